#include "compiler/fusion/rules.h"

#include <algorithm>
#include <vector>

namespace kiln::fusion {
namespace {

// Ops that a library executor runs on the GPU (issue 4 wires the calls), and ops without
// any GPU path yet. Every op of the CPU backend appears in exactly one table;
// tests/compiler/fusion/rules_test.cc checks that.
constexpr FusionRule kOtherRules[] = {
    {"MatMul", FusionKind::kLibrary, nullptr, nullptr, "cuBLASLt matmul, with its bias/activation epilogue",
     "cublaslt"},
    {"Gemm", FusionKind::kLibrary, nullptr, nullptr, "cuBLASLt matmul, with its bias/activation epilogue",
     "cublaslt"},
    {"Conv", FusionKind::kLibrary, nullptr, nullptr, "cuDNN convolution, fused with bias and activation", "cudnn"},
    {"ConvTranspose", FusionKind::kLibrary, nullptr, nullptr, "cuDNN convolution backward-data", "cudnn"},
    {"MaxPool", FusionKind::kLibrary, nullptr, nullptr, "cuDNN pooling", "cudnn"},
    {"AveragePool", FusionKind::kLibrary, nullptr, nullptr, "cuDNN pooling", "cudnn"},
    {"LSTM", FusionKind::kCpuOnly, nullptr, nullptr, "no GPU path yet (cuDNN RNN supports LSTM; not wired)"},
    {"GRU", FusionKind::kCpuOnly, nullptr, nullptr, "no GPU path yet (cuDNN RNN supports GRU; not wired)"},
    {"RNN", FusionKind::kCpuOnly, nullptr, nullptr, "no GPU path yet (cuDNN RNN supports it; not wired)"},
    {"LpPool", FusionKind::kCpuOnly, nullptr, nullptr,
     "cuDNN has no Lp pooling mode and windowed reductions are not generated yet"},
    {"ArgMax", FusionKind::kCpuOnly, nullptr, nullptr,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"ArgMin", FusionKind::kCpuOnly, nullptr, nullptr,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Hardmax", FusionKind::kCpuOnly, nullptr, nullptr,
     "needs a (value, index) reduction; fused programs reduce one value per row"},
    {"Attention", FusionKind::kCpuOnly, nullptr, nullptr, "no GPU attention kernel yet (two GEMMs around a masked softmax)"},
    {"RotaryEmbedding", FusionKind::kCpuOnly, nullptr, nullptr, "not lowered to a fused program yet (a gather of the cache rows per token)"},
    {"RMSNormalization", FusionKind::kCpuOnly, nullptr, nullptr, "not lowered to the reduction family yet"},
    {"GatherND", FusionKind::kCpuOnly, nullptr, nullptr, "index tuples read from a tensor; not lowered to index arithmetic yet"},
    {"OneHot", FusionKind::kCpuOnly, nullptr, nullptr, "not lowered to a fused program yet (a compare of the index with the coordinate)"},
    {"Scatter", FusionKind::kCpuOnly, nullptr, nullptr, "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterElements", FusionKind::kCpuOnly, nullptr, nullptr, "a scatter writes where its indices say; fused programs compute each output element once"},
    {"ScatterND", FusionKind::kCpuOnly, nullptr, nullptr, "a scatter writes where its indices say; fused programs compute each output element once"},
    {"RoiAlign", FusionKind::kCpuOnly, nullptr, nullptr, "bilinear samples at data-dependent region coordinates; fused index maps are affine"},
    {"Col2Im", FusionKind::kCpuOnly, nullptr, nullptr, "overlapping blocks accumulate into one pixel; fused programs compute each output element once"},
    {"MaxUnpool", FusionKind::kCpuOnly, nullptr, nullptr, "a scatter to MaxPool's indices; fused programs compute each output element once"},
    {"DeformConv", FusionKind::kCpuOnly, nullptr, nullptr, "convolution taps at data-dependent offsets; cuDNN has no deformable convolution"},
    {"NonMaxSuppression", FusionKind::kCpuOnly, nullptr, nullptr, "a data-dependent output size: compiled only from constants and folded"},
    {"TopK", FusionKind::kCpuOnly, nullptr, nullptr, "a per-row selection sort; fused programs reduce one value per row"},
    {"LRN", FusionKind::kCpuOnly, nullptr, nullptr, "a sum over a channel window; not lowered to a fused program yet"},
    {"LpNormalization", FusionKind::kCpuOnly, nullptr, nullptr, "not lowered to the reduction family yet"},
    {"MeanVarianceNormalization", FusionKind::kCpuOnly, nullptr, nullptr, "statistics over several axes; not lowered to the reduction family yet"},
    {"Einsum", FusionKind::kCpuOnly, nullptr, nullptr, "a direct loop over the index space; not rewritten to a batched matmul yet"},
    {"ReverseSequence", FusionKind::kCpuOnly, nullptr, nullptr, "a per-batch reversal length read from a tensor; fused index maps are affine"},
    {"CenterCropPad", FusionKind::kCpuOnly, nullptr, nullptr, "not lowered to Slice/Pad index arithmetic yet"},
    {"Compress", FusionKind::kCpuOnly, nullptr, nullptr, "a data-dependent output size: compiled only from a constant condition"},
    {"NonZero", FusionKind::kCpuOnly, nullptr, nullptr, "a data-dependent output size: compiled only from constants and folded"},
    {"Unique", FusionKind::kCpuOnly, nullptr, nullptr, "a data-dependent output size: compiled only from constants and folded"},
    {"Det", FusionKind::kCpuOnly, nullptr, nullptr, "an LU factorisation per matrix; fused programs compute one element at a time"},
    {"DynamicQuantizeLinear", FusionKind::kCpuOnly, nullptr, nullptr,
     "a whole-tensor min/max feeds every element; fused programs have no reduce-then-map region"},
    {"QuantizeLinear", FusionKind::kCpuOnly, nullptr, nullptr, "no quantized dtypes in fused programs yet"},
    {"DequantizeLinear", FusionKind::kCpuOnly, nullptr, nullptr, "no quantized dtypes in fused programs yet"},
    {"MatMulInteger", FusionKind::kCpuOnly, nullptr, nullptr, "integer GEMM (cuBLASLt int8) is not wired yet"},
    {"QLinearMatMul", FusionKind::kCpuOnly, nullptr, nullptr, "integer GEMM (cuBLASLt int8) is not wired yet"},
    {"ConvInteger", FusionKind::kCpuOnly, nullptr, nullptr, "integer convolution (cuDNN int8) is not wired yet"},
    {"QLinearConv", FusionKind::kCpuOnly, nullptr, nullptr, "integer convolution (cuDNN int8) is not wired yet"},
    {"GridSample", FusionKind::kCpuOnly, nullptr, nullptr,
     "data-dependent gathers with per-axis taps; fused index maps address inputs by affine index arithmetic"},
    {"AffineGrid", FusionKind::kCpuOnly, nullptr, nullptr, "a small per-point matrix product; no generated kernel yet"},
    {"DFT", FusionKind::kCpuOnly, nullptr, nullptr, "a transform along an axis (cuFFT is not wired yet)"},
    {"STFT", FusionKind::kCpuOnly, nullptr, nullptr, "framed transforms (cuFFT is not wired yet)"},
    {"HannWindow", FusionKind::kCpuOnly, nullptr, nullptr, "a constant of the size input: folded at compile time"},
    {"HammingWindow", FusionKind::kCpuOnly, nullptr, nullptr, "a constant of the size input: folded at compile time"},
    {"BlackmanWindow", FusionKind::kCpuOnly, nullptr, nullptr, "a constant of the size input: folded at compile time"},
    {"MelWeightMatrix", FusionKind::kCpuOnly, nullptr, nullptr, "a constant of its inputs: folded at compile time"},
    {"CumSum", FusionKind::kCpuOnly, nullptr, nullptr, "a running scan along an axis; fused programs compute each element independently"},
    {"CumProd", FusionKind::kCpuOnly, nullptr, nullptr, "a running scan along an axis; fused programs compute each element independently"},
    {"BitCast", FusionKind::kCpuOnly, nullptr, nullptr, "a byte copy; fused programs have no bit-reinterpreting load yet"},
    {"CausalConvWithState", FusionKind::kCpuOnly, nullptr, nullptr, "a stateful depthwise convolution with two outputs; no generated kernel yet"},
    {"TensorScatter", FusionKind::kCpuOnly, nullptr, nullptr, "a KV-cache write at data-dependent rows; fused programs compute each output element once"},
    {"Shape", FusionKind::kCpuOnly, nullptr, nullptr,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never launched"},
    {"Size", FusionKind::kCpuOnly, nullptr, nullptr,
     "shape arithmetic: folded at compile time or evaluated by the entry's expressions, never launched"},
};

struct Table {
  std::vector<FusionRule> rules;
  Table() {
    for (auto part : {ElementwiseRules(), DataMovementRules(), ReductionRules(), MathRules(), std::span<const FusionRule>(kOtherRules)})
      rules.insert(rules.end(), part.begin(), part.end());
    std::sort(rules.begin(), rules.end(), [](const FusionRule& a, const FusionRule& b) { return a.op < b.op; });
  }
};

const Table& GetTable() {
  static const Table table;
  return table;
}

}  // namespace

const FusionRule* FindRule(std::string_view op) {
  const auto& rules = GetTable().rules;
  auto it = std::lower_bound(rules.begin(), rules.end(), op, [](const FusionRule& r, std::string_view o) { return r.op < o; });
  return it != rules.end() && it->op == op ? &*it : nullptr;
}

std::span<const FusionRule> AllRules() { return GetTable().rules; }

const char* KindName(FusionKind kind) {
  switch (kind) {
    case FusionKind::kElementwise: return "elementwise";
    case FusionKind::kIndexMap: return "index map";
    case FusionKind::kReduction: return "reduction";
    case FusionKind::kLibrary: return "library";
    case FusionKind::kCpuOnly: return "cpu only";
  }
  return "?";
}

}  // namespace kiln::fusion
