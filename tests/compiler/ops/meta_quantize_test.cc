// Meta functions of the quantization ops: output dtypes, shapes and attribute errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"

namespace kiln::ir {
namespace {

struct QBuilder {
  Trace t;
  ValueId In(DType dt, std::vector<int64_t> dims) {
    Value v;
    v.name = "in" + std::to_string(t.values.size());
    v.dtype = dt;
    for (int64_t d : dims) v.shape.push_back(Sym(d));
    ValueId id = t.AddValue(std::move(v));
    t.inputs.push_back(id);
    return id;
  }
  Status Op(const std::string& op, std::vector<ValueId> ins, AttrMap attrs = {}, int nout = 1) {
    Node n;
    n.op = op;
    n.name = "n";
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    for (int i = 0; i < nout; ++i) n.outputs.push_back(t.AddValue(Value{}));
    t.body.nodes.push_back(std::move(n));
    return InferNode(t, t.body.nodes.back());
  }
  const Value& Out(int i = 0) const { return t.value(t.body.nodes.back().outputs[i]); }
};

AttrMap Int(const char* name, int64_t v) {
  AttrMap a;
  a.SetInt(name, v);
  return a;
}

TEST_CASE("QuantizeLinear meta: output dtype from zero point, output_dtype or uint8") {
  QBuilder b;
  ValueId x = b.In(DType::kFloat32, {2, 4}), s = b.In(DType::kFloat32, {}), zp = b.In(DType::kInt8, {});
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
  ValueId x = b.In(DType::kFloat32, {2, 4}), per_axis = b.In(DType::kFloat32, {4}), wrong = b.In(DType::kFloat32, {3});
  ValueId blocked = b.In(DType::kFloat32, {2, 2});
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
  ValueId q = b.In(DType::kUInt8, {2, 4}), s16 = b.In(DType::kFloat16, {});
  REQUIRE(b.Op("DequantizeLinear", {q, s16}).ok());
  CHECK(b.Out().dtype == DType::kFloat16);
  ValueId zp8 = b.In(DType::kInt8, {});
  st = b.Op("DequantizeLinear", {q, s16, zp8});
  CHECK(st.message().find("expected the same dtype") != std::string::npos);
}

TEST_CASE("Integer matmul and convolution meta") {
  QBuilder b;
  ValueId a = b.In(DType::kUInt8, {3, 2, 4}), w = b.In(DType::kInt8, {4, 5}), fa = b.In(DType::kFloat32, {2, 4});
  REQUIRE(b.Op("MatMulInteger", {a, w}).ok());
  CHECK(b.Out().dtype == DType::kInt32);
  CHECK(ShapeToString(b.Out().shape) == "[3, 2, 5]");
  Status st = b.Op("MatMulInteger", {fa, w});
  CHECK(st.message() == "node 'n' (MatMulInteger): input A: expected int8 or uint8, found float32");
  ValueId x = b.In(DType::kUInt8, {1, 2, 5, 5}), k = b.In(DType::kUInt8, {4, 1, 3, 3});
  AttrMap g = Int("group", 2);
  REQUIRE(b.Op("ConvInteger", {x, k}, g).ok());
  CHECK(ShapeToString(b.Out().shape) == "[1, 4, 3, 3]");
  ValueId zps = b.In(DType::kUInt8, {3});
  st = b.Op("ConvInteger", {x, k, kNoValue, zps}, g);
  CHECK(st.message().find("w_zero_point dim 0 (output channels)") != std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
