// A run-time Loop (passes/control_flow/runtime_loop.cc): a Loop whose trip count or condition is
// tensor data has its body compiled once between kiln.LoopBegin and kiln.LoopEnd
// (runtime/executor/loop.h), and the executors run it again while the loop goes on, on the CPU
// backend (fused into generated kernels or not) and the CUDA one (the emulated device in CI),
// where the host runs the control (reading each iteration's condition) and the body's
// instructions run where they would outside a loop. Expected values are computed by hand (the
// halvings are exact in float32); the refusals and ContextOptions::max_loop_iterations are
// tested with their messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/features/control_flow_models.h"
#include "tests/gpu_test_util.h"
#include "tests/runtime/count_allocations.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

std::vector<io::HostTensor> RunHalving(ExecutionContext& ctx, int64_t m, const std::vector<float>& x) {
  TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}),
                     TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
  auto out = testing::RunToHost(ctx, in);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  REQUIRE(out->size() == 2);
  return *out;
}

void CheckHalving(Device device, bool fuse) {
  auto model = Model::Load(testing::CompileModel(testing::HalvingModel(), testing::OptionsFor(device, fuse)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kLoopsFormatVersion);
  const EntryInfo& entry = model->entries()[0];
  REQUIRE(entry.runtime_dims.size() == 1);
  CHECK_MESSAGE(entry.runtime_dims[0].find("sums.count <= max(0, M)") != std::string::npos, entry.runtime_dims[0]);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  // Sums 8, 4, 2, 1: the fourth halving leaves 1, which ends it.
  auto r = RunHalving(*ctx, 100, {3, 5, 8});
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{0.1875f, 0.3125f, 0.5f});
  CHECK(r[1].dims == std::vector<int64_t>{4});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{8, 4, 2, 1});
  // M = 2 ends it first.
  r = RunHalving(*ctx, 2, {3, 5, 8});
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{0.75f, 1.25f, 2});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{8, 4});
  // No iteration: M <= 0, or the condition false from the start. The carried value is the
  // initial one, the scan output empty.
  for (int64_t m : {0, -5}) {
    r = RunHalving(*ctx, m, {3, 5, 8});
    CHECK(testing::Values<float>(r[0]) == std::vector<float>{3, 5, 8});
    CHECK(r[1].dims == std::vector<int64_t>{0});
  }
  r = RunHalving(*ctx, 100, {0.25f, 0.5f});
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{0.25f, 0.5f});
  CHECK(r[1].dims == std::vector<int64_t>{0});
  // And a long one again, on the same context.
  r = RunHalving(*ctx, 100, {1024, 1024});  // sums 2048 / 2^k, down to 1 at k = 11
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{0.5f, 0.5f});
  CHECK(r[1].dims == std::vector<int64_t>{11});
  CHECK(ctx->stats().graph_hits == 0);
}

}  // namespace

TEST_CASE("run-time Loop: a condition on tensor data ends it, on the CPU backend") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    CheckHalving(Device::kCpu, fuse);
  }
}

TEST_CASE("run-time Loop: a steady-state Run allocates nothing, whatever the iterations") {
  auto model = Model::Load(testing::CompileModel(testing::HalvingModel()));
  REQUIRE(model.ok());
  ContextOptions options{Device::kCpu};
  options.cpu.threads = 2;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  const int64_t ms[] = {100, 2, 0};
  const std::vector<float> x = {3, 5, 8};
  std::vector<TensorView> out;
  auto run = [&](int k) {
    TensorView in[] = {TensorView::Host(&ms[k % 3], DType::kInt64, {}), TensorView::Host(x.data(), DType::kFloat32, {3})};
    return ctx->Run(in, out).ok();
  };
  for (int k = 0; k < 3; ++k) REQUIRE(run(k));  // 4, 2 and 0 iterations: the scan output's size changes
  bool ok = true;
  const long n = testing::CountAllocations([&] {
    for (int k = 0; k < 60; ++k) ok = ok && run(k);
  });
  CHECK(n == 0);
  CHECK(ok);
  CHECK(ctx->stats().runtime_dim_binds > 0);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: the host controls the loop, the body runs on the device") {
  KILN_REQUIRE_GPU();
  CheckHalving(Device::kCuda, true);
  // The body's fused ops are generated kernels, as outside a loop; only the control is on the host.
  auto model = Model::Load(testing::CompileModel(testing::HalvingModel(), testing::OptionsFor(Device::kCuda)));
  REQUIRE(model.ok());
  for (const InstructionInfo& ins : model->entries()[0].instructions)
    CHECK_MESSAGE(ins.library("cuda") == (ins.op.starts_with("kiln.Loop") ? Library::kControl : Library::kGenerated),
                  ins.name);
}

