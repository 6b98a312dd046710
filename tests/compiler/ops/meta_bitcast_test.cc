// BitCast meta function: dtype `to` of the same width, same shape.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

AttrMap To(DType t) {
  AttrMap a;
  a.SetInt("to", static_cast<int64_t>(t));
  return a;
}

TEST_CASE("BitCast meta: same width only, bool only from bool") {
  auto ok = InferOne("BitCast", {{DType::kFloat32, {2, 3}}}, To(DType::kInt32));
  REQUIRE(ok.ok());
  CHECK(ok->dtype == DType::kInt32);
  CHECK(ShapeToString(ok->shape) == "[2, 3]");
  CHECK(InferOne("BitCast", {{DType::kBool, {4}}}, To(DType::kUInt8)).ok());
  auto wide = InferOne("BitCast", {{DType::kFloat32, {2}}}, To(DType::kInt64));
  CHECK(wide.status().code() == StatusCode::kInvalidArgument);
  CHECK(wide.status().message() == "node 'n' (BitCast): attribute 'to': int64 is 64 bits wide, the input float32 "
                                   "32 (BitCast keeps the width)");
  auto to_bool = InferOne("BitCast", {{DType::kUInt8, {2}}}, To(DType::kBool));
  CHECK(to_bool.status().code() == StatusCode::kUnimplemented);
  CHECK(to_bool.status().message().find("bool from uint8 is not supported") != std::string::npos);
  auto missing = InferOne("BitCast", {{DType::kFloat32, {2}}});
  CHECK(missing.status().message() == "node 'n' (BitCast): attribute 'to': expected an int (a dtype), found it missing");
  AttrMap int2;
  int2.SetInt("to", 26);  // int2 (opset 25): not a Kiln dtype
  CHECK(InferOne("BitCast", {{DType::kFloat32, {2}}}, int2).status().code() == StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::ir::testing
