// Resize meta function: keep_aspect_ratio_policy sizes the resized axes with one common scale.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

std::string ResizeShape(std::vector<int64_t> x, std::vector<int64_t> sizes, const char* policy) {
  AttrMap a;
  a.SetInts("axes", {2, 3});
  a.SetString("keep_aspect_ratio_policy", policy);
  const int64_t n = static_cast<int64_t>(sizes.size());
  auto r = InferOne("Resize", {{DType::kFloat32, x}, testing::kAbsent, testing::kAbsent,
                               {DType::kInt64, {n}, sizes}}, a);
  return r.ok() ? ShapeToString(r->shape) : r.status().message();
}

TEST_CASE("Resize meta: keep_aspect_ratio_policy not_larger / not_smaller") {
  // Scales 7/2 = 3.5 and 8/2 = 4: not_larger takes 3.5 (7x7), not_smaller 4 (8x8).
  CHECK(ResizeShape({1, 1, 2, 2}, {7, 8}, "not_larger") == "[1, 1, 7, 7]");
  CHECK(ResizeShape({1, 1, 2, 2}, {7, 8}, "not_smaller") == "[1, 1, 8, 8]");
  CHECK(ResizeShape({1, 1, 2, 2}, {7, 8}, "stretch") == "[1, 1, 7, 8]");
  // Scales 3/4 and 3/6: 0.5 gives 2x3; 0.75 gives 3 x round(4.5) = 3x5 (halves round away from zero).
  CHECK(ResizeShape({1, 1, 4, 6}, {3, 3}, "not_larger") == "[1, 1, 2, 3]");
  CHECK(ResizeShape({1, 1, 4, 6}, {3, 3}, "not_smaller") == "[1, 1, 3, 5]");
  CHECK(ResizeShape({1, 1, 4, 6}, {3, 3}, "fit") ==
        "node 'n' (Resize): keep_aspect_ratio_policy: expected stretch, not_larger or not_smaller, found \"fit\"");
}

}  // namespace
}  // namespace kiln::ir::testing
