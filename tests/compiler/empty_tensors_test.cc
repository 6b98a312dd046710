// Tensors with a static 0 dim compile and run end to end: the canonical stage accepts
// them, the memory plan gives them no bytes, and fused programs and CPU kernels (with and
// without fusion) produce what ONNX's reference does.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

kiln::compiler::CompileOptions Fused(bool fuse) {
  auto o = CpuOnly();
  o.fuse = fuse;
  return o;
}

// x[2, 0, 3] -> ReduceSum/ReduceProd/ReduceMax over axis 1 (keepdims) and Relu(x).
onnx::ModelProto ReduceEmptyModel() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "0", "3"});
  AddInt64Init(g, "axes", {1}, {1});
  AddNode(g, "ReduceSum", {"x", "axes"}, {"sum"});
  AddNode(g, "ReduceProd", {"x", "axes"}, {"prod"});
  AddNode(g, "ReduceMax", {"x", "axes"}, {"max"});
  AddNode(g, "Relu", {"x"}, {"relu"});
  for (const char* o : {"sum", "prod", "max", "relu"}) AddOutput(g, o);
  return m;
}

}  // namespace

TEST_CASE("empty tensors: reductions over an empty axis give their identity, fused or not") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    auto bytes = CompileModel(ReduceEmptyModel(), Fused(fuse));
    float none = 0;
    kiln::TensorView in[] = {kiln::TensorView::Host(&none, kiln::DType::kFloat32, {2, 0, 3})};
    auto out = RunFloat(bytes, in);
    REQUIRE(out.size() == 4);
    CHECK(out[0] == std::vector<float>(6, 0.0f));
    CHECK(out[1] == std::vector<float>(6, 1.0f));
    CHECK(out[2] == std::vector<float>(6, -std::numeric_limits<float>::infinity()));
    CHECK(out[3].empty());
  }
}

TEST_CASE("empty tensors: a Slice past the end, a zero-sized Split part and a Concat of it") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "2"});
  AddInt64Init(g, "starts", {1}, {1000});
  AddInt64Init(g, "ends", {1}, {1001});
  AddInt64Init(g, "axes", {1}, {0});
  AddInt64Init(g, "split", {3}, {0, 4, 0});
  AddNode(g, "Slice", {"x", "starts", "ends", "axes"}, {"past"});
  AttrInt(AddNode(g, "Split", {"x", "split"}, {"s0", "s1", "s2"}), "axis", 0);
  AttrInt(AddNode(g, "Concat", {"s0", "past", "x", "s2"}, {"cat"}), "axis", 0);
  AddNode(g, "Neg", {"cat"}, {"y"});
  for (const char* o : {"past", "s0", "y"}) AddOutput(g, o);
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    auto bytes = CompileModel(m, Fused(fuse));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {4, 2})};
    auto model = kiln::Model::Load(bytes);
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {});
    REQUIRE(ctx.ok());
    std::vector<kiln::TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    REQUIRE(out.size() == 3);
    CHECK(out[0].rank == 2);
    CHECK(out[0].dims[0] == 0);
    CHECK(out[0].num_elements() == 0);
    CHECK(out[1].num_elements() == 0);
    auto y = FloatCopies(std::span(out).subspan(2));
    CHECK(y[0] == (std::vector<float>{-1, -2, -3, -4, -5, -6, -7, -8}));
  }
}

TEST_CASE("empty tensors: MatMul with an inner dim of 0 gives zeros") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "a", {"2", "0"});
  AddInput(g, "b", {"0", "3"});
  AddNode(g, "MatMul", {"a", "b"}, {"y"});
  AddOutput(g, "y");
  float none = 0;
  kiln::TensorView in[] = {kiln::TensorView::Host(&none, kiln::DType::kFloat32, {2, 0}),
                           kiln::TensorView::Host(&none, kiln::DType::kFloat32, {0, 3})};
  auto out = RunFloat(CompileModel(m), in);
  CHECK(out[0] == std::vector<float>(6, 0.0f));
}
