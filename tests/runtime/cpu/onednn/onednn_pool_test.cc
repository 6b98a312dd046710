// oneDNN's MaxPool and AveragePool (runtime/cpu/onednn/onednn.h) against Kiln's CPU kernel (which the
// conformance tier checks against ONNX's own test data) and hand-computed values: 1-D to 3-D,
// strided, padded, dilated, ceil_mode and SAME forms, count_include_pad both ways; float32 and
// bfloat16; 1 and 2 threads. Max pooling must give the kernel's bits; average pooling may sum
// in another order. Then NaNs (ONNX propagates them through MaxPool, oneDNN's max drops them),
// a pooling kept in its producer's layout between two Convs, and what oneDNN refuses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kernels/half_convert.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/onednn/onednn.h"
#include "tests/runtime/cpu/onednn/plan_alone.h"
#include "tests/runtime/kernels/kernel_test_util.h"
#include "tests/runtime/cpu/onednn/onednn_test_util.h"

namespace kiln::cpu::testing {
namespace {

struct PoolCase {
  const char* name;
  std::vector<int64_t> x, y, kernel, strides, pads, dilations;
  int64_t ceil_mode = 0;
  const char* auto_pad = "NOTSET";
};

AttrMap PoolAttrs(const PoolCase& c, int64_t count_include_pad) {
  AttrMap a;
  a.SetInts("kernel_shape", c.kernel);
  if (!c.strides.empty()) a.SetInts("strides", c.strides);
  if (!c.pads.empty()) a.SetInts("pads", c.pads);
  if (!c.dilations.empty()) a.SetInts("dilations", c.dilations);
  a.SetInt("ceil_mode", c.ceil_mode);
  a.SetString("auto_pad", c.auto_pad);
  a.SetInt("count_include_pad", count_include_pad);
  return a;
}

const PoolCase kPoolCases[] = {
    {"3x3 stride 2 pad 1 (a ResNet's stem)", {1, 16, 14, 14}, {1, 16, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
    {"2x2 stride 2, batch 2", {2, 5, 8, 6}, {2, 5, 4, 3}, {2, 2}, {2, 2}, {}, {}},
    {"3x3 stride 2 ceil_mode", {1, 4, 8, 8}, {1, 4, 4, 4}, {3, 3}, {2, 2}, {}, {}, 1},
    {"3x3 stride 1 asymmetric pads", {1, 3, 6, 7}, {1, 3, 5, 6}, {3, 3}, {}, {1, 0, 0, 1}, {}},
    {"dilated 2", {1, 6, 9, 9}, {1, 6, 5, 5}, {3, 3}, {}, {}, {2, 2}},
    {"SAME_UPPER 2x2", {1, 8, 5, 5}, {1, 8, 3, 3}, {2, 2}, {2, 2}, {}, {}, 0, "SAME_UPPER"},
    {"1-D", {2, 4, 11}, {2, 4, 5}, {3}, {2}, {0, 0}, {}},
    {"3-D", {1, 2, 5, 6, 7}, {1, 2, 3, 2, 4}, {2, 3, 2}, {2, 2, 2}, {0, 0, 0, 1, 0, 1}, {}},
};

// Plans `op` on oneDNN and runs it twice on `x`; Y's values as stored (float32 or bfloat16
// bits widened). Nothing when oneDNN has only its reference loops for the form here (dilated
// windows, in oneDNN 2.6), which Kiln refuses; fails the test on any other refusal.
std::optional<std::vector<float>> RunPool(std::string_view op, const AttrMap& attrs, const TestTensor& x,
                                          std::vector<int64_t> y_dims, int threads, DType dt,
                                          std::string* description) {
  TestTensor y = Output(dt, y_dims);
  const std::vector<TensorRef> in{x.ref()}, out{y.ref()};
  auto planned = PlanAlone(op, KernelCall{attrs, in, out}, threads, false);
  if (!planned.ok() && planned.status().code() == StatusCode::kUnimplemented &&
      planned.status().message().starts_with("oneDNN has only its reference implementation (ref"))
    return std::nullopt;
  REQUIRE_MESSAGE(planned.ok(), planned.status().ToString());
  *description = (*planned)->description();
  AlignedBuffer ws;
  REQUIRE(ws.Reserve((*planned)->workspace_bytes() + 1));
  const KernelCall call{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())};
  for (int i = 0; i < 2; ++i) {
    const Status st = (*planned)->Run(call);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  if (dt == DType::kFloat32) return y.values<float>();
  const std::vector<uint16_t> h = y.values<uint16_t>();
  std::vector<float> v(h.size());
  HalvesToFloat(dt, h.data(), v.data(), static_cast<int64_t>(h.size()));
  return v;
}

TEST_CASE("oneDNN pooling: MaxPool and AveragePool against Kiln's kernel, every form, type and thread count") {
  if (!OneDnnBuilt()) return;
  uint32_t seed = 1;
  for (const PoolCase& c : kPoolCases)
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      if (dt == DType::kBFloat16 && !OneDnnRunsBFloat16()) continue;
      TestTensor x = RandomTensor(c.x, seed++, 4.0);
      if (dt == DType::kBFloat16) {  // the same values, rounded to bfloat16
        const std::vector<float> v = x.values<float>();
        TestTensor h = Output(dt, c.x);
        FloatToHalves(dt, v.data(), h.data<uint16_t>(), static_cast<int64_t>(v.size()));
        x = h;
      }
      for (const char* op : {"MaxPool", "AveragePool"})
        for (int64_t include_pad : {0, 1}) {
          if (std::string(op) == "MaxPool" && include_pad == 1) continue;
          const AttrMap attrs = PoolAttrs(c, include_pad);
          TestTensor kernel_y = Output(dt, c.y);
          const Status st = RunKernel(op, attrs, {&x}, {&kernel_y});
          REQUIRE_MESSAGE(st.ok(), st.ToString());
          std::vector<float> expected;
          if (dt == DType::kFloat32) {
            expected = kernel_y.values<float>();
          } else {
            const std::vector<uint16_t> h = kernel_y.values<uint16_t>();
            expected.resize(h.size());
            HalvesToFloat(dt, h.data(), expected.data(), static_cast<int64_t>(h.size()));
          }
          for (int threads : {1, 2}) {
            INFO("case " << std::string(c.name) << ", " << std::string(op) << ", count_include_pad " << include_pad);
            CAPTURE(static_cast<int>(dt));
            CAPTURE(threads);
            if (include_pad == 1 && c.ceil_mode == 1) {  // oneDNN would count ceil_mode's extra pad
              TestTensor y = Output(dt, c.y);
              const std::vector<TensorRef> in{x.ref()}, out{y.ref()};
              auto refused = PlanAlone(op, KernelCall{attrs, in, out}, threads, false);
              REQUIRE(refused.status().code() == StatusCode::kUnimplemented);
              CHECK(std::string(refused.status().message()).starts_with("ceil_mode's last window"));
              continue;
            }
            std::string description;
            const std::optional<std::vector<float>> pooled = RunPool(op, attrs, x, c.y, threads, dt, &description);
            if (!pooled) {
              CHECK(!c.dilations.empty());  // the one form this oneDNN has no fast pooling for, on AVX-512
              continue;
            }
            const std::vector<float>& y = *pooled;
            INFO(description);
            CHECK(!description.empty());
            REQUIRE(y.size() == expected.size());
            const bool exact = std::string(op) == "MaxPool";
            // bfloat16 averages: oneDNN and the kernel each round the float32 mean once.
            const double tol = exact ? 0.0 : dt == DType::kFloat32 ? 1e-6 : 0x1p-7;
            int bad = 0;
            for (size_t i = 0; i < y.size() && bad < 5; ++i)
              if (!(std::fabs(y[i] - expected[i]) <= tol * (1 + std::fabs(expected[i])))) {
                ++bad;
                FAIL_CHECK("index " << i << ": " << y[i] << ", Kiln's kernel " << expected[i]);
              }
          }
        }
    }
}

// Hand-computed: a 4x4 plane 0..15, 3x3 windows, stride 2, pad 1, so Y is 2x2. Max: 5, 7, 13,
// 15. Average without the pads: (0+1+4+5)/4, (1+2+3+5+6+7)/6, (4+5+8+9+12+13)/6,
// (5+6+7+9+10+11+13+14+15)/9; with them, each sum over 9.
TEST_CASE("oneDNN pooling: hand-computed maxima and averages, with and without the pads counted") {
  if (!OneDnnBuilt()) return;
  std::vector<float> plane(16);
  for (int i = 0; i < 16; ++i) plane[static_cast<size_t>(i)] = static_cast<float>(i);
  const TestTensor x = Floats({1, 1, 4, 4}, plane);
  const PoolCase c{"hand", {1, 1, 4, 4}, {1, 1, 2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}};
  std::string description;
  const auto run = [&](const char* op, int64_t include_pad) {
    const std::optional<std::vector<float>> y =
        RunPool(op, PoolAttrs(c, include_pad), x, c.y, 1, DType::kFloat32, &description);
    REQUIRE(y);
    return *y;
  };
  CHECK(run("MaxPool", 0) == std::vector<float>{5, 7, 13, 15});
  const std::vector<float> exclude = run("AveragePool", 0), include = run("AveragePool", 1);
  const double sums[] = {10, 24, 51, 90}, counts[] = {4, 6, 6, 9};
  for (size_t i = 0; i < 4; ++i) {
    CHECK(exclude[i] == doctest::Approx(sums[i] / counts[i]).epsilon(1e-6));
    CHECK(include[i] == doctest::Approx(sums[i] / 9).epsilon(1e-6));
  }
}

// ONNX and Kiln propagate a NaN through MaxPool (docs/semantics.md); oneDNN's max drops it, so
// a MaxPool whose X holds one runs Kiln's kernel: Y has Kiln's bits, NaN in every window that
// holds the NaN, in float32 and bfloat16.
TEST_CASE("oneDNN pooling: a NaN in a MaxPool window gives NaN, as Kiln's kernel does") {
  if (!OneDnnBuilt()) return;
  const PoolCase& c = kPoolCases[0];
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    if (dt == DType::kBFloat16 && !OneDnnRunsBFloat16()) continue;
    CAPTURE(static_cast<int>(dt));
    TestTensor x = RandomTensor(c.x, 7);
    if (dt == DType::kBFloat16) {
      const std::vector<float> v = x.values<float>();
      TestTensor h = Output(dt, c.x);
      FloatToHalves(dt, v.data(), h.data<uint16_t>(), static_cast<int64_t>(v.size()));
      x = h;
    }
    // A NaN in channel 3 at (5, 5): the windows of outputs (2..3, 2..3) hold it.
    const size_t at = static_cast<size_t>(3 * 14 * 14 + 5 * 14 + 5);
    if (dt == DType::kFloat32)
      x.data<float>()[at] = std::numeric_limits<float>::quiet_NaN();
    else
      x.data<uint16_t>()[at] = 0x7fc0;
    const AttrMap attrs = PoolAttrs(c, 0);
    TestTensor kernel_y = Output(dt, c.y);
    REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&kernel_y}).ok());
    std::string description;
    const std::optional<std::vector<float>> pooled = RunPool("MaxPool", attrs, x, c.y, 2, dt, &description);
    REQUIRE(pooled);
    const std::vector<float>& y = *pooled;
    int nans = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const int64_t ch = static_cast<int64_t>(i) / 49, oy = static_cast<int64_t>(i) / 7 % 7,
                    ox = static_cast<int64_t>(i) % 7;
      const bool window_has_nan = ch == 3 && oy >= 2 && oy <= 3 && ox >= 2 && ox <= 3;
      CHECK(std::isnan(y[i]) == window_has_nan);
      nans += std::isnan(y[i]) ? 1 : 0;
    }
    CHECK(nans == 4);
  }
}

