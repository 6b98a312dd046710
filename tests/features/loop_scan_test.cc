// Loop and Scan, unrolled by the canonical stage (compiler/passes/canonicalize.h) when their
// trip count is known at compile time: a Scan carrying state (a running sum, forwards and
// backwards), a Loop whose condition the body computes, the errors for a Scan whose length is
// not known, and the Loops that run at run time instead (runtime_loop_test.cc).
// Expected values are computed by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln {
namespace {

using testing::CompileStatus;

// Scan over xs float32[T, 2] from h0 float32[2]: h = h + x; y = 2 * h. Outputs: the last h and
// the ys stacked. `T` is "3" or a symbol.
onnx::ModelProto RunningSum(const std::string& t, int64_t input_direction, int64_t output_direction) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "h0", {"2"});
  testing::AddInput(g, "xs", {t, "2"});
  auto* scan = testing::AddNode(g, "Scan", {"h0", "xs"}, {"h_last", "ys"}, "scan");
  testing::AttrInt(scan, "num_scan_inputs", 1);
  testing::AttrInts(scan, "scan_input_directions", {input_direction});
  testing::AttrInts(scan, "scan_output_directions", {output_direction});
  auto* body = testing::AddBranch(scan, "body");
  testing::AddInput(body, "h", {"2"});
  testing::AddInput(body, "x", {"2"});
  testing::AddFloatInit(body, "two", {}, {2.0f});
  testing::AddNode(body, "Add", {"h", "x"}, {"h_next"}, "add");
  testing::AddNode(body, "Mul", {"h_next", "two"}, {"y"}, "double");
  testing::AddOutput(body, "h_next");
  testing::AddOutput(body, "y");
  testing::AddOutput(g, "h_last");
  testing::AddOutput(g, "ys");
  return m;
}

std::vector<std::vector<float>> RunRunningSum(int64_t input_direction, int64_t output_direction,
                                              const std::string& t = "3") {
  const std::vector<uint8_t> bytes = testing::CompileModel(RunningSum(t, input_direction, output_direction));
  const float h0[2] = {0, 0}, xs[6] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(h0, DType::kFloat32, {2}), TensorView::Host(xs, DType::kFloat32, {3, 2})};
  return testing::RunFloat(bytes, in, {Device::kCpu});
}

// Loop with M an int64 input: acc = acc + i, and the body's condition acc < 6 (a constant
// after unrolling); the scan output stacks each acc.
onnx::ModelProto CountingLoop() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "M", {}, onnx::TensorProto::INT64);
  testing::AddInt64Init(g, "acc0", {}, {0});
  auto* loop = testing::AddNode(g, "Loop", {"M", "", "acc0"}, {"acc_last", "accs"}, "loop");
  auto* body = testing::AddBranch(loop, "body");
  testing::AddInput(body, "i", {}, onnx::TensorProto::INT64);
  testing::AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  testing::AddInput(body, "acc", {}, onnx::TensorProto::INT64);
  testing::AddInt64Init(body, "six", {}, {6});
  testing::AddNode(body, "Add", {"acc", "i"}, {"acc_next"}, "add");
  testing::AddNode(body, "Less", {"acc_next", "six"}, {"go_on"}, "less");
  testing::AddNode(body, "Identity", {"acc_next"}, {"acc_out"}, "copy");
  testing::AddOutput(body, "go_on");
  testing::AddOutput(body, "acc_next");
  testing::AddOutput(body, "acc_out");
  testing::AddOutput(g, "acc_last");
  testing::AddOutput(g, "accs");
  return m;
}

}  // namespace

TEST_CASE("Scan unrolled: a running sum carries its state, forwards and backwards, in both output orders") {
  auto r = RunRunningSum(0, 0);
  REQUIRE(r.size() == 2);
  CHECK(r[0] == std::vector<float>{9, 12});
  CHECK(r[1] == std::vector<float>{2, 4, 8, 12, 18, 24});
  r = RunRunningSum(1, 0);  // from the last row: h = [5, 6], [8, 10], [9, 12]
  CHECK(r[0] == std::vector<float>{9, 12});
  CHECK(r[1] == std::vector<float>{10, 12, 16, 20, 18, 24});
  r = RunRunningSum(1, 1);  // the same ys, stacked from the end
  CHECK(r[1] == std::vector<float>{18, 24, 16, 20, 10, 12});
}

