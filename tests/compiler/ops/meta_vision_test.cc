// Meta functions of RoiAlign, Col2Im, MaxUnpool, DeformConv and NonMaxSuppression: output
// shapes, attribute errors, and NonMaxSuppression's data-dependent size.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
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

std::string Error(const Result<Value>& r) {
  REQUIRE(!r.ok());
  return std::string(r.status().message());
}

TEST_CASE("RoiAlign meta: [num_rois, C, output_height, output_width] and attribute errors") {
  const std::vector<In> ins = {{DType::kFloat32, {2, 3, 10, 10}}, {DType::kFloat32, {5, 4}}, {DType::kInt64, {5}}};
  AttrMap a;
  a.SetInt("output_height", 2);
  a.SetInt("output_width", 7);
  CHECK(Shape(InferOne("RoiAlign", ins, a)) == "[5, 3, 2, 7]");
  AttrMap m;
  m.SetString("mode", "sum");
  CHECK(Error(InferOne("RoiAlign", ins, m)) == "node 'n' (RoiAlign): attribute 'mode': expected avg or max, found \"sum\"");
  AttrMap c;
  c.SetString("coordinate_transformation_mode", "align_corners");
  CHECK(Error(InferOne("RoiAlign", ins, c)) ==
        "node 'n' (RoiAlign): attribute 'coordinate_transformation_mode': expected half_pixel or output_half_pixel, "
        "found \"align_corners\"");
  AttrMap s;
  s.SetInt("sampling_ratio", -1);
  CHECK(Error(InferOne("RoiAlign", ins, s)) ==
        "node 'n' (RoiAlign): attribute 'sampling_ratio': expected >= 0 (0: adaptive), found -1");
}

TEST_CASE("Col2Im meta: image from constant image_shape, block count checked") {
  AttrMap a;
  a.SetInts("strides", {2, 2});
  // 5x5 image, 2x2 blocks at stride 2: 2x2 = 4 blocks; 12 channels = 3 * 4.
  CHECK(Shape(InferOne("Col2Im", {{DType::kFloat32, {1, 12, 4}}, {DType::kInt64, {2}, {{5, 5}}},
                                  {DType::kInt64, {2}, {{2, 2}}}}, a)) == "[1, 3, 5, 5]");
  CHECK(Error(InferOne("Col2Im", {{DType::kFloat32, {1, 12, 5}}, {DType::kInt64, {2}, {{5, 5}}},
                                  {DType::kInt64, {2}, {{2, 2}}}}, a)) ==
        "node 'n' (Col2Im): input input dim 2 (number of blocks): expected 4, found 5");
  CHECK(Error(InferOne("Col2Im", {{DType::kFloat32, {1, 12, 4}}, {DType::kInt64, {2}},
                                  {DType::kInt64, {2}, {{2, 2}}}}, a)) ==
        "node 'n' (Col2Im): data-dependent output shape: image_shape (in1) is not known at compile time");
}

TEST_CASE("MaxUnpool meta: inferred shape or output_shape") {
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  a.SetInts("strides", {2, 2});
  const In x{DType::kFloat32, {1, 3, 2, 2}}, i{DType::kInt64, {1, 3, 2, 2}};
  CHECK(Shape(InferOne("MaxUnpool", {x, i}, a)) == "[1, 3, 4, 4]");
  CHECK(Shape(InferOne("MaxUnpool", {x, i, {DType::kInt64, {4}, {{1, 3, 5, 5}}}}, a)) == "[1, 3, 5, 5]");
  CHECK(Error(InferOne("MaxUnpool", {x, i, {DType::kInt64, {4}, {{1, 3, 3, 5}}}}, a)) ==
        "node 'n' (MaxUnpool): input output_shape: value 2 (3) is smaller than the unpooled size 4");
  CHECK(Error(InferOne("MaxUnpool", {x, i})) == "node 'n' (MaxUnpool): attribute 'kernel_shape': required");
}

