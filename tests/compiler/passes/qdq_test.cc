// Quantized (QDQ) graphs as onnxruntime's quantize_static writes them (compiler/passes/qdq.h):
// DequantizeLinear -> Conv / MatMul -> QuantizeLinear folded into QLinearConv / QLinearMatMul
// (oneDNN's int8 kernels on the CPU backend), checked against the same graph compiled without
// the fusion stage, where every QuantizeLinear, DequantizeLinear and the float Conv / MatMul run
// as their own CPU kernels: within one quantization step of the output (the folded op rounds
// once, the unfolded graph computes in float32 and rounds at its QuantizeLinear). QuantizeLinear
// and DequantizeLinear fused into generated kernels give the unfused bits exactly. The int8
// weights stay int8 in the artifact, and malformed scales are compile errors.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"
#include "tests/random_floats.h"

namespace kiln::testing {
namespace {

std::vector<int8_t> RandomInt8(size_t n, uint32_t seed) {
  std::vector<int8_t> v(n);
  uint32_t s = seed;
  for (int8_t& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<int8_t>(static_cast<int>((s >> 16) % 255) - 127);
  }
  return v;
}

struct QdqShape {
  int64_t c = 8, m = 16, hw = 10;  // Conv: X [1, c, hw, hw], W [m, c, 3, 3] (pads 1)
  bool matmul = false;             // MatMul: X [6, c] by W [c, m]
  bool gemm = false;               // Gemm: X [6, c] by W [m, c] (transB), C [m], alpha 0.5
  bool relu = false;               // a Relu before the output's QuantizeLinear (zero point 0)
  bool w_axis_1 = false;           // W's scales along axis 1: not foldable
  bool pointwise = false;          // Conv: a 1 x 1 kernel, no pads
  uint8_t x_zero_point = 128;
  float y_scale = 0.1f;
};

// y = DQ(Q(op(DQ(Q(x)), DQ(W)[, DQ(B)]))), as quantize_static writes it: X uint8 (scale
// 0.05, zero point 128), W int8 with one scale per output channel (MatMul: one scale), B int32
// in the scale x_scale * w_scale, Y uint8.
onnx::ModelProto QdqModel(const QdqShape& s) {
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  const float xs = 0.05f;
  if (s.matmul || s.gemm) {
    AddInput(g, "x", {"6", std::to_string(s.c)});
  } else {
    AddInput(g, "x", {"1", std::to_string(s.c), std::to_string(s.hw), std::to_string(s.hw)});
  }
  AddFloatInit(g, "xs", {}, {xs});
  AddRawInit<uint8_t>(g, "xzp", onnx::TensorProto::UINT8, {}, {s.x_zero_point});
  AddNode(g, "QuantizeLinear", {"x", "xs", "xzp"}, {"xq"}, "qx");
  AddNode(g, "DequantizeLinear", {"xq", "xs", "xzp"}, {"xf"}, "dqx");
  const int64_t per = s.matmul ? 1 : (s.w_axis_1 ? s.c : s.m);
  const float alpha = s.gemm ? 0.5f : 1.0f;
  std::vector<float> ws(static_cast<size_t>(per));
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.002f * static_cast<float>(1 + i % 5);
  if (s.matmul) {
    AddRawInit(g, "w", onnx::TensorProto::INT8, {s.c, s.m}, RandomInt8(static_cast<size_t>(s.c * s.m), 3));
  } else if (s.gemm) {
    AddRawInit(g, "w", onnx::TensorProto::INT8, {s.m, s.c}, RandomInt8(static_cast<size_t>(s.c * s.m), 3));
  } else {
    const int64_t k = s.pointwise ? 1 : 3;
    AddRawInit(g, "w", onnx::TensorProto::INT8, {s.m, s.c, k, k}, RandomInt8(static_cast<size_t>(s.m * s.c * k * k), 3));
  }
  AddFloatInit(g, "ws", per == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{per}, ws);
  AddRawInit(g, "wzp", onnx::TensorProto::INT8, per == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{per},
             std::vector<int8_t>(static_cast<size_t>(per), 0));
  auto* dqw = AddNode(g, "DequantizeLinear", {"w", "ws", "wzp"}, {"wf"}, "dqw");
  AttrInt(dqw, "axis", s.w_axis_1 ? 1 : 0);
  if (s.matmul) {
    AddNode(g, "MatMul", {"xf", "wf"}, {"yf"}, "op");
  } else if (s.gemm) {  // C as a float constant, not quantized: requantized in the fold
    AddFloatInit(g, "c", {s.m}, RandomFloats(static_cast<size_t>(s.m), 5, -2.0f, 2.0f));
    auto* gemm = AddNode(g, "Gemm", {"xf", "wf", "c"}, {"yf"}, "op");
    AttrInt(gemm, "transB", 1);
    AttrFloat(gemm, "alpha", alpha);
  } else {
    std::vector<int32_t> bq(static_cast<size_t>(s.m));
    std::vector<float> bs(static_cast<size_t>(s.m));
    for (int64_t k = 0; k < s.m; ++k) {
      bq[static_cast<size_t>(k)] = static_cast<int32_t>(k * 97 % 2001) - 1000;
      bs[static_cast<size_t>(k)] = xs * ws[static_cast<size_t>(s.w_axis_1 ? 0 : k)];
    }
    AddRawInit(g, "b", onnx::TensorProto::INT32, {s.m}, bq);
    AddFloatInit(g, "bs", {s.m}, bs);
    AddRawInit(g, "bzp", onnx::TensorProto::INT32, {s.m}, std::vector<int32_t>(static_cast<size_t>(s.m), 0));
    auto* dqb = AddNode(g, "DequantizeLinear", {"b", "bs", "bzp"}, {"bf"}, "dqb");
    AttrInt(dqb, "axis", 0);
    auto* conv = AddNode(g, "Conv", {"xf", "wf", "bf"}, {"yf"}, "op");
    if (!s.pointwise) AttrInts(conv, "pads", {1, 1, 1, 1});
  }
  std::string y = "yf";
  if (s.relu) {
    AddNode(g, "Relu", {"yf"}, {"yr"}, "relu");
    y = "yr";
  }
  AddFloatInit(g, "ys", {}, {s.y_scale});
  AddRawInit<uint8_t>(g, "yzp", onnx::TensorProto::UINT8, {}, {static_cast<uint8_t>(s.relu ? 0 : 100)});
  AddNode(g, "QuantizeLinear", {y, "ys", "yzp"}, {"yq"}, "qy");
  AddNode(g, "DequantizeLinear", {"yq", "ys", "yzp"}, {"y"}, "dqy");
  AddOutput(g, "y");
  return m;
}

// The model's input x of QdqModel(s): [6, c] for MatMul and Gemm, [1, c, hw, hw] for Conv, in [-6, 6).
struct QdqInput {
  std::vector<int64_t> dims;
  std::vector<float> x;
  explicit QdqInput(const QdqShape& s)
      : dims(s.matmul || s.gemm ? std::vector<int64_t>{6, s.c} : std::vector<int64_t>{1, s.c, s.hw, s.hw}),
        x(RandomFloats(static_cast<size_t>(dims.size() == 2 ? 6 * s.c : s.c * s.hw * s.hw), 11, -6.0f, 6.0f)) {}
  std::vector<TensorView> Views() const {
    return {TensorView::Host(x.data(), DType::kFloat32, dims.data(), static_cast<int>(dims.size()))};
  }
};

// The model's output on the CPU backend, compiled with the fusion stage (`fuse`) or without.
std::vector<float> RunQdq(const onnx::ModelProto& m, const QdqShape& s, bool fuse) {
  const QdqInput input(s);
  ContextOptions options;
  options.device = Device::kCpu;
  const auto out = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, fuse)), input.Views(), options);
  REQUIRE(out.size() == 1);
  return out[0];
}

