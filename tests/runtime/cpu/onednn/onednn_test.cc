// oneDNN's Conv (runtime/cpu/onednn/onednn.h) against a direct double-precision convolution written
// here and against Kiln's CPU kernel: 1-D to 3-D, grouped, depthwise, strided, dilated,
// padded and SAME forms; every epilogue activation in both orders, with and without the
// residual; 1 and 2 threads; model weights (reordered once, kept) and computed weights
// (reordered on every call); float16 and bfloat16. Then what oneDNN refuses, and a malformed
// call's error.
#include "runtime/cpu/onednn/onednn.h"
#include "tests/runtime/cpu/onednn/plan_alone.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kernels/half_convert.h"
#include "runtime/cpu/host_memory.h"
#include "tests/runtime/kernels/kernel_test_util.h"
#include "tests/runtime/cpu/onednn/onednn_test_util.h"

namespace kiln::cpu::testing {
namespace {

TestTensor Random(std::vector<int64_t> dims, uint32_t seed) { return RandomTensor(std::move(dims), seed); }

double Activate(double v, const std::string& act) {
  if (act == "Relu") return v > 0 ? v : 0;
  if (act == "Sigmoid") return 1 / (1 + std::exp(-v));
  if (act == "SiLU") return v / (1 + std::exp(-v));
  if (act == "HardSwish") return v * std::fmin(1.0, std::fmax(0.0, v / 6 + 0.5));  // ONNX HardSwish
  if (act == "Gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  if (act == "GeluTanh") return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  return v;
}

struct ConvCase {
  const char* name;
  std::vector<int64_t> x, w, y;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  const char* auto_pad = "NOTSET";
};

// The ONNX Conv of `c` in double: pads resolved as the spec says (SAME_UPPER: the odd pad at
// the end), then bias, then the epilogue in its order.
std::vector<float> Reference(const ConvCase& c, const TestTensor& x, const TestTensor& w, const TestTensor& b,
                             const TestTensor* residual, const std::string& act, bool residual_first) {
  const int sr = static_cast<int>(c.x.size()) - 2;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {};
  for (int i = 0; i < sr; ++i) {
    in[i] = c.x[i + 2];
    k[i] = c.w[i + 2];
    out[i] = c.y[i + 2];
    if (!c.strides.empty()) s[i] = c.strides[i];
    if (!c.dilations.empty()) d[i] = c.dilations[i];
    if (!c.pads.empty()) p[i] = c.pads[i];
    if (std::string(c.auto_pad) == "SAME_UPPER") {
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i]);
      p[i] = total / 2;
    }
  }
  const int64_t n = c.x[0], ch = c.x[1], m = c.w[0], cg = ch / c.group, mg = m / c.group;
  const auto xv = x.values<float>(), wv = w.values<float>(), bv = b.values<float>();
  const std::vector<float> rv = residual ? residual->values<float>() : std::vector<float>();
  std::vector<float> y;
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t z = 0; z < out[0]; ++z)
        for (int64_t yy = 0; yy < out[1]; ++yy)
          for (int64_t xx = 0; xx < out[2]; ++xx) {
            double acc = bv[static_cast<size_t>(o)];
            const int64_t grp = o / mg;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t a = 0; a < k[0]; ++a)
                for (int64_t bb = 0; bb < k[1]; ++bb)
                  for (int64_t e = 0; e < k[2]; ++e) {
                    const int64_t i0 = z * s[0] - p[0] + a * d[0], i1 = yy * s[1] - p[1] + bb * d[1],
                                  i2 = xx * s[2] - p[2] + e * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    const int64_t xi = (((b0 * ch + grp * cg + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2;
                    const int64_t wi = (((o * cg + ci) * k[0] + a) * k[1] + bb) * k[2] + e;
                    acc += static_cast<double>(xv[static_cast<size_t>(xi)]) * wv[static_cast<size_t>(wi)];
                  }
            const double r = residual ? rv[y.size()] : 0.0;
            acc = residual_first ? Activate(acc + r, act) : Activate(acc, act) + r;
            y.push_back(static_cast<float>(acc));
          }
  return y;
}

AttrMap Attrs(const ConvCase& c, const std::string& act, bool residual, bool residual_first) {
  AttrMap a;
  if (!c.strides.empty()) a.SetInts("strides", c.strides);
  if (!c.pads.empty()) a.SetInts("pads", c.pads);
  if (!c.dilations.empty()) a.SetInts("dilations", c.dilations);
  a.SetInt("group", c.group);
  a.SetString("auto_pad", c.auto_pad);
  if (!act.empty()) a.SetString("epilogue_activation", act);
  if (residual) a.SetInt("epilogue_residual", 1);
  a.SetString("epilogue_order", residual_first ? "bias,residual,act" : "bias,act,residual");
  return a;
}

void CheckNear(const std::vector<float>& actual, const std::vector<float>& expected, const char* what,
               double tol = 2e-5) {
  REQUIRE(actual.size() == expected.size());
  int bad = 0;
  for (size_t i = 0; i < actual.size() && bad < 5; ++i)
    if (!(std::fabs(actual[i] - expected[i]) <= tol * (1 + std::fabs(expected[i])))) {
      ++bad;
      FAIL_CHECK(what << " index " << i << ": " << actual[i] << ", expected " << expected[i]);
    }
}

// Whether PlanOneDnn's refusal `st` is one oneDNN may make on this CPU for a Conv whose
// epilogue adds the residual after the activation (`act_then_residual`): some forms have only
// oneDNN's reference implementation, which Kiln refuses. On AVX-512 CPUs that is only such
// epilogues on some grouped Convs; below AVX-512 (a test tier caps oneDNN at SSE4.1), more.
bool RefusedHere(const Status& st, bool act_then_residual) {
  return (act_then_residual || !OneDnnRunsBFloat16()) && st.code() == StatusCode::kUnimplemented &&
         st.message().starts_with("oneDNN has only its reference implementation (ref:");
}

// Plans and runs oneDNN's Conv twice (the second call reuses the kept weights); returns Y
// (widened to float32 when `dt` is a half type), or nothing when oneDNN refuses the form
// here (RefusedHere).
std::optional<std::vector<float>> RunOneDnn(const AttrMap& attrs, const std::vector<const TestTensor*>& inputs,
                             const std::vector<int64_t>& y_dims, int threads, bool constant_weights,
                             std::string* description, DType dt = DType::kFloat32) {
  const bool act_then_residual = attrs.GetInt("epilogue_residual", 0) != 0 &&
                                 attrs.GetString("epilogue_order", "") == "bias,act,residual" &&
                                 !attrs.GetString("epilogue_activation", "").empty();
  TestTensor y = Output(dt, y_dims);
  std::vector<TensorRef> in, out{y.ref()};
  for (const TestTensor* t : inputs) in.push_back(t->ref());
  const KernelCall plan_call{attrs, in, out};
  auto op = PlanAlone("Conv", plan_call, threads, constant_weights);
  if (!op.ok() && RefusedHere(op.status(), act_then_residual)) return std::nullopt;
  REQUIRE_MESSAGE(op.ok(), op.status().ToString());
  *description = (*op)->description();
  AlignedBuffer ws;
  REQUIRE(ws.Reserve((*op)->workspace_bytes() + 1));
  const KernelCall call{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())};
  Status st = (*op)->Run(call);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  const auto values = [&] { return dt == DType::kFloat32 ? y.values<float>() : Widened(dt, y); };
  const std::vector<float> first = values();
  if (!constant_weights) CHECK((*op)->held_bytes() == 0);  // reordered into the workspace instead
  st = (*op)->Run(call);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(values() == first);  // the same bits from the kept weights
  return first;
}

const ConvCase kCases[] = {
    {"3x3 pad 1", {1, 8, 9, 7}, {16, 8, 3, 3}, {1, 16, 9, 7}, {}, {1, 1, 1, 1}, {}},
    {"3x3 stride 2, asymmetric pads, batch 2", {2, 3, 11, 10}, {8, 3, 3, 3}, {2, 8, 6, 5}, {2, 2}, {1, 0, 1, 1}, {}},
    {"grouped 2", {1, 8, 6, 6}, {12, 4, 3, 3}, {1, 12, 6, 6}, {}, {1, 1, 1, 1}, {}, 2},
    {"depthwise 3x3", {1, 16, 10, 10}, {16, 1, 3, 3}, {1, 16, 10, 10}, {}, {1, 1, 1, 1}, {}, 16},
    {"depthwise 5x5 stride 2", {1, 24, 13, 13}, {24, 1, 5, 5}, {1, 24, 7, 7}, {2, 2}, {2, 2, 2, 2}, {}, 24},
    {"dilated 2", {1, 4, 12, 12}, {8, 4, 3, 3}, {1, 8, 8, 8}, {}, {}, {2, 2}},
    {"pointwise", {1, 32, 7, 5}, {24, 32, 1, 1}, {1, 24, 7, 5}, {}, {}, {}},
    {"SAME_UPPER 4x4", {1, 3, 7, 7}, {4, 3, 4, 4}, {1, 4, 7, 7}, {}, {}, {}, 1, "SAME_UPPER"},
    {"1-D", {2, 6, 20}, {10, 6, 5}, {2, 10, 10}, {2}, {2, 1}, {}},
    // A first layer over raw audio (wav2vec2's 1 x 10, stride 5): plain X and Y (ConvOp::Plan).
    {"1-D one channel, window 10, stride 5", {1, 1, 400}, {24, 1, 10}, {1, 24, 79}, {5}, {}, {}},
    {"3-D", {1, 4, 5, 6, 7}, {8, 4, 3, 3, 3}, {1, 8, 5, 6, 7}, {}, {1, 1, 1, 1, 1, 1}, {}},
};

TEST_CASE("oneDNN Conv: the direct reference and Kiln's kernel, every form, epilogue, order and thread count") {
  if (!OneDnnBuilt()) {
    const AttrMap none;
    const KernelCall call{none, {}, {}};
    auto op = PlanAlone("Conv", call, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "this runtime was built without oneDNN");
    return;
  }
  CHECK(OneDnnVersion().starts_with("oneDNN "));
  const char* activations[] = {"", "Relu", "Sigmoid", "SiLU", "HardSwish", "Gelu", "GeluTanh"};
  uint32_t seed = 1;
  for (const ConvCase& c : kCases) {
    const TestTensor x = Random(c.x, seed++), w = Random(c.w, seed++), b = Random({c.w[0]}, seed++),
                     r = Random(c.y, seed++);
    for (const char* act : activations)
      for (int form = 0; form < 3; ++form) {  // no residual; residual after the activation; before it
        const bool residual = form > 0, residual_first = form == 2;
        const AttrMap attrs = Attrs(c, act, residual, residual_first);
        std::vector<const TestTensor*> inputs = {&x, &w, &b};
        if (residual) inputs.push_back(&r);
        const std::vector<float> expected = Reference(c, x, w, b, residual ? &r : nullptr, act, residual_first);
        TestTensor kernel_y = Output(DType::kFloat32, c.y);
        const Status st = RunKernel("Conv", attrs, inputs, {&kernel_y});
        REQUIRE_MESSAGE(st.ok(), st.ToString());
        for (int threads : {1, 2})
          for (bool constant : {true, false}) {
            INFO("case " << std::string(c.name));
            INFO("activation " << std::string(act));
            CAPTURE(form);
            CAPTURE(threads);
            CAPTURE(constant);
            std::string description;
            const std::optional<std::vector<float>> y =
                RunOneDnn(attrs, inputs, c.y, threads, constant, &description);
            if (!y) continue;  // only oneDNN's reference loops for this form on this CPU
            CHECK(!description.empty());
            CheckNear(*y, expected, "oneDNN against the reference");
            CheckNear(*y, kernel_y.values<float>(), "oneDNN against Kiln's kernel");
          }
      }
  }
}

// `t` (float32) rounded to `dt`, and back: the half tensor and its exact float32 twin.
struct HalfPair {
  TestTensor half, twin;
};
HalfPair ToHalf(DType dt, const TestTensor& t) {
  HalfPair p{Output(dt, t.dims()), Output(DType::kFloat32, t.dims())};
  const std::vector<float> v = t.values<float>();
  FloatToHalves(dt, v.data(), p.half.data<uint16_t>(), static_cast<int64_t>(v.size()));
  HalvesToFloat(dt, p.half.data<uint16_t>(), p.twin.data<float>(), static_cast<int64_t>(v.size()));
  return p;
}


// float16 (float32 copies) and bfloat16 (oneDNN's bfloat16 convolution): each Y element is the
// direct reference on the half values, rounded once to the half type, give or take one unit
// in its last place (oneDNN and the reference sum in other orders), and within one unit of
// Kiln's kernel (which widens the same way). Both forms of W, both epilogue orders, 1 and 2
// threads; a few activations, the full set being float32's above.
TEST_CASE("oneDNN Conv: float16 and bfloat16, against the reference and Kiln's kernel") {
  if (!OneDnnBuilt()) return;
  const char* activations[] = {"", "Relu", "SiLU"};
  uint32_t seed = 100;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    if (dt == DType::kBFloat16 && !OneDnnRunsBFloat16()) {  // e.g. ONEDNN_MAX_CPU_ISA=SSE41
      const ConvCase& c = kCases[0];
      const TestTensor x = Output(dt, c.x), w = Output(dt, c.w);
      TestTensor y = Output(dt, c.y);
      const std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
      auto op = PlanAlone("Conv", KernelCall{Attrs(c, "", false, false), in, out}, 1, true);
      REQUIRE(op.status().code() == StatusCode::kUnimplemented);
      CHECK(op.status().message() == "oneDNN has no bfloat16 convolution for this form on this CPU");
      continue;
    }
    // A unit in the last place is 2^-10 (float16) or 2^-7 (bfloat16) of the value's binade: two
    // of them, relative to 1 + |y|, hold for either rounding of a value near a tie.
    const double tol = dt == DType::kFloat16 ? 0x1p-9 : 0x1p-6;
    for (const ConvCase& c : kCases) {
      const HalfPair x = ToHalf(dt, Random(c.x, seed++)), w = ToHalf(dt, Random(c.w, seed++)),
                     b = ToHalf(dt, Random({c.w[0]}, seed++)), r = ToHalf(dt, Random(c.y, seed++));
      for (const char* act : activations)
        for (int form = 0; form < 3; ++form) {
          const bool residual = form > 0, residual_first = form == 2;
          const AttrMap attrs = Attrs(c, act, residual, residual_first);
          std::vector<const TestTensor*> inputs = {&x.half, &w.half, &b.half};
          if (residual) inputs.push_back(&r.half);
          const std::vector<float> expected =
              Reference(c, x.twin, w.twin, b.twin, residual ? &r.twin : nullptr, act, residual_first);
          TestTensor kernel_y = Output(dt, c.y);
          const Status st = RunKernel("Conv", attrs, inputs, {&kernel_y});
          REQUIRE_MESSAGE(st.ok(), st.ToString());
          const std::vector<float> kernel = Widened(dt, kernel_y);
          for (int threads : {1, 2})
            for (bool constant : {true, false}) {
              CAPTURE(static_cast<int>(dt));
              INFO("case " << std::string(c.name));
              INFO("activation " << std::string(act));
              CAPTURE(form);
              CAPTURE(threads);
              CAPTURE(constant);
              std::string description;
              const std::optional<std::vector<float>> y =
                  RunOneDnn(attrs, inputs, c.y, threads, constant, &description, dt);
              if (!y) continue;  // only oneDNN's reference loops for this form on this CPU
              CHECK(description.ends_with(", on float32 copies of its float16 operands") == (dt == DType::kFloat16));
              CheckNear(*y, expected, "oneDNN against the reference", tol);
              CheckNear(*y, kernel, "oneDNN against Kiln's kernel", tol);
            }
        }
    }
  }
}

