// The fusion stage: which ops form one region, where regions are cut and why, and that a
// fused artifact computes what the unfused one does (hand-computed values and --no-fuse).
#include "compiler/fusion/fusion.h"

#include <doctest/doctest.h>

#include <cmath>

#include "compiler/fusion/rules.h"
#include "runtime/cuda/claims.h"
#include "compiler/ops/op_table_check.h"
#include "runtime/op_table.h"
#include "runtime/kernels/kernel.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/random_floats.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

struct Fused {
  kiln::ir::Trace trace;
  kiln::fusion::FusionReport report;
  std::vector<const kiln::ir::Node*> kernels;  // the kiln.Fused nodes
  std::string log;                             // report lines joined
};

Fused FuseModel(const onnx::ModelProto& m) {
  auto canonical = Canonical(m);
  REQUIRE_MESSAGE(canonical.ok(), canonical.status().ToString());
  Fused f;
  auto trace = kiln::fusion::Fuse(canonical->trace, &f.report);
  REQUIRE_MESSAGE(trace.ok(), trace.status().ToString());
  f.trace = std::move(*trace);
  for (const auto& n : f.trace.body.nodes)
    if (n.fused) f.kernels.push_back(&n);
  for (const auto& l : f.report.log) f.log += l + "\n";
  return f;
}

// Compiles `m` fused and unfused and checks both give the same outputs on `inputs`.
void CheckFusedMatchesUnfused(const onnx::ModelProto& m, std::span<const kiln::TensorView> inputs) {
  auto fused_opts = CpuOnly();
  auto unfused_opts = CpuOnly();
  unfused_opts.fuse = false;
  auto fused = RunFloat(CompileModel(m, fused_opts), inputs);
  auto unfused = RunFloat(CompileModel(m, unfused_opts), inputs);
  REQUIRE(fused.size() == unfused.size());
  for (size_t o = 0; o < fused.size(); ++o) {
    REQUIRE(fused[o].size() == unfused[o].size());
    // Same float32 math in another order: a few ulps, and 1e-6 absolute near zero.
    for (size_t i = 0; i < fused[o].size(); ++i)
      REQUIRE_MESSAGE(std::fabs(fused[o][i] - unfused[o][i]) <= 1e-6f + 1e-5f * std::fabs(unfused[o][i]),
                      "output " << o << " element " << i << ": fused " << fused[o][i] << ", unfused " << unfused[o][i]);
  }
}

}  // namespace

TEST_CASE("fusion: an elementwise chain with broadcasts becomes one kernel with the right values") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "w", {3}, {1.0f, 2.0f, 3.0f});
  AddFloatInit(g, "one", {}, {1.0f});
  AddNode(g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(g, "Mul", {"r", "w"}, {"m"}, "mul");
  AddNode(g, "Add", {"m", "one"}, {"y"}, "add");
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  REQUIRE(f.kernels.size() == 1);
  CHECK(f.trace.body.nodes.size() == 1);
  CHECK(f.kernels[0]->fused->members.size() == 3);
  CHECK(f.report.nodes_before == 3);
  CHECK(f.report.nodes_after == 1);
  // The scalar constant is folded into the program; w is its one loaded weight.
  CHECK(f.kernels[0]->inputs.size() == 2);

  float x[6] = {-1, 1, 2, 3, -4, 0.5f};
  kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 3})};
  auto y = RunFloat(CompileModel(m), in);
  const float expected[6] = {1, 3, 7, 4, 1, 2.5f};  // relu(x) * [1,2,3] + 1
  for (int i = 0; i < 6; ++i) CHECK(y[0][i] == doctest::Approx(expected[i]));
}

