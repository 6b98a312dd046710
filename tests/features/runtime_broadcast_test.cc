// Broadcasting decided at run time (ir::meta::BroadcastDims::kAtRunTime): two symbolic dims of an
// elementwise op either of which may be 1 at a call, as numpy allows. The entry accepts
// x[N, 2] + y[M, 2] for N == M, N == 1 or M == 1 and refuses the rest with the guard named, on
// the CPU backend (fused into a generated kernel or not) and the CUDA one (the emulated device in
// CI). Expected values are computed by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"

namespace kiln {
namespace {

// z = Relu(x[N, 2] + y[M, 2]) * w[K, 1, 1]: the Add broadcasts N against M, the Mul the result's
// max(N, M) against K's leading dim.
onnx::ModelProto AddReluMulModel() {
  auto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "2"});
  testing::AddInput(g, "y", {"M", "2"});
  testing::AddInput(g, "w", {"K", "1", "1"});
  testing::AddNode(g, "Add", {"x", "y"}, {"s"}, "add");
  testing::AddNode(g, "Relu", {"s"}, {"r"}, "relu");
  testing::AddNode(g, "Mul", {"r", "w"}, {"z"}, "mul");
  testing::AddOutput(g, "z");
  return m;
}

struct Out {
  std::vector<int64_t> dims;
  std::vector<float> z;
};

Result<Out> RunBroadcast(ExecutionContext& ctx, const std::vector<float>& x, const std::vector<float>& y,
                const std::vector<float>& w) {
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size() / 2), 2}),
                     TensorView::Host(y.data(), DType::kFloat32, {static_cast<int64_t>(y.size() / 2), 2}),
                     TensorView::Host(w.data(), DType::kFloat32, {static_cast<int64_t>(w.size()), 1, 1})};
  KILN_ASSIGN_OR_RETURN(const std::vector<io::HostTensor> out, testing::RunToHost(ctx, in));
  Out r;
  r.dims = out[0].dims;
  r.z = testing::Values<float>(out[0]);
  return r;
}

void CheckAdd(Device device, bool fuse) {
  compiler::CompileOptions options = testing::OptionsFor(device, fuse);
  auto model = Model::Load(testing::CompileModel(AddReluMulModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto ok = [&](const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w) {
    auto r = RunBroadcast(*ctx, x, y, w);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  };
  // M == 1: y's row is added to each of x's rows; K == 1 scales them all.
  Out r = ok({1, -2, 3, 4, -5, 6}, {10, 1}, {2});
  CHECK(r.dims == std::vector<int64_t>{1, 3, 2});
  CHECK(r.z == std::vector<float>{22, 0, 26, 10, 10, 14});
  // N == 1: x's row against each of y's; K == 2 broadcasts over max(N, M) = 2 rows.
  r = ok({1, -2}, {1, 1, -3, 5}, {1, -1});
  CHECK(r.dims == std::vector<int64_t>{2, 2, 2});
  CHECK(r.z == std::vector<float>{2, 0, 0, 3, -2, 0, 0, -3});
  // N == M: row by row, as before.
  r = ok({1, 2, 3, 4}, {-1, -1, 1, 1}, {3});
  CHECK(r.z == std::vector<float>{0, 3, 12, 15});
  // N == M == 1.
  r = ok({1, 2}, {3, -4}, {1});
  CHECK(r.dims == std::vector<int64_t>{1, 1, 2});
  CHECK(r.z == std::vector<float>{4, 0});
  // 2 rows against 3: numpy refuses, and so does the prologue, naming the guard and the dims.
  auto bad = RunBroadcast(*ctx, {1, 2, 3, 4}, {1, 2, 3, 4, 5, 6}, {1});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  const std::string msg = bad.status().message();
  CHECK_MESSAGE(msg.find("guard (0 < (((N == M)+(N == 1))+(M == 1))) from node 'add' (Add) does not hold for N = 2 "
                         "(input 'x' dim 0), M = 3 (input 'y' dim 0)") != std::string::npos,
                msg);
}

}  // namespace

TEST_CASE("run-time broadcasting: either symbolic dim may be 1 at a call, CPU backend, fused and not") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    CheckAdd(Device::kCpu, fuse);
  }
}

TEST_CASE("[gpu] run-time broadcasting on the CUDA backend: the generated kernel reads a dim of 1 at index 0") {
  KILN_REQUIRE_GPU();
  CheckAdd(Device::kCuda, true);
}

