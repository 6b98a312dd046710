// The CPU plan's channels-last layout (compiler/passes/channels_last.h): which ops follow the
// NHWC values, which Convs keep a side NCHW, how many Transposes are left between the layouts,
// and that the results are the NCHW model's, on oneDNN and on Kiln's kernel
// (runtime/kernels/nhwc_conv.h) alike.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {
namespace {

// Deterministic values in [-1, 1).
std::vector<float> Pseudorandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

void AddConv(onnx::GraphProto* g, const std::string& x, const std::string& y, int64_t out, int64_t in, int64_t k,
          uint32_t seed, bool bias = true) {
  AddFloatInit(g, y + "_w", {out, in, k, k}, Pseudorandom(static_cast<size_t>(out * in * k * k), seed));
  std::vector<std::string> ins = {x, y + "_w"};
  if (bias) {
    AddFloatInit(g, y + "_b", {out}, Pseudorandom(static_cast<size_t>(out), seed + 1));
    ins.push_back(y + "_b");
  }
  auto* n = AddNode(g, "Conv", ins, {y}, y);
  const int64_t p = k / 2;
  AttrInts(n, "pads", {p, p, p, p});
}

// x [1, 4, 6, 6] -> Conv 3x3 + SiLU -> a; squeeze-and-excitation: ReduceMean over H, W, Conv 1x1
// + Sigmoid, times a -> e; Conv 1x1 + a (residual) -> y; GlobalAveragePool, Flatten -> f.
// Outputs f [1, 8] and y [1, 8, 6, 6].
onnx::ModelProto SqueezeExcite() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4", "6", "6"});
  AddConv(g, "x", "c1", 8, 4, 3, 1);
  AddNode(g, "Sigmoid", {"c1"}, {"s1"}, "s1");
  AddNode(g, "Mul", {"c1", "s1"}, {"a"}, "silu");
  AddInt64Init(g, "hw", {2}, {2, 3});
  AddNode(g, "ReduceMean", {"a", "hw"}, {"m"}, "mean");
  AddConv(g, "m", "r", 8, 8, 1, 2);
  AddNode(g, "Sigmoid", {"r"}, {"gate"}, "gate");
  AddNode(g, "Mul", {"a", "gate"}, {"e"}, "excite");
  AddConv(g, "e", "c2", 8, 8, 1, 3);
  AddNode(g, "Add", {"c2", "a"}, {"y"}, "residual");
  AddNode(g, "GlobalAveragePool", {"y"}, {"p"}, "pool");
  AddNode(g, "Flatten", {"p"}, {"f"}, "flatten");
  AddOutput(g, "f");
  AddOutput(g, "y");
  return m;
}

// x [1, 4, 5, 5] -> Conv 1x1 -> Split in two along C; Conv 3x3 of the second half, Concat with
// the first -> k; Resize x2 (nearest) -> u; ConvNeXt's permutes around a Mul along C:
// Transpose to [N, H, W, C], times gamma [8], Transpose back; plus u; Conv 3x3 -> o [1, 2, 10, 10].
onnx::ModelProto SplitConcatResize() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4", "5", "5"});
  AddConv(g, "x", "c", 8, 4, 1, 4);
  AddInt64Init(g, "halves", {2}, {4, 4});
  AttrInt(AddNode(g, "Split", {"c", "halves"}, {"s0", "s1"}, "split"), "axis", 1);
  AddConv(g, "s1", "d", 4, 4, 3, 5, false);
  AttrInt(AddNode(g, "Concat", {"s0", "d"}, {"k"}, "concat"), "axis", 1);
  AddFloatInit(g, "scales", {4}, {1, 1, 2, 2});
  AddNode(g, "Resize", {"k", "", "scales"}, {"u"}, "resize");
  AttrInts(AddNode(g, "Transpose", {"u"}, {"t"}, "to_last"), "perm", {0, 2, 3, 1});
  AddFloatInit(g, "gamma", {8}, Pseudorandom(8, 6));
  AddNode(g, "Mul", {"t", "gamma"}, {"tm"}, "scale");
  AttrInts(AddNode(g, "Transpose", {"tm"}, {"b"}, "to_first"), "perm", {0, 3, 1, 2});
  AddNode(g, "Add", {"b", "u"}, {"z"}, "add");
  AddConv(g, "z", "o", 2, 8, 3, 7);
  AddOutput(g, "o");
  return m;
}

using Compiled = CompiledWithLog;

CompiledWithLog CompileWithLayout(const onnx::ModelProto& m, bool channels_last = true) {
  compiler::CompileOptions options = CpuOnly();
  options.cpu_channels_last = channels_last;
  return CompileWithLog(m, options);
}

bool Logged(const CompiledWithLog& c, const std::string& line) { return c.Logged(line); }

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The outputs on the CPU backend, with oneDNN or on Kiln's kernels.
std::vector<std::vector<float>> RunOnCpu(const std::vector<uint8_t>& bytes, const std::vector<float>& x,
                                    std::vector<int64_t> dims, bool onednn) {
  ContextOptions options;
  options.device = Device::kCpu;
  options.cpu.onednn = onednn;
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, dims.data(), static_cast<int32_t>(dims.size()))};
  return RunFloat(bytes, in, options);
}

