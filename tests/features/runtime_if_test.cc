// A run-time If (passes/control_flow/runtime_if.cc): an If whose condition is tensor data has both
// branches compiled, each instruction under its predicate (schema/kiln.fbs Instruction.when),
// and its outputs merged by Where. Each call runs the branch its condition picks, on the CPU
// backend (fused into generated kernels or not) and the CUDA one (the emulated device in CI).
// Expected values are computed by hand; the refusals and the verifier's checks are tested
// with their messages.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/features/control_flow_models.h"
#include "tests/gpu_test_util.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

std::vector<float> Run(ExecutionContext& ctx, const std::vector<float>& x) {
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size() / 2), 2})};
  std::vector<float> z(x.size());
  std::vector<TensorView> out = {TensorView::Host(z.data(), DType::kFloat32, in[0].dims, 2)};
  Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(ctx.Synchronize().ok());
  return z;
}

void CheckBranches(Device device, bool fuse) {
  compiler::CompileOptions options = testing::OptionsFor(device, fuse);
  auto model = Model::Load(testing::CompileModel(testing::BranchModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kPredicatesFormatVersion);
  // The plan's trace marks each branch's instructions with their conditions, outer first.
  std::string plan;
  for (const std::string& t : model->entries()[0].stage_traces)
    if (t.starts_with("# stage: plan\n")) plan = t;
  CHECK_MESSAGE(plan.find("[if c] ") != std::string::npos, plan);
  CHECK_MESSAGE(plan.find("[if not c] [if d] ") != std::string::npos, plan);
  CHECK_MESSAGE(plan.find("[if not c] [if not d] ") != std::string::npos, plan);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  // Each branch in turn on one context, and the first again: sum 6 > 0 takes Relu(x) * 2; sum
  // -3 with max -1 takes x * x; sum -1 with max 0.5 takes 1 - x.
  CHECK(Run(*ctx, {1, -2, 3, 4}) == std::vector<float>{2.5f, 0.5f, 6.5f, 8.5f});
  CHECK(Run(*ctx, {-1, -2}) == std::vector<float>{1.5f, 4.5f});
  CHECK(Run(*ctx, {0.5f, -1.5f}) == std::vector<float>{1.0f, 3.0f});
  CHECK(Run(*ctx, {2, -1}) == std::vector<float>{4.5f, 0.5f});
  CHECK(ctx->stats().graph_hits == 0);
  if (device != Device::kCuda) return;
  // With CUDA graphs (on the context's own stream), the segments of device work between the
  // conditions the host reads are captured at their second run and replayed at their third: as
  // many replays as captures, whichever branch a shape takes, and the same results.
  ContextOptions graphs{device};
  graphs.cuda.graphs = graphs.cuda.own_stream = true;
  auto captured = ExecutionContext::Create(*model, graphs);
  REQUIRE(captured.ok());
  for (int run = 0; run < 3; ++run) {
    CHECK(Run(*captured, {1, -2, 3, 4}) == std::vector<float>{2.5f, 0.5f, 6.5f, 8.5f});
    CHECK(Run(*captured, {-1, -2}) == std::vector<float>{1.5f, 4.5f});
  }
  CHECK(captured->stats().graph_misses > 0);
  CHECK(captured->stats().graph_hits == captured->stats().graph_misses);
}

using testing::CompileStatus;

// x float32[N, 2] and w float32[M, 2]: If(ReduceSum(x) > 0) with `then_g` and `else_g` made
// by the caller; y is its output.
onnx::ModelProto IfModel(onnx::GraphProto** then_g, onnx::GraphProto** else_g) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "2"});
  testing::AddInput(g, "w", {"M", "2"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* node = testing::AddNode(g, "If", {"c"}, {"y"}, "branch");
  *then_g = testing::AddBranch(node, "then_branch");
  *else_g = testing::AddBranch(node, "else_branch");
  testing::AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("run-time If: each call runs the branch its condition picks, nested, on the CPU backend") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    CheckBranches(Device::kCpu, fuse);
  }
}

TEST_CASE("[gpu] run-time If on the CUDA backend: the condition is read on the host, each segment a CUDA graph") {
  KILN_REQUIRE_GPU();
  CheckBranches(Device::kCuda, true);
}

