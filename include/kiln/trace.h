// kiln/trace.h: define a model in C++ and compile it into a .kiln artifact, without ONNX.
//
//   using namespace kiln::trace;
//   Builder b("mlp");
//   Tensor x = b.Input("x", kiln::DType::kFloat32, {"N", 4});          // N: bound at run time
//   Tensor w1 = b.Parameter("fc1.weight", {4, 8}, w1_values);           // copied
//   Tensor b1 = b.Parameter("fc1.bias", {8}, b1_values);
//   Tensor w2 = b.ParameterFromNpy("fc2.weight", "weights/fc2_weight.npy");
//   Tensor b2 = b.ParameterFromNpy("fc2.bias", "weights/fc2_bias.npy");
//   b.Output(Softmax(Linear(Relu(Linear(x, w1, b1, "fc1")), w2, b2, "fc2"), -1, "probs"));
//   CompileOptions options;
//   options.archs = std::vector<std::string>{};                         // CPU-only artifact
//   kiln::Status st = b.CompileToFile("mlp.kiln", options);              // then kiln::Model::Load
//
// A model is a C++ function over proxy Tensors. Each op is recorded, as the ONNX operator of
// the same name would be (Linear is MatMul then Add, LayerNorm is LayerNormalization), into
// the same `import` trace the ONNX importer produces, so a traced model goes through the same
// compiler stages into the same kind of artifact as `kiln compile model.onnx`.
//
// Shapes and dtypes are checked as each op is recorded (by the compiler's op registry), so
// errors surface at the op that caused them. No call throws or aborts: the first error is
// recorded in the Builder together with the op, its name and its arguments' names, dtypes and
// shapes (e.g. "MatMul 'scores' (a: 'q' float32[N, 4, 8], b: 'k' float32[N, 6, 8]): node
// 'scores' (MatMul): inner dims differ: ..."). Every later op of that Builder does nothing and
// returns an invalid Tensor; status(), Compile and CompileToFile return the error.
//
// Names: every op takes an optional `name` for its output (and node), which `kiln inspect`
// shows in the traces; without one the op's kind is used ("relu", "relu_1", ...). A name
// already used in the Builder gets a suffix "_1", "_2", ... Linear with a bias (two ONNX
// nodes) names the first "<name>.matmul" and the second "<name>"; an op's constants are
// "<name>.shape" and "<name>.scalar".
//
// Dtypes: ops take the dtypes their ONNX operator takes (the examples use float32). A float
// scalar operand (x * 0.5f) becomes a constant of the tensor's float dtype.
//
// Thread safety: a Builder and its Tensors are thread-compatible: one thread at a time may use
// a Builder and the Tensors it made. Different Builders are independent.
// Lifetime: a Tensor keeps its Builder's recorded model alive (shared), so Tensors may outlive
// the Builder object, though only the Builder can output or compile them.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::trace {

namespace internal {
struct State;
}

// One dim of a shape: a size (>= 0), or a symbol. An input declares symbols by name ("N");
// a computed dim may be an expression over them, e.g. "(T*4)", held as its text.
class Dim {
 public:
  template <std::integral T>
  Dim(T size) : size_(static_cast<int64_t>(size)) {}  // NOLINT: implicit, so {"N", 4} reads naturally
  Dim(const char* symbol) : symbol_(symbol ? symbol : "") {}  // NOLINT
  Dim(std::string symbol) : symbol_(std::move(symbol)) {}     // NOLINT

  bool is_symbol() const { return size_ < 0; }
  int64_t size() const { return size_; }               // -1 for a symbol
  const std::string& symbol() const { return symbol_; }  // "" for a size

 private:
  int64_t size_ = -1;
  std::string symbol_;
};

// A proxy for a tensor of a traced model: an input, a parameter or an op's output. A cheap
// handle (copy freely). A default-constructed Tensor, or one returned by an op after an error,
// is invalid; passing an invalid Tensor to an op returns an invalid Tensor.
class KILN_API Tensor {
 public:
  Tensor() = default;

