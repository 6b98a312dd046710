// NaN and infinity go through the kernels the way onnxruntime and NumPy pass them on: a
// NaN input gives a NaN output wherever the math does, so a bad input is not hidden by a
// plausible number. Expected values come from onnxruntime 1.32 (CPU provider, no graph
// optimizations) on x = [nan, -1, 2, inf, -inf].
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

using namespace kiln::cpu::testing;  // NOLINT

namespace {

void CheckSame(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i << ": got " << got[i] << ", want " << want[i]);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i])) CHECK(got[i] == want[i]);
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}

std::vector<float> RunOn(std::string_view op, const kiln::AttrMap& attrs, std::vector<const TestTensor*> extra,
                         std::vector<int64_t> out_dims = {1, 5}) {
  TestTensor x = Floats({1, 5}, {kNaN, -1.0f, 2.0f, kInf, -kInf});
  TestTensor y = Output(kiln::DType::kFloat32, out_dims);
  std::vector<const TestTensor*> ins{&x};
  ins.insert(ins.end(), extra.begin(), extra.end());
  kiln::Status st = RunKernel(op, attrs, ins, {&y});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return y.values<float>();
}

}  // namespace

TEST_CASE("NaN: activations pass NaN on") {
  kiln::AttrMap none;
  CheckSame(RunOn("Relu", none, {}), {kNaN, 0, 2, kInf, 0});
  CheckSame(RunOn("LeakyRelu", none, {}), {kNaN, -0.01f, 2, kInf, -kInf});
  CheckSame(RunOn("HardSigmoid", none, {}), {kNaN, 0.3f, 0.9f, 1, 0});
  CheckSame(RunOn("Sigmoid", none, {}), {kNaN, 0.26894143f, 0.8807971f, 1, 0});
  TestTensor lo = Floats({}, {0.0f}), hi = Floats({}, {1.0f});
  CheckSame(RunOn("Clip", none, {&lo, &hi}), {kNaN, 0, 1, 1, 0});
}

TEST_CASE("NaN: Max, Min and the max/min reductions pass NaN on") {
  kiln::AttrMap none;
  TestTensor zeros = Floats({1, 5}, {0, 0, 0, 0, 0});
  CheckSame(RunOn("Max", none, {&zeros}), {kNaN, 0, 2, kInf, 0});
  CheckSame(RunOn("Min", none, {&zeros}), {kNaN, -1, 0, 0, -kInf});
  kiln::AttrMap drop;
  drop.SetInt("keepdims", 0);
  CheckSame(RunOn("ReduceMax", drop, {}, {1}), {kNaN});
  CheckSame(RunOn("ReduceMin", drop, {}, {1}), {kNaN});
}