// `got` against the NCHW model's outputs: compiled with --no-fuse (no NHWC plan) and run on Kiln's
// kernels, an independent path.
void CheckAgainstNchw(const onnx::ModelProto& m, const std::vector<uint8_t>& nhwc, const std::vector<float>& x,
                      const std::vector<int64_t>& dims) {
  const std::vector<uint8_t> nchw = CompileModel(m, OptionsFor(Device::kCpu, false));
  const auto want = RunOnCpu(nchw, x, dims, false);
  for (const bool onednn : {true, false}) {
    INFO("oneDNN: " << onednn);
    const auto got = RunOnCpu(nhwc, x, dims, onednn);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      REQUIRE(got[k].size() == want[k].size());
      for (size_t i = 0; i < got[k].size(); ++i) {
        INFO("output " << k << " element " << i);
        CHECK(got[k][i] == doctest::Approx(want[k][i]).epsilon(1e-5).scale(1.0));
      }
    }
  }
}

}  // namespace

TEST_CASE("channels-last: a lone Conv stays NCHW, and a model without a 2-D Conv is left alone") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4", "5", "5"});
  AddConv(g, "x", "y", 2, 4, 3, 8);
  AddOutput(g, "y");
  const Compiled c = CompileWithLog(m);
  INFO(c.fusion_trace);
  CHECK(c.fusion_trace.find("y = Conv(x, y_w, y_b, ") != std::string::npos);
  CHECK_FALSE(Logged(c, "channels-last:"));
}

TEST_CASE("channels-last: --cpu-layout nchw keeps every Conv as ONNX has it") {
  const onnx::ModelProto m = SqueezeExcite();
  const Compiled c = CompileWithLayout(m, false);
  INFO(c.fusion_trace);
  CHECK_FALSE(Logged(c, "channels-last:"));
  CHECK(c.fusion_trace.find("kiln.NhwcConv") == std::string::npos);
  CHECK(Occurrences(c.fusion_trace, "= Conv(") == 3);
  CheckAgainstNchw(m, c.bytes, Pseudorandom(4 * 36, 13), {1, 4, 6, 6});
}

TEST_CASE("channels-last: a squeeze-and-excitation block runs in NHWC, one Transpose in and one out") {
  const onnx::ModelProto m = SqueezeExcite();
  const Compiled c = CompileWithLog(m);
  INFO(c.fusion_trace);
  // Three Convs in NHWC; the ReduceMean, the excitation's Mul, the pooling (a ReduceMean over
  // H and W) and the Flatten of [1, 8, 1, 1] follow. The first Conv reads x as it is (NCHW, a
  // model input); y, a model output too, comes back out through the one Transpose.
  CHECK(Logged(c, "channels-last: 3 Convs in NHWC (kiln.NhwcConv), 4 ops follow their NHWC values, "
                  "1 Transpose between the layouts"));
  CHECK(Occurrences(c.fusion_trace, "= kiln.NhwcConv(") == 3);
  CHECK(c.fusion_trace.find("a#nhwc = kiln.NhwcConv(x, c1_w, c1_b, ") != std::string::npos);
  CHECK(Occurrences(c.fusion_trace, "x_layout='NCHW'") == 1);
  CHECK(c.fusion_trace.find("Transpose 'y#to_nchw'") != std::string::npos);
  const std::vector<float> x = Pseudorandom(4 * 36, 11);
  CheckAgainstNchw(m, c.bytes, x, {1, 4, 6, 6});
}

TEST_CASE("channels-last: Split, Concat, Resize and a model's own permutes follow, and the permutes cancel") {
  const onnx::ModelProto m = SplitConcatResize();
  const Compiled c = CompileWithLog(m);
  INFO(c.fusion_trace);
  // The permute to [N, H, W, C] is the NHWC value itself and the one back its NCHW form; the
  // first Conv reads x NCHW and the last writes o NCHW: no Transpose is left.
  CHECK(Logged(c, "channels-last: 3 Convs in NHWC (kiln.NhwcConv), 5 ops follow their NHWC values, "
                  "0 Transposes between the layouts"));
  CHECK(c.fusion_trace.find("c#nhwc = kiln.NhwcConv(x, ") != std::string::npos);
  CHECK(c.fusion_trace.find("o = kiln.NhwcConv(z#nhwc, ") != std::string::npos);
  CHECK(c.fusion_trace.find("y_layout='NCHW'") != std::string::npos);
  CHECK(c.fusion_trace.find("Transpose 'to_last'") == std::string::npos);
  CHECK(c.fusion_trace.find("Transpose 'to_first'") == std::string::npos);
  const std::vector<float> x = Pseudorandom(4 * 25, 12);
  CheckAgainstNchw(m, c.bytes, x, {1, 4, 5, 5});
}

}  // namespace kiln::testing
