// Meta functions of the signal and grid-sampling ops: output shapes and attribute errors.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"

namespace kiln::ir {
namespace {

struct SBuilder {
  Trace t;
  ValueId In(DType dt, std::vector<int64_t> dims) {
    Value v;
    v.name = "in" + std::to_string(t.values.size());
    v.dtype = dt;
    for (int64_t d : dims) v.shape.push_back(Sym(d));
    return t.AddValue(std::move(v));
  }
  ValueId Scalar(int64_t x) {
    auto d = std::make_shared<ConstData>();
    d->dtype = DType::kInt64;
    d->bytes.resize(sizeof x);
    std::memcpy(d->bytes.data(), &x, sizeof x);
    Value v;
    v.name = "c" + std::to_string(t.values.size());
    v.dtype = DType::kInt64;
    v.data = d;
    return t.AddValue(std::move(v));
  }
  Status Op(const std::string& op, std::vector<ValueId> ins, AttrMap attrs = {}) {
    Node n;
    n.op = op;
    n.name = "n";
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    n.outputs.push_back(t.AddValue(Value{}));
    t.body.nodes.push_back(std::move(n));
    return InferNode(t, t.body.nodes.back());
  }
  std::string OutShape() const { return ShapeToString(t.value(t.body.nodes.back().outputs[0]).shape); }
};

TEST_CASE("DFT meta: lengths, one-sided bins, irfft, axis errors") {
  SBuilder b;
  ValueId x = b.In(DType::kFloat32, {2, 10, 1}), c = b.In(DType::kFloat32, {2, 6, 2});
  REQUIRE(b.Op("DFT", {x}).ok());  // axis -2 by default
  CHECK(b.OutShape() == "[2, 10, 2]");
  AttrMap one;
  one.SetInt("onesided", 1);
  REQUIRE(b.Op("DFT", {x, b.Scalar(16)}, one).ok());
  CHECK(b.OutShape() == "[2, 9, 2]");
  one.SetInt("inverse", 1);
  REQUIRE(b.Op("DFT", {c}, one).ok());  // irfft: 2 * (6 - 1) real samples
  CHECK(b.OutShape() == "[2, 10, 1]");
  Status st = b.Op("DFT", {x, kNoValue, b.Scalar(-1)});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("axis: expected a signal axis") != std::string::npos);
}

TEST_CASE("Window, STFT and GridSample meta") {
  SBuilder b;
  REQUIRE(b.Op("HannWindow", {b.Scalar(10)}).ok());
  CHECK(b.OutShape() == "[10]");
  AttrMap f16;
  f16.SetInt("output_datatype", 10);
  CHECK(b.Op("HannWindow", {b.Scalar(10)}, f16).code() == StatusCode::kUnimplemented);
  ValueId sig = b.In(DType::kFloat32, {1, 128, 1});
  REQUIRE(b.Op("STFT", {sig, b.Scalar(8), kNoValue, b.Scalar(16)}).ok());
  CHECK(b.OutShape() == "[1, 15, 9, 2]");
  ValueId x = b.In(DType::kFloat32, {1, 3, 4, 4}), g = b.In(DType::kFloat32, {1, 6, 5, 2});
  REQUIRE(b.Op("GridSample", {x, g}).ok());
  CHECK(b.OutShape() == "[1, 3, 6, 5]");
  AttrMap area;
  area.SetString("mode", "area");
  Status st = b.Op("GridSample", {x, g}, area);
  CHECK(st.message() == "node 'n' (GridSample): attribute 'mode': expected linear, nearest or cubic (bilinear, bicubic "
                        "before opset 20), found \"area\"");
  ValueId g3 = b.In(DType::kFloat32, {1, 6, 5, 3});
  CHECK(b.Op("GridSample", {x, g3}).message().find("grid last dim") != std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
