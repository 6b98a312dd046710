#include "runtime/cpu/claims.h"

#include <algorithm>
#include <iterator>

namespace kiln::cpu {
namespace {

struct LibraryOp {
  std::string_view op;
  std::string_view reason;
};

// oneDNN's ops, sorted. What it refuses of each is runtime/cpu/onednn/onednn.h's.
constexpr LibraryOp kOneDnn[] = {
    {"AveragePool", "oneDNN pooling, in its producer's layout"},
    {"Conv", "oneDNN convolution, its epilogue as post-ops"},
    {"ConvInteger", "oneDNN int8 convolution into int32 (an s8 W with zero point 0, a model weight; x's zero point "
                    "subtracted after)"},
    {"GRU", "oneDNN's gru_forward / lbr_gru_forward (float32 model weights, the default activations, no "
            "sequence_lens or clip; batch 16 and up)"},
    {"Gemm", "oneDNN matmul (float32, at least 2^18 multiply-adds, a 2-D B), its epilogue as post-ops"},
    {"LSTM", "oneDNN's lstm_forward (float32 model weights, the default activations, no sequence_lens, clip, "
             "peepholes or input_forget; batch 16 and up)"},
    {"MatMul", "oneDNN matmul (float32, at least 2^18 multiply-adds, a 2-D B), its epilogue as post-ops"},
    {"MatMulInteger", "oneDNN int8 matmul (a 2-D s8 B with zero point 0, a model weight), int32 Y"},
    {"MaxPool", "oneDNN pooling, in its producer's layout (a NaN in X: the CPU kernel)"},
    {"QGemm", "oneDNN int8 matmul (an s8 B with zero point 0, C of N values; B, C, scales and zero points model "
              "weights)"},
    {"QLinearConv", "oneDNN int8 convolution (s8 W with zero point 0; W, bias, scales and zero points model weights)"},
    {"QLinearMatMul", "oneDNN int8 matmul (a 2-D s8 B with zero point 0; B, scales and zero points model weights)"},
    {"RNN", "oneDNN's vanilla_rnn_forward (float32 model weights, one of Tanh, Relu and Sigmoid for every "
            "direction, no sequence_lens or clip)"},
    {"kiln.NhwcConv", "oneDNN convolution on NHWC tensors, its epilogue as post-ops"},
};
static_assert(std::is_sorted(std::begin(kOneDnn), std::end(kOneDnn),
                             [](const LibraryOp& a, const LibraryOp& b) { return a.op < b.op; }));

}  // namespace

Claim ClaimOp(std::string_view op, bool fused) {
  if (fused) return {Library::kGenerated, "a generated kernel: its portable program, interpreted"};
  const auto* it = std::lower_bound(std::begin(kOneDnn), std::end(kOneDnn), op,
                                    [](const LibraryOp& r, std::string_view name) { return r.op < name; });
  if (it != std::end(kOneDnn) && it->op == op) return {Library::kOneDnn, it->reason};
  return {Library::kCpuKernel, "Kiln's CPU kernel"};
}

}  // namespace kiln::cpu