TEST_CASE("fusion: softmax takes its elementwise prologue and epilogue into one row-reduction kernel") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "5"});
  AddFloatInit(g, "s", {}, {0.5f});
  AddFloatInit(g, "b", {5}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f});
  AddNode(g, "Mul", {"x", "s"}, {"xs"}, "scale");
  AttrInt(AddNode(g, "Softmax", {"xs"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "Add", {"p", "b"}, {"y"}, "bias");
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  REQUIRE(f.kernels.size() == 1);
  CHECK(f.kernels[0]->fused->reduction == "Softmax");
  CHECK(f.kernels[0]->fused->program.reductions.size() == 2);  // max, then sum of exp

  std::vector<float> x = RandomFloats(20, 1);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {4, 5})};
  auto y = RunFloat(CompileModel(m), in);
  for (int r = 0; r < 4; ++r) {
    double mx = -1e30, sum = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, 0.5 * x[r * 5 + c]);
    for (int c = 0; c < 5; ++c) sum += std::exp(0.5 * x[r * 5 + c] - mx);
    for (int c = 0; c < 5; ++c) {
      const double want = std::exp(0.5 * x[r * 5 + c] - mx) / sum + 0.1 * (c + 1);
      CHECK(y[0][r * 5 + c] == doctest::Approx(want).epsilon(1e-5));
    }
  }
  CheckFusedMatchesUnfused(m, in);
}

TEST_CASE("fusion: a decomposed softmax is two kernels, the row result broadcasts into the epilogue") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3", "7"});
  AddInt64Init(g, "axes", {1}, {1});
  AddNode(g, "ReduceMax", {"x", "axes"}, {"mx"}, "max");
  AddNode(g, "Sub", {"x", "mx"}, {"d"}, "sub");
  AddNode(g, "Exp", {"d"}, {"e"}, "exp");
  AddNode(g, "ReduceSum", {"e", "axes"}, {"s"}, "sum");
  AddNode(g, "Div", {"e", "s"}, {"y"}, "div");
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  REQUIRE(f.kernels.size() == 2);
  CHECK(f.kernels[0]->fused->reduction == "ReduceMax");
  CHECK(f.kernels[1]->fused->reduction == "ReduceSum");
  CHECK(f.kernels[1]->fused->members.size() == 4);  // sub, exp, sum, div
  CHECK(f.kernels[1]->fused->program.outputs[0].per_row == false);
  CHECK(f.log.find("the region already has a reduction") != std::string::npos);

  std::vector<float> x = RandomFloats(21, 2);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {3, 7})};
  CheckFusedMatchesUnfused(m, in);
}

TEST_CASE("fusion: cuts at model outputs and at index maps after a reduction, with reasons") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3", "4"});
  AddNode(g, "Exp", {"x"}, {"e"}, "exp");
  AddNode(g, "Neg", {"e"}, {"n"}, "neg");            // e is also a model output: cut
  AttrInt(AddNode(g, "Softmax", {"n"}, {"p"}, "softmax"), "axis", -1);
  AttrInts(AddNode(g, "Transpose", {"p"}, {"t"}, "transpose"), "perm", {0, 2, 1});  // index map after reduction
  AddOutput(g, "e");
  AddOutput(g, "t");
  Fused f = FuseModel(m);
  CHECK(f.log.find("cut after Exp 'exp' (output 'e'): it is a model output") != std::string::npos);
  CHECK(f.log.find("the index map Transpose 'transpose' would follow the reduction") != std::string::npos);
  CHECK(f.kernels.size() == 3);  // exp | neg+softmax | transpose

  std::vector<float> x = RandomFloats(24, 3);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, 3, 4})};
  CheckFusedMatchesUnfused(m, in);
}

