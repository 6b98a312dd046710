// A plan per backend (compile.cc CompilePlans, EntryInfo::backend): an artifact with GPU archs
// whose CPU plan folds more activations into epilogues than the CUDA libraries apply, or runs
// Convs in NHWC (passes/channels_last.h), carries a "cuda" and a "cpu" entry with the same
// prologue, and a CPU context runs the "cpu" one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "compiler/codegen/nvrtc_compiler.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {
namespace {

const std::vector<float> kW = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f};  // [3, 2, 1, 1]
const std::vector<float> kBias = {0.5f, 0.25f, -4.0f};                   // [3, 1, 1]

// y = SiLU(Conv(x, W) + bias), x float32[1, 2, 2, 2]; with `silu` false, y = Conv(x, W) + bias.
onnx::ModelProto ConvSiluModel(bool silu) {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "2", "2"});
  AddFloatInit(g, "W", {3, 2, 1, 1}, kW);
  AddFloatInit(g, "k", {3, 1, 1}, kBias);
  AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv");
  AddNode(g, "Add", {"c", "k"}, {silu ? "cb" : "y"}, "add");
  if (silu) {
    AddNode(g, "Sigmoid", {"cb"}, {"s"}, "sig");
    AddNode(g, "Mul", {"cb", "s"}, {"y"}, "mul");
  }
  AddOutput(g, "y");
  return m;
}

std::vector<std::string> Ops(const EntryInfo& e) {
  std::vector<std::string> ops;
  for (const InstructionInfo& i : e.instructions) ops.push_back(i.op);
  return ops;
}

}  // namespace

TEST_CASE("backend plans: with GPU archs, Conv + SiLU gets a CUDA plan and a CPU plan, and the CPU runs its own") {
  if (!codegen::HaveNvrtc()) {
    MESSAGE("skipped: this build has no NVRTC, so it compiles no GPU archs");
    return;
  }
  compiler::CompileOptions gpu = OptionsFor(Device::kCuda);
  std::vector<std::string> log;
  gpu.log = [&](const std::string& line) { log.push_back(line); };
  compiler::CompileSummary summary;
  auto model = Model::Load(CompileModel(ConvSiluModel(true), gpu, &summary));
  REQUIRE(model.ok());
  REQUIRE(summary.entries.size() == 2);
  CHECK(summary.entries[0].backend == "cuda");
  CHECK(summary.entries[1].backend == "cpu");
  CHECK(std::count(log.begin(), log.end(), "entry 'default' (cpu plan): 1 instructions, arena 64 bytes") == 1);

  const std::vector<EntryInfo>& entries = model->entries();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].name == entries[1].name);
  CHECK(entries[0].prologue_text == entries[1].prologue_text);
  // cuDNN applies no SiLU: the CUDA plan runs it as a generated kernel; the CPU's Conv applies it.
  CHECK(entries[0].backend == "cuda");
  CHECK(Ops(entries[0]) == std::vector<std::string>{"Conv", "kiln.Fused"});
  CHECK(entries[1].backend == "cpu");
  CHECK(Ops(entries[1]) == std::vector<std::string>{"Conv"});
  // The CPU plan's kernels (none here beyond the CUDA plan's) get no cubins of their own.
  REQUIRE(model->kernels().size() == 1);
  CHECK_FALSE(model->kernels()[0].archs.empty());

  auto ctx = ExecutionContext::Create(*model, {.device = Device::kCpu});
  REQUIRE(ctx.ok());
  std::vector<float> x = {1, -2, 3, 0.5f, -1, 4, 0, 2};  // [1, 2, 2, 2]
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, 2, 2, 2})};
  std::vector<float> y;
  REQUIRE(RunFirstFloat(*ctx, in, &y).ok());
  CHECK(ctx->stats().last_entry == 1);
  REQUIRE(y.size() == 12);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 4; ++p) {
      const double v = double(kW[2 * c]) * x[p] + double(kW[2 * c + 1]) * x[4 + p] + kBias[c];
      CHECK(y[4 * c + p] == doctest::Approx(v / (1 + std::exp(-v))).epsilon(1e-6));
    }
  // Bit for bit what a CPU-only artifact (the same plan) gives.
  auto cpu_only = Model::Load(CompileModel(ConvSiluModel(true), CpuOnly()));
  REQUIRE(cpu_only.ok());
  REQUIRE(cpu_only->entries().size() == 1);
  CHECK(cpu_only->entries()[0].backend.empty());
  auto cpu_ctx = ExecutionContext::Create(*cpu_only, {.device = Device::kCpu});
  REQUIRE(cpu_ctx.ok());
  std::vector<float> y_cpu;
  REQUIRE(RunFirstFloat(*cpu_ctx, in, &y_cpu).ok());
  CHECK(y == y_cpu);
}