// Elements of `a` and `b` more than one step of `scale` apart, and how many differ at all.
std::pair<int, int> StepsApart(const std::vector<float>& a, const std::vector<float>& b, float scale) {
  REQUIRE(a.size() == b.size());
  int over = 0, differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    differ += a[i] != b[i];
    over += !(std::fabs(a[i] - b[i]) <= scale * 1.0001f);
  }
  return {over, differ};
}

TEST_CASE("QDQ Conv and MatMul groups fold into QLinearConv and QLinearMatMul, within one step of the unfolded graph") {
  for (const QdqShape s : {QdqShape{}, QdqShape{.relu = true}, QdqShape{.c = 32, .m = 24, .hw = 7},
                           QdqShape{.c = 64, .m = 48, .matmul = true}, QdqShape{.c = 64, .m = 40, .gemm = true}}) {
    CAPTURE(s.matmul);
    CAPTURE(s.gemm);
    CAPTURE(s.relu);
    CAPTURE(s.c);
    const onnx::ModelProto m = QdqModel(s);
    const CompiledWithLog c = CompileWithLog(m);
    const std::string op = s.matmul ? "QLinearMatMul" : s.gemm ? "QGemm" : "QLinearConv";
    CHECK(c.fusion_trace.find(op) != std::string::npos);
    CHECK(
        c.Logged(fmt::format("qdq: {} DequantizeLinear -> Conv -> QuantizeLinear groups -> QLinearConv, {} with MatMul "
                             "-> QLinearMatMul, {} with Gemm -> QGemm",
                             int{!s.matmul && !s.gemm}, int{s.matmul}, int{s.gemm})));
    const std::vector<float> folded = RunQdq(m, s, true), unfolded = RunQdq(m, s, false);
    const auto [over, differ] = StepsApart(folded, unfolded, s.y_scale);
    CHECK(over == 0);
    // Rounding the float32 sum and the integer one apart moves few outputs across a step.
    CHECK(differ * 20 < static_cast<int>(folded.size()));
    // Not a constant output: the outputs spread over many steps.
    float lo = folded[0], hi = folded[0];
    for (float v : folded) lo = std::min(lo, v), hi = std::max(hi, v);
    CHECK(hi - lo > 20 * s.y_scale);
  }
}