// A 1-D Conv of few multiply-adds per output (1 channel, window 10) runs with plain X and Y,
// no reorder of either, and gives the same bits on 1, 2 and 3 threads.
TEST_CASE("oneDNN Conv: a 1-D first layer over one channel runs in NCW, the same bits on any thread count") {
  if (!OneDnnBuilt()) return;
  const ConvCase& c = kCases[9];
  REQUIRE(std::string(c.name) == "1-D one channel, window 10, stride 5");
  const TestTensor x = Random(c.x, 41), w = Random(c.w, 42), b = Random({c.w[0]}, 43);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::string description;
    const std::optional<std::vector<float>> y =
        RunOneDnn(Attrs(c, "Gelu", false, false), {&x, &w, &b}, c.y, threads, true, &description);
    REQUIRE(y);
    INFO(description);
    CHECK(description.find(", in ") == std::string::npos);  // X and Y as ONNX has them: no layout named
    if (first.empty()) first = *y;
    CHECK(*y == first);
  }
}

TEST_CASE("oneDNN Conv: a pointwise Conv says so, float16 runs on float32 copies, a 3x3 runs in oneDNN's layout") {
  if (!OneDnnBuilt()) return;
  const ConvCase& pointwise = kCases[6];
  const TestTensor x = Random(pointwise.x, 1), w = Random(pointwise.w, 2), b = Random({pointwise.w[0]}, 3);
  TestTensor y = Output(DType::kFloat32, pointwise.y);
  const AttrMap attrs = Attrs(pointwise, "", false, false);
  const std::vector<TensorRef> in{x.ref(), w.ref(), b.ref()}, out{y.ref()};
  auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
  REQUIRE(op.ok());
  CHECK((*op)->pointwise());  // the CPU backend keeps it on oneDNN only between oneDNN ops
  // float16: oneDNN computes in float32 on copies converted in the workspace, and says so.
  const TestTensor xh = Output(DType::kFloat16, pointwise.x), wh = Output(DType::kFloat16, pointwise.w);
  TestTensor yh = Output(DType::kFloat16, pointwise.y);
  const std::vector<TensorRef> inh{xh.ref(), wh.ref()}, outh{yh.ref()};
  op = PlanAlone("Conv", KernelCall{attrs, inh, outh}, 1, true);
  REQUIRE(op.ok());
  CHECK((*op)->description().ends_with(", on float32 copies of its float16 operands"));
  // The 3x3: oneDNN picks its layout; whatever it picks is named (nhwc or nChw16c on AVX-512).
  const ConvCase& c3 = kCases[0];
  const TestTensor x3 = Random(c3.x, 4), w3 = Random(c3.w, 5), b3 = Random({c3.w[0]}, 6);
  std::string description;
  REQUIRE(RunOneDnn(Attrs(c3, "", false, false), {&x3, &w3, &b3}, c3.y, 1, true, &description));
  INFO(description);
  if (description.find(", in ") != std::string::npos)
    CHECK(description.find("a blocked layout") == std::string::npos);
}

