// Compress, NonZero, Unique and kiln.IfOutput CPU kernels against hand-computed selections.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Compress: along an axis, flattened, and a short condition") {
  auto x = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto cond = Bools({3}, {false, true, true});
  auto y = Output(DType::kFloat32, {2, 2});
  AttrMap axis0;
  axis0.SetInt("axis", 0);
  REQUIRE(RunKernel("Compress", axis0, {&x, &cond}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{3, 4, 5, 6});
  // No axis: the flattened input; elements past the condition are dropped.
  auto flat = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Compress", {}, {&x, &cond}, {&flat}).ok());
  CHECK(flat.values<float>() == std::vector<float>{2, 3});
  // An output sized for another condition is an error, not an overrun.
  auto wrong = Output(DType::kFloat32, {1, 2});
  CHECK(RunKernel("Compress", axis0, {&x, &cond}, {&wrong}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("NonZero: indices per dim, row-major order") {
  auto x = Floats({2, 2}, {1, 0, -0.0f, 2});
  auto y = Output(DType::kInt64, {2, 2});
  REQUIRE(RunKernel("NonZero", {}, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 1, 0, 1});  // (0,0) and (1,1); -0 is zero
  auto bad = Output(DType::kInt64, {2, 3});
  CHECK(RunKernel("NonZero", {}, {&x}, {&bad}).code() == StatusCode::kInvalidArgument);
}

// Runs kiln.IfOutput on cond, then_value and else_value; `size` set: as the instruction that
// reports its run-time dim.
Status RunIfOutput(bool cond, const TestTensor& a, const TestTensor& b, const TestTensor& y, int64_t* size) {
  auto c = Bools({}, {cond});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  std::vector<TensorRef> in = {c.ref(), a.ref(), b.ref()}, out = {y.ref()};
  KernelCall call{attrs, in, out};
  call.runtime_size = size;
  return cpu::RunKernel(*FindKernel("kiln.IfOutput"), call);
}

TEST_CASE("kiln.IfOutput: the value cond picks, packed, and its size in dim axis - no room is kInternal") {
  auto a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = Floats({2, 1}, {7, 8});
  auto y = Output(DType::kFloat32, {2, 3});  // sized for the bound, max(3, 1)
  int64_t size = -1;
  REQUIRE(RunIfOutput(true, a, b, y, &size).ok());
  CHECK(size == 3);
  CHECK(y.values<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE(RunIfOutput(false, a, b, y, &size).ok());
  CHECK(size == 1);
  CHECK(y.values<float>() == std::vector<float>{7, 8, 3, 4, 5, 6});  // [2, 1] packed first
  // Without a run-time dim the output must be the chosen value's shape.
  CHECK(RunIfOutput(false, a, b, y, nullptr).code() == StatusCode::kInvalidArgument);
  // An output with no room for the chosen value (a bound that did not hold) writes nothing.
  auto small = Output(DType::kFloat32, {2, 2});
  CHECK(RunIfOutput(true, a, b, small, &size).code() == StatusCode::kInternal);
  CHECK(small.values<float>() == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("Unique: sorted and in order of first occurrence, with all four outputs") {
  auto x = Floats({6}, {2, 1, 1, 3, 4, 3});
  auto y = Output(DType::kFloat32, {4});
  auto idx = Output(DType::kInt64, {4}), inv = Output(DType::kInt64, {6}), cnt = Output(DType::kInt64, {4});
  REQUIRE(RunKernel("Unique", {}, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 0, 3, 4});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{1, 0, 0, 2, 3, 2});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{2, 1, 2, 1});
  AttrMap unsorted;
  unsorted.SetInt("sorted", 0);
  REQUIRE(RunKernel("Unique", unsorted, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<float>() == std::vector<float>{2, 1, 3, 4});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{0, 1, 3, 4});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 2, 3, 2});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{1, 2, 2, 1});
}

TEST_CASE("Unique: rows along axis 0") {
  auto x = Int64s({3, 2}, {1, 0, 0, 1, 1, 0});
  auto y = Output(DType::kInt64, {2, 2});
  auto idx = Output(DType::kInt64, {2}), inv = Output(DType::kInt64, {3}), cnt = Output(DType::kInt64, {2});
  AttrMap a;
  a.SetInt("axis", 0);
  REQUIRE(RunKernel("Unique", a, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{1, 2});
}

}  // namespace
}  // namespace kiln::cpu::testing