namespace {

// M int64 (a value input), a0 and b0 float32[2]: each iteration swaps a and b and adds the
// iteration number to k (int64, from 0); the scan output stacks each iteration's a.
onnx::ModelProto SwapModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "a0", {"2"});
  testing::AddInput(g, "b0", {"2"});
  testing::AddInt64Init(g, "k0", {}, {0});
  auto* loop = testing::AddNode(g, "Loop", {"M", "", "a0", "b0", "k0"}, {"a", "b", "k", "as"}, "swap");
  auto* body = testing::AddBranch(loop, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"2"});
  testing::AddInput(body, "y", {"2"});
  testing::AddInput(body, "acc", {}, onnx::TensorProto::INT64);
  testing::AddNode(body, "Add", {"acc", "i"}, {"acc_next"}, "count");
  testing::AddNode(body, "Identity", {"x"}, {"x_seen"}, "seen");
  testing::AddOutput(body, "cond");
  testing::AddOutput(body, "y");
  testing::AddOutput(body, "x");
  testing::AddOutput(body, "acc_next");
  testing::AddOutput(body, "x_seen");
  for (const char* o : {"a", "b", "k", "as"}) testing::AddOutput(g, o);
  return m;
}

void CheckSwap(Device device) {
  auto model = Model::Load(testing::CompileModel(SwapModel(), testing::OptionsFor(device)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const std::vector<float> a0 = {1, 2}, b0 = {3, 4};
  for (int64_t m : {0, 1, 3, 4}) {
    INFO("M " << m);
    TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}), TensorView::Host(a0.data(), DType::kFloat32, {2}),
                       TensorView::Host(b0.data(), DType::kFloat32, {2})};
    auto r = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    const bool odd = m % 2 == 1;
    CHECK(testing::Values<float>((*r)[0]) == (odd ? b0 : a0));
    CHECK(testing::Values<float>((*r)[1]) == (odd ? a0 : b0));
    CHECK(testing::Values<int64_t>((*r)[2]) == std::vector<int64_t>{m * (m - 1) / 2});  // 0 + 1 + ... + (M - 1)
    std::vector<float> as;
    for (int64_t i = 0; i < m; ++i) as.insert(as.end(), (i % 2 ? b0 : a0).begin(), (i % 2 ? b0 : a0).end());
    CHECK((*r)[3].dims == std::vector<int64_t>{m, 2});
    CHECK(testing::Values<float>((*r)[3]) == as);
  }
}

}  // namespace

TEST_CASE("run-time Loop: carried values swapped by the body, the iteration number and a scan output") {
  CheckSwap(Device::kCpu);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: carried values swapped by the body and a scan output") {
  KILN_REQUIRE_GPU();
  CheckSwap(Device::kCuda);
}

namespace {

// M int64 (a value input) and x0 float32[2]: M times, an inner loop halves x while its sum is
// above 1 (a run-time Loop in a run-time Loop's body), then x + 1 if its max is above 0.5,
// else x + 2 (a run-time If there); the scan output stacks the inner loop's results.
onnx::ModelProto NestedModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "x0", {"2"});
  testing::AddFloatInit(g, "one", {}, {1.0f});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddFloatInit(g, "half", {}, {0.5f});
  auto* outer = testing::AddNode(g, "Loop", {"M", "", "x0"}, {"x_last", "halved"}, "outer");
  auto* body = testing::AddBranch(outer, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"2"});
  testing::AttrInt(testing::AddNode(body, "ReduceSum", {"x"}, {"s0"}, "sum0"), "keepdims", 0);
  testing::AddNode(body, "Greater", {"s0", "one"}, {"c0"}, "above0");
  auto* inner = testing::AddNode(body, "Loop", {"", "c0", "x"}, {"h"}, "inner");
  auto* inner_body = testing::AddBranch(inner, "body");
  testing::AddInput(inner_body, "j", {}, onnx::TensorProto::INT64);
  testing::AddInput(inner_body, "c", {}, onnx::TensorProto::BOOL);
  testing::AddInput(inner_body, "z", {"2"});
  testing::AddNode(inner_body, "Mul", {"z", "half"}, {"z_next"}, "mul");
  testing::AttrInt(testing::AddNode(inner_body, "ReduceSum", {"z_next"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(inner_body, "Greater", {"s", "one"}, {"go_on"}, "above");
  testing::AddOutput(inner_body, "go_on");
  testing::AddOutput(inner_body, "z_next");
  testing::AttrInt(testing::AddNode(body, "ReduceMax", {"h"}, {"mx"}, "max"), "keepdims", 0);
  testing::AddNode(body, "Greater", {"mx", "half"}, {"big"}, "big");
  auto* branch = testing::AddNode(body, "If", {"big"}, {"x_next"}, "step");
  testing::AddNode(testing::AddBranch(branch, "then_branch"), "Add", {"h", "one"}, {"t"}, "plus_one");
  testing::AddOutput(branch->mutable_attribute(0)->mutable_g(), "t");
  testing::AddNode(testing::AddBranch(branch, "else_branch"), "Add", {"h", "two"}, {"e"}, "plus_two");
  testing::AddOutput(branch->mutable_attribute(1)->mutable_g(), "e");
  testing::AddNode(body, "Identity", {"h"}, {"h_out"}, "keep");
  testing::AddOutput(body, "cond");
  testing::AddOutput(body, "x_next");
  testing::AddOutput(body, "h_out");
  testing::AddOutput(g, "x_last");
  testing::AddOutput(g, "halved");
  return m;
}

void CheckNested(Device device) {
  auto model = Model::Load(testing::CompileModel(NestedModel(), testing::OptionsFor(device)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const int64_t m = 3;
  const std::vector<float> x0 = {3, 5};
  TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}), TensorView::Host(x0.data(), DType::kFloat32, {2})};
  auto r = testing::RunToHost(*ctx, in);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  // [3, 5] halves to [0.375, 0.625] (max above 0.5: + 1); [1.375, 1.625] to [0.34375, 0.40625]
  // (+ 2); [2.34375, 2.40625] to [0.29296875, 0.30078125] (+ 2).
  CHECK(testing::Values<float>((*r)[0]) == std::vector<float>{2.29296875f, 2.30078125f});
  CHECK((*r)[1].dims == std::vector<int64_t>{3, 2});
  CHECK(testing::Values<float>((*r)[1]) == std::vector<float>{0.375f, 0.625f, 0.34375f, 0.40625f, 0.29296875f, 0.30078125f});
}

}  // namespace