TEST_CASE("The cuda plan computes QDQ MatMul, Gemm and Conv groups on cuBLASLt's and cuDNN's int8 kernels, and says why not") {
  // An artifact with GPU archs: entry 0 is the cuda plan (compile.cc).
  struct Case {
    QdqShape s;
    int matmul, gemm, pointwise, conv;
    const char* op;
  };
  for (const Case& k : {Case{QdqShape{.c = 64, .m = 48, .matmul = true}, 1, 0, 0, 0, "kiln.MatMulIntegerTransB("},
                        Case{QdqShape{.c = 64, .m = 40, .gemm = true}, 0, 1, 0, 0, "kiln.MatMulIntegerTransB("},
                        Case{QdqShape{.c = 32, .m = 16, .pointwise = true}, 0, 0, 1, 0, "kiln.MatMulIntegerTransB("},
                        Case{QdqShape{}, 0, 0, 0, 1, "kiln.NhwcConvInt8("}}) {
    CAPTURE(k.s.matmul);
    CAPTURE(k.s.gemm);
    CAPTURE(k.s.pointwise);
    const CompiledWithLog c = CompileWithLog(QdqModel(k.s), OptionsFor(Device::kCuda));
    CHECK(c.Logged(fmt::format("(cuda plan): fusion: qdq: {} DequantizeLinear -> MatMul -> QuantizeLinear groups, {} "
                               "with Gemm and {} with a pointwise Conv -> kiln.MatMulIntegerTransB (cuBLASLt int8), "
                               "{} with Conv -> kiln.NhwcConvInt8 (cuDNN int8), between generated kernels",
                               k.matmul, k.gemm, k.pointwise, k.conv)));
    CHECK(c.fusion_trace.find(k.op) != std::string::npos);
    for (const char* op : {"= MatMul(", "= Gemm(", "= Conv("}) CHECK(c.fusion_trace.find(op) == std::string::npos);
  }
  // X's zero point 100 (not the 128 that is 0 on the int8 side): X is padded with it before the
  // unpadded int8 convolution, in the generated kernel that quantizes it.
  const CompiledWithLog padded = CompileWithLog(QdqModel(QdqShape{.x_zero_point = 100}), OptionsFor(Device::kCuda));
  CHECK(padded.fusion_trace.find("Pad 'op#x_pad'") != std::string::npos);
  CHECK(padded.fusion_trace.find("pads=[0, 0, 0, 0]") != std::string::npos);
  // 3 input channels (an RGB stem): padded to 4 against zero weights.
  const CompiledWithLog c3 = CompileWithLog(QdqModel(QdqShape{.c = 3}), OptionsFor(Device::kCuda));
  CHECK(c3.fusion_trace.find("kiln.NhwcConvInt8(") != std::string::npos);
  CHECK(c3.fusion_trace.find("int8[16, 3, 3, 4]") != std::string::npos);
  // Not folded, each with its reason: 6 output channels; N = 42 columns.
  const CompiledWithLog m6 = CompileWithLog(QdqModel(QdqShape{.m = 6}), OptionsFor(Device::kCuda));
  CHECK(m6.Logged("(cuda plan): fusion: qdq not folded: Conv 'op': cuDNN's int8 convolution needs output channels "
                  "that are a multiple of 4, found 6"));
  CHECK(m6.fusion_trace.find("= Conv(") != std::string::npos);
  const CompiledWithLog n42 = CompileWithLog(QdqModel(QdqShape{.c = 64, .m = 42, .matmul = true}),
                                             OptionsFor(Device::kCuda));
  CHECK(n42.Logged("(cuda plan): fusion: qdq not folded: MatMul 'op': cuBLASLt's int8 GEMM needs K and N multiples "
                   "of 4, found K 64, N 42"));
  CHECK(n42.fusion_trace.find("kiln.MatMulIntegerTransB") == std::string::npos);
}