TEST_CASE("run-time If: branches whose outputs differ in rank or in two dims are refused with the reason") {
  onnx::GraphProto *then_g = nullptr, *else_g = nullptr;
  auto rank = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Identity", {"x"}, {"t"}, "keep");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "ReduceSum", {"w"}, {"e"}, "sum_w");
  testing::AttrInt(else_g->mutable_node(0), "keepdims", 0);
  testing::AddOutput(else_g, "e");
  Status st = CompileStatus(rank);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(st.message().find("node 'branch' (If): output 0 has shape [N, 2] in then_branch and [] in "
                                  "else_branch; a run-time If carries outputs whose shapes differ in one dim at most") !=
                    std::string::npos,
                st.message());

  auto two_dims = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Identity", {"x"}, {"t"}, "keep");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Transpose", {"w"}, {"e"}, "flip");
  testing::AddOutput(else_g, "e");
  st = CompileStatus(two_dims);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(st.message().find("output 0 has shape [N, 2] in then_branch and [2, M] in else_branch; a run-time If "
                                  "carries outputs whose shapes differ in one dim at most; model output 'y' reads it") !=
                    std::string::npos,
                st.message());

  // The same output unread does not stop the compile: y is the other output, one shape.
  auto unread = IfModel(&then_g, &else_g);
  auto* if_node = unread.mutable_graph()->mutable_node(2);
  REQUIRE(if_node->op_type() == "If");
  if_node->clear_output();
  if_node->add_output("y");
  if_node->add_output("unread");
  testing::AddNode(then_g, "Identity", {"x"}, {"t"}, "keep");
  testing::AddNode(then_g, "Neg", {"x"}, {"t2"}, "neg");
  testing::AddOutput(then_g, "t2");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Transpose", {"w"}, {"e"}, "flip");
  testing::AddNode(else_g, "Abs", {"x"}, {"e2"}, "abs");
  testing::AddOutput(else_g, "e2");
  testing::AddOutput(else_g, "e");
  auto model = Model::Load(testing::CompileModel(unread, testing::CpuOnly()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> w = {1, 2};
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x = {3 * sign, -1 * sign};
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, 2}), TensorView::Host(w.data(), DType::kFloat32, {1, 2})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    const float* y = static_cast<const float*>(out[0].data);
    // Sum 2 > 0: -x; sum -2: |x|.
    CHECK(std::vector<float>(y, y + 2) == (sign > 0 ? std::vector<float>{-3, 1} : std::vector<float>{3, 1}));
  }
}

namespace {

// x float32[N, 4]: y = If(ReduceSum(x) > 0) then x, else x[:, 0:2] (then [N, 4], else [N, 2]);
// z = y * 2. y's dim 1 is a run-time dim, the size of the branch that ran.
onnx::ModelProto WidthModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "4"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* node = testing::AddNode(g, "If", {"c"}, {"y"}, "branch");
  auto* then_g = testing::AddBranch(node, "then_branch");
  testing::AddNode(then_g, "Identity", {"x"}, {"t"}, "keep");
  testing::AddOutput(then_g, "t");
  auto* else_g = testing::AddBranch(node, "else_branch");
  testing::AddInt64Init(else_g, "starts", {1}, {0});
  testing::AddInt64Init(else_g, "ends", {1}, {2});
  testing::AddInt64Init(else_g, "axes", {1}, {1});
  testing::AddNode(else_g, "Slice", {"x", "starts", "ends", "axes"}, {"e"}, "first_two");
  testing::AddOutput(else_g, "e");
  testing::AddNode(g, "Mul", {"y", "two"}, {"z"}, "double");
  testing::AddOutput(g, "y");
  testing::AddOutput(g, "z");
  return m;
}

// Runs `x` (rows of 4) and checks y's and z's shapes [rows, width] and values.
void CheckWidth(ExecutionContext& ctx, const std::vector<float>& x, int64_t width, const std::vector<float>& y) {
  const int64_t rows = static_cast<int64_t>(x.size() / 4);
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {rows, 4})};
  auto out = testing::RunToHost(ctx, in);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  REQUIRE(out->size() == 2);
  for (const io::HostTensor& v : *out) CHECK(v.dims == std::vector<int64_t>{rows, width});
  CHECK(testing::Values<float>((*out)[0]) == y);
  std::vector<float> z = y;
  for (float& v : z) v *= 2;
  CHECK(testing::Values<float>((*out)[1]) == z);
}