TEST_CASE("run-time Loop: a run-time Loop and a run-time If inside a run-time Loop's body") {
  CheckNested(Device::kCpu);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: a nested loop and an If in the body, conditions read per iteration") {
  KILN_REQUIRE_GPU();
  CheckNested(Device::kCuda);
}

namespace {

// M int64 (a value input) and x0 float32[1, 3]: M times, y = CumSum(x) (a CPU instruction: on
// the CUDA backend a CPU fallback region inside the body) and x = MatMul(y, 0.5 I) (cuBLASLt);
// the scan output stacks each y.
void CheckLibraries(Device device) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "x0", {"1", "3"});
  testing::AddFloatInit(g, "w", {3, 3}, {0.5f, 0, 0, 0, 0.5f, 0, 0, 0, 0.5f});
  testing::AddInt64Init(g, "axis", {}, {1});
  auto* loop = testing::AddNode(g, "Loop", {"M", "", "x0"}, {"x_last", "ys"}, "loop");
  auto* body = testing::AddBranch(loop, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"1", "3"});
  testing::AddNode(body, "CumSum", {"x", "axis"}, {"y"}, "cumsum");
  testing::AddNode(body, "MatMul", {"y", "w"}, {"z"}, "matmul");
  testing::AddNode(body, "Identity", {"y"}, {"y_out"}, "keep");
  testing::AddOutput(body, "cond");
  testing::AddOutput(body, "z");
  testing::AddOutput(body, "y_out");
  testing::AddOutput(g, "x_last");
  testing::AddOutput(g, "ys");
  auto model = Model::Load(testing::CompileModel(m, testing::OptionsFor(device)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const std::vector<float> x0 = {1, 1, 1};
  for (const int64_t trips : {2, 0, 2}) {
    TensorView in[] = {TensorView::Host(&trips, DType::kInt64, {}), TensorView::Host(x0.data(), DType::kFloat32, {1, 3})};
    auto r = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    // [1, 2, 3] halves to [0.5, 1, 1.5]; [0.5, 1.5, 3] to [0.25, 0.75, 1.5].
    CHECK(testing::Values<float>((*r)[0]) == (trips ? std::vector<float>{0.25f, 0.75f, 1.5f} : x0));
    CHECK((*r)[1].dims == std::vector<int64_t>{trips, 1, 3});
    CHECK(testing::Values<float>((*r)[1]) ==
          (trips ? std::vector<float>{1, 2, 3, 0.5f, 1.5f, 3} : std::vector<float>{}));
  }
}

}  // namespace

TEST_CASE("run-time Loop: a body with a CPU-only op and a MatMul") { CheckLibraries(Device::kCpu); }

TEST_CASE("[gpu] run-time Loop on the CUDA backend: a CPU fallback region and cuBLASLt inside the body") {
  KILN_REQUIRE_GPU();
  CheckLibraries(Device::kCuda);
}