TEST_CASE("[gpu] A QDQ model on the CUDA backend: MatMul on cuBLASLt int8, Conv on cuDNN int8, Q and DQ in generated kernels, within one step of the CPU plan's integer ops") {
  KILN_REQUIRE_GPU();
  // One artifact, two plans: the CPU one folds the group into QLinearConv / QLinearMatMul /
  // QGemm, the CUDA one computes MatMul, Gemm and a 1 x 1 Conv on cuBLASLt's int8 GEMM and a 3 x 3
  // Conv on cuDNN's int8 convolution (X padded with its zero point where that is not 0), with the
  // QuantizeLinear and DequantizeLinear nodes fused into generated kernels. Every instruction runs on the device: the entry is captured as a CUDA graph,
  // which an entry with a CPU region never is (kiln/stats.h).
  for (const QdqShape s : {QdqShape{}, QdqShape{.x_zero_point = 100}, QdqShape{.c = 3, .x_zero_point = 90},
                           QdqShape{.c = 64, .m = 48, .matmul = true},
                           QdqShape{.c = 64, .m = 40, .gemm = true}, QdqShape{.c = 32, .m = 16, .relu = true},
                           QdqShape{.c = 32, .m = 16, .relu = true, .pointwise = true}}) {
    CAPTURE(s.matmul);
    CAPTURE(s.gemm);
    const onnx::ModelProto m = QdqModel(s);
    const std::vector<uint8_t> bytes = CompileModel(m, OptionsFor(Device::kCuda));
    const QdqInput input(s);
    const std::vector<TensorView> in = input.Views();
    ContextOptions cpu;
    cpu.device = Device::kCpu;
    const std::vector<std::vector<float>> on_cpu = RunFloat(bytes, in, cpu);
    auto model = Model::Load(bytes);
    REQUIRE_MESSAGE(model.ok(), model.status().ToString());
    ContextOptions cuda;
    cuda.device = Device::kCuda;
    cuda.cuda.graphs = true;
    cuda.cuda.own_stream = true;
    auto ctx = ExecutionContext::Create(*model, cuda);
    REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
    std::vector<float> on_cuda;
    for (int run = 0; run < 3; ++run) {
      auto out = RunToHost(*ctx, in);
      REQUIRE_MESSAGE(out.ok(), out.status().ToString());
      REQUIRE(out->size() == 1);
      on_cuda = Values<float>((*out)[0]);
    }
    CHECK(ctx->stats().last_fallbacks.empty());
    CHECK(ctx->stats().graph_hits >= 1);
    const auto [over, differ] = StepsApart(on_cuda, on_cpu[0], s.y_scale);
    CHECK(over == 0);
    CHECK(static_cast<size_t>(differ) * 20 < on_cuda.size());
    float lo = on_cuda[0], hi = on_cuda[0];
    for (float v : on_cuda) lo = std::min(lo, v), hi = std::max(hi, v);
    CHECK(hi - lo > 20 * s.y_scale);
  }
}

