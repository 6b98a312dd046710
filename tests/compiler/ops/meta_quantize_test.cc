// Meta functions of the quantization ops: output dtypes, shapes and attribute errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir {
namespace {

// One node at a time through testing::InferOne; Out() is the last node's output.
struct QBuilder {
  Result<Value> last = Status(StatusCode::kInternal, "no node yet");
  testing::In In(DType dt, std::vector<int64_t> dims) const { return {dt, std::move(dims)}; }
  Status Op(const std::string& op, const std::vector<testing::In>& ins, const AttrMap& attrs = {}) {
    last = testing::InferOne(op, ins, attrs);
    return last.status();
  }
  const Value& Out() const { return *last; }
};


AttrMap Int(const char* name, int64_t v) {
  AttrMap a;
  a.SetInt(name, v);
  return a;
}

TEST_CASE("QuantizeLinear meta: output dtype from zero point, output_dtype or uint8") {
  QBuilder b;
  testing::In x = b.In(DType::kFloat32, {2, 4}), s = b.In(DType::kFloat32, {}), zp = b.In(DType::kInt8, {});
  REQUIRE(b.Op("QuantizeLinear", {x, s}).ok());
  CHECK(b.Out().dtype == DType::kUInt8);
  REQUIRE(b.Op("QuantizeLinear", {x, s, zp}).ok());
  CHECK(b.Out().dtype == DType::kInt8);
  REQUIRE(b.Op("QuantizeLinear", {x, s}, Int("output_dtype", 5)).ok());
  CHECK(b.Out().dtype == DType::kInt16);
  CHECK(ShapeToString(b.Out().shape) == "[2, 4]");
  Status st = b.Op("QuantizeLinear", {x, s, zp}, Int("output_dtype", 2));
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "node 'n' (QuantizeLinear): attribute 'output_dtype' (uint8) differs from y_zero_point's "
                        "dtype (int8)");
  st = b.Op("QuantizeLinear", {x, s}, Int("output_dtype", 6));
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(st.message().find("output dtype int32: Kiln quantizes to int8, uint8, int16 and uint16") != std::string::npos);
  st = b.Op("QuantizeLinear", {x, s}, Int("block_size", -1));
  CHECK(st.message().find("attribute 'block_size': expected >= 0, found -1") != std::string::npos);
}

TEST_CASE("QuantizeLinear / DequantizeLinear meta: per-axis and blocked parameter shapes") {
  QBuilder b;
  testing::In x = b.In(DType::kFloat32, {2, 4}), per_axis = b.In(DType::kFloat32, {4}), wrong = b.In(DType::kFloat32, {3});
  testing::In blocked = b.In(DType::kFloat32, {2, 2});
  CHECK(b.Op("QuantizeLinear", {x, per_axis}).ok());
  Status st = b.Op("QuantizeLinear", {x, wrong});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("y_scale dim 0 (x dim 1)") != std::string::npos);
  CHECK(b.Op("QuantizeLinear", {x, blocked}, Int("block_size", 2)).ok());
  st = b.Op("QuantizeLinear", {x, blocked}, Int("block_size", 3));  // ceil(4 / 3) = 2 blocks: fine
  CHECK(st.ok());
  st = b.Op("QuantizeLinear", {x, blocked}, Int("block_size", 1));
  CHECK(st.message().find("y_scale dim 1") != std::string::npos);
  st = b.Op("QuantizeLinear", {x, per_axis}, Int("axis", 2));
  CHECK(st.message().find("attribute 'axis'") != std::string::npos);
  testing::In q = b.In(DType::kUInt8, {2, 4}), s16 = b.In(DType::kFloat16, {});
  REQUIRE(b.Op("DequantizeLinear", {q, s16}).ok());
  CHECK(b.Out().dtype == DType::kFloat16);
  testing::In zp8 = b.In(DType::kInt8, {});
  st = b.Op("DequantizeLinear", {q, s16, zp8});
  CHECK(st.message().find("expected the same dtype") != std::string::npos);
}

TEST_CASE("Integer matmul and convolution meta") {
  QBuilder b;
  testing::In a = b.In(DType::kUInt8, {3, 2, 4}), w = b.In(DType::kInt8, {4, 5}), fa = b.In(DType::kFloat32, {2, 4});
  REQUIRE(b.Op("MatMulInteger", {a, w}).ok());
  CHECK(b.Out().dtype == DType::kInt32);
  CHECK(ShapeToString(b.Out().shape) == "[3, 2, 5]");
  Status st = b.Op("MatMulInteger", {fa, w});
  CHECK(st.message() == "node 'n' (MatMulInteger): input A: expected int8 or uint8, found float32");
  testing::In x = b.In(DType::kUInt8, {1, 2, 5, 5}), k = b.In(DType::kUInt8, {4, 1, 3, 3});
  AttrMap g = Int("group", 2);
  REQUIRE(b.Op("ConvInteger", {x, k}, g).ok());
  CHECK(ShapeToString(b.Out().shape) == "[1, 4, 3, 3]");
  testing::In zps = b.In(DType::kUInt8, {3});
  st = b.Op("ConvInteger", {x, k, testing::kAbsent, zps}, g);
  CHECK(st.message().find("w_zero_point dim 0 (output channels)") != std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