namespace {

// M int64 (a value input), x0 float32[6], acc0 float32: M times, the sum and count of x's
// positive elements (NonZero in the body: a run-time dim set in each iteration), added to acc,
// then x + 1; the sums and counts stacked.
onnx::ModelProto PositivesModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "x0", {"6"});
  testing::AddInput(g, "acc0", {});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "one", {}, {1.0f});
  testing::AddInt64Init(g, "first", {}, {0});
  auto* loop = testing::AddNode(g, "Loop", {"M", "", "x0", "acc0"}, {"x_last", "acc", "sums", "counts"}, "loop");
  auto* body = testing::AddBranch(loop, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"6"});
  testing::AddInput(body, "a", {});
  testing::AddNode(body, "Greater", {"x", "zero"}, {"positive"}, "positive");
  testing::AddNode(body, "NonZero", {"positive"}, {"where"}, "where");
  testing::AttrInt(testing::AddNode(body, "Gather", {"where", "first"}, {"at"}, "at"), "axis", 0);
  testing::AttrInt(testing::AddNode(body, "Gather", {"x", "at"}, {"picked"}, "pick"), "axis", 0);
  testing::AttrInt(testing::AddNode(body, "ReduceSum", {"picked"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(body, "Size", {"picked"}, {"n"}, "count");
  testing::AddNode(body, "Add", {"a", "s"}, {"a_next"}, "add");
  testing::AddNode(body, "Add", {"x", "one"}, {"x_next"}, "next");
  for (const char* o : {"cond", "x_next", "a_next", "s", "n"}) testing::AddOutput(body, o);
  for (const char* o : {"x_last", "acc", "sums", "counts"}) testing::AddOutput(g, o);
  return m;
}

// M and K int64 (value inputs), x0 float32[2]: M times, an inner loop of at most K iterations
// halves x while its sum is above 1 and stacks the sums (a run-time dim of the inner loop, set
// in each outer iteration), whose total the outer loop stacks; x becomes the halved x times 16.
onnx::ModelProto InnerScanModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "K", {}, onnx::TensorProto::INT64);
  testing::AddInput(g, "x0", {"2"});
  testing::AddFloatInit(g, "half", {}, {0.5f});
  testing::AddFloatInit(g, "one", {}, {1.0f});
  testing::AddFloatInit(g, "sixteen", {}, {16.0f});
  auto* outer = testing::AddNode(g, "Loop", {"M", "", "x0"}, {"x_last", "totals"}, "outer");
  auto* body = testing::AddBranch(outer, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"2"});
  auto* inner = testing::AddNode(body, "Loop", {"K", "", "x"}, {"h", "sums"}, "inner");
  auto* inner_body = testing::AddBranch(inner, "body");
  testing::AddInput(inner_body, "j", {}, onnx::TensorProto::INT64);
  testing::AddInput(inner_body, "c", {}, onnx::TensorProto::BOOL);
  testing::AddInput(inner_body, "y", {"2"});
  testing::AddNode(inner_body, "Mul", {"y", "half"}, {"y_next"}, "halve");
  testing::AttrInt(testing::AddNode(inner_body, "ReduceSum", {"y_next"}, {"s"}, "sum"), "keepdims", 0);
  testing::AddNode(inner_body, "Greater", {"s", "one"}, {"go_on"}, "above");
  for (const char* o : {"go_on", "y_next", "s"}) testing::AddOutput(inner_body, o);
  testing::AttrInt(testing::AddNode(body, "ReduceSum", {"sums"}, {"total"}, "total"), "keepdims", 0);
  testing::AddNode(body, "Mul", {"h", "sixteen"}, {"x_next"}, "grow");
  for (const char* o : {"cond", "x_next", "total"}) testing::AddOutput(body, o);
  for (const char* o : {"x_last", "totals"}) testing::AddOutput(g, o);
  return m;
}

void CheckRuntimeDimsInBody(Device device) {
  auto model = Model::Load(testing::CompileModel(PositivesModel(), testing::OptionsFor(device)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const std::vector<float> x0 = {3, -1, 1, 2, 0, 5};
  const float acc0 = 0.5f;
  auto run = [&](int64_t m) {
    TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}), TensorView::Host(x0.data(), DType::kFloat32, {6}),
                       TensorView::Host(&acc0, DType::kFloat32, {})};
    auto r = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    REQUIRE(r->size() == 4);
    return *r;
  };
  // Positive elements per iteration: {3, 1, 2, 5}, {4, 2, 3, 1, 6}, then all six of x0 + k,
  // summing 10 + 6k: each count at least the last, so every iteration needs the room of the
  // bound again.
  auto r = run(8);
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{11, 7, 9, 10, 8, 13});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{249.5f});
  CHECK(testing::Values<float>(r[2]) == std::vector<float>{11, 16, 22, 28, 34, 40, 46, 52});
  CHECK(testing::Values<int64_t>(r[3]) == std::vector<int64_t>{4, 5, 6, 6, 6, 6, 6, 6});
  r = run(0);
  CHECK(testing::Values<float>(r[0]) == x0);
  CHECK(r[2].dims == std::vector<int64_t>{0});
  r = run(2);
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{27.5f});
  CHECK(testing::Values<int64_t>(r[3]) == std::vector<int64_t>{4, 5});

  model = Model::Load(testing::CompileModel(InnerScanModel(), testing::OptionsFor(device)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto nested = [&](int64_t m, int64_t k) {
    const std::vector<float> x = {3, 5};
    TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}), TensorView::Host(&k, DType::kInt64, {}),
                       TensorView::Host(x.data(), DType::kFloat32, {2})};
    auto out = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    return *out;
  };
  // [3, 5]: sums 4, 2, 1 (total 7), then from [6, 10] sums 8, 4, 2, 1 (total 15), twice: the
  // inner loop ran 3, then 4 iterations, each time from the room of its bound K.
  r = nested(3, 10);
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{6, 10});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{7, 15, 15});
  r = nested(3, 1);  // one halving each: sums 4, 32, 256
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{1536, 2560});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{4, 32, 256});
}

}  // namespace