// Conv -> MaxPool -> Conv with the pooling following the first Conv's layout (Follow) and both
// tensors kept in it (on AVX-512 CPUs, NHWC) gives the same bits as NCHW between them; with a
// NaN in X too (the pooling then runs Kiln's kernel on NCHW copies).
TEST_CASE("oneDNN pooling: kept in its producer's layout between two Convs, with and without a NaN") {
  if (!OneDnnBuilt()) return;
  const std::vector<int64_t> xd{1, 8, 14, 14}, w1d{16, 8, 3, 3}, midd{1, 16, 14, 14}, pd{1, 16, 7, 7},
      w2d{16, 16, 3, 3};
  AttrMap conv;
  conv.SetInts("pads", {1, 1, 1, 1});
  const AttrMap pool = PoolAttrs(kPoolCases[0], 0);
  const TestTensor w1 = RandomTensor(w1d, 2), w2 = RandomTensor(w2d, 3);
  for (bool with_nan : {false, true}) {
    CAPTURE(with_nan);
    TestTensor x = RandomTensor(xd, 1);
    if (with_nan) x.data<float>()[100] = std::numeric_limits<float>::quiet_NaN();
    TestTensor mid = Output(DType::kFloat32, midd), pooled = Output(DType::kFloat32, pd);
    TestTensor y_plain = Output(DType::kFloat32, pd), y_kept = Output(DType::kFloat32, pd);
    const std::vector<TensorRef> in1{x.ref(), w1.ref()}, out1{mid.ref()}, in2{mid.ref()}, out2{pooled.ref()},
        in3{pooled.ref(), w2.ref()}, out3_plain{y_plain.ref()}, out3_kept{y_kept.ref()};
    auto c1 = PlanAlone("Conv", KernelCall{conv, in1, out1}, 2, true);
    auto p = PlanAlone("MaxPool", KernelCall{pool, in2, out2}, 2, false);
    auto c2 = PlanAlone("Conv", KernelCall{conv, in3, out3_plain}, 2, true);
    REQUIRE(c1.ok());
    REQUIRE(p.ok());
    REQUIRE(c2.ok());
    AlignedBuffer ws;
    const auto run = [&](OneDnnOp& op, const AttrMap& a, const std::vector<TensorRef>& in,
                         const std::vector<TensorRef>& out) { RunPlanned(op, a, in, out, ws); };
    const auto run_all = [&](const std::vector<TensorRef>& out3) {
      run(**c1, conv, in1, out1);
      run(**p, pool, in2, out2);
      run(**c2, conv, in3, out3);
    };
    run_all(out3_plain);
    if (!(*p)->Follow(**c1)) {
      MESSAGE("oneDNN's Conv runs in NCHW here (", (*c1)->description(), "): nothing to follow");
      continue;
    }
    const bool mid_kept = (*c1)->CanFeed(**p, 0), pooled_kept = mid_kept && (*p)->CanFeed(**c2, 0);
    REQUIRE(mid_kept);
    if (!pooled_kept) MESSAGE("the second Conv wants another layout here: ", (*c2)->description());
    REQUIRE((*c1)->Place(false, mid_kept, false).ok());
    REQUIRE((*p)->Place(mid_kept, pooled_kept, false).ok());
    REQUIRE((*c2)->Place(pooled_kept, false, false).ok());
    if (pooled_kept) CHECK((*p)->description().find("kept between oneDNN ops for X and Y") != std::string::npos);
    run_all(out3_kept);
    const std::vector<uint32_t> a = y_plain.values<uint32_t>(), b = y_kept.values<uint32_t>();
    CHECK(a == b);
    int nans = 0;
    for (float v : y_kept.values<float>()) nans += std::isnan(v) ? 1 : 0;
    CHECK((nans > 0) == with_nan);
  }
}