TEST_CASE("run-time broadcasting: the output dim is the larger, and a constant side needs no max") {
  auto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "c", {"N"}, onnx::TensorProto::BOOL);
  testing::AddInput(g, "a", {"M"});
  testing::AddFloatInit(g, "b", {3}, {7, 8, 9});
  testing::AddNode(g, "Where", {"c", "a", "b"}, {"y"}, "where");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->outputs().size() == 1);
  REQUIRE(model->outputs()[0].shape.size() == 1);
  CHECK(model->outputs()[0].shape[0].value == 3);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  // c of 1 and a of 3, then c of 3 and a of 1: Where reads each at index 0 along its 1.
  const bool c1[1] = {true}, c3[3] = {true, false, true};
  const float a3[3] = {1, 2, 3}, a1[1] = {-1};
  TensorView in1[] = {TensorView::Host(c1, DType::kBool, {1}), TensorView::Host(a3, DType::kFloat32, {3})};
  CHECK(testing::RunFloat(testing::CompileModel(m), in1)[0] == std::vector<float>{1, 2, 3});
  TensorView in2[] = {TensorView::Host(c3, DType::kBool, {3}), TensorView::Host(a1, DType::kFloat32, {1})};
  std::vector<float> y;
  REQUIRE(testing::RunFirstFloat(*ctx, in2, &y).ok());
  CHECK(y == std::vector<float>{-1, 8, -1});
  // A length that is neither 1 nor 3 fails the guard.
  const float a2[2] = {1, 2};
  TensorView in3[] = {TensorView::Host(c1, DType::kBool, {1}), TensorView::Host(a2, DType::kFloat32, {2})};
  Status st = testing::RunFirstFloat(*ctx, in3, &y);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("from node 'where' (Where) does not hold for N = 1 (input 'c' dim 0), M = 2") !=
                    std::string::npos,
                st.message());
}


TEST_CASE("run-time broadcasting: a dim from an input's values (TopK's K) against a symbol") {
  // v = TopK(x[N], K)[0] (K an int64[1] input, a value symbol) + y[M].
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddInput(g, "k", {"1"}, onnx::TensorProto::INT64);
  testing::AddInput(g, "y", {"M"});
  testing::AddNode(g, "TopK", {"x", "k"}, {"top", "idx"}, "topk");
  testing::AddNode(g, "Add", {"top", "y"}, {"v"}, "add");
  testing::AddOutput(g, "v");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[3] = {5, 1, 3}, y3[3] = {10, 20, 30}, y1[1] = {1};
  auto run = [&](int64_t k, const float* y, int64_t m_len, std::vector<float>* v) {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {3}), TensorView::Host(&k, DType::kInt64, {1}),
                       TensorView::Host(y, DType::kFloat32, {m_len})};
    return testing::RunFirstFloat(*ctx, in, v);
  };
  std::vector<float> v;
  REQUIRE(run(1, y3, 3, &v).ok());  // K = 1 against M = 3
  CHECK(v == std::vector<float>{15, 25, 35});
  REQUIRE(run(3, y1, 1, &v).ok());  // K = 3 against M = 1
  CHECK(v == std::vector<float>{6, 4, 2});
  REQUIRE(run(3, y3, 3, &v).ok());
  CHECK(v == std::vector<float>{15, 23, 31});
  CHECK(run(2, y3, 3, &v).code() == StatusCode::kInvalidArgument);  // 2 against 3
}

TEST_CASE("run-time broadcasting: PRelu's slope is X's dim or 1 at each call (unidirectionally)") {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"2", "N"});
  testing::AddInput(g, "slope", {"M"});
  testing::AddNode(g, "PRelu", {"x", "slope"}, {"y"}, "prelu");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[4] = {-1, 2, -3, 4}, one[1] = {0.5f}, two[2] = {0.1f, 10}, three[3] = {1, 1, 1};
  std::vector<float> y;
  TensorView shared[] = {TensorView::Host(x, DType::kFloat32, {2, 2}), TensorView::Host(one, DType::kFloat32, {1})};
  REQUIRE(testing::RunFirstFloat(*ctx, shared, &y).ok());
  CHECK(y == std::vector<float>{-0.5f, 2, -1.5f, 4});
  TensorView per_column[] = {TensorView::Host(x, DType::kFloat32, {2, 2}), TensorView::Host(two, DType::kFloat32, {2})};
  REQUIRE(testing::RunFirstFloat(*ctx, per_column, &y).ok());
  CHECK(y == std::vector<float>{-0.1f, 2, -0.3f, 4});
  // A slope longer than X's dim does not broadcast to X (the output keeps X's shape).
  TensorView longer[] = {TensorView::Host(x, DType::kFloat32, {2, 2}), TensorView::Host(three, DType::kFloat32, {3})};
  CHECK(testing::RunFirstFloat(*ctx, longer, &y).code() == StatusCode::kInvalidArgument);
}

}  // namespace kiln