TEST_CASE("run-time Loop: a NonZero and a run-time Loop with scan outputs in the body set their run-time dims in each iteration") {
  CheckRuntimeDimsInBody(Device::kCpu);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: run-time dims set in each iteration of the body") {
  KILN_REQUIRE_GPU();
  CheckRuntimeDimsInBody(Device::kCuda);
}

TEST_CASE("run-time Loop: ContextOptions::max_loop_iterations stops a loop that would run on") {
  // No M and a condition that stays true: x + 1 forever.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "go", {}, onnx::TensorProto::BOOL);
  testing::AddInput(g, "x0", {"1"});
  auto* loop = testing::AddNode(g, "Loop", {"", "go", "x0"}, {"x_last"}, "spin");
  auto* body = testing::AddBranch(loop, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "x", {"1"});
  testing::AddFloatInit(body, "one", {}, {1.0f});
  testing::AddNode(body, "Add", {"x", "one"}, {"x_next"}, "add");
  testing::AddOutput(body, "cond");
  testing::AddOutput(body, "x_next");
  testing::AddOutput(g, "x_last");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  ContextOptions options{Device::kCpu};
  options.max_loop_iterations = 1000;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  const float x0 = 0;
  for (const bool go : {true, false}) {
    TensorView in[] = {TensorView::Host(&go, DType::kBool, {}), TensorView::Host(&x0, DType::kFloat32, {1})};
    std::vector<TensorView> out;
    const Status st = ctx->Run(in, out);
    if (go) {
      CHECK(st.code() == StatusCode::kResourceExhausted);
      CHECK_MESSAGE(st.message().find("'spin_end' (kiln.LoopEnd): kiln.LoopEnd: this call's loops would run more than 1000 "
                                      "iterations, past ContextOptions::max_loop_iterations") != std::string::npos,
                    st.message());
    } else {
      // The next call is not harmed: no iteration, x0 out.
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      CHECK(*static_cast<const float*>(out[0].data) == 0);
    }
  }
  // The bound is on all loops of a call together: the nested model runs 3 outer iterations and
  // 3 + 2 + 3 inner ones (the halvings of CheckNested), 11 in all.
  auto nested = Model::Load(testing::CompileModel(NestedModel()));
  REQUIRE(nested.ok());
  const int64_t three = 3;
  const std::vector<float> x2 = {3, 5};
  TensorView nested_in[] = {TensorView::Host(&three, DType::kInt64, {}),
                            TensorView::Host(x2.data(), DType::kFloat32, {2})};
  for (const int64_t max : {10, 11}) {
    options.max_loop_iterations = max;
    auto c = ExecutionContext::Create(*nested, options);
    REQUIRE(c.ok());
    std::vector<TensorView> o;
    CHECK_MESSAGE(c->Run(nested_in, o).code() == (max == 11 ? StatusCode::kOk : StatusCode::kResourceExhausted), max);
  }
  options.max_loop_iterations = 0;
  const auto refused = ExecutionContext::Create(*model, options);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() == "max_loop_iterations is 0, expected at least 1");
}