TEST_CASE("Scan at run time: a scan length not known at compile time gives the same results, in every direction") {
  // xs float32[T, 2]: a run-time loop of T iterations (runtime_loop_test.cc), each reading its
  // row; the stacked output's dim is T itself.
  auto r = RunRunningSum(0, 0, "T");
  REQUIRE(r.size() == 2);
  CHECK(r[0] == std::vector<float>{9, 12});
  CHECK(r[1] == std::vector<float>{2, 4, 8, 12, 18, 24});
  CHECK(RunRunningSum(1, 0, "T")[1] == std::vector<float>{10, 12, 16, 20, 18, 24});
  CHECK(RunRunningSum(1, 1, "T")[1] == std::vector<float>{18, 24, 16, 20, 10, 12});
  CHECK(RunRunningSum(0, 1, "T")[1] == std::vector<float>{18, 24, 8, 12, 2, 4});
  // Stacked along axis 1: ys float32[2, T].
  auto along = RunningSum("T", 0, 0);
  testing::AttrInts(along.mutable_graph()->mutable_node(0), "scan_output_axes", {1});
  const float h0[2] = {0, 0}, xs[6] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(h0, DType::kFloat32, {2}), TensorView::Host(xs, DType::kFloat32, {3, 2})};
  CHECK(testing::RunFloat(testing::CompileModel(along), in, {Device::kCpu})[1] ==
        std::vector<float>{2, 8, 18, 4, 12, 24});
  auto model = Model::Load(testing::CompileModel(RunningSum("T", 0, 0)));
  REQUIRE(model.ok());
  CHECK(model->format_version() == kLoopsFormatVersion);
  CHECK(model->entries()[0].runtime_dims.empty());
  // With the length fixed by a profile, it is unrolled.
  CHECK(CompileStatus(RunningSum("T", 0, 0), testing::WithProfiles({"xs:T=3"})).ok());
}

TEST_CASE("Scan: directions other than 0 and 1 and attribute lists of the wrong length are refused") {
  auto m = RunningSum("T", 0, 0);
  for (auto& a : *m.mutable_graph()->mutable_node(0)->mutable_attribute())
    if (a.name() == "scan_output_directions") a.set_ints(0, 2);
  Status st = CompileStatus(m, testing::CpuOnly());
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "node 'scan' (Scan): scan_output_directions[0] = 2, expected 0 (forward) or 1 (reverse)");
  m = RunningSum("3", 0, 0);
  testing::AttrInts(m.mutable_graph()->mutable_node(0), "scan_input_axes", {0, 1});
  st = CompileStatus(m, testing::CpuOnly());
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "node 'scan' (Scan): scan_input_axes has 2 values for 1 scan inputs");
}

TEST_CASE("Loop and Scan: a body input declared with another dtype than the loop gives it is refused") {
  for (const char* t : {"3", "T"}) {  // unrolled, and at run time
    INFO("T = " << t);
    auto m = RunningSum(t, 0, 0);
    m.mutable_graph()->mutable_node(0)->mutable_attribute(3)->mutable_g()->mutable_input(0)->mutable_type()
        ->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT32);
    const Status st = CompileStatus(m, testing::CpuOnly());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message() == "node 'scan' (Scan): its body's input 'h' is declared int32, and the Scan gives it float32");
  }
}

TEST_CASE("Loop and Scan: a body node's output named like a value of the enclosing graph is refused (SSA)") {
  auto m = RunningSum("3", 0, 0);
  auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(3)->mutable_g();
  body->mutable_node(0)->set_output(0, "xs");  // the outer graph's input
  body->mutable_node(1)->set_input(0, "xs");
  body->mutable_output(0)->set_name("xs");
  const Status st = CompileStatus(m, testing::CpuOnly());
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find("value 'xs' is defined again in a subgraph, where its enclosing graph defines it "
                                  "already (ONNX names are SSA)") != std::string::npos,
                st.message());
}

