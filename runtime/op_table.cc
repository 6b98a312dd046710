// The op table (runtime/op_table.h): one row per op, sorted by op name.
//
// Arity: onnx 1.23's schemas at the newest opset; CausalConvWithState is com.microsoft's, with
// its present_state output optional as the kernel treats it. MatMul, Gemm and Conv take up to
// 4: an epilogue-annotated node's optional bias (2) and residual (3) (runtime/kernels/epilogue.h).
//
// Precision:
//  - kLow: GEMM and convolution, the tensor-core ops with float32 accumulators (cuBLASLt
//    CUBLAS_COMPUTE_32F, cuDNN float compute, the CPU backend's float32 GEMM); reductions whose
//    result stays within the input's range (statistics, sums and exponentials computed in
//    float32, the result stored in the precision type).
//  - kFollow: elementwise ops, activations, comparisons and data movement: exact or within
//    the input's range.
//  - kFloat32: Exp, Log, Pow, Reciprocal and the hyperbolic and inverse trigonometric
//    functions (results beyond 65504, or accuracy lost near 0 and 1); ReduceSum,
//    ReduceSumSquare, ReduceProd, ReduceLogSum(Exp), CumSum, CumProd, LpPool and LRN (sums that
//    outgrow their inputs); LSTM, GRU, RNN and LinearAttention (state carried over many steps);
//    NonMaxSuppression, RoiAlign, GridSample and AffineGrid (coordinates); DFT, STFT and the
//    window functions; quantization, Range, ConstantOfShape, EyeLike, Det, Mod, BitCast.
#include "runtime/op_table.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#if KILN_SELECTIVE
#include "runtime/kernels/selective.h"
#endif