namespace {

// kiln compile --loop-scan-bound 3 (CompileOptions::loop_scan_bound): the halving loop with
// M = INT64_MAX (PyTorch's while) and with M an input.
void CheckScanBound(Device device) {
  auto endless = testing::HalvingModel();
  endless.mutable_graph()->mutable_input(0)->set_name("unused");
  testing::AddInt64Init(endless.mutable_graph(), "M", {}, {INT64_MAX});
  // The scan outputs have room for 3 iterations, and a call that would run more fails naming the
  // option.
  compiler::CompileOptions capped = testing::OptionsFor(device);
  capped.loop_scan_bound = 3;
  auto bounded = Model::Load(testing::CompileModel(endless, capped));
  REQUIRE_MESSAGE(bounded.ok(), bounded.status().ToString());
  CHECK_MESSAGE(bounded->entries()[0].runtime_dims[0].find("sums.count <= 3, set by") == 0,
                bounded->entries()[0].runtime_dims[0]);
  auto capped_ctx = ExecutionContext::Create(*bounded, {device});
  REQUIRE(capped_ctx.ok());
  auto halved = RunHalving(*capped_ctx, 0, {1, 2});  // sums 1.5, then 0.75 ends it
  CHECK(testing::Values<float>(halved[0]) == std::vector<float>{0.25f, 0.5f});
  CHECK(testing::Values<float>(halved[1]) == std::vector<float>{1.5f, 0.75f});
  const int64_t no_m = 0;
  const std::vector<float> far = {3, 5, 8};  // sums 8, 4, 2, 1: a fourth iteration
  TensorView far_in[] = {TensorView::Host(&no_m, DType::kInt64, {}), TensorView::Host(far.data(), DType::kFloat32, {3})};
  std::vector<TensorView> far_out;
  const Status past = capped_ctx->Run(far_in, far_out);
  CHECK(past.code() == StatusCode::kResourceExhausted);
  CHECK_MESSAGE(past.message().find("'halve_end' (kiln.LoopEnd): ") != std::string::npos, past.message());
  CHECK_MESSAGE(past.message().find("the loop goes on past its scan outputs' room of 3 rows (kiln compile "
                                    "--loop-scan-bound 3)") != std::string::npos,
                past.message());
  // An M that is an input's value (a value input) is bounded by the option too: M = INT64_MAX,
  // a while loop's, no longer sizes the arena.
  auto input_m = testing::HalvingModel();
  auto with_m = Model::Load(testing::CompileModel(input_m, capped));
  REQUIRE_MESSAGE(with_m.ok(), with_m.status().ToString());
  CHECK_MESSAGE(with_m->entries()[0].runtime_dims[0].find("sums.count <= min(max(0, M), 3), set by") == 0,
                with_m->entries()[0].runtime_dims[0]);
  auto m_ctx = ExecutionContext::Create(*with_m, {device});
  REQUIRE(m_ctx.ok());
  halved = RunHalving(*m_ctx, INT64_MAX, {1, 2});
  CHECK(testing::Values<float>(halved[1]) == std::vector<float>{1.5f, 0.75f});
  halved = RunHalving(*m_ctx, 1, {3, 5, 8});  // M ends it
  CHECK(testing::Values<float>(halved[1]) == std::vector<float>{8});
  const int64_t big_m = INT64_MAX;
  TensorView past_in[] = {TensorView::Host(&big_m, DType::kInt64, {}), TensorView::Host(far.data(), DType::kFloat32, {3})};
  CHECK(m_ctx->Run(past_in, far_out).code() == StatusCode::kResourceExhausted);
}

}  // namespace

namespace {

// Sums x.sum() / 2, / 4, ... while above 1, for x = {2^k}: k iterations.
std::vector<float> Halvings(int k) {
  std::vector<float> sums;
  for (int n = 1; n <= k; ++n) sums.push_back(std::ldexp(1.0f, k - n));
  return sums;
}

// Without --loop-scan-bound, the scan outputs of a loop that nothing bounds are a room of 16
// rows that doubles when a call needs more (Stats::room_growths), the call running again: the
// halving loop with M = INT64_MAX (PyTorch's while) and with M computed from data.
void CheckRoomGrowth(Device device) {
  auto endless = testing::HalvingModel();
  endless.mutable_graph()->mutable_input(0)->set_name("unused");
  testing::AddInt64Init(endless.mutable_graph(), "M", {}, {INT64_MAX});
  const std::vector<uint8_t> artifact = testing::CompileModel(endless, testing::OptionsFor(device));
  auto model = Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kRoomsFormatVersion);
  CHECK_MESSAGE(model->entries()[0].runtime_dims[0].find("sums.count <= sums.rows, set by") == 0,
                model->entries()[0].runtime_dims[0]);
  CHECK_MESSAGE(model->entries()[0].runtime_dims[0].find("; room 16 at first, doubled when a call needs more") !=
                    std::string::npos,
                model->entries()[0].runtime_dims[0]);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const auto run = [&](ExecutionContext& c, int k) {
    auto r = RunHalving(c, 0, {std::ldexp(1.0f, k)});
    CHECK(r[1].dims == std::vector<int64_t>{k});
    CHECK(testing::Values<float>(r[1]) == Halvings(k));
    CHECK(testing::Values<float>(r[0]) == std::vector<float>{1.0f});
  };
  run(*ctx, 3);  // fits the 16 rows
  CHECK(ctx->stats().room_growths == 0);
  const uint64_t small = ctx->memory_usage().host_bytes;  // the CPU backend's arena and workspace
  run(*ctx, 39);  // 16 -> 32 -> 64 rows: two runs again
  CHECK(ctx->stats().room_growths == 2);
  run(*ctx, 5);  // the context keeps its 64 rows
  run(*ctx, 64);
  CHECK(ctx->stats().room_growths == 2);
  run(*ctx, 65);
  CHECK(ctx->stats().room_growths == 3);
  // A room that would take the context past LoadOptions::max_context_bytes stops there (the
  // CPU backend's host bytes are its arena and workspace, which the limit bounds; the context's
  // undoing of the room is the same for both backends).
  if (device == Device::kCpu) {
    LoadOptions tight;
    tight.max_context_bytes = small;
    auto limited = Model::Load(artifact, tight);
    REQUIRE(limited.ok());
    auto limited_ctx = ExecutionContext::Create(*limited, {device});
    REQUIRE(limited_ctx.ok());
    run(*limited_ctx, 16);
    std::vector<TensorView> out;
    const int64_t m = 0;
    const float big = std::ldexp(1.0f, 100);
    TensorView in[] = {TensorView::Host(&m, DType::kInt64, {}), TensorView::Host(&big, DType::kFloat32, {1})};
    const Status st = limited_ctx->Run(in, out);
    CHECK(st.code() == StatusCode::kResourceExhausted);
    CHECK_MESSAGE(st.message().find("max_context_bytes") != std::string::npos, st.message());
    run(*limited_ctx, 2);  // the next call is not harmed: the room went back to 16 rows
    CHECK(limited_ctx->stats().room_growths == 1);
  }
  // M from tensor data (the rounded sum of x0): the same room.
  auto from_data = testing::HalvingModel();
  auto* g = from_data.mutable_graph();
  g->mutable_input(0)->set_name("unused");
  testing::AttrInt(testing::AddNode(g, "Cast", {"s0"}, {"M"}, "trips"), "to", onnx::TensorProto::INT64);
  g->mutable_node()->SwapElements(2, 3);  // the Cast before the Loop
  auto data_model = Model::Load(testing::CompileModel(from_data, testing::OptionsFor(device)));
  REQUIRE_MESSAGE(data_model.ok(), data_model.status().ToString());
  auto data_ctx = ExecutionContext::Create(*data_model, {device});
  REQUIRE(data_ctx.ok());
  run(*data_ctx, 20);  // M = 2^20 lets the condition end it
  CHECK(data_ctx->stats().room_growths == 1);
}

}  // namespace