TEST_CASE("Loop unrolled: the body's condition ends it, the carried value and the scan output are its results") {
  // M = 10, but the condition stops it after i = 3: acc = 0, 1, 3, 6. Unrolled with M's value
  // fixed by a profile; without one, M is a value input and the loop runs at run time
  // (runtime_loop_test.cc), with the same results.
  for (const bool profile : {true, false}) {
    INFO("profile " << profile);
    const std::vector<uint8_t> bytes =
        testing::CompileModel(CountingLoop(), profile ? testing::WithProfiles({"M=10"}) : testing::CpuOnly());
    auto model = Model::Load(bytes);
    REQUIRE(model.ok());
    CHECK((model->format_version() == kLoopsFormatVersion) == !profile);
    auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
    REQUIRE(ctx.ok());
    const int64_t m = 10;
    TensorView in[] = {TensorView::Host(&m, DType::kInt64, {})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    REQUIRE(out.size() == 2);
    CHECK(*static_cast<const int64_t*>(out[0].data) == 6);
    const int64_t* accs = static_cast<const int64_t*>(out[1].data);
    CHECK(std::vector<int64_t>(accs, accs + out[1].num_elements()) == std::vector<int64_t>{0, 1, 3, 6});
  }
  std::vector<TensorView> out;
  // M = 2 stops first: acc = 0, 1.
  const std::vector<uint8_t> two = testing::CompileModel(CountingLoop(), testing::WithProfiles({"M=2"}));
  auto model2 = Model::Load(two);
  REQUIRE(model2.ok());
  auto ctx2 = ExecutionContext::Create(*model2, {Device::kCpu});
  REQUIRE(ctx2.ok());
  const int64_t m2 = 2;
  TensorView in2[] = {TensorView::Host(&m2, DType::kInt64, {})};
  out.clear();
  REQUIRE(ctx2->Run(in2, out).ok());
  CHECK(*static_cast<const int64_t*>(out[0].data) == 1);
  CHECK(out[1].dims[0] == 2);
}

TEST_CASE("Loop and Scan unrolled: no iteration gives the initial state and empty scan outputs of the declared shape") {
  // The body declares its outputs' types (acc_out int64[]): the stack of no iterations is int64[0].
  auto m = CountingLoop();
  auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  for (auto& o : *body->mutable_output()) {
    auto* tt = o.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(o.name() == "go_on" ? onnx::TensorProto::BOOL : onnx::TensorProto::INT64);
    tt->mutable_shape();
  }
  auto model = Model::Load(testing::CompileModel(m, testing::WithProfiles({"M=0"})));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const int64_t zero = 0;
  TensorView in[] = {TensorView::Host(&zero, DType::kInt64, {})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  CHECK(*static_cast<const int64_t*>(out[0].data) == 0);  // acc0
  REQUIRE(out[1].rank == 1);
  CHECK(out[1].dims[0] == 0);
}

TEST_CASE("Loop: a condition on tensor data, or more than 1024 iterations, makes a run-time loop instead") {
  auto artifact_version = [](const onnx::ModelProto& m, const compiler::CompileOptions& options) {
    auto model = Model::Load(testing::CompileModel(m, options));
    REQUIRE_MESSAGE(model.ok(), model.status().ToString());
    return model->format_version();
  };
  // The condition is an input's data: not known at compile time.
  auto m = CountingLoop();
  auto* g = m.mutable_graph();
  testing::AddInput(g, "stop", {}, onnx::TensorProto::BOOL);
  g->mutable_node(0)->set_input(1, "stop");
  CHECK(artifact_version(m, testing::WithProfiles({"M=10"})) == kLoopsFormatVersion);
  // The body's condition stops it after 4 iterations: unrolled.
  CHECK(artifact_version(CountingLoop(), testing::WithProfiles({"M=5000"})) < kLoopsFormatVersion);
  // A loop that would run 2000 times is not unrolled, with the same results.
  auto endless = CountingLoop();
  endless.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_initializer(0)->set_int64_data(
      0, 1 << 30);
  auto model = Model::Load(testing::CompileModel(endless, testing::WithProfiles({"M=2000"})));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kLoopsFormatVersion);
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const int64_t trips = 2000;
  TensorView in[] = {TensorView::Host(&trips, DType::kInt64, {})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  CHECK(*static_cast<const int64_t*>(out[0].data) == 1999 * 2000 / 2);  // 0 + 1 + ... + 1999
  CHECK(out[1].dims[0] == 2000);
}

}  // namespace kiln
