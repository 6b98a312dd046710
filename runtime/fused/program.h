// The portable program of a fused op: one scalar expression DAG evaluated once per element
// of an iteration domain. The compiler builds it (compiler/fusion/), the CPU backend
// interprets it (runtime/fused/interpreter.cc), and the CUDA emitter turns the same program into
// CUDA C++ (compiler/codegen/). It is stored in the artifact's kernel table.
//
//   Program p;                      // out0[i] = max(in0[i] + in1[i % 8], 0) over a [4, 8] domain
//   p.domain = {4, 8};
//   p.inputs = {{DType::kFloat32, {4, 8}}, {DType::kFloat32, {8}}};
//   p.nodes = {{kLinear, I64}, {kLoad, F32, a=0, i=0}, {kCoord, I64, i=1}, {kLoad, F32, a=2, i=1},
//              {kAdd, F32, a=1, b=3}, {kConst, F32, f=0}, {kMax, F32, a=4, b=5}};
//   p.outputs = {{{DType::kFloat32, {4, 8}}, /*value=*/6, /*per_row=*/false}};
//
// Semantics:
//  - The domain is a row-major index space of rank `domain.size()`. Axes in `reduce_axes`
//    are reduced; the others are kept. A *row* is one combination of kept coordinates; its
//    *columns* are the combinations of reduced coordinates (row-major over the reduced axes).
//    With no reduced axes every element is its own row with one column.
//  - Nodes are in SSA order: operands a, b, c refer to earlier nodes only. A node's value
//    depends on the current domain element (kCoord, kLinear), the size arguments (kSize),
//    the inputs (kLoad) and reduction results (kAcc).
//  - For each row, reductions run in order: reduction k folds its `value` node, evaluated at
//    every column of the row, with its op. Reduction k may read kAcc j only for j < k.
//  - Then each output is stored. A full output (per_row = false) has one element per domain
//    element and stores its value node at every column of the row, at index kLinear. A
//    per-row output has one element per row and stores its value node once per row, at the
//    row's index (row-major over the kept axes), evaluated with every reduced coordinate 0.
//  - Every kLoad index is in range by construction: the compiler clamps the coordinates of
//    unselected Concat/Pad branches and checks data-dependent indices with kCheckIndex.
//    An interpreter still bounds-checks each load and fails with kInternal if one is not.
//
// Dims in `domain` and tensor specs are encoded as int64: d >= 0 is a constant extent,
// d < 0 is size argument -(d + 1), whose value is passed with each launch (kSize reads it).
// Size arguments are any int64 (a symbolic Pad amount may be negative); a dim that reads
// one must find it >= 0.
//
// A load from an input with no elements yields 0 and reads nothing: such a load is always
// one whose value a Select discards (an empty Concat input, say), but it is still
// evaluated, and its clamped index cannot be in range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::fused {

// The type a node computes in. Booleans are kI64 holding 0 or 1; every integer dtype is
// widened to kI64 on load and narrowed on store; float16 and bfloat16 compute in kF32.
enum class ScalarType : uint8_t { kI64 = 0, kF32 = 1, kF64 = 2 };