TEST_CASE("fusion: data movement fuses as index maps - arithmetic feeding a Concat is stored, not recomputed") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3", "4"});
  AddInput(g, "z", {"4", "6"});
  AddInt64Init(g, "shape", {2}, {6, 4});
  AddNode(g, "Sigmoid", {"x"}, {"s"}, "sigmoid");
  AddNode(g, "Reshape", {"s", "shape"}, {"r"}, "reshape");
  AttrInts(AddNode(g, "Transpose", {"r"}, {"t"}, "transpose"), "perm", {1, 0});
  AttrInt(AddNode(g, "Concat", {"t", "z"}, {"c"}, "concat"), "axis", 1);
  AddNode(g, "Tanh", {"c"}, {"y"}, "tanh");
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  // Sigmoid would run for every Concat element, once per Concat input: it is its own kernel;
  // the views between it and the Concat fold into the Concat's index arithmetic.
  REQUIRE(f.kernels.size() == 2);
  CHECK(f.kernels[0]->fused->members.size() == 1);
  CHECK(f.kernels[1]->fused->members.size() == 4);
  CHECK(f.log.find("cut after Sigmoid 'sigmoid' (output 's'): it would be computed for every element of Concat") !=
        std::string::npos);

  std::vector<float> x = RandomFloats(24, 4), z = RandomFloats(24, 5);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, 3, 4}),
                           kiln::TensorView::Host(z.data(), kiln::DType::kFloat32, {4, 6})};
  auto y = RunFloat(CompileModel(m), in);
  // y[i][j] = tanh(j < 6 ? sigmoid(x.flat[j * 4 + i]) : z[i][j - 6])
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 12; ++j) {
      const float want = std::tanh(j < 6 ? 1.0f / (1.0f + std::exp(-x[j * 4 + i])) : z[i * 6 + (j - 6)]);
      CHECK(y[0][i * 12 + j] == doctest::Approx(want).epsilon(1e-5));
    }
}

TEST_CASE("fusion: layer normalization with a residual prologue and symbolic rows") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "8"});
  AddInput(g, "res", {"N", "8"});
  AddFloatInit(g, "gamma", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  AddFloatInit(g, "beta", {8}, {0, 0, 0, 0, 1, 1, 1, 1});
  AddNode(g, "Add", {"x", "res"}, {"h"}, "residual");
  AttrFloat(AddNode(g, "LayerNormalization", {"h", "gamma", "beta"}, {"y"}, "ln"), "epsilon", 1e-5f);
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  REQUIRE(f.kernels.size() == 1);
  CHECK(f.kernels[0]->fused->program.num_sizes == 1);  // N is a size argument

  for (int64_t n : {1, 3}) {
    std::vector<float> x = RandomFloats(n * 8, 6), r = RandomFloats(n * 8, 7);
    kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {n, 8}),
                             kiln::TensorView::Host(r.data(), kiln::DType::kFloat32, {n, 8})};
    CheckFusedMatchesUnfused(m, in);
  }
}

TEST_CASE("the op table: every op has its meta function, CPU kernel and lowering, and nothing else does") {
  // What `kiln ops --check` (run by the build) reports.
  const std::vector<std::string> problems = kiln::ir::OpTableProblems();
  for (const std::string& p : problems) MESSAGE(p);
  CHECK(problems.empty());
  for (const kiln::fusion::FusionRule& rule : kiln::fusion::AllRules()) {
    INFO("op " << rule.op);
    switch (rule.kind) {
      case kiln::FusionKind::kElementwise:
      case kiln::FusionKind::kIndexMap: CHECK(static_cast<bool>(rule.lower)); break;
      case kiln::FusionKind::kReduction:
        CHECK(static_cast<bool>(rule.lower));
        CHECK(static_cast<bool>(rule.domain));
        break;
      case kiln::FusionKind::kLibrary: {
        // Never fused: the CUDA backend's claims give it a library (runtime/cuda/claims.cc).
        CHECK(rule.note.empty());
        const kiln::Library cuda = kiln::cuda::ClaimOp(rule.op, false).library;
        CHECK((cuda == kiln::Library::kCublasLt || cuda == kiln::Library::kCudnn));
        break;
      }
      case kiln::FusionKind::kCpuOnly:
        CHECK(!rule.note.empty());
        CHECK(kiln::cuda::ClaimOp(rule.op, false).library == kiln::Library::kCpuKernel);
        CHECK(kiln::cuda::ClaimOp(rule.op, false).reason == rule.note);
        break;
    }
  }
  CHECK(kiln::fusion::AllRules().size() == kiln::AllOpInfo().size());
  // The precision policy is a column too: Resize keeps its coordinates (inputs 1 and 2) as
  // declared, and an op is float32 only where its row says so.
  REQUIRE(kiln::FindOpInfo("Resize") != nullptr);
  CHECK(kiln::FindOpInfo("Resize")->precision.declared_inputs == 0b110u);
  CHECK(kiln::FindOpInfo("Exp")->precision.cls == kiln::PrecisionClass::kFloat32);
  CHECK(kiln::FindOpInfo("MatMul")->precision.cls == kiln::PrecisionClass::kLow);
  CHECK(kiln::FindOpInfo("kiln.Fused") == nullptr);
}