  // False for a default-constructed Tensor and for the result of a failed op.
  bool valid() const;
  // The tensor's name in the trace ("" when invalid).
  std::string name() const;
  // Its dtype (kUndefined when invalid).
  DType dtype() const;
  // Its shape as inferred when it was recorded (empty when invalid; also empty for a scalar).
  std::vector<Dim> shape() const;

 private:
  friend struct internal::State;
  std::shared_ptr<internal::State> state_;
  int32_t id_ = -1;
};

// Options for Builder::Compile, with the meaning of the compiler's options of the same names
// (`kiln compile --arch`, `--profile`, `--no-fuse`).
struct CompileOptions {
  // NVRTC targets, "sm_NN" (cubins) and "compute_NN" (PTX). nullopt: Kiln's default list (as
  // `kiln compile`); an empty list: a CPU-only artifact (`--arch none`), no NVRTC needed.
  std::optional<std::vector<std::string>> archs;
  // Shape specialisations in `kiln compile --profile` syntax, e.g. "x:N=1" or "x:N=1..64":
  // one artifact entry each. Empty: one entry, symbolic where the inputs are.
  std::vector<std::string> profiles;
  // The fusion stage. Off: every op stays a separate instruction.
  bool fuse = true;
  // Called with each line of the compile log (progress, fallbacks); may be empty.
  std::function<void(const std::string&)> log;
};

// Records one model: its inputs, parameters, ops and outputs. Copies of a Builder share the
// recorded model (as Tensors do); thread-compatible.
class KILN_API Builder {
 public:
  // `name` names the model in the artifact's provenance and in messages.
  explicit Builder(std::string name = "model");

  // A runtime input of `dtype` and `shape`; each dim is a size or a symbol name, and inputs
  // using the same symbol must be called with equal dims. Errors (recorded): an invalid
  // dtype, a negative size or an empty symbol name.
  Tensor Input(std::string name, DType dtype, std::vector<Dim> shape);

  // A float32 constant of `dims` (row-major) holding `values`, which are copied: the caller's
  // array may be freed after the call. Errors (recorded): a negative dim, or values.size()
  // differing from the product of dims.
  Tensor Parameter(std::string name, std::vector<int64_t> dims, std::span<const float> values);
  // A constant read from a NumPy .npy file now (v1-v3, little-endian, C order, any dtype Kiln
  // supports). Errors (recorded): the reader's, naming `path` (kNotFound for a missing file,
  // kDataLoss for a malformed one).
  Tensor ParameterFromNpy(std::string name, const std::string& path);

  // Marks `t` as a model output, in call order, named `name` (default: the tensor's name).
  // Errors (recorded): `t` invalid or from another Builder, `t` an input or a parameter, or
  // `name` already used by another tensor.
  void Output(const Tensor& t, std::string name = "");

  // OK, or the first recorded error.
  Status status() const;
  // The recorded `import` trace as text, one line per op (as `kiln inspect` prints it).
  std::string Print() const;

  // Compiles the model through every compiler stage into artifact bytes (load them with
  // kiln::Model::Load). Errors: the first recorded error; no output; otherwise those of
  // `kiln compile` (an invalid profile or arch, an NVRTC failure, kResourceExhausted over a
  // compiler limit or out of memory). May be called several times; the Builder is unchanged.
  Result<std::vector<uint8_t>> Compile(const CompileOptions& options = {}) const;
  // Same, writing the artifact to `path` by a temporary file and a rename, so a program that
  // has the old file loaded keeps working. Errors, besides Compile's: kFailedPrecondition
  // naming the path and the reason (no such folder, no permission, disk full, or the path is
  // a folder, device or FIFO).
  Status CompileToFile(const std::string& path, const CompileOptions& options = {}) const;

 private:
  std::shared_ptr<internal::State> state_;
};

// ---- ops ------------------------------------------------------------------------------
// Shapes below use numpy broadcasting and ONNX semantics; `name` is the output's name.

