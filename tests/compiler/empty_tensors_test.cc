// Tensors with a static 0 dim compile and run end to end: the canonical stage accepts
// them, the memory plan gives them no bytes, and fused programs and CPU kernels (with and
// without fusion) produce what ONNX's reference does.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"

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

namespace {

// x[N, 1, 4, 4] -> Conv (two 3x3 filters of ones, pads 1) -> Relu -> GlobalAveragePool ->
// Flatten -> Gemm (B [2, 3] of ones): y[N, 3].
onnx::ModelProto ConvHeadModel() {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "1", "4", "4"});
  AddFloatInit(g, "w", {2, 1, 3, 3}, std::vector<float>(18, 1.0f));
  AddFloatInit(g, "b", {2, 3}, std::vector<float>(6, 1.0f));
  AttrInts(AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Relu", {"c"}, {"r"}, "relu");
  AddNode(g, "GlobalAveragePool", {"r"}, {"p"}, "pool");
  AddNode(g, "Flatten", {"p"}, {"f"}, "flatten");
  AddNode(g, "Gemm", {"f", "b"}, {"y"}, "gemm");
  AddOutput(g, "y");
  return m;
}

// A batch of 0 and a batch of 2 of ones through one artifact compiled with --profile
// 'x:N=0..4'. Ones: each Conv output is the count of in-bounds taps (4 at the corners, 6 at the
// edges, 9 inside: 100 over 16 positions, a mean of 6.25), so each y element is 2 x 6.25.
void CheckEmptyBatch(kiln::Device device) {
  kiln::compiler::CompileOptions options = device == kiln::Device::kCuda ? kiln::compiler::CompileOptions{} : CpuOnly();
  kiln::compiler::CompileOptions profiled = WithProfiles({"x:N=0..4"});
  options.profiles = profiled.profiles;
  auto model = kiln::Model::Load(CompileModel(ConvHeadModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "N=0");
  auto ctx = kiln::ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const std::vector<float> ones(2 * 16, 1.0f);
  for (int64_t n : {0, 2, 0}) {
    INFO("N = " << n);
    kiln::TensorView in[] = {kiln::TensorView::Host(ones.data(), kiln::DType::kFloat32, {n, 1, 4, 4})};
    std::vector<float> y(6, -1.0f);  // never empty: a view's data is not null
    std::vector<kiln::TensorView> out = {kiln::TensorView::Host(y.data(), kiln::DType::kFloat32, {n, 3})};
    kiln::Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(ctx->Synchronize().ok());
    CHECK(ctx->stats().last_entry == (n == 0 ? 0 : 1));
    std::vector<float> want(6, -1.0f);
    std::fill(want.begin(), want.begin() + n * 3, 12.5f);
    CHECK(y == want);
  }
}

}  // namespace

TEST_CASE("empty tensors: a batch of 0 through Conv, pooling and Gemm from a profile's N=0 entry") {
  CheckEmptyBatch(kiln::Device::kCpu);
}

TEST_CASE("[gpu] empty tensors: a batch of 0 through cuDNN, generated kernels and cuBLASLt") {
  KILN_REQUIRE_GPU();
  CheckEmptyBatch(kiln::Device::kCuda);
}