TEST_CASE("A QDQ Conv whose weight scales run along axis 1 stays float, says why, and computes the same") {
  const QdqShape s{.w_axis_1 = true};
  const onnx::ModelProto m = QdqModel(s);
  const CompiledWithLog c = CompileWithLog(m);
  CHECK(c.fusion_trace.find("QLinearConv") == std::string::npos);
  CHECK(c.Logged("qdq not folded: Conv 'op': DequantizeLinear 'dqw' has 8 scales (expected 1 or 16 along axis 0)"));
  const auto [over, differ] = StepsApart(RunQdq(m, s, true), RunQdq(m, s, false), s.y_scale);
  CHECK(over == 0);
  CHECK(differ == 0);
}

TEST_CASE("A QDQ model's int8 weights stay int8 in the artifact") {
  const QdqShape s{.c = 64, .m = 64, .hw = 6};
  const onnx::ModelProto m = QdqModel(s);
  int64_t initializer_bytes = 0;
  for (const auto& t : m.graph().initializer())
    initializer_bytes += static_cast<int64_t>(t.raw_data().size() + t.float_data_size() * sizeof(float));
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  // W alone is 64 * 64 * 9 = 36864 bytes as int8, four times that widened to float32.
  CHECK(initializer_bytes > 36864);
  CHECK(static_cast<double>(model->weights_bytes()) <= 1.1 * static_cast<double>(initializer_bytes));
}

TEST_CASE("An int8 weight that only elementwise ops read stays int8, widened in their kernel") {
  // y = x + DQ(e): e an int8 [8, 1024] constant (a quantized positional embedding); the Add
  // reads it through the fused DequantizeLinear, and the artifact holds its 8192 bytes, not
  // 32768 of float32.
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"8", "1024"});
  AddRawInit(g, "e", onnx::TensorProto::INT8, {8, 1024}, RandomInt8(8 * 1024, 17));
  AddFloatInit(g, "s", {}, {0.01f});
  AddNode(g, "DequantizeLinear", {"e", "s"}, {"ef"}, "dqe");
  AddNode(g, "Add", {"x", "ef"}, {"y"}, "add");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  CHECK(model->weights_bytes() < 8192 + 1024);
  const std::vector<float> x = RandomFloats(8 * 1024, 19, -1.0f, 1.0f);
  const int64_t dims[] = {8, 1024};
  const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 2)};
  ContextOptions options;
  options.device = Device::kCpu;
  const auto got = RunFloat(CompileModel(m), in, options);
  const std::vector<int8_t> e = RandomInt8(8 * 1024, 17);
  REQUIRE(got.size() == 1);
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) bad += got[0][i] != x[i] + static_cast<float>(e[i]) * 0.01f;
  CHECK(bad == 0);
}

TEST_CASE("QuantizeLinear and DequantizeLinear fuse into generated kernels with the unfused kernels' bits") {
  // y = DQ(Q(DQ(Q(a)) + DQ(Q(b)))): per-tensor parameters for a, per-channel (axis 1) for b,
  // int8 and uint8, NaN and values that saturate in x.
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "a", {"2", "3", "5"});
  AddInput(g, "b", {"2", "3", "5"});
  AddFloatInit(g, "sa", {}, {0.07f});
  AddRawInit<int8_t>(g, "za", onnx::TensorProto::INT8, {}, {-3});
  AddFloatInit(g, "sb", {3}, {0.02f, 0.5f, 0.11f});
  AddRawInit<uint8_t>(g, "zb", onnx::TensorProto::UINT8, {3}, {0, 128, 250});
  AddNode(g, "QuantizeLinear", {"a", "sa", "za"}, {"aq"}, "qa");
  AddNode(g, "DequantizeLinear", {"aq", "sa", "za"}, {"af"}, "dqa");
  AddNode(g, "QuantizeLinear", {"b", "sb", "zb"}, {"bq"}, "qb");
  AddNode(g, "DequantizeLinear", {"bq", "sb", "zb"}, {"bf"}, "dqb");
  AddNode(g, "Add", {"af", "bf"}, {"sum"}, "add");
  AddNode(g, "QuantizeLinear", {"sum", "sa", "za"}, {"sq"}, "qs");
  AddNode(g, "DequantizeLinear", {"sq", "sa", "za"}, {"y"}, "dqs");
  AddOutput(g, "y");
  const CompiledWithLog c = CompileWithLog(m);
  CHECK(c.Logged("7 ops -> 1 kernel"));
  std::vector<float> a = RandomFloats(30, 21, -12.0f, 12.0f), b = RandomFloats(30, 22, -80.0f, 80.0f);
  a[3] = std::nanf("");
  b[7] = 1e30f;
  const int64_t dims[] = {2, 3, 5};
  const std::vector<TensorView> in = {TensorView::Host(a.data(), DType::kFloat32, dims, 3),
                                      TensorView::Host(b.data(), DType::kFloat32, dims, 3)};
  ContextOptions options;
  options.device = Device::kCpu;
  const auto fused = RunFloat(c.bytes, in, options);
  const auto unfused = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, false)), in, options);
  REQUIRE(fused.size() == 1);
  REQUIRE(unfused.size() == 1);
  CHECK(std::memcmp(fused[0].data(), unfused[0].data(), fused[0].size() * sizeof(float)) == 0);
  // Hand-computed: a NaN quantizes to int8's lowest value, -128, so y = (-128 + 3) * 0.07 ...
  // plus b's element, then requantized; here the element of a alone: DQ(Q(NaN)) = -8.75.
  float lo = fused[0][0], hi = fused[0][0];
  for (float v : fused[0]) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo == doctest::Approx((-128 + 3) * 0.07f));  // saturated at int8's lowest
  CHECK(hi == doctest::Approx((127 + 3) * 0.07f));   // and highest
}