// Matrix product as numpy.matmul (ONNX MatMul): a [..., M, K] x b [..., K, N] -> [..., M, N],
// batch dims broadcast; rank-1 operands are promoted as numpy does.
KILN_API Tensor MatMul(const Tensor& a, const Tensor& b, std::string name = "");
// x [..., in] @ weight [in, out] + bias [out] -> [..., out] (ONNX MatMul, then Add). The weight
// is [in, out] as in ONNX and numpy; a PyTorch nn.Linear weight is [out, in], so store its
// transpose. bias: an invalid Tensor() for none.
KILN_API Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                       std::string name = "");

struct Conv2dOptions {
  int64_t stride[2] = {1, 1};       // along H, W
  int64_t padding[4] = {0, 0, 0, 0};  // top, left, bottom, right (ONNX pads order), in elements
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};
// 2-D convolution (ONNX Conv): x [N, C, H, W], weight [M, C/groups, kH, kW], bias [M] or an
// invalid Tensor() for none -> [N, M, H', W'].
KILN_API Tensor Conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                       const Conv2dOptions& options = {}, std::string name = "");

// Elementwise activations, same shape and dtype as x (float dtypes).
KILN_API Tensor Relu(const Tensor& x, std::string name = "");
KILN_API Tensor Sigmoid(const Tensor& x, std::string name = "");
KILN_API Tensor Tanh(const Tensor& x, std::string name = "");
// Exact GELU, x * (1 + erf(x / sqrt(2))) / 2 (ONNX Gelu, approximate="none").
KILN_API Tensor Gelu(const Tensor& x, std::string name = "");

// Softmax along `axis` (negative counts from the end).
KILN_API Tensor Softmax(const Tensor& x, int64_t axis = -1, std::string name = "");
// Layer normalisation over the dims from `axis` to the last (ONNX LayerNormalization):
// (x - mean) / sqrt(var + epsilon) * scale + bias; scale and bias have the normalised dims'
// shape (bias: an invalid Tensor() for none).
KILN_API Tensor LayerNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t axis = -1,
                          float epsilon = 1e-5f, std::string name = "");

// ONNX Reshape: a 0 in `shape` copies the input's dim there, one -1 is inferred.
KILN_API Tensor Reshape(const Tensor& x, std::vector<int64_t> shape, std::string name = "");
// ONNX Transpose: output dim i is input dim perm[i].
KILN_API Tensor Transpose(const Tensor& x, std::vector<int64_t> perm, std::string name = "");

// Elementwise arithmetic with broadcasting (ONNX Add, Sub, Mul, Div); both operands have the
// same dtype. The operators below are the same ops with default names.
KILN_API Tensor Add(const Tensor& a, const Tensor& b, std::string name = "");
KILN_API Tensor Sub(const Tensor& a, const Tensor& b, std::string name = "");
KILN_API Tensor Mul(const Tensor& a, const Tensor& b, std::string name = "");
KILN_API Tensor Div(const Tensor& a, const Tensor& b, std::string name = "");
KILN_API Tensor operator+(const Tensor& a, const Tensor& b);
KILN_API Tensor operator-(const Tensor& a, const Tensor& b);
KILN_API Tensor operator*(const Tensor& a, const Tensor& b);
KILN_API Tensor operator/(const Tensor& a, const Tensor& b);
// With a scalar: the scalar becomes a rank-0 constant of the tensor's dtype (a float dtype).
KILN_API Tensor operator+(const Tensor& a, float b);
KILN_API Tensor operator-(const Tensor& a, float b);
KILN_API Tensor operator*(const Tensor& a, float b);
KILN_API Tensor operator/(const Tensor& a, float b);
KILN_API Tensor operator+(float a, const Tensor& b);
KILN_API Tensor operator-(float a, const Tensor& b);
KILN_API Tensor operator*(float a, const Tensor& b);
KILN_API Tensor operator/(float a, const Tensor& b);

}  // namespace kiln::trace