TEST_CASE("DeformConv meta: convolution output, offset and mask shapes checked") {
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  a.SetInt("offset_group", 2);
  a.SetInts("pads", {1, 1, 1, 1});
  const In x{DType::kFloat32, {1, 4, 3, 3}}, w{DType::kFloat32, {6, 4, 2, 2}};
  CHECK(Shape(InferOne("DeformConv", {x, w, {DType::kFloat32, {1, 16, 4, 4}}}, a)) == "[1, 6, 4, 4]");
  CHECK(Error(InferOne("DeformConv", {x, w, {DType::kFloat32, {1, 8, 4, 4}}}, a)) ==
        "node 'n' (DeformConv): input offset dim 1 (offset_group * kH * kW * 2): expected 16, found 8");
  CHECK(Error(InferOne("DeformConv", {x, w, {DType::kFloat32, {1, 16, 4, 4}}, testing::kAbsent,
                                      {DType::kFloat32, {1, 4, 4, 4}}}, a)) ==
        "node 'n' (DeformConv): input mask dim 1 (offset_group * kH * kW): expected 8, found 4");
  AttrMap g = a;
  g.SetInt("offset_group", 3);
  CHECK(Error(InferOne("DeformConv", {x, w, {DType::kFloat32, {1, 24, 4, 4}}}, g)) ==
        "node 'n' (DeformConv): input X dim 1: expected a multiple of offset_group 3, found 4");
}

// A float32 constant (or, with no values, a graph input) named `name`.
ValueId AddFloats(Trace& t, const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  Value val;
  val.name = name;
  val.dtype = DType::kFloat32;
  for (int64_t d : dims) val.shape.push_back(Sym(d));
  if (!v.empty()) {
    auto d = std::make_shared<ConstData>();
    d->dtype = DType::kFloat32;
    d->dims = dims;
    d->bytes.resize(v.size() * 4);
    std::memcpy(d->bytes.data(), v.data(), d->bytes.size());
    val.data = d;
  }
  return t.AddValue(std::move(val));
}

Result<Value> Nms(bool const_boxes, bool const_scores, int64_t max_out) {
  Trace t;
  Node n;
  n.op = "NonMaxSuppression";
  n.name = "nms";
  // Box 1 overlaps box 0 (IOU 0.82); box 2 is apart.
  n.inputs.push_back(AddFloats(t, "boxes", {1, 3, 4},
                               const_boxes ? std::vector<float>{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11}
                                           : std::vector<float>{}));
  n.inputs.push_back(AddFloats(t, "scores", {1, 1, 3}, const_scores ? std::vector<float>{0.9f, 0.95f, 0.5f}
                                                                    : std::vector<float>{}));
  Value m;
  m.name = "max";
  m.dtype = DType::kInt64;
  m.shape = {Sym(1)};
  auto md = std::make_shared<ConstData>();
  md->dtype = DType::kInt64;
  md->dims = {1};
  md->bytes.resize(8);
  std::memcpy(md->bytes.data(), &max_out, 8);
  m.data = md;
  n.inputs.push_back(t.AddValue(std::move(m)));
  n.inputs.push_back(AddFloats(t, "iou", {1}, {0.5f}));
  Value out;
  out.name = "selected";
  n.outputs.push_back(t.AddValue(std::move(out)));
  t.body.nodes.push_back(n);
  KILN_RETURN_IF_ERROR(InferNode(t, t.body.nodes.back()));
  return t.value(t.body.nodes.back().outputs[0]);
}

TEST_CASE("NonMaxSuppression meta: the selection count from constants, else a run-time dim") {
  CHECK(Shape(Nms(true, true, 3)) == "[2, 3]");
  CHECK(Shape(Nms(true, true, 1)) == "[1, 3]");
  CHECK(Shape(Nms(true, true, 0)) == "[0, 3]");
  CHECK(Shape(Nms(true, false, 3)) == "[selected.count, 3]");
  CHECK(Shape(Nms(false, true, 3)) == "[selected.count, 3]");
}

}  // namespace
}  // namespace kiln::ir