TEST_CASE("DequantizeLinear -> Reshape -> Transpose -> QuantizeLinear of one quantization moves onto the int8 tensor") {
  // y = DQ(Q(Transpose(Reshape(DQ(Q(x)))))) with one scale and zero point throughout: the
  // Reshape and Transpose run on the uint8 tensor and the inner QuantizeLinear goes, with the
  // unfused graph's values exactly (a dequantized value quantizes back to itself).
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "12"});
  AddFloatInit(g, "s", {}, {0.125f});
  AddRawInit<uint8_t>(g, "z", onnx::TensorProto::UINT8, {}, {100});
  AddInt64Init(g, "shape", {3}, {2, 3, 4});
  AddNode(g, "QuantizeLinear", {"x", "s", "z"}, {"q0"}, "q0");
  AddNode(g, "DequantizeLinear", {"q0", "s", "z"}, {"d0"}, "d0");
  AddNode(g, "Reshape", {"d0", "shape"}, {"r"}, "reshape");
  AttrInts(AddNode(g, "Transpose", {"r"}, {"tr"}, "transpose"), "perm", {0, 2, 1});
  AddNode(g, "QuantizeLinear", {"tr", "s", "z"}, {"q1"}, "q1");
  AddNode(g, "DequantizeLinear", {"q1", "s", "z"}, {"y"}, "d1");
  AddOutput(g, "y");
  const CompiledWithLog c = CompileWithLog(m);
  CHECK(c.Logged("qdq: 1 DequantizeLinear -> Reshape/Transpose/.../MaxPool -> QuantizeLinear chains"));
  CHECK(c.fusion_trace.find("'q1'") == std::string::npos);
  const std::vector<float> x = RandomFloats(24, 31, -20.0f, 20.0f);
  const int64_t dims[] = {2, 12};
  const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 2)};
  ContextOptions options;
  options.device = Device::kCpu;
  const auto moved = RunFloat(c.bytes, in, options),
             unfused = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, false)), in, options);
  REQUIRE(moved.size() == 1);
  CHECK(moved[0] == unfused[0]);
  // y[0, 0, 1] (element 1) is the reshaped [0, 1, 0], x[4], rounded to the step and saturated to
  // the uint8 range [-12.5, 19.375].
  CHECK(moved[0][1] == std::clamp(std::nearbyint(x[4] / 0.125f) * 0.125f, -12.5f, 19.375f));
}