// Four 3x3 Convs: conv1 x -> mid; conv2 mid -> y2; conv3 mid -> y3 with mid as its residual
// (added before its Relu, as in a ResNet)
// too; conv4 y3 -> y4. With mid and y3 kept in oneDNN's layout (conv1's and conv3's Y, conv2's,
// conv3's and conv4's X, conv3's residual: Place(x, y, residual)), y2 and y4 are the same
// bits as with NCHW between them, in float32, float16 (float16 values kept in the layout's
// order) and bfloat16.
TEST_CASE("oneDNN Conv: tensors kept in oneDNN's layout between Convs, as X and as residual, give the same result") {
  if (!OneDnnBuilt()) return;
  const ConvCase& c = kCases[0];  // [1,8,9,7] -> [1,16,9,7]
  const ConvCase next{"next", c.y, {16, 16, 3, 3}, c.y, {}, {1, 1, 1, 1}, {}};
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    CAPTURE(static_cast<int>(dt));
    if (dt == DType::kBFloat16 && !OneDnnRunsBFloat16()) continue;  // refused: the test above
    const auto typed = [&](std::vector<int64_t> dims, uint32_t seed) {
      TestTensor t = Random(std::move(dims), seed);
      return dt == DType::kFloat32 ? t : ToHalf(dt, t).half;
    };
    const TestTensor x = typed(c.x, 11), w1 = typed(c.w, 12), b1 = typed({16}, 13), w2 = typed(next.w, 14),
                     b2 = typed({16}, 15), w3 = typed(next.w, 16), b3 = typed({16}, 17), w4 = typed(next.w, 18),
                     b4 = typed({16}, 19);
    const AttrMap a1 = Attrs(c, "Relu", false, false), a2 = Attrs(next, "SiLU", false, false),
                  a3 = Attrs(next, "Relu", true, true), a4 = Attrs(next, "", false, false);
    TestTensor mid = Output(dt, c.y), y3 = Output(dt, c.y);
    TestTensor y2_plain = Output(dt, c.y), y2_kept = Output(dt, c.y), y4_plain = Output(dt, c.y),
               y4_kept = Output(dt, c.y);
    const std::vector<TensorRef> in1{x.ref(), w1.ref(), b1.ref()}, out1{mid.ref()};
    const std::vector<TensorRef> in2{mid.ref(), w2.ref(), b2.ref()};
    const std::vector<TensorRef> in3{mid.ref(), w3.ref(), b3.ref(), mid.ref()}, out3{y3.ref()};
    const std::vector<TensorRef> in4{y3.ref(), w4.ref(), b4.ref()};
    const std::vector<TensorRef> out2_plain{y2_plain.ref()}, out2_kept{y2_kept.ref()}, out4_plain{y4_plain.ref()},
        out4_kept{y4_kept.ref()};
    auto op1 = PlanAlone("Conv", KernelCall{a1, in1, out1}, 2, true);
    auto op2 = PlanAlone("Conv", KernelCall{a2, in2, out2_plain}, 2, true);
    auto op3 = PlanAlone("Conv", KernelCall{a3, in3, out3}, 2, true);
    auto op4 = PlanAlone("Conv", KernelCall{a4, in4, out4_plain}, 2, true);
    REQUIRE(op1.ok());
    REQUIRE(op2.ok());
    REQUIRE(op3.ok());
    REQUIRE(op4.ok());
    CHECK((*op3)->residual());
    CHECK(!(*op1)->residual());
    AlignedBuffer ws;
    const auto run = [&](OneDnnOp& op, const AttrMap& a, const std::vector<TensorRef>& in,
                         const std::vector<TensorRef>& out) { RunPlanned(op, a, in, out, ws); };
    const auto run_all = [&](const std::vector<TensorRef>& out2, const std::vector<TensorRef>& out4) {
      run(**op1, a1, in1, out1);
      run(**op2, a2, in2, out2);
      run(**op3, a3, in3, out3);
      run(**op4, a4, in4, out4);
    };
    run_all(out2_plain, out4_plain);  // NCHW between them
    CHECK(!(*op1)->CanFeed(**op2, 3));  // conv2 has no residual
    if (!(*op1)->CanFeed(**op2, 0)) {
      MESSAGE("oneDNN chose NCHW here (", (*op1)->description(), "): nothing to keep");
      continue;
    }
    // mid is kept where conv3 takes it in that layout both as X and as residual (on AVX-512
    // CPUs, NHWC throughout); y3 where conv4 takes it, and conv3's residual is kept.
    const bool mid_kept = (*op1)->CanFeed(**op3, 0) && (*op1)->CanFeed(**op3, 3);
    const bool y3_kept = mid_kept && (*op3)->CanFeed(**op4, 0);
    if (!y3_kept) {
      const std::string what = std::string(mid_kept ? "mid only" : "neither mid nor y3") + " (" +
                               (*op1)->description() + "; " + (*op3)->description() + "; " +
                               (*op4)->description() + ")";
      MESSAGE("oneDNN's layouts here keep " << what);
    }
    REQUIRE((*op1)->Place(false, mid_kept, false).ok());
    REQUIRE((*op2)->Place(mid_kept, false, false).ok());
    REQUIRE((*op3)->Place(mid_kept, y3_kept, mid_kept).ok());
    REQUIRE((*op4)->Place(y3_kept, false, false).ok());
    if (y3_kept) {
      CHECK((*op1)->description().find("kept between oneDNN ops for Y") != std::string::npos);
      CHECK((*op2)->description().find("kept between oneDNN ops for X") != std::string::npos);
      CHECK((*op3)->description().find("kept between oneDNN ops for X and Y and the residual") != std::string::npos);
    }
    run_all(out2_kept, out4_kept);
    const auto same = [&](const TestTensor& a, const TestTensor& b) {
      return dt == DType::kFloat32 ? a.values<uint32_t>() == b.values<uint32_t>()
                                   : a.values<uint16_t>() == b.values<uint16_t>();
    };
    CHECK(same(y2_kept, y2_plain));
    CHECK(same(y4_kept, y4_plain));
    CHECK(!same(y4_plain, Output(dt, c.y)));  // not all zeros: the comparison means something
  }
}