TEST_CASE("fusion: an empty Concat input is never read") {
  // Symbolic dims are >= 1 by the prologue's extent guards, so only a static 0 gets here.
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddInput(g, "z", {"0", "3"});
  AttrInt(AddNode(g, "Concat", {"x", "z"}, {"c"}, "concat"), "axis", 0);
  AddNode(g, "Relu", {"c"}, {"y"}, "relu");
  AddOutput(g, "y");
  REQUIRE(FuseModel(m).kernels.size() == 1);
  std::vector<float> x = RandomFloats(6, 8), z(1, 0.0f);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, 3}),
                           kiln::TensorView::Host(z.data(), kiln::DType::kFloat32, {0, 3})};
  auto y = RunFloat(CompileModel(m), in);
  REQUIRE(y[0].size() == 6);
  for (int i = 0; i < 6; ++i) CHECK(y[0][i] == std::max(0.0f, x[i]));
}

TEST_CASE("fusion: uint64 stays unfused (signed int64 arithmetic would be wrong past 2^63)") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "a", {"3"}, onnx::TensorProto::UINT64);
  AddInput(g, "b", {"3"}, onnx::TensorProto::UINT64);
  AddNode(g, "Mul", {"a", "b"}, {"p"}, "mul");
  AddNode(g, "Div", {"p", "b"}, {"y"}, "div");
  AddOutput(g, "y");
  Fused f = FuseModel(m);
  CHECK(f.kernels.empty());
  CHECK_MESSAGE(f.log.find("has dtype uint64, which a fused program cannot hold") != std::string::npos, f.log);
}

TEST_CASE("symbolic GatherElements index dims and reflect pads are checked by the prologue") {
  {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"A", "B"});
    AddInput(g, "i", {"C", "D"}, onnx::TensorProto::INT64);
    AttrInt(AddNode(g, "GatherElements", {"x", "i"}, {"y"}, "ge"), "axis", 0);
    AddOutput(g, "y");
    auto model = kiln::Model::Load(CompileModel(m));
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {kiln::Device::kCpu});
    float x[4] = {1, 2, 3, 4};
    int64_t idx[3] = {0, 0, 0};  // [1, 3] against data [2, 2]: dim 1 does not fit
    kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 2}),
                             kiln::TensorView::Host(idx, kiln::DType::kInt64, {1, 3})};
    std::vector<kiln::TensorView> out;
    kiln::Status st = ctx->Run(in, out);
    CHECK(st.code() == kiln::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find("guard") != std::string::npos, st.message());
  }
  {
    auto m = MakeModel(18);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"N", "2"});
    AddInt64Init(g, "pads", {4}, {2, 0, 2, 0});
    AttrString(AddNode(g, "Pad", {"x", "pads"}, {"y"}, "pad"), "mode", "reflect");
    AddOutput(g, "y");
    auto model = kiln::Model::Load(CompileModel(m));
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {kiln::Device::kCpu});
    float x[4] = {1, 2, 3, 4};  // N = 2: reflect pads of 2 need N >= 3
    kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 2})};
    std::vector<kiln::TensorView> out;
    kiln::Status st = ctx->Run(in, out);
    CHECK(st.code() == kiln::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find("guard") != std::string::npos, st.message());
    float x3[6] = {1, 2, 3, 4, 5, 6};
    kiln::TensorView in3[] = {kiln::TensorView::Host(x3, kiln::DType::kFloat32, {3, 2})};
    REQUIRE(ctx->Run(in3, out).ok());
    const float* y = static_cast<const float*>(out[0].data);
    const float want[14] = {5, 6, 3, 4, 1, 2, 3, 4, 5, 6, 3, 4, 1, 2};
    for (int k = 0; k < 14; ++k) CHECK(y[k] == want[k]);
  }
}