TEST_CASE("DequantizeLinear -> MaxPool -> QuantizeLinear of one quantization moves onto the int8 tensor") {
  // The padded MaxPool picks the largest element, which dequantizing keeps the largest: on the
  // int8 tensor it gives the unfused graph's values exactly.
  for (const bool int8 : {false, true}) {
    CAPTURE(int8);
    auto m = MakeModel(19);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "3", "7", "7"});
    AddFloatInit(g, "s", {}, {0.1f});
    if (int8) {
      AddRawInit<int8_t>(g, "z", onnx::TensorProto::INT8, {}, {-5});
    } else {
      AddRawInit<uint8_t>(g, "z", onnx::TensorProto::UINT8, {}, {120});
    }
    AddNode(g, "QuantizeLinear", {"x", "s", "z"}, {"q0"}, "q0");
    AddNode(g, "DequantizeLinear", {"q0", "s", "z"}, {"d0"}, "d0");
    auto* pool = AddNode(g, "MaxPool", {"d0"}, {"p"}, "pool");
    AttrInts(pool, "kernel_shape", {3, 3});
    AttrInts(pool, "pads", {1, 1, 1, 1});
    AttrInts(pool, "strides", {2, 2});
    AddNode(g, "QuantizeLinear", {"p", "s", "z"}, {"q1"}, "q1");
    AddNode(g, "DequantizeLinear", {"q1", "s", "z"}, {"y"}, "d1");
    AddOutput(g, "y");
    const CompiledWithLog c = CompileWithLog(m);
    CHECK(c.Logged("qdq: 1 DequantizeLinear -> Reshape/Transpose/.../MaxPool -> QuantizeLinear chains"));
    CHECK(c.fusion_trace.find("'q1'") == std::string::npos);
    const std::vector<float> x = RandomFloats(3 * 49, 17, -16.0f, 16.0f);
    const int64_t dims[] = {1, 3, 7, 7};
    const std::vector<TensorView> in = {TensorView::Host(x.data(), DType::kFloat32, dims, 4)};
    ContextOptions options;
    options.device = Device::kCpu;
    const auto moved = RunFloat(c.bytes, in, options),
               unfused = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, false)), in, options);
    REQUIRE(moved.size() == 1);
    REQUIRE(moved[0].size() == 3 * 16);
    CHECK(moved[0] == unfused[0]);
    // y[0, 0, 0, 0]: the largest of x's top-left 2 x 2 corner (the rest is padding), rounded to
    // the step and saturated.
    const float lo = int8 ? -12.3f : -12.0f, hi = int8 ? 13.2f : 13.5f;
    const float corner = std::max({x[0], x[1], x[7], x[8]});
    CHECK(moved[0][0] == doctest::Approx(std::clamp(std::nearbyint(corner / 0.1f) * 0.1f, lo, hi)).epsilon(1e-6));
  }
}

TEST_CASE("A zero or non-finite quantization scale is a compile error that names the node") {
  QdqShape s;
  s.y_scale = 0.0f;
  Status st = CompileStatus(QdqModel(s));
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("'qy'") != std::string::npos);
  CHECK(st.message().find("input y_scale: element 0 is 0.000000; a scale must be finite and nonzero") !=
        std::string::npos);
  s.y_scale = std::numeric_limits<float>::infinity();
  st = CompileStatus(QdqModel(s));
  CHECK(st.message().find("a scale must be finite and nonzero") != std::string::npos);
}

