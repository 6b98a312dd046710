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
//    outgrow their inputs); LSTM, GRU and RNN (state carried over many steps);
//    NonMaxSuppression, RoiAlign, GridSample and AffineGrid (coordinates); DFT, STFT and the
//    window functions; quantization, Range, ConstantOfShape, EyeLike, Det, Mod, BitCast.
#include "runtime/op_table.h"

#include <algorithm>
#include <iterator>

namespace kiln {
namespace {

using enum PrecisionClass;
using enum FusionKind;
using enum OpLibrary;
constexpr uint8_t kUnbounded = Arity::kUnbounded;
constexpr uint32_t kAll = Arity::kAll;
constexpr std::string_view kNoBitOps = "a fused program computes in int64 and has no bitwise nodes";

constexpr OpInfo kOps[] = {
    {"Abs", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Acos", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Acosh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Add", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"AffineGrid", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a small per-point matrix product; no generated kernel yet"},
    {"And", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"ArgMax", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"ArgMin", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Asin", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Asinh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Atan", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Atanh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Attention", {3, 7, 0b111, 1, 4}, kLow, kCpuOnly, kNone,
     "no GPU attention kernel yet (two GEMMs around a masked softmax)"},
    {"AveragePool", {1, 1, 0b1, 1, 1}, kLow, kLibrary, kCudnn, "cuDNN pooling"},
    {"BatchNormalization", {5, 5, 0b11111, 1, 3}, kLow, kElementwise, kNone, ""},
    {"BitCast", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a byte copy; fused programs have no bit-reinterpreting load yet"},
    {"BitShift", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone, kNoBitOps},
    {"BitwiseAnd", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone, kNoBitOps},
    {"BitwiseNot", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone, kNoBitOps},
    {"BitwiseOr", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone, kNoBitOps},
    {"BitwiseXor", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone, kNoBitOps},
    {"BlackmanWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a constant of the size input: folded at compile time"},
    {"Cast", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"CastLike", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"CausalConvWithState", {2, 4, 0b11, 1, 2}, kFloat32, kCpuOnly, kNone,
     "a stateful depthwise convolution with two outputs; no generated kernel yet"},
    {"Ceil", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Celu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"CenterCropPad", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "not lowered to Slice/Pad index arithmetic yet"},
    {"Clip", {1, 3, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Col2Im", {3, 3, 0b111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "overlapping blocks accumulate into one pixel; fused programs compute each output element "
     "once"},
    {"Compress", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Concat", {1, kUnbounded, kAll, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"ConstantOfShape", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Conv", {2, 4, 0b11, 1, 1}, kLow, kLibrary, kCudnn, "cuDNN convolution, fused with bias and activation"},
    {"ConvInteger", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "integer convolution (cuDNN int8) is not wired yet"},
    {"ConvTranspose", {2, 3, 0b11, 1, 1}, kLow, kLibrary, kCudnn, "cuDNN convolution backward-data"},
    {"Cos", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Cosh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"CumProd", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a running scan along an axis; fused programs compute each element independently"},
    {"CumSum", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a running scan along an axis; fused programs compute each element independently"},
    {"DFT", {1, 3, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a transform along an axis (cuFFT is not wired yet)"},
    {"DeformConv", {3, 5, 0b111, 1, 1}, kLow, kCpuOnly, kNone,
     "convolution taps at data-dependent offsets; cuDNN has no deformable convolution"},
    {"DepthToSpace", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"DequantizeLinear", {2, 3, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "no quantized dtypes in fused programs yet"},
    {"Det", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "an LU factorisation per matrix; fused programs compute one element at a time"},
    {"Div", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Dropout", {1, 3, 0b1, 1, 2}, kFollow, kIndexMap, kNone, ""},
    {"DynamicQuantizeLinear", {1, 1, 0b1, 3, 3}, kFloat32, kCpuOnly, kNone,
     "a whole-tensor min/max feeds every element; fused programs have no reduce-then-map region"},
    {"Einsum", {1, kUnbounded, kAll, 1, 1}, kLow, kCpuOnly, kNone,
     "a direct loop over the index space; not rewritten to a batched matmul yet"},
    {"Elu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Equal", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Erf", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Exp", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Expand", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"EyeLike", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Flatten", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Floor", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"GRU", {3, 6, 0b111, 0, 2}, kFloat32, kCpuOnly, kNone,
     "no GPU path yet (cuDNN RNN supports GRU; not wired)"},
    {"Gather", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"GatherElements", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"GatherND", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "index tuples read from a tensor; not lowered to index arithmetic yet"},
    {"Gelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Gemm", {2, 4, 0b11, 1, 1}, kLow, kLibrary, kCublasLt,
     "cuBLASLt matmul, with its bias/activation epilogue"},
    {"GlobalAveragePool", {1, 1, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"GlobalLpPool", {1, 1, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"GlobalMaxPool", {1, 1, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"Greater", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"GreaterOrEqual", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"GridSample", {2, 2, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "data-dependent gathers with per-axis taps; fused index maps address inputs by affine index "
     "arithmetic"},
    {"GroupNormalization", {3, 3, 0b111, 1, 1}, kLow, kReduction, kNone, ""},
    {"HammingWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a constant of the size input: folded at compile time"},
    {"HannWindow", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a constant of the size input: folded at compile time"},
    {"HardSigmoid", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"HardSwish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Hardmax", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Identity", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"InstanceNormalization", {3, 3, 0b111, 1, 1}, kLow, kReduction, kNone, ""},
    {"IsInf", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"IsNaN", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"LRN", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a sum over a channel window; not lowered to a fused program yet"},
    {"LSTM", {3, 8, 0b111, 0, 3}, kFloat32, kCpuOnly, kNone,
     "no GPU path yet (cuDNN RNN supports LSTM; not wired)"},
    {"LayerNormalization", {2, 3, 0b11, 1, 3}, kLow, kReduction, kNone, ""},
    {"LeakyRelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Less", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"LessOrEqual", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Log", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"LogSoftmax", {1, 1, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"LpNormalization", {1, 1, 0b1, 1, 1}, kLow, kCpuOnly, kNone, "not lowered to the reduction family yet"},
    {"LpPool", {1, 1, 0b1, 1, 1}, kFloat32, kCpuOnly, kNone,
     "cuDNN has no Lp pooling mode and windowed reductions are not generated yet"},
    {"MatMul", {2, 4, 0b11, 1, 1}, kLow, kLibrary, kCublasLt,
     "cuBLASLt matmul, with its bias/activation epilogue"},
    {"MatMulInteger", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "integer GEMM (cuBLASLt int8) is not wired yet"},
    {"Max", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"MaxPool", {1, 1, 0b1, 1, 2}, kLow, kLibrary, kCudnn, "cuDNN pooling"},
    {"MaxUnpool", {2, 3, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "a scatter to MaxPool's indices; fused programs compute each output element once"},
    {"Mean", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"MeanVarianceNormalization", {1, 1, 0b1, 1, 1}, kLow, kCpuOnly, kNone,
     "statistics over several axes; not lowered to the reduction family yet"},
    {"MelWeightMatrix", {5, 5, 0b11111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a constant of its inputs: folded at compile time"},
    {"Min", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Mish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Mod", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Mul", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Neg", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"NonMaxSuppression", {2, 5, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"NonZero", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Not", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"OneHot", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly, kNone,
     "not lowered to a fused program yet (a compare of the index with the coordinate)"},
    {"Or", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"PRelu", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Pad", {2, 4, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Pow", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"QLinearConv", {8, 9, 0b11111111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "integer convolution (cuDNN int8) is not wired yet"},
    {"QLinearMatMul", {8, 8, 0b11111111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "integer GEMM (cuBLASLt int8) is not wired yet"},
    {"QuantizeLinear", {2, 3, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone,
     "no quantized dtypes in fused programs yet"},
    {"RMSNormalization", {2, 2, 0b11, 1, 1}, kLow, kCpuOnly, kNone,
     "not lowered to the reduction family yet"},
    {"RNN", {3, 6, 0b111, 0, 2}, kFloat32, kCpuOnly, kNone,
     "no GPU path yet (cuDNN RNN supports it; not wired)"},
    {"Range", {3, 3, 0b111, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Reciprocal", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"ReduceL1", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceL2", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceLogSum", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceLogSumExp", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceMax", {1, 2, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"ReduceMean", {1, 2, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"ReduceMin", {1, 2, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"ReduceProd", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceSum", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"ReduceSumSquare", {1, 2, 0b1, 1, 1}, kFloat32, kReduction, kNone, ""},
    {"Relu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Reshape", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Resize", {1, 4, 0b1, 1, 1}, {kFollow, 0b110}, kIndexMap, kNone, ""},
    {"ReverseSequence", {2, 2, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "a per-batch reversal length read from a tensor; fused index maps are affine"},
    {"RoiAlign", {3, 3, 0b111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "bilinear samples at data-dependent region coordinates; fused index maps are affine"},
    {"RotaryEmbedding", {3, 4, 0b111, 1, 1}, kFloat32, kCpuOnly, kNone,
     "not lowered to a fused program yet (a gather of the cache rows per token)"},
    {"Round", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"STFT", {2, 4, 0b11, 1, 1}, kFloat32, kCpuOnly, kNone, "framed transforms (cuFFT is not wired yet)"},
    {"Scatter", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly, kNone,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterElements", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly, kNone,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterND", {3, 3, 0b111, 1, 1}, kFollow, kCpuOnly, kNone,
     "a scatter writes where its indices say; fused programs compute each output element once"},
    {"Selu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Shape", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never "
     "launched"},
    {"Shrink", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Sigmoid", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Sign", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Sin", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Sinh", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Size", {1, 1, 0b1, 1, 1}, kFollow, kCpuOnly, kNone,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never "
     "launched"},
    {"Slice", {3, 5, 0b111, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Softmax", {1, 1, 0b1, 1, 1}, kLow, kReduction, kNone, ""},
    {"Softplus", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Softsign", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"SpaceToDepth", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Split", {1, 2, 0b1, 1, kUnbounded}, kFollow, kIndexMap, kNone, ""},
    {"Sqrt", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Squeeze", {1, 2, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Sub", {2, 2, 0b11, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Sum", {1, kUnbounded, kAll, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Swish", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Tan", {1, 1, 0b1, 1, 1}, kFloat32, kElementwise, kNone, ""},
    {"Tanh", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"TensorScatter", {2, 3, 0b11, 1, 1}, kFollow, kCpuOnly, kNone,
     "a KV-cache write at data-dependent rows; fused programs compute each output element once"},
    {"ThresholdedRelu", {1, 1, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Tile", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"TopK", {2, 2, 0b11, 2, 2}, kFollow, kCpuOnly, kNone,
     "a per-row selection sort; fused programs reduce one value per row"},
    {"Transpose", {1, 1, 0b1, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Trilu", {1, 2, 0b1, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Unique", {1, 1, 0b1, 1, 4}, kFollow, kCpuOnly, kNone,
     "a data-dependent output size: folded from constants, else a run-time dim that the host reads"},
    {"Unsqueeze", {2, 2, 0b11, 1, 1}, kFollow, kIndexMap, kNone, ""},
    {"Where", {3, 3, 0b111, 1, 1}, kFollow, kElementwise, kNone, ""},
    {"Xor", {2, 2, 0b11, 1, 1}, kFloat32, kElementwise, kNone, ""},
};

constexpr bool Sorted() {
  for (size_t i = 1; i < std::size(kOps); ++i)
    if (!(kOps[i - 1].op < kOps[i].op)) return false;
  return true;
}
static_assert(Sorted(), "the op table must be sorted by op name, each op once");

// A library names itself exactly on kLibrary rows; kLibrary and kCpuOnly rows say why; operand
// counts are ordered and no required input lies beyond max_inputs.
constexpr bool Consistent(const OpInfo& r) {
  const Arity& a = r.arity;
  return (r.fusion == kLibrary) == (r.library != kNone) &&
         (r.fusion == kLibrary || r.fusion == kCpuOnly) == !r.note.empty() && a.min_inputs <= a.max_inputs &&
         a.min_outputs <= a.max_outputs &&
         (a.required == kAll || a.max_inputs >= 32 || (a.required >> a.max_inputs) == 0);
}
static_assert(std::all_of(std::begin(kOps), std::end(kOps), Consistent),
              "an op table row is inconsistent: library without kLibrary, a missing note, or bad arity");

}  // namespace

const OpInfo* FindOpInfo(std::string_view op) {
  const OpInfo* it = std::lower_bound(std::begin(kOps), std::end(kOps), op,
                                      [](const OpInfo& r, std::string_view name) { return r.op < name; });
  return it != std::end(kOps) && it->op == op ? it : nullptr;
}

std::span<const OpInfo> AllOpInfo() { return kOps; }

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

std::string_view CpuLibraryOf(std::string_view op) {
  return op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "MatMul" || op == "Gemm" ? "onednn" : "";
}

std::string_view LibraryName(OpLibrary library) {
  switch (library) {
    case kCublasLt: return "cublaslt";
    case kCudnn: return "cudnn";
    case kNone: break;
  }
  return "";
}

}  // namespace kiln