extern "C" {
void omp_set_num_threads(int num_threads);  // libgomp, as in runtime/cpu/onednn/onednn.cc
int omp_get_max_threads(void);
}

size_t ProcessThreads() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// A plan's reorders run on its own thread count, whatever the OpenMP setting of the thread
// that places it: oneDNN's reorders fix their team size when they are made. Place once made
// them at the caller's setting (the machine's core count by default), so that a 1-thread
// context ran its reorders on 2 threads here, and libgomp's second thread spun at 100% of a
// core between them. Placed from a thread set to 16, a 1-thread plan must start no thread.
TEST_CASE("oneDNN Conv: Place makes its reorders for the plan's threads, not the caller's OpenMP setting") {
  if (!OneDnnBuilt()) return;
  // Large enough that oneDNN splits its reorders over every thread it may use.
  const ConvCase c{"3x3 pad 1, 64x64", {1, 32, 64, 64}, {32, 32, 3, 3}, {1, 32, 64, 64}, {}, {1, 1, 1, 1}, {}};
  const TestTensor x = Random(c.x, 31), w = Random(c.w, 32), b = Random({c.w[0]}, 33);
  TestTensor y = Output(DType::kFloat32, c.y);
  const AttrMap attrs = Attrs(c, "Relu", false, false);
  const std::vector<TensorRef> in{x.ref(), w.ref(), b.ref()}, out{y.ref()};
  auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
  REQUIRE(op.ok());
  const std::string layout = (*op)->description();
  if (layout.find(", in ") == std::string::npos) {
    MESSAGE("oneDNN runs this Conv in NCHW here (", layout, "): no reorder to check");
    return;
  }
  const int saved = omp_get_max_threads();
  omp_set_num_threads(16);
  const size_t before = ProcessThreads();
  const Status placed = (*op)->Place(false, false, false);
  AlignedBuffer ws;
  REQUIRE(ws.Reserve((*op)->workspace_bytes() + 1));
  const Status ran = (*op)->Run(KernelCall{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())});
  const size_t after = ProcessThreads();
  omp_set_num_threads(saved);
  REQUIRE(placed.ok());
  REQUIRE_MESSAGE(ran.ok(), ran.ToString());
  CHECK(after == before);
}