namespace kiln {
namespace {

using enum PrecisionClass;
using enum FusionKind;
constexpr uint8_t kUnbounded = Arity::kUnbounded;
constexpr uint32_t kAll = Arity::kAll;
constexpr std::string_view kNoBitOps = "a fused program computes in int64 and has no bitwise nodes";

constexpr OpInfo kOps[] = {
    {"Abs", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Acos", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Acosh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Add", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"AffineGrid", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "a small per-point matrix product; no generated kernel yet"},
    {"And", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"ArgMax", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"ArgMin", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Asin", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Asinh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Atan", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Atanh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Attention", {3, 7, 0b111, 1, 4}, kLow, kLibrary, ""},
    {"AveragePool", {1, 1, 0b1, 1, 1}, kLow, kLibrary, ""},
    {"BatchNormalization", {5, 5, 0b11111, 1, 3}, kLow, kElementwise, ""},
    {"BitCast", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a byte copy; fused programs have no bit-reinterpreting load yet"},
    {"BitShift", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNoBitOps},
    {"BitwiseAnd", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNoBitOps},
    {"BitwiseNot", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNoBitOps},
    {"BitwiseOr", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNoBitOps},
    {"BitwiseXor", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNoBitOps},
    {"BlackmanWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a constant of the size input: folded at compile time"},
    {"Cast", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"CastLike", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"CausalConvWithState", {2, 4, 0b11, 1, 2}, kFloat32, kCpuOnly,
     "a stateful depthwise convolution with two outputs; no generated kernel yet"},
    {"Ceil", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Celu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"CenterCropPad", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly,
     "not lowered to Slice/Pad index arithmetic yet"},
    {"Clip", {1, 3, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Col2Im", {3, 3, 0b111, 1, 1}, kFloat32, kCpuOnly,
     "overlapping blocks accumulate into one pixel; fused programs compute each output element "
     "once"},
    {"Compress", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Concat", {1, kUnbounded, kAll, 1, 1}, kFollow, kIndexMap, ""},
    {"ConstantOfShape", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Conv", {2, 4, 0b11, 1, 1}, kLow, kLibrary, ""},
    {"ConvInteger", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "zero points read at run time; a QDQ Conv runs on cuDNN as kiln.NhwcConvInt8 (compiler/passes/qdq.h)"},
    {"ConvTranspose", {2, 3, 0b11, 1, 1}, kLow, kLibrary, ""},
    {"Cos", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Cosh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"CumProd", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "a running scan along an axis; fused programs compute each element independently"},
    {"CumSum", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "a running scan along an axis; fused programs compute each element independently"},
    {"DFT", {1, 3, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a transform along an axis (cuFFT is not wired yet)"},
    {"DeformConv", {3, 5, 0b111, 1, 1}, kLow, kCpuOnly,
     "convolution taps at data-dependent offsets; cuDNN has no deformable convolution"},
    {"DepthToSpace", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"DequantizeLinear", {2, 3, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"Det", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "an LU factorisation per matrix; fused programs compute one element at a time"},
    {"Div", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"Dropout", {1, 3, 0b1, 1, 2}, kFollow, kIndexMap, ""},
    {"DynamicQuantizeLinear", {1, 1, 0b1, 3, 3}, kFloat32, kCpuOnly,
     "a whole-tensor min/max feeds every element; fused programs have no reduce-then-map region"},
    {"Einsum", {1, kUnbounded, kAll, 1, 1}, kLow, kCpuOnly,
     "a direct loop over the index space; not rewritten to a batched matmul yet"},
    {"Elu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Equal", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"Erf", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Exp", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Expand", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"EyeLike", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Flatten", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"Floor", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"GRU", {3, 6, 0b111, 0, 2}, kFloat32, kLibrary, ""},
    {"Gather", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"GatherElements", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"GatherND", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly,
     "index tuples read from a tensor; not lowered to index arithmetic yet"},
    {"Gelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Gemm", {2, 4, 0b11, 1, 1}, kLow, kLibrary, ""},
    {"GlobalAveragePool", {1, 1, 0b1, 1, 1}, kLow, kReduction, ""},
    {"GlobalLpPool", {1, 1, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"GlobalMaxPool", {1, 1, 0b1, 1, 1}, kLow, kReduction, ""},
    {"Greater", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"GreaterOrEqual", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"GridSample", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "data-dependent gathers with per-axis taps; fused index maps address inputs by affine index "
     "arithmetic"},
    {"GroupNormalization", {3, 3, 0b111, 1, 1}, kLow, kReduction, ""},
    {"HammingWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a constant of the size input: folded at compile time"},
    {"HannWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a constant of the size input: folded at compile time"},
    {"HardSigmoid", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"HardSwish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Hardmax", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Identity", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"InstanceNormalization", {3, 3, 0b111, 1, 1}, kLow, kReduction, ""},
    {"IsInf", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"IsNaN", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"LRN", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "a sum over a channel window; not lowered to a fused program yet"},
    {"LSTM", {3, 8, 0b111, 0, 3}, kFloat32, kLibrary, ""},
    {"LayerNormalization", {2, 3, 0b11, 1, 3}, kLow, kReduction, ""},
    {"LeakyRelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Less", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"LessOrEqual", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"LinearAttention", {3, 6, 0b111, 2, 2}, kFloat32, kCpuOnly,
     "a recurrence over the tokens, each step reading the state the last one wrote; no generated kernel"},
    {"Log", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"LogSoftmax", {1, 1, 0b1, 1, 1}, kLow, kReduction, ""},
    {"LpNormalization", {1, 1, 0b1, 1, 1}, kLow, kCpuOnly, "not lowered to the reduction family yet"},
    {"LpPool", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly,
     "cuDNN has no Lp pooling mode and windowed reductions are not generated yet"},
    {"MatMul", {2, 4, 0b11, 1, 1}, kLow, kLibrary, ""},
    {"MatMulInteger", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "B [K, N] is not the TN form of cuBLASLt's int8 GEMM; a QDQ MatMul runs there as kiln.MatMulIntegerTransB"},
    {"Max", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, ""},
    {"MaxPool", {1, 1, 0b1, 1, 2}, kLow, kLibrary, ""},
    {"MaxUnpool", {2, 3, 0b11, 1, 1}, kFollow, kCpuOnly,
     "a scatter to MaxPool's indices; fused programs compute each output element once"},
    {"Mean", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, ""},
    {"MeanVarianceNormalization", {1, 1, 0b1, 1, 1}, kLow, kCpuOnly,
     "statistics over several axes; not lowered to the reduction family yet"},
    {"MelWeightMatrix", {5, 5, 0b11111, 1, 1}, kFloat32, kCpuOnly,
     "a constant of its inputs: folded at compile time"},
    {"Min", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, ""},
    {"Mish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Mod", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"Mul", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"Neg", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"NonMaxSuppression", {2, 5, 0b11, 1, 1}, kFloat32, kCpuOnly,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"NonZero", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Not", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"OneHot", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly,
     "not lowered to a fused program yet (a compare of the index with the coordinate)"},
    {"Or", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"PRelu", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"Pad", {2, 4, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"Pow", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"QGemm", {6, 9, 0b111111, 1, 1}, kFloat32, kCpuOnly, "integer GEMM (cuBLASLt int8) is not wired yet"},
    {"QLinearConv", {8, 9, 0b11111111, 1, 1}, kFloat32, kCpuOnly,
     "not on cuDNN as it is; a QDQ Conv runs there as kiln.NhwcConvInt8 (compiler/passes/qdq.h)"},
    {"QLinearMatMul", {8, 8, 0b11111111, 1, 1}, kFloat32, kCpuOnly,
     "not on cuBLASLt as it is; a QDQ MatMul runs there as kiln.MatMulIntegerTransB (compiler/passes/qdq.h)"},
    {"QuantizeLinear", {2, 3, 0b11, 1, 1}, kFloat32, kElementwise, ""},
    {"RMSNormalization", {2, 2, 0b11, 1, 1}, kLow, kCpuOnly,
     "not lowered to the reduction family yet"},
    {"RNN", {3, 6, 0b111, 0, 2}, kFloat32, kLibrary, ""},
    {"Range", {3, 3, 0b111, 1, 1}, kFloat32, kElementwise, ""},
    {"Reciprocal", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"ReduceL1", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceL2", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceLogSum", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceLogSumExp", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceMax", {1, 2, 0b1, 1, 1}, kLow, kReduction, ""},
    {"ReduceMean", {1, 2, 0b1, 1, 1}, kLow, kReduction, ""},
    {"ReduceMin", {1, 2, 0b1, 1, 1}, kLow, kReduction, ""},
    {"ReduceProd", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceSum", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"ReduceSumSquare", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, ""},
    {"Relu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Reshape", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"Resize", {1, 4, 0b1, 1, 1}, {kFollow, 0b110}, kIndexMap, ""},
    {"ReverseSequence", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly,
     "a per-batch reversal length read from a tensor; fused index maps are affine"},
    {"RoiAlign", {3, 3, 0b111, 1, 1}, kFloat32, kCpuOnly,
     "bilinear samples at data-dependent region coordinates; fused index maps are affine"},
    {"RotaryEmbedding", {3, 4, 0b111, 1, 1}, kFloat32, kCpuOnly,
     "not lowered to a fused program yet (a gather of the cache rows per token)"},
    {"Round", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"STFT", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly, "framed transforms (cuFFT is not wired yet)"},
    {"Scatter", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterElements", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterND", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"Selu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Shape", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never "
     "launched"},
    {"Shrink", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Sigmoid", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Sign", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Sin", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Sinh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Size", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never "
     "launched"},
    {"Slice", {3, 5, 0b111, 1, 1}, kFollow, kIndexMap, ""},
    {"Softmax", {1, 1, 0b1, 1, 1}, kLow, kReduction, ""},
    {"Softplus", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Softsign", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"SpaceToDepth", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"Split", {1, 2, 0b1, 1, kUnbounded}, kFollow, kIndexMap, ""},
    {"Sqrt", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Squeeze", {1, 2, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"Sub", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, ""},
    {"Sum", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, ""},
    {"Swish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Tan", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, ""},
    {"Tanh", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"TensorScatter", {2, 3, 0b11, 1, 1}, kFollow, kCpuOnly,
     "a KV-cache write at data-dependent rows; fused programs compute each output element once"},
    {"ThresholdedRelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Tile", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"TopK", {2, 2, 0b11, 2, 2}, kFollow, kCpuOnly,
     "a per-row selection sort; fused programs reduce one value per row"},
    {"Transpose", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, ""},
    {"Trilu", {1, 2, 0b1, 1, 1}, kFollow, kElementwise, ""},
    {"Unique", {1, 1, 0b1, 1, 4}, kFollow, kCpuOnly,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Unsqueeze", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, ""},
    {"Where", {3, 3, 0b111, 1, 1}, kFollow, kElementwise, ""},
    {"Xor", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, ""},
};

constexpr bool Sorted() {
  for (size_t i = 1; i < std::size(kOps); ++i)
    if (!(kOps[i - 1].op < kOps[i].op)) return false;
  return true;
}
static_assert(Sorted(), "the op table must be sorted by op name, each op once");

// kCpuOnly rows, and only they, say why no generated kernel takes the op; operand counts are
// ordered and no required input lies beyond max_inputs.
constexpr bool Consistent(const OpInfo& r) {
  const Arity& a = r.arity;
  return (r.fusion == kCpuOnly) == !r.note.empty() && a.min_inputs <= a.max_inputs &&
         a.min_outputs <= a.max_outputs &&
         (a.required == kAll || a.max_inputs >= 32 || (a.required >> a.max_inputs) == 0);
}
static_assert(std::all_of(std::begin(kOps), std::end(kOps), Consistent),
              "an op table row is inconsistent: a note on a row that is not kCpuOnly or none on one that is, or bad arity");

#if KILN_SELECTIVE
// A selective runtime (cmake/selective.cmake) keeps the rows of the ops whose CPU kernels it keeps
// (runtime/kernels/selective.h), in their order: the verifier reads an instruction's arity from
// its kernel's row, and it refuses the instructions of the other ops, whose rows would be unused
// bytes (about 22 KB of the library: the rows, their names and notes, and their relocations).
constexpr size_t kNumKept = static_cast<size_t>(
    std::count_if(std::begin(kOps), std::end(kOps), [](const OpInfo& r) { return cpu::KeepsKernel(r.op); }));
constexpr std::array<size_t, kNumKept> kKeptIndices = [] {
  std::array<size_t, kNumKept> kept{};
  size_t n = 0;
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (cpu::KeepsKernel(kOps[i].op)) kept[n++] = i;
  return kept;
}();
template <size_t... I>
constexpr std::array<OpInfo, kNumKept> KeptRows(std::index_sequence<I...>) {
  return {kOps[kKeptIndices[I]]...};
}
constexpr std::array<OpInfo, kNumKept> kRows = KeptRows(std::make_index_sequence<kNumKept>());
#else
constexpr const auto& kRows = kOps;
#endif

}  // namespace

const OpInfo* FindOpInfo(std::string_view op) {
  const OpInfo* it = std::lower_bound(std::begin(kRows), std::end(kRows), op,
                                      [](const OpInfo& r, std::string_view name) { return r.op < name; });
  return it != std::end(kRows) && it->op == op ? it : nullptr;
}

std::span<const OpInfo> AllOpInfo() { return kRows; }

const char* FusionKindName(FusionKind kind) {
  switch (kind) {
    case kElementwise: return "elementwise";
    case kIndexMap: return "index map";
    case kReduction: return "reduction";
    case kLibrary: return "library";
    case kCpuOnly: return "cpu only";
  }
  return "?";
}

}  // namespace kiln
