// GRU and RNN meta functions: Y's shape in both layouts, the weight shapes they check.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("GRU/RNN meta: Y shape per layout - W, R and B sized by the gate count") {
  AttrMap a;
  a.SetInt("hidden_size", 5);
  a.SetString("direction", "bidirectional");
  auto gru = InferOne("GRU", {{DType::kFloat32, {7, 2, 3}}, {DType::kFloat32, {2, 15, 3}},
                              {DType::kFloat32, {2, 15, 5}}, {DType::kFloat32, {2, 30}}}, a);
  REQUIRE(gru.ok());
  CHECK(ShapeToString(gru->shape) == "[7, 2, 2, 5]");
  a.SetInt("layout", 1);
  auto rnn = InferOne("RNN", {{DType::kFloat32, {2, 7, 3}}, {DType::kFloat32, {2, 5, 3}},
                              {DType::kFloat32, {2, 5, 5}}, {DType::kFloat32, {2, 10}}}, a);
  REQUIRE(rnn.ok());
  CHECK(ShapeToString(rnn->shape) == "[2, 7, 2, 5]");

  auto lstm_sized = InferOne("GRU", {{DType::kFloat32, {7, 2, 3}}, {DType::kFloat32, {2, 20, 3}},
                                     {DType::kFloat32, {2, 20, 5}}}, a);
  CHECK(lstm_sized.status().code() == StatusCode::kInvalidArgument);
  CHECK(lstm_sized.status().message() ==
        "node 'n' (GRU): input W: expected shape [2, 15, 3], found [2, 20, 3]");
  a.SetInt("layout", 0);
  auto bias = InferOne("RNN", {{DType::kFloat32, {7, 2, 3}}, {DType::kFloat32, {2, 5, 3}},
                               {DType::kFloat32, {2, 5, 5}}, {DType::kFloat32, {2, 20}}}, a);
  CHECK(bias.status().message() == "node 'n' (RNN): input B: expected shape [2, 10], found [2, 20]");
  a.SetString("direction", "up");
  auto dir = InferOne("GRU", {{DType::kFloat32, {7, 2, 3}}, {DType::kFloat32, {2, 15, 3}},
                              {DType::kFloat32, {2, 15, 5}}}, a);
  CHECK(dir.status().message() ==
        "node 'n' (GRU): direction: expected forward, reverse or bidirectional, found \"up\"");
}

}  // namespace
}  // namespace kiln::ir::testing