TEST_CASE("com.microsoft QGemm computes its spec's formula, requantized or float, C broadcast") {
  // Y = alpha * a_scale * b_scale[n] * ((A - a_zp)(B' - 0) + C[n]), then y_scale / y_zero_point;
  // onnxruntime's docs/ContribOperators.md. A uint8 [4, 16] (an input), B int8 [8, 16] (transB).
  constexpr int64_t kM = 4, kK = 16, kN = 8;
  const std::vector<int8_t> b = RandomInt8(static_cast<size_t>(kN * kK), 13);
  std::vector<int32_t> c(static_cast<size_t>(kN));
  for (int64_t n = 0; n < kN; ++n) c[static_cast<size_t>(n)] = static_cast<int32_t>(n * 311) - 1200;
  std::vector<float> bs(static_cast<size_t>(kN));
  for (int64_t n = 0; n < kN; ++n) bs[static_cast<size_t>(n)] = 0.01f * static_cast<float>(n + 1);
  std::vector<uint8_t> a(static_cast<size_t>(kM * kK));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  const float as = 0.02f, alpha = 0.75f, ys = 0.5f;
  const uint8_t azp = 120, yzp = 7;
  for (const bool requantized : {true, false}) {
    CAPTURE(requantized);
    auto m = MakeModel(17);
    auto* ms = m.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
    auto* g = m.mutable_graph();
    AddInput(g, "a", {std::to_string(kM), std::to_string(kK)}, onnx::TensorProto::UINT8);
    AddFloatInit(g, "as", {}, {as});
    AddRawInit<uint8_t>(g, "azp", onnx::TensorProto::UINT8, {}, {azp});
    AddRawInit(g, "b", onnx::TensorProto::INT8, {kN, kK}, b);
    AddFloatInit(g, "bs", {kN}, bs);
    AddRawInit(g, "bzp", onnx::TensorProto::INT8, {kN}, std::vector<int8_t>(static_cast<size_t>(kN), 0));
    AddRawInit(g, "c", onnx::TensorProto::INT32, {kN}, c);
    AddFloatInit(g, "ys", {}, {ys});
    AddRawInit<uint8_t>(g, "yzp", onnx::TensorProto::UINT8, {}, {yzp});
    std::vector<std::string> ins = {"a", "as", "azp", "b", "bs", "bzp", "c"};
    if (requantized) ins.insert(ins.end(), {"ys", "yzp"});
    auto* n = AddNode(g, "QGemm", ins, {"y"}, "qgemm");
    n->set_domain("com.microsoft");
    AttrInt(n, "transB", 1);
    AttrFloat(n, "alpha", alpha);
    AddOutput(g, "y");
    auto model = Model::Load(CompileModel(m));
    REQUIRE(model.ok());
    ContextOptions options;
    options.device = Device::kCpu;
    auto ctx = ExecutionContext::Create(*model, options);
    REQUIRE(ctx.ok());
    const int64_t a_dims[] = {kM, kK};
    const std::vector<TensorView> in = {TensorView::Host(a.data(), DType::kUInt8, a_dims, 2)};
    auto out = RunToHost(*ctx, in);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    int bad = 0;
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        int64_t acc = c[static_cast<size_t>(j)];
        for (int64_t k = 0; k < kK; ++k)
          acc += (int64_t{a[static_cast<size_t>(i * kK + k)]} - azp) * b[static_cast<size_t>(j * kK + k)];
        const double v = static_cast<double>(acc) * alpha * as * bs[static_cast<size_t>(j)];
        if (requantized) {
          const double q = std::clamp(std::nearbyint(v / ys) + yzp, 0.0, 255.0);
          bad += std::fabs(Values<uint8_t>(out->at(0))[static_cast<size_t>(i * kN + j)] - q) > 1;  // one step
        } else {
          bad += std::fabs(Values<float>(out->at(0))[static_cast<size_t>(i * kN + j)] - v) > 1e-5 * (1 + std::fabs(v));
        }
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("MatMulInteger with an int8 weight gives the exact int32 sums, its A zero point read per call") {
  // quantize_dynamic's MatMul: A uint8 with a zero point that changes per call, B an int8 weight
  // (oneDNN's int8 matmul with VNNI; the CPU kernel on other CPUs, where B's 8-bit values could
  // saturate oneDNN's 16-bit pair sums).
  constexpr int64_t kM = 6, kK = 64, kN = 48;
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "a", {std::to_string(kM), std::to_string(kK)}, onnx::TensorProto::UINT8);
  AddInput(g, "azp", {}, onnx::TensorProto::UINT8);
  const std::vector<int8_t> b = RandomInt8(static_cast<size_t>(kK * kN), 9);
  AddRawInit(g, "b", onnx::TensorProto::INT8, {kK, kN}, b);
  AddNode(g, "MatMulInteger", {"a", "b", "azp"}, {"y"}, "mmi");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  ContextOptions options;
  options.device = Device::kCpu;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  std::vector<uint8_t> a(static_cast<size_t>(kM * kK));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  const int64_t a_dims[] = {kM, kK};
  for (const uint8_t azp : {uint8_t{0}, uint8_t{131}}) {  // two calls, two zero points
    CAPTURE(int{azp});
    const std::vector<TensorView> in = {TensorView::Host(a.data(), DType::kUInt8, a_dims, 2),
                                        TensorView::Host(&azp, DType::kUInt8, nullptr, 0)};
    auto out = RunToHost(*ctx, in);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    const std::vector<int32_t> y = Values<int32_t>(out->at(0));
    REQUIRE(y.size() == static_cast<size_t>(kM * kN));
    int bad = 0;
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        int64_t sum = 0;
        for (int64_t k = 0; k < kK; ++k)
          sum += (int64_t{a[static_cast<size_t>(i * kK + k)]} - azp) * b[static_cast<size_t>(k * kN + j)];
        bad += y[static_cast<size_t>(i * kN + j)] != sum;
      }
    CHECK(bad == 0);
  }
}

}  // namespace
}  // namespace kiln::testing
