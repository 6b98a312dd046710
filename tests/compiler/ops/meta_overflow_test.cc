// Meta functions on attribute and constant values at the int64 limits: a precise error or the
// right shape, never signed overflow (issue 8; these wrapped before, UBSan reported them).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir {
namespace {

using testing::In;
using testing::InferOne;
using testing::Shape;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST_CASE("meta overflow: Conv pads of 2^62 overflow the output size and say so") {
  AttrMap a;
  a.SetInts("pads", std::vector<int64_t>(4, int64_t{1} << 62));
  auto r = InferOne("Conv", {{DType::kFloat32, {1, 1, 4, 4}}, {DType::kFloat32, {1, 1, 1, 1}}}, a);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  // Was "expected an output size >= 1, found -9223372036854775804" (pads + pads wrapped).
  CHECK(r.status().message() ==
        "node 'n' (Conv): spatial dim 0: kernel_shape 1, dilation 1, stride 1 and pads [4611686018427387904, "
        "4611686018427387904, 4611686018427387904, 4611686018427387904] overflow int64 in the output size");
}

TEST_CASE("meta overflow: Slice with step INT64_MIN takes one element, as onnxruntime does") {
  const In data{DType::kFloat32, {1, 2, 3, 4}};
  // -step negated INT64_MIN: the length came out 0 ([1, 2, 0, 4]).
  CHECK(Shape(InferOne("Slice", {data, {DType::kInt64, {1}, std::vector<int64_t>{-1}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{kMin}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{2}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{kMin}}})) == "[1, 2, 1, 4]");
  // A positive step near INT64_MAX: (E - S + step - 1) wrapped.
  CHECK(Shape(InferOne("Slice", {data, {DType::kInt64, {1}, std::vector<int64_t>{0}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{kMax}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{3}},
                                 {DType::kInt64, {1}, std::vector<int64_t>{kMax}}})) == "[1, 2, 3, 1]");
}

TEST_CASE("meta overflow: Reshape whose known dims multiply past int64 says so") {
  auto r = InferOne("Reshape", {{DType::kFloat32, {1, 2, 4, 4}},
                                {DType::kInt64, {4}, std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32, 0, -1}}});
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  // Was "dim 3 is (32 floordiv 0)": the product wrapped to 0.
  CHECK(r.status().message() ==
        "node 'n' (Reshape): cannot reshape [1, 2, 4, 4] to [4294967296, 4294967296, 0, -1]: the product of the "
        "dims besides the -1 overflows int64");
}

TEST_CASE("meta overflow: Range from INT64_MIN to INT64_MAX keeps the overflowing count symbolic") {
  // Splitting the offsets of (limit - start) added INT64_MAX to INT64_MIN's negation; the
  // count now stays an expression that the compile refuses as overflowing (invalid models test).
  auto r = InferOne("Range", {{DType::kInt64, {}, std::vector<int64_t>{kMin}},
                              {DType::kInt64, {}, std::vector<int64_t>{kMax}},
                              {DType::kInt64, {}, std::vector<int64_t>{kMax}}});
  CHECK(Shape(r) == "[max(((9223372036854775807--9223372036854775808) ceildiv 9223372036854775807), 0)]");
}

TEST_CASE("meta overflow: ConvTranspose, Col2Im and DeformConv attributes that overflow are named") {
  AttrMap dil;
  dil.SetInts("dilations", {int64_t{1} << 62, int64_t{1} << 62});
  auto convt = InferOne("ConvTranspose", {{DType::kFloat32, {1, 1, 4, 4}}, {DType::kFloat32, {1, 1, 3, 3}}}, dil);
  REQUIRE(!convt.ok());
  CHECK(convt.status().code() == StatusCode::kInvalidArgument);
  CHECK(convt.status().message() ==
        "node 'n' (ConvTranspose): spatial dim 0: kernel_shape 3, dilation 4611686018427387904, stride 1 and pads "
        "[0, 0, 0, 0] overflow int64 in the output size");

  // 2^62 x 2^62 blocks of 1x1: each count fits, their product does not.
  auto col2im = InferOne("Col2Im", {{DType::kFloat32, {1, 1, 4}},
                                    {DType::kInt64, {2}, std::vector<int64_t>{int64_t{1} << 62, int64_t{1} << 62}},
                                    {DType::kInt64, {2}, std::vector<int64_t>{1, 1}}});
  REQUIRE(!col2im.ok());
  CHECK(col2im.status().code() == StatusCode::kInvalidArgument);
  CHECK(col2im.status().message() ==
        "node 'n' (Col2Im): inputs image_shape and block_shape: the block size or the number of blocks of "
        "[4611686018427387904, 4611686018427387904] and [1, 1] overflows int64");

  AttrMap deform;
  deform.SetInts("kernel_shape", {int64_t{1} << 32, int64_t{1} << 32});
  deform.SetInts("pads", std::vector<int64_t>(4, int64_t{1} << 31));
  auto d = InferOne("DeformConv", {{DType::kFloat32, {1, 1, 3, 3}},
                                   {DType::kFloat32, {1, 1, int64_t{1} << 32, int64_t{1} << 32}},
                                   {DType::kFloat32, {1, 2, 4, 4}}}, deform);
  REQUIRE(!d.ok());
  CHECK(d.status().code() == StatusCode::kInvalidArgument);
  CHECK(d.status().message() ==
        "node 'n' (DeformConv): attributes 'offset_group' 1 and 'kernel_shape' [4294967296, 4294967296]: "
        "offset_group * kH * kW * 2 overflows int64");
}

TEST_CASE("meta overflow: empty tensors whose other dims multiply past int64 are shaped, not overflowed") {
  // [2^32, 2^32, 0] holds no elements; the element propagation multiplied the dims in order.
  const In x{DType::kInt64, {int64_t{1} << 32, int64_t{1} << 32, 0}, std::vector<int64_t>{}};
  CHECK(Shape(InferOne("Add", {x, x})) == "[4294967296, 4294967296, 0]");
  CHECK(Shape(InferOne("Concat", {x, x}, [] {
          AttrMap a;
          a.SetInt("axis", 2);
          return a;
        }())) == "[4294967296, 4294967296, 0]");
  AttrMap last;
  last.SetInt("axis", 2);
  auto u = InferOne("Unique", {x}, last);  // the slices' outer and inner counts overflowed
  REQUIRE(u.ok());
  CHECK(ShapeToString(u->shape) == "[4294967296, 4294967296, 0]");
}

}  // namespace
}  // namespace kiln::ir