TEST_CASE("oneDNN pooling: what it refuses") {
  if (!OneDnnBuilt()) return;
  const PoolCase& c = kPoolCases[1];
  const AttrMap attrs = PoolAttrs(c, 0);
  const auto refusal = [&](std::string_view op, const TestTensor& x, std::vector<const TestTensor*> outputs) {
    const std::vector<TensorRef> in{x.ref()};
    std::vector<TensorRef> out;
    for (const TestTensor* t : outputs) out.push_back(t->ref());
    auto planned = PlanAlone(op, KernelCall{attrs, in, out}, 1, false);
    REQUIRE(planned.status().code() == StatusCode::kUnimplemented);
    return std::string(planned.status().message());
  };
  const TestTensor x = RandomTensor(c.x, 1);
  TestTensor y = Output(DType::kFloat32, c.y), indices = Output(DType::kInt64, c.y);
  CHECK(refusal("MaxPool", x, {&y, &indices}) == "the Indices output (oneDNN's pooling gives none)");
  const TestTensor xh = Output(DType::kFloat16, c.x);
  TestTensor yh = Output(DType::kFloat16, c.y);
  CHECK(refusal("MaxPool", xh, {&yh}) == "float16 (oneDNN runs float32 and bfloat16 MaxPool in Kiln)");
  const TestTensor empty = Output(DType::kFloat32, {0, 5, 8, 6});
  TestTensor y_empty = Output(DType::kFloat32, {0, 5, 4, 3});
  CHECK(refusal("AveragePool", empty, {&y_empty}) == "an empty tensor (the CPU kernel writes what it needs)");
}

}  // namespace
}  // namespace kiln::cpu::testing