void CheckWidths(Device device, bool fuse) {
  compiler::CompileOptions options = testing::OptionsFor(device, fuse);
  auto model = Model::Load(testing::CompileModel(WidthModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const EntryInfo& entry = model->entries()[0];
  REQUIRE(entry.runtime_dims.size() == 1);
  CHECK(entry.runtime_dims[0].find("y.count <= 4") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  // Sum 4 > 0 keeps x; sum -10 takes the first two columns; then the first again.
  CheckWidth(*ctx, {1, -2, 3, 2}, 4, {1, -2, 3, 2});
  CheckWidth(*ctx, {-1, -2, -3, -4, 5, -6, 7, -6}, 2, {-1, -2, 5, -6});
  CheckWidth(*ctx, {0, 1, 0, 1}, 4, {0, 1, 0, 1});
}

}  // namespace

TEST_CASE("run-time If: an output whose shapes differ in one dim gets the size of the branch that ran") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    CheckWidths(Device::kCpu, fuse);
  }
  // Two symbols: x[N, 2] or w[M, 2], so dim 0 is N or M.
  onnx::GraphProto *then_g = nullptr, *else_g = nullptr;
  auto m = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Identity", {"x"}, {"t"}, "keep");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Identity", {"w"}, {"e"}, "other");
  testing::AddOutput(else_g, "e");
  auto model = Model::Load(testing::CompileModel(m, testing::CpuOnly()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->entries()[0].runtime_dims.at(0).find("y.count <= max(N, M)") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, 2}, w = {-1, -2, -3, -4, -5, -6};
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> xs = x;
    for (float& v : xs) v *= sign;
    TensorView in[] = {TensorView::Host(xs.data(), DType::kFloat32, {1, 2}),
                       TensorView::Host(w.data(), DType::kFloat32, {3, 2})};
    std::vector<TensorView> out;
    Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    const std::vector<float>& want = sign > 0 ? xs : w;
    CHECK(out[0].dims[0] == static_cast<int64_t>(want.size() / 2));
    CHECK(std::vector<float>(static_cast<const float*>(out[0].data),
                             static_cast<const float*>(out[0].data) + want.size()) == want);
  }
}

TEST_CASE("[gpu] run-time If on the CUDA backend: an output whose shapes differ in one dim gets the branch's size") {
  KILN_REQUIRE_GPU();
  CheckWidths(Device::kCuda, true);
}

namespace {

// x float32[N]: If(ReduceSum(x) > 0) then NonZero(x > 0) + NonZero(x < 0) (each [1, count],
// broadcast: a guard on the two counts), else Unsqueeze(ArgMax(x)) ([1, 1]).
onnx::ModelProto CountsModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* node = testing::AddNode(g, "If", {"c"}, {"y"}, "branch");
  auto* then_g = testing::AddBranch(node, "then_branch");
  testing::AddNode(then_g, "Greater", {"x", "zero"}, {"gt"}, "above");
  testing::AddNode(then_g, "Less", {"x", "zero"}, {"lt"}, "below");
  testing::AddNode(then_g, "NonZero", {"gt"}, {"p"}, "positives");
  testing::AddNode(then_g, "NonZero", {"lt"}, {"q"}, "negatives");
  testing::AddNode(then_g, "Add", {"p", "q"}, {"t"}, "add");
  testing::AddOutput(then_g, "t");
  auto* else_g = testing::AddBranch(node, "else_branch");
  testing::AddInt64Init(else_g, "axes", {1}, {0});
  testing::AttrInt(testing::AddNode(else_g, "ArgMax", {"x"}, {"am"}, "argmax"), "keepdims", 1);
  testing::AddNode(else_g, "Unsqueeze", {"am", "axes"}, {"e"}, "row");
  testing::AddOutput(else_g, "e");
  testing::AddOutput(g, "y");
  return m;
}

