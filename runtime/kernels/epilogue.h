// The epilogue of an annotated MatMul, Gemm or Conv: the attribute names and their parsing
// (shared with the compiler's meta functions, so both sides accept exactly the same forms)
// and the CPU backend's in-place application. The annotated forms, and which cuBLASLt and
// cuDNN fusions take them, are documented in compiler/passes/epilogue.h.
//
// The bias is not applied here: each kernel adds it as part of the product (Conv's bias and
// an annotated MatMul's bias fill the output before the GEMM accumulates onto it, Gemm's C
// goes through beta), which is the "bias" step of every order. ApplyEpilogue then runs the
// residual add and the activation, in the node's order, with the formulas of the unary
// kernels (runtime/kernels/activation.h), so a folded activation equals the separate op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/status.h"
#include "runtime/attrs.h"
#include "runtime/kernels/kernel.h"

namespace kiln::cpu {

inline constexpr std::string_view kEpilogueActivationAttr = "epilogue_activation";
inline constexpr std::string_view kEpilogueResidualAttr = "epilogue_residual";
inline constexpr std::string_view kEpilogueOrderAttr = "epilogue_order";
// The two orders; absent means the first.
inline constexpr std::string_view kEpilogueOrderActFirst = "bias,act,residual";
inline constexpr std::string_view kEpilogueOrderResidualFirst = "bias,residual,act";
// Input positions on an annotated node: MatMul's bias (Conv's B and Gemm's C are already
// input 2 in ONNX) and the residual, the same for all three ops.
inline constexpr size_t kEpilogueBiasInput = 2;
inline constexpr size_t kEpilogueResidualInput = 3;

enum class EpilogueActivation : uint8_t { kNone, kRelu, kGelu, kGeluTanh, kSigmoid, kHardSwish, kSilu };

// "Relu", "Gelu" (erf), "GeluTanh", "Sigmoid", "HardSwish", "SiLU"; nullopt for any other.
std::optional<EpilogueActivation> ParseEpilogueActivation(std::string_view name);
// The attribute spelling of `a` ("" for kNone).
std::string_view EpilogueActivationName(EpilogueActivation a);

struct EpilogueSpec {
  EpilogueActivation activation = EpilogueActivation::kNone;
  bool residual = false;        // input kEpilogueResidualInput is the residual
  bool residual_first = false;  // order "bias,residual,act"
  bool any() const { return activation != EpilogueActivation::kNone || residual; }
};

// Reads and validates the epilogue attributes of a node (no tensors). InvalidArgument, with
// the attribute name, what was expected and what was found, for an unknown activation, an
// epilogue_residual other than 0 or 1, an unknown order, or an attribute of the wrong kind.
Status ParseEpilogue(const AttrMap& attrs, EpilogueSpec* spec);

// An epilogue ready to run: its spec and the residual tensor (null when none).
struct Epilogue {
  EpilogueSpec spec;
  const TensorRef* residual = nullptr;
};

// Parses the attributes of `call` and checks its residual input against the output `y`:
// present exactly when epilogue_residual = 1, the same dtype and shape as y. Any epilogue
// needs a float32 or float64 output. Errors are prefixed with `op`.
Status ReadEpilogue(const KernelCall& call, std::string_view op, Epilogue* epilogue);

// Applies the residual add and the activation, in the spec's order, in place to elements
// [begin, begin + count) of y (the residual is read at the same positions). y must have
// passed ReadEpilogue; does nothing when the spec is empty. Never allocates.
void ApplyEpilogue(const Epilogue& epilogue, const TensorRef& y, int64_t begin, int64_t count);
inline void ApplyEpilogue(const Epilogue& epilogue, const TensorRef& y) {
  ApplyEpilogue(epilogue, y, 0, y.num_elements);
}

}  // namespace kiln::cpu