// Operand counts and types are checked by Validate. "x" is operand a, "y" b, "z" c.
enum class Op : uint8_t {
  // Leaves.
  kConst = 0,    // i (kI64) or f (kF32/kF64)
  kCoord = 1,    // kI64: the current domain coordinate along axis i
  kLinear = 2,   // kI64: the row-major index of the current domain element
  kSize = 3,     // kI64: size argument i
  kAcc = 4,      // result of reduction i (its value's type)
  kLoad = 5,     // input tensor i at element a (kI64); type = ComputeType(input dtype)
  // Conversion: x converted to DType i as ONNX Cast does (float->int truncates toward zero,
  // saturating at the target's range and mapping NaN to 0; ->bool is x != 0; ->float16
  // rounds to nearest even), then held in ComputeType(i).
  kCast = 6,
  // Unary; type = x's type. Float-only unless marked.
  kNeg = 7,        // all types
  kAbs = 8,        // all types
  kSign = 9,       // all types
  kNot = 10,       // kI64: x == 0
  kFloor = 11, kCeil = 12,
  kRound = 13,     // half to even (ONNX Round)
  kSqrt = 14, kExp = 15, kLog = 16, kErf = 17, kTanh = 18,
  kSigmoid = 19,   // 1 / (1 + exp(-x))
  kSin = 20, kCos = 21, kTan = 22, kAsin = 23, kAcos = 24, kAtan = 25, kSinh = 26, kCosh = 27,
  kReciprocal = 28,
  kIsNaN = 29,     // kI64 result
  // Binary; x and y have the node's type, except comparisons (kI64 result, x and y of one type).
  kAdd = 30, kSub = 31, kMul = 32,
  kDiv = 33,       // floats: IEEE; kI64: truncates toward zero, x / 0 = 0
  kFloorDiv = 34,  // kI64: floor(x / y), x / 0 = 0
  kMod = 35,       // result has y's sign (ONNX Mod fmod=0; Python %); x % 0 = 0 for kI64
  kFmod = 36,      // result has x's sign (C fmod; ONNX Mod fmod=1); x % 0 = 0 for kI64
  kPow = 37,       // floats
  kMin = 38, kMax = 39,  // a NaN operand gives NaN (ONNX Min/Max)
  kEq = 40, kLt = 41, kLe = 42,  // kI64 result 0/1; NaN compares false
  kAnd = 43, kOr = 44, kXor = 45,  // kI64 0/1 operands
  // Ternary.
  kSelect = 46,    // x != 0 ? y : z (x kI64; y, z of the node's type)
  // kI64: x if 0 <= x < y; otherwise the program reports check i (an index into
  // Program::checks: "what was indexed") as out of range and the node yields 0, so the
  // dependent load stays in range.
  kCheckIndex = 47,
};
inline constexpr int kNumOps = 48;

enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

struct Node {
  Op op = Op::kConst;
  ScalarType type = ScalarType::kI64;
  int32_t a = -1, b = -1, c = -1;  // operand node indices, -1 when unused
  int64_t i = 0;                   // axis, input, size argument, reduction, DType, check, or int constant
  double f = 0.0;                  // float constant (kF32 constants are exactly representable floats)
};

struct TensorSpec {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;  // encoded dims (see top)
};

struct Output {
  TensorSpec tensor;
  int32_t value = -1;     // node stored; its type is ComputeType(tensor.dtype)
  bool per_row = false;
};

struct Reduction {
  ReduceOp op = ReduceOp::kSum;
  int32_t value = -1;     // node folded over the columns of each row; kF32, kF64 or kI64
};

struct Program {
  std::vector<int64_t> domain;          // encoded dims; rank <= 8
  uint32_t reduce_axes = 0;             // bit k set: domain axis k is reduced
  int32_t num_sizes = 0;                // size arguments passed per launch
  std::vector<TensorSpec> inputs;
  std::vector<Output> outputs;
  std::vector<Node> nodes;
  std::vector<Reduction> reductions;
  std::vector<std::string> checks;      // kCheckIndex messages, e.g. "Gather 'g1' input 'idx'"
};

// The compute type of a tensor dtype, or false for dtypes a program cannot hold (strings,
// complex, and uint64, whose upper half signed int64 arithmetic would get wrong). Bool and
// every other integer dtype map to kI64; float16/bfloat16/float to kF32.
bool ComputeTypeOf(DType dtype, ScalarType* out);

// Checks the program's structure: operand indices refer to earlier nodes, operand and
// result types follow the table above, leaves refer to existing axes, inputs, size
// arguments, reductions and checks, kAcc is only read after its reduction, per-row outputs
// exist only with reduced axes, every tensor spec's dtype has a compute type, encoded dims
// refer to existing size arguments, and a full output has as many elements as the domain
// and a per-row output as many as there are rows (compared where both are constant).
// Returns kInvalidArgument naming the first bad node or field. Used on every artifact the
// runtime loads and on every program the compiler builds.
Status Validate(const Program& program);

// The message of a failed kCheckIndex, with the index as the model gave it: a check sees an
// index that negative-index normalisation already moved up by `bound` when it was negative,
// so a negative one is reported `bound` lower ("index -7 is out of range [-5, 5)"), as the
// unfused CPU kernels report it.
std::string IndexOutOfRange(int64_t checked_index, int64_t bound);

// Encoded dims as text, a size argument k as "sk": "[4, s0]".
std::string DimsText(const std::vector<int64_t>& dims);

// The op's printed name ("add", "load", ...), for traces and messages.
const char* OpName(Op op);
const char* ReduceOpName(ReduceOp op);

// Readable text, one node per line ("%4 = add f32 %1, %3"), for `kiln inspect`.
std::string Print(const Program& program);

}  // namespace kiln::fused