// y for `x`, or the Run's error.
Result<std::vector<int64_t>> RunCounts(ExecutionContext& ctx, const std::vector<float>& x) {
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
  KILN_ASSIGN_OR_RETURN(const std::vector<io::HostTensor> out, testing::RunToHost(ctx, in));
  REQUIRE(out[0].dims.size() == 2);
  return testing::Values<int64_t>(out[0]);
}

void CheckCounts(Device device) {
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(CountsModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  using V = std::vector<int64_t>;
  // Positives at 0 and 2, negatives at 1 and 3: [0, 2] + [1, 3].
  CHECK(RunCounts(*ctx, {3, -1, 2, -2}).value() == V{1, 5});
  // The else branch: ArgMax. Its counts would be 1 and 4, which do not broadcast, but they are
  // the then branch's, which did not run, so their guard is not checked.
  CHECK(RunCounts(*ctx, {-3, -1, 2, -2, -5}).value() == V{2});
  // Counts 2 and 1 broadcast: [0, 2] + [1].
  CHECK(RunCounts(*ctx, {3, -1, 2}).value() == V{1, 3});
  // Counts 3 and 2 do not: the guard fails, naming the counts.
  auto bad = RunCounts(*ctx, {3, -1, -1, 2, 1});
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(bad.status().message().find("p.count = 3, q.count = 2") != std::string::npos, bad.status().ToString());
  CHECK(RunCounts(*ctx, {-3, -1, 2, -2, -5}).value() == V{2});
}

}  // namespace

TEST_CASE("run-time If: a branch sets run-time dims, and the guard that reads them holds only when it runs") {
  CheckCounts(Device::kCpu);
}

TEST_CASE("[gpu] run-time If on the CUDA backend: a branch sets run-time dims, and their guard holds only when it runs") {
  KILN_REQUIRE_GPU();
  CheckCounts(Device::kCuda);
}

TEST_CASE("run-time If: a guard only one branch needs is checked when that branch runs") {
  // then: x + w, which needs N and M to broadcast; else: -x.
  onnx::GraphProto *then_g = nullptr, *else_g = nullptr;
  auto m = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Add", {"x", "w"}, {"t"}, "add");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Neg", {"x"}, {"e"}, "neg");
  testing::AddOutput(else_g, "e");
  auto model = Model::Load(testing::CompileModel(m, testing::CpuOnly()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> w = {10, 20, 30, 40, 50, 60};
  auto run = [&](const std::vector<float>& x, std::vector<TensorView>& out) {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size() / 2), 2}),
                       TensorView::Host(w.data(), DType::kFloat32, {3, 2})};
    return ctx->Run(in, out);
  };
  auto values = [](const TensorView& v) {
    const float* p = static_cast<const float*>(v.data);
    return std::vector<float>(p, p + v.num_elements());
  };
  std::vector<TensorView> out;
  // N = 1 broadcasts against M = 3: the then branch.
  REQUIRE(run({1, 2}, out).ok());
  CHECK(values(out[0]) == std::vector<float>{11, 22, 31, 42, 51, 62});
  // N = 2 does not, and the then branch fails its guard, naming it.
  Status st = run({1, 2, 3, 4}, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("from node 'add' (Add), in then_branch, checked when it runs") != std::string::npos,
                st.ToString());
  // The else branch needs no guard: N = 2 runs. (Before, the prologue refused every N = 2 call.)
  REQUIRE(run({-1, 2, 3, -5}, out).ok());
  CHECK(values(out[0]) == std::vector<float>{1, -2, -3, 5});
  REQUIRE(run({1, 2}, out).ok());
  CHECK(values(out[0]) == std::vector<float>{11, 22, 31, 42, 51, 62});

  // Where a profile's ranges prove the guard (M = 1 broadcasts against any N), the guard and the
  // instruction that records the branch go.
  compiler::CompileOptions proven = testing::CpuOnly();
  proven.profiles = {compiler::ParseProfile("x:N=1..8;w:M=1").value()};
  auto pruned = Model::Load(testing::CompileModel(m, proven));
  REQUIRE_MESSAGE(pruned.ok(), pruned.status().ToString());
  for (const InstructionInfo& ins : pruned->entries()[0].instructions) CHECK_MESSAGE(ins.op != "NonZero", ins.name);
  CHECK(pruned->entries()[0].runtime_dims.empty());  // x + w is [N, 2] as -x is: Where, no kiln.IfOutput
}

