// Meta functions of the signal and grid-sampling ops: output shapes and attribute errors.
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

In F32(std::vector<int64_t> dims) { return {DType::kFloat32, std::move(dims)}; }
In Scalar(int64_t x) { return {DType::kInt64, {}, std::vector<int64_t>{x}}; }
In Absent() { return {DType::kUndefined, {}, std::nullopt, true}; }

TEST_CASE("DFT meta: lengths, one-sided bins, irfft, axis errors") {
  const In x = F32({2, 10, 1}), c = F32({2, 6, 2});
  CHECK(Shape(InferOne("DFT", {x})) == "[2, 10, 2]");  // axis -2 by default
  AttrMap one;
  one.SetInt("onesided", 1);
  CHECK(Shape(InferOne("DFT", {x, Scalar(16)}, one)) == "[2, 9, 2]");
  one.SetInt("inverse", 1);
  CHECK(Shape(InferOne("DFT", {c}, one)) == "[2, 10, 1]");  // irfft: 2 * (6 - 1) real samples
  auto bad = InferOne("DFT", {x, Absent(), Scalar(-1)});
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("axis: expected a signal axis") != std::string::npos);
}

TEST_CASE("Window, STFT and GridSample meta") {
  CHECK(Shape(InferOne("HannWindow", {Scalar(10)})) == "[10]");
  AttrMap f16;
  f16.SetInt("output_datatype", 10);
  CHECK(InferOne("HannWindow", {Scalar(10)}, f16).status().code() == StatusCode::kUnimplemented);
  CHECK(Shape(InferOne("STFT", {F32({1, 128, 1}), Scalar(8), Absent(), Scalar(16)})) == "[1, 15, 9, 2]");
  const In x = F32({1, 3, 4, 4}), g = F32({1, 6, 5, 2});
  CHECK(Shape(InferOne("GridSample", {x, g})) == "[1, 3, 6, 5]");
  AttrMap area;
  area.SetString("mode", "area");
  CHECK(InferOne("GridSample", {x, g}, area).status().message() ==
        "node 'n' (GridSample): attribute 'mode': expected linear, nearest or cubic (bilinear, bicubic before opset 20), "
        "found \"area\"");
  CHECK(InferOne("GridSample", {x, F32({1, 6, 5, 3})}).status().message().find("grid last dim") != std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