TEST_CASE("run-time Loop: a while loop's scan outputs are a room that doubles when a call needs more") {
  CheckRoomGrowth(Device::kCpu);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: a while loop's scan room grows") {
  KILN_REQUIRE_GPU();
  CheckRoomGrowth(Device::kCuda);
}

TEST_CASE("run-time Loop: --loop-scan-bound gives a while loop's scan outputs room, and a call past it fails") {
  CheckScanBound(Device::kCpu);
}

TEST_CASE("[gpu] run-time Loop on the CUDA backend: --loop-scan-bound, and a call past it") {
  KILN_REQUIRE_GPU();
  CheckScanBound(Device::kCuda);
}

TEST_CASE("run-time Loop: carried values that change shape, and scan values sized in the body, are refused") {
  // The carried x doubles its length per iteration (Concat): its shape is not the loop's.
  auto grow = testing::HalvingModel();
  auto* body = grow.mutable_graph()->mutable_node(2)->mutable_attribute(0)->mutable_g();
  body->mutable_node(0)->set_op_type("Concat");
  body->mutable_node(0)->set_input(1, "x");
  testing::AttrInt(body->mutable_node(0), "axis", 0);
  Status st = testing::TryCompileModel(grow).status();
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(st.message().find("loop-carried value 0 ('x') is float32[N] before an iteration "
                                  "and float32[(N+N)] after it; a run-time loop carries values whose dtype and shape "
                                  "stay the same") != std::string::npos,
                st.message());
  // A scan value sized by a run-time dim of the body: its rows would differ in shape.
  auto ragged = PositivesModel();
  ragged.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_output(4)->set_name("picked");
  st = testing::TryCompileModel(ragged).status();
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(st.message().find("node 'loop' (Loop): ") == 0, st.message());
  CHECK_MESSAGE(st.message().find("scan output 1 ('picked') is float32[where.count], sized by a run-time dim set in "
                                  "each iteration (node 'where' (NonZero)'s count of nonzero elements); the rows a "
                                  "scan output stacks must have one shape") != std::string::npos,
                st.message());
  // M from tensor data (the rounded sum of x0), with no scan output: M is read at each call.
  auto unbounded = testing::HalvingModel();
  auto* g = unbounded.mutable_graph();
  g->mutable_input(0)->set_name("unused");
  testing::AttrInt(testing::AddNode(g, "Cast", {"s0"}, {"M"}, "trips"), "to", onnx::TensorProto::INT64);
  g->mutable_node()->SwapElements(2, 3);  // the Cast before the Loop
  g->mutable_node(3)->mutable_output()->RemoveLast();
  body = g->mutable_node(3)->mutable_attribute(0)->mutable_g();
  body->mutable_output()->RemoveLast();
  g->mutable_output()->RemoveLast();
  auto model = Model::Load(testing::CompileModel(unbounded));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const int64_t unused = 0;
  const std::vector<float> x0 = {1, 1.5f};  // M = 2 (2.5 cast to int64), sum 2.5: halved twice
  TensorView in[] = {TensorView::Host(&unused, DType::kInt64, {}), TensorView::Host(x0.data(), DType::kFloat32, {2})};
  auto r = testing::RunToHost(*ctx, in);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(testing::Values<float>((*r)[0]) == std::vector<float>{0.25f, 0.375f});
}

