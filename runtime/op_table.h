// The op table: every backend-neutral fact about an ONNX op that more than one part of Kiln
// needs, in one row per op (runtime/op_table.cc), read by the compiler and the runtime alike:
//   arity      its operands, from the ONNX schema of the newest opset (the importer rewrites
//              older forms); load checks every instruction against it (runtime/verify.cc);
//   precision  how the precision pass lowers it under --precision fp16/bf16
//              (compiler/passes/precision.cc);
//   fusion     how it fuses: into a generated kernel of one of three kinds, never (a library
//              call on the backends that have one), or never with no generated kernel at all
//              (compiler/fusion/rules.h says how each kind fuses);
//   note       kCpuOnly rows: why no generated kernel takes it (the executors trace and `kiln
//              ops` print it).
// Which library runs an op on a backend is that backend's claim, not a column here
// (runtime/claims.h: runtime/cpu/claims.cc, runtime/cuda/claims.cc).
// Where an op's code is, each found by its name: the meta function (compiler/ops/registry.h),
// the CPU kernel (runtime/kernels/kernel.h) and, for the generated kinds, the lowering
// (compiler/fusion/rules.h). Which op versions Kiln implements is compiler/onnx/op_versions.h.
//
// Adding an op is adding its row. A row's constructor takes every column, so a row without one
// does not compile; the table's order and each row's consistency are static_asserts; and
// `kiln ops --check`, run after every build of `kiln`, fails the build when a row lacks its meta
// function, CPU kernel or lowering, or one of those has no row.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kiln {

// The operands an op takes, from its ONNX schema: onnx.defs.get_schema(op).min_input,
// max_input, min_output, max_output; an input whose option is Single is required, and a
// variadic op's inputs all are. tests/conformance/check_arity.py compares the table, as
// `kiln ops --json` prints it, with the schemas of the onnx wheel.
struct Arity {
  static constexpr uint8_t kUnbounded = 255;  // max_inputs/max_outputs of a variadic op
  static constexpr uint32_t kAll = ~0u;       // required: every input (variadic ops)
  uint8_t min_inputs = 0, max_inputs = 0;
  uint32_t required = 0;  // bit i: input i must be present; kAll: every input
  uint8_t min_outputs = 0, max_outputs = 0;

  constexpr bool Required(size_t i) const {
    return required == kAll || (i < 32 && (required >> i & 1u));
  }
};

// How the precision pass treats an op when the model is lowered to float16 or bfloat16.
enum class PrecisionClass : uint8_t {
  kLow,      // half storage, float32 accumulation inside the kernel
  kFollow,   // the type its inputs arrive in
  kFloat32,  // float32 in and out (results that outgrow a half's range or lose its accuracy)
};
struct OpPrecision {
  PrecisionClass cls;
  // Bit i: input i keeps its declared dtype whatever the class (Resize's roi and scales are
  // coordinates, read as float32 by its meta function).
  uint32_t declared_inputs = 0;
  constexpr OpPrecision(PrecisionClass c, uint32_t declared = 0) : cls(c), declared_inputs(declared) {}
};

// How an op fuses (compiler/fusion/rules.h):
enum class FusionKind : uint8_t {
  kElementwise,  // one output element from the same element of each (broadcast) input
  kIndexMap,     // data movement: an output element reads its input elsewhere
  kReduction,    // a reduction family; at most one per generated kernel
  kLibrary,      // never fused, may carry an epilogue: a library call where a backend has one
                 // (cuBLASLt, cuDNN, oneDNN), else its CPU kernel
  kCpuOnly,      // no generated kernel: its CPU kernel runs it on every backend (on a device, a
                 // CPU fallback)
};
const char* FusionKindName(FusionKind kind);  // "elementwise", "index map", ...

struct OpInfo {
  std::string_view op;  // the ONNX op type (CausalConvWithState: com.microsoft's)
  Arity arity;
  OpPrecision precision;
  FusionKind fusion;
  std::string_view note;  // kCpuOnly: why no generated kernel takes it; "" on other rows

  constexpr OpInfo(std::string_view op, Arity arity, OpPrecision precision, FusionKind fusion, std::string_view note)
      : op(op), arity(arity), precision(precision), fusion(fusion), note(note) {}
};

// The row of `op`, or nullptr (Kiln's internal ops, such as kiln.Fused, have none; nor, in a
// selective runtime, the ops whose CPU kernels it lacks). Thread-safe: the table is constant.
const OpInfo* FindOpInfo(std::string_view op);
// Every row, sorted by op (a selective runtime: those of the ops whose CPU kernels it keeps).
std::span<const OpInfo> AllOpInfo();

}  // namespace kiln
