#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

AttrMap Axes(int64_t batch_axis, int64_t time_axis) {
  AttrMap a;
  a.SetInt("batch_axis", batch_axis);
  a.SetInt("time_axis", time_axis);
  return a;
}

TEST_CASE("ReverseSequence: the ONNX examples, a trailing dim, bad lengths") {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  auto x = Floats({4, 4}, v);
  auto y = Output(DType::kFloat32, {4, 4});
  // Time along dim 0, batch along dim 1: column b reverses its first lens[b] entries.
  auto lens1 = Int64s({4}, {4, 3, 2, 1});
  REQUIRE(RunKernel("ReverseSequence", Axes(1, 0), {&x, &lens1}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
  // Batch along dim 0, time along dim 1: row b reverses its first lens[b] entries.
  auto lens2 = Int64s({4}, {1, 2, 3, 4});
  REQUIRE(RunKernel("ReverseSequence", Axes(0, 1), {&x, &lens2}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});

  // [batch 2, time 3, 2]: each time step moves its row of 2 as a whole; length 0 copies.
  auto xi = Int64s({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto lens3 = Int64s({2}, {2, 0});
  auto yi = Output(DType::kInt64, {2, 3, 2});
  REQUIRE(RunKernel("ReverseSequence", Axes(0, 1), {&xi, &lens3}, {&yi}).ok());
  CHECK(yi.values<int64_t>() == std::vector<int64_t>{2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11});

  auto too_long = Int64s({2}, {2, 4});
  Status st = RunKernel("ReverseSequence", Axes(0, 1), {&xi, &too_long}, {&yi});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "ReverseSequence: sequence_lens[1] = 4 is outside [0, 3]");
  CHECK(RunKernel("ReverseSequence", Axes(1, 1), {&xi, &lens3}, {&yi}).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu::testing