namespace {

// A hand-built artifact with a run-time loop: x float32[2, 3] carried as p, p + w each
// iteration, no trip count and the condition passed through (so only max_loop_iterations ends
// it). Tensors: 0 x, 1 w, 2 i, 3 c, 4 p, 5 q, 6 y.
testing::ArtifactSpec LoopSpec() {
  using testing::E;
  using testing::T;
  testing::ArtifactSpec a;
  a.format_version = kLoopsFormatVersion;
  a.inputs = {{"x", DType::kFloat32, {2, 3}, {"", ""}}};
  a.outputs = {{"y", DType::kFloat32, {2, 3}, {"", ""}}};
  a.weights = {{"w", DType::kFloat32, {3}, testing::Bytes(std::vector<float>{10, 20, 30})}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Const(2), testing::Const(3)}}};
  e.exprs = {E(fb::ExprOp::Const, 2),   E(fb::ExprOp::Const, 3),   E(fb::ExprOp::Const, 0),
             E(fb::ExprOp::Const, 64),  E(fb::ExprOp::Const, 128), E(fb::ExprOp::Const, 192),
             E(fb::ExprOp::Const, 256), E(fb::ExprOp::Const, 320)};
  e.tensors = {T("x", DType::kFloat32, {0, 1}, fb::Storage::Input, 0),
               T("w", DType::kFloat32, {1}, fb::Storage::Weight, 0),
               T("i", DType::kInt64, {}, fb::Storage::Arena, 0, 2),
               T("c", DType::kBool, {}, fb::Storage::Arena, 0, 3),
               T("p", DType::kFloat32, {0, 1}, fb::Storage::Arena, 0, 4),
               T("q", DType::kFloat32, {0, 1}, fb::Storage::Arena, 0, 5),
               T("y", DType::kFloat32, {0, 1}, fb::Storage::Arena, 0, 6)};
  testing::AttrSpec carried{"carried", fb::AttrKind::Int, 1, 0, {}, {}};
  e.instructions = {{"kiln.LoopBegin", "begin", {-1, -1, 0}, {2, 3, 4}, {}, -1, {}, {}},
                    {"Add", "add", {4, 1}, {5}, {}, -1, {}, {}},
                    {"kiln.LoopEnd", "end", {-1, 2, 3, 4, 3, 5}, {6}, {carried}, -1, {}, {}}};
  e.inputs = {0};
  e.outputs = {6};
  e.arena_bytes = 7;
  e.stage_names = {"import", "canonical", "fusion", "executors", "plan"};
  a.entries = {e};
  return a;
}

}  // namespace

TEST_CASE("run-time Loop: the loader pairs kiln.LoopBegin with kiln.LoopEnd and refuses loops that do not nest") {
  auto load = [](const testing::ArtifactSpec& a) { return Model::Load(testing::BuildArtifact(a)); };
  // As built it loads, and runs until max_loop_iterations stops it, having added w 4 times.
  auto model = load(LoopSpec());
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  ContextOptions options{Device::kCpu};
  options.max_loop_iterations = 4;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  CHECK(ctx->Run(in, out).code() == StatusCode::kResourceExhausted);
  auto refused = [&](const testing::ArtifactSpec& a, const std::string& message) {
    const Status st = load(a).status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK_MESSAGE(st.message().find(message) != std::string::npos, st.message());
  };
  testing::ArtifactSpec a = LoopSpec();
  a.entries[0].instructions.pop_back();  // no LoopEnd; y written by nothing is not reached
  refused(a, "instruction 0 'begin' (kiln.LoopBegin) starts a loop that no kiln.LoopEnd ends");
  a = LoopSpec();
  std::swap(a.entries[0].instructions[0], a.entries[0].instructions[2]);
  refused(a, "instruction 0 'end' (kiln.LoopEnd) ends a loop that no kiln.LoopBegin starts");
  a = LoopSpec();
  a.entries[0].instructions[2].inputs[3] = 5;  // q where its parameter p should be
  refused(a, "instruction 2 'end' (kiln.LoopEnd) does not end the loop instruction 0 'begin' (kiln.LoopBegin) starts");
  a = LoopSpec();
  a.entries[0].instructions[2].when = {{3, true}};  // under a predicate its LoopBegin is not under
  refused(a, "does not end the loop");
  a = LoopSpec();
  a.entries[0].instructions[2].attrs = {{"carried", fb::AttrKind::Int, 2, 0, {}, {}}};  // operands for 1
  refused(a, "instruction 2 'end' (kiln.LoopEnd): carried = 2 does not fit 6 inputs and 1 outputs");
}

}  // namespace kiln