namespace {

// x float32[1, 1, N]: If(ReduceSum(x) > 0) then ReduceSum(Conv(x, w)) with a 5-wide w of ones
// (its output [1, 1, N - 4]), else ReduceMean(x).
void CheckConvBranch(Device device) {
  auto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"1", "1", "N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "w", {1, 1, 5}, {1, 1, 1, 1, 1});
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* node = testing::AddNode(g, "If", {"c"}, {"y"}, "branch");
  auto* then_g = testing::AddBranch(node, "then_branch");
  testing::AddNode(then_g, "Conv", {"x", "w"}, {"conv"}, "conv");
  testing::AttrInt(testing::AddNode(then_g, "ReduceSum", {"conv"}, {"t"}, "total"), "keepdims", 0);
  testing::AddOutput(then_g, "t");
  auto* else_g = testing::AddBranch(node, "else_branch");
  testing::AttrInt(testing::AddNode(else_g, "ReduceMean", {"x"}, {"e"}, "mean"), "keepdims", 0);
  testing::AddOutput(else_g, "e");
  testing::AddOutput(g, "y");
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(m, options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto run = [&](const std::vector<float>& x) -> Result<float> {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, 1, static_cast<int64_t>(x.size())})};
    float y = 0;
    std::vector<TensorView> out = {TensorView::Host(&y, DType::kFloat32, {})};
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    KILN_RETURN_IF_ERROR(ctx->Synchronize());
    return y;
  };
  // N = 3 with the else branch: the Conv's extent would be -1, and its branch does not run.
  CHECK(run({-1, -2, -3}).value() == -2.0f);
  // N = 6 with the then branch: windows 0..4 and 1..5.
  CHECK(run({0, 1, 2, 3, 4, 5}).value() == 10.0f + 15.0f);
  // N = 3 with the then branch fails its guard, naming it.
  auto bad = run({1, 1, 1});
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(bad.status().message().find("whose output 'conv' dim 2 must be >= 1, in then_branch, checked when it runs") !=
                    std::string::npos,
                bad.status().ToString());
  CHECK(run({-1, -2, -3}).value() == -2.0f);
}

}  // namespace

TEST_CASE("run-time If: a branch that cannot run for a call's shapes (a negative Conv extent) lets the other run") {
  CheckConvBranch(Device::kCpu);
}

TEST_CASE("[gpu] run-time If on the CUDA backend: a branch that cannot run for a call's shapes lets the other run") {
  KILN_REQUIRE_GPU();
  CheckConvBranch(Device::kCuda);
}

