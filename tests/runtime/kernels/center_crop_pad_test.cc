// CenterCropPad CPU kernel: crop and pad about the centre, the odd element at the end.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("CenterCropPad: crops one dim and pads the other about the centre") {
  // [3, 2] -> [2, 4]: rows 0..1 kept (crop of 1, the odd row dropped at the end), each row
  // padded by 2: one zero before, one after.
  auto x = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto shape = Int64s({2}, {2, 4});
  auto y = Output(DType::kFloat32, {2, 4});
  REQUIRE(RunKernel("CenterCropPad", {}, {&x, &shape}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0});
  // [3, 2] -> [1, 5]: the middle row; a pad of 3 puts one zero before and two after.
  auto y2 = Output(DType::kFloat32, {1, 5});
  REQUIRE(RunKernel("CenterCropPad", {}, {&x, &shape}, {&y2}).ok());
  CHECK(y2.values<float>() == std::vector<float>{0, 3, 4, 0, 0});
}

TEST_CASE("CenterCropPad: an output of another rank is an error") {
  auto x = Floats({2}, {1, 2});
  auto shape = Int64s({1}, {2});
  auto y = Output(DType::kFloat32, {2, 1});
  CHECK(RunKernel("CenterCropPad", {}, {&x, &shape}, {&y}).message() ==
        "CenterCropPad: output float32[2, 1] does not match input float32[2]");
}

}  // namespace
}  // namespace kiln::cpu::testing