TEST_CASE("oneDNN Conv: what it refuses, and a malformed call's error is the kernel's") {
  if (!OneDnnBuilt()) return;
  AttrMap attrs;
  {  // four spatial dims: the CPU kernel takes them, oneDNN does not
    const TestTensor x = Random({1, 2, 3, 3, 3, 3}, 1), w = Random({2, 2, 1, 1, 1, 1}, 2);
    TestTensor y = Output(DType::kFloat32, {1, 2, 3, 3, 3, 3});
    const std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
    auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "oneDNN convolves 1 to 3 spatial dims, not 4");
  }
  {  // an empty batch
    const TestTensor x = Random({0, 2, 3, 3}, 1), w = Random({2, 2, 1, 1}, 2);
    TestTensor y = Output(DType::kFloat32, {0, 2, 3, 3});
    const std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
    auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "an empty tensor (the CPU kernel writes what it needs)");
  }
  {  // W with the wrong input channels: the kernel's own check and message
    const TestTensor x = Random({1, 4, 3, 3}, 1), w = Random({2, 3, 1, 1}, 2);
    TestTensor y = Output(DType::kFloat32, {1, 2, 3, 3});
    const std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
    auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
    const Status kernel = RunKernel("Conv", attrs, {&x, &w}, {&y});
    REQUIRE(op.status().code() == StatusCode::kInvalidArgument);
    CHECK(op.status().ToString() == kernel.ToString());
    CHECK(op.status().message().find("input channels per group, expected 4") != std::string::npos);
  }
  {  // float64, and a Y of another type than X
    const TestTensor x = Output(DType::kFloat64, {1, 2, 3, 3}), w = Output(DType::kFloat64, {2, 2, 1, 1});
    TestTensor y = Output(DType::kFloat64, {1, 2, 3, 3});
    const std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
    auto op = PlanAlone("Conv", KernelCall{attrs, in, out}, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "float64 (oneDNN runs float32, float16 and bfloat16 Convs in Kiln)");
    const TestTensor xh = Output(DType::kFloat16, {1, 2, 3, 3}), wh = Output(DType::kFloat16, {2, 2, 1, 1});
    TestTensor yf = Output(DType::kFloat32, {1, 2, 3, 3});
    const std::vector<TensorRef> inh{xh.ref(), wh.ref()}, outf{yf.ref()};
    op = PlanAlone("Conv", KernelCall{attrs, inh, outf}, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "X float16 with Y float32 (oneDNN's Conv in Kiln takes one type)");
  }
  {  // an op oneDNN does not run in Kiln
    const KernelCall call{attrs, {}, {}};
    auto op = PlanAlone("Softmax", call, 1, true);
    REQUIRE(op.status().code() == StatusCode::kUnimplemented);
    CHECK(op.status().message() == "oneDNN does not run Softmax in Kiln");
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