TEST_CASE("run-time If: a guard both branches need is checked once, and an If on shapes inside a branch splits entries") {
  // then x + w, else x - w: both need N and M to broadcast; the prologue checks it for every call.
  onnx::GraphProto *then_g = nullptr, *else_g = nullptr;
  auto both = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Add", {"x", "w"}, {"t"}, "add");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Sub", {"x", "w"}, {"e"}, "sub");
  testing::AddOutput(else_g, "e");
  auto model = Model::Load(testing::CompileModel(both));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[2] = {1, 2}, neg[2] = {-1, -2}, w[4] = {10, 20, 30, 40};
  std::vector<float> y;
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 2}), TensorView::Host(w, DType::kFloat32, {2, 2})};
  REQUIRE(testing::RunFirstFloat(*ctx, in, &y).ok());
  CHECK(y == std::vector<float>{11, 22, 31, 42});
  TensorView in_neg[] = {TensorView::Host(neg, DType::kFloat32, {1, 2}), TensorView::Host(w, DType::kFloat32, {2, 2})};
  REQUIRE(testing::RunFirstFloat(*ctx, in_neg, &y).ok());
  CHECK(y == std::vector<float>{-11, -22, -31, -42});
  // x of 2 rows against w of 1 broadcasts; against 3 rows it fails the guard, before either branch.
  TensorView one_w[] = {TensorView::Host(w, DType::kFloat32, {2, 2}), TensorView::Host(w, DType::kFloat32, {1, 2})};
  REQUIRE(testing::RunFirstFloat(*ctx, one_w, &y).ok());
  CHECK(y == std::vector<float>{20, 40, 40, 60});
  std::vector<float> big(6);
  TensorView three_w[] = {TensorView::Host(w, DType::kFloat32, {2, 2}), TensorView::Host(big.data(), DType::kFloat32, {3, 2})};
  CHECK(testing::RunFirstFloat(*ctx, three_w, &y).code() == StatusCode::kInvalidArgument);

  // then: If(N == 2) on x's shape (Neg, else Abs); else Abs. The shape If splits the entry in
  // two, each assuming its outcome: the assumption is the entry's, not the run-time branch's.
  auto nested = IfModel(&then_g, &else_g);
  testing::AddNode(then_g, "Shape", {"x"}, {"shape"}, "shape");
  testing::AddInt64Init(then_g, "zero_index", {}, {0});
  testing::AddInt64Init(then_g, "two", {}, {2});
  testing::AddNode(then_g, "Gather", {"shape", "zero_index"}, {"n"}, "rows");
  testing::AddNode(then_g, "Equal", {"n", "two"}, {"is_two"}, "is_two");
  auto* inner = testing::AddNode(then_g, "If", {"is_two"}, {"t"}, "by_shape");
  testing::AddNode(testing::AddBranch(inner, "then_branch"), "Neg", {"x"}, {"a"}, "negate");
  testing::AddOutput(inner->mutable_attribute(0)->mutable_g(), "a");
  testing::AddNode(testing::AddBranch(inner, "else_branch"), "Abs", {"x"}, {"b"}, "abs_inner");
  testing::AddOutput(inner->mutable_attribute(1)->mutable_g(), "b");
  testing::AddOutput(then_g, "t");
  testing::AddNode(else_g, "Abs", {"x"}, {"e"}, "abs");
  testing::AddOutput(else_g, "e");
  model = Model::Load(testing::CompileModel(nested));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->entries().size() == 2);
  ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x3[6] = {1, 2, 3, 4, 5, 6};
  TensorView two_rows[] = {TensorView::Host(x3, DType::kFloat32, {2, 2}), TensorView::Host(w, DType::kFloat32, {1, 2})};
  REQUIRE(testing::RunFirstFloat(*ctx, two_rows, &y).ok());
  CHECK(y == std::vector<float>{-1, -2, -3, -4});
  TensorView three_rows[] = {TensorView::Host(x3, DType::kFloat32, {3, 2}), TensorView::Host(w, DType::kFloat32, {1, 2})};
  REQUIRE(testing::RunFirstFloat(*ctx, three_rows, &y).ok());
  CHECK(y == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("run-time If: an If node with two inputs, no output or an attribute given twice is refused") {
  onnx::GraphProto *then_g = nullptr, *else_g = nullptr;
  auto m = IfModel(&then_g, &else_g);
  testing::AddOutput(then_g, "x");
  testing::AddOutput(else_g, "x");
  m.mutable_graph()->mutable_node(2)->add_input("x");
  Status st = CompileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("node 'branch' (If): expected 1 input (cond) and at least 1 output, found 2 and 1") !=
                    std::string::npos,
                st.message());
  m = IfModel(&then_g, &else_g);
  testing::AddOutput(then_g, "x");
  testing::AddOutput(else_g, "x");
  *m.mutable_graph()->mutable_node(2)->add_attribute() = m.graph().node(2).attribute(0);
  st = CompileStatus(m);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find("node 'branch' (If): attribute 'then_branch' is given twice") != std::string::npos,
                st.message());
}

TEST_CASE("run-time If: the verifier refuses a predicate on a tensor out of range or not bool") {
  auto load = [](const testing::ArtifactSpec& a) { return Model::Load(testing::BuildArtifact(a)).status(); };
  testing::ArtifactSpec a = testing::AddModelSpec();
  a.format_version = kPredicatesFormatVersion;
  a.entries[0].instructions[0].when = {{7, true}};
  Status st = load(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find("instruction 0 'add0': predicate 0 tensor 7 out of range (tensors: 3)") != std::string::npos,
                st.message());
  a.entries[0].instructions[0].when = {{0, true}};  // x: float32
  st = load(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find("instruction 0 'add0': predicate 0 tensor 0 is float32, not bool") != std::string::npos,
                st.message());
}

}  // namespace kiln