TEST_CASE("backend plans: where the CUDA libraries fold as much as the CPU, one entry serves every backend") {
  if (!codegen::HaveNvrtc()) {
    MESSAGE("skipped: this build has no NVRTC, so it compiles no GPU archs");
    return;
  }
  compiler::CompileSummary summary;
  auto model = Model::Load(CompileModel(ConvSiluModel(false), OptionsFor(Device::kCuda), &summary));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 1);
  CHECK(model->entries()[0].backend.empty());
  CHECK(summary.entries[0].backend.empty());
  // --no-fuse folds nothing on any backend: one entry too.
  auto unfused = Model::Load(CompileModel(ConvSiluModel(true), OptionsFor(Device::kCuda, false)));
  REQUIRE(unfused.ok());
  CHECK(unfused->entries().size() == 1);
}

TEST_CASE("backend plans: Convs the CPU runs in NHWC get a CPU plan, the CUDA plan keeps NCHW") {
  if (!codegen::HaveNvrtc()) {
    MESSAGE("skipped: this build has no NVRTC, so it compiles no GPU archs");
    return;
  }
  // x [1, 2, 2, 2] -> Conv 1x1 + Relu -> Conv 1x1: both fold alike, but the first Conv's Y is
  // the second's X, which the CPU plan keeps in NHWC.
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "2", "2"});
  AddFloatInit(g, "W", {2, 2, 1, 1}, {0.5f, -1.0f, 2.0f, 0.25f});
  AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv");
  AddNode(g, "Relu", {"c"}, {"r"}, "relu");
  AddNode(g, "Conv", {"r", "W"}, {"y"}, "conv2");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m, OptionsFor(Device::kCuda)));
  REQUIRE(model.ok());
  const std::vector<EntryInfo>& entries = model->entries();
  REQUIRE(entries.size() == 2);
  CHECK(Ops(entries[0]) == std::vector<std::string>{"Conv", "Conv"});
  CHECK(Ops(entries[1]) == std::vector<std::string>{"kiln.NhwcConv", "kiln.NhwcConv"});
  auto ctx = ExecutionContext::Create(*model, {.device = Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, -2, 3, 0.5f, -1, 4, 0, 2};  // [1, 2, 2, 2]
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, 2, 2, 2})};
  std::vector<float> y;
  REQUIRE(RunFirstFloat(*ctx, in, &y).ok());
  CHECK(ctx->stats().last_entry == 1);
  // By hand: r = Relu(W x), y = W r, per pixel p.
  REQUIRE(y.size() == 8);
  for (int p = 0; p < 4; ++p) {
    const float r0 = std::max(0.0f, 0.5f * x[p] - 1.0f * x[4 + p]);
    const float r1 = std::max(0.0f, 2.0f * x[p] + 0.25f * x[4 + p]);
    CHECK(y[p] == doctest::Approx(0.5f * r0 - 1.0f * r1));
    CHECK(y[4 + p] == doctest::Approx(2.0f * r0 + 0.25f * r1));
  }
}

}  // namespace kiln::testing
