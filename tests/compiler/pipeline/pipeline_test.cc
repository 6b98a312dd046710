// The compiler's pipeline (compiler/pipeline/pipeline.h): its stages in order, named and
// described; the options that turn a stage off; RunStages recording each stage that ran into
// the artifact; and CompileOptions::stop_after (`kiln compile --to`), which makes no artifact
// and gives each entry's trace of the stage it stopped after.
#include "compiler/pipeline/pipeline.h"

#include <doctest/doctest.h>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using kiln::compiler::CompileSummary;
using kiln::compiler::Stage;

namespace {

// x float32[N, 3] -> y = x + c: one generated kernel; with profiles N=1 and N in 2..8, two
// entries.
onnx::ModelProto AddConstantModel() {
  auto m = kiln::testing::MakeModel(13);
  auto* g = m.mutable_graph();
  kiln::testing::AddInput(g, "x", {"N", "3"});
  kiln::testing::AddFloatInit(g, "c", {3}, {1.0f, 2.0f, 3.0f});
  kiln::testing::AddNode(g, "Add", {"x", "c"}, {"y"}, "add");
  kiln::testing::AddOutput(g, "y");
  return m;
}

kiln::compiler::CompileOptions TwoProfiles(Stage stop_after) {
  kiln::compiler::CompileOptions options = kiln::testing::WithProfiles({"x:N=1", "x:N=2..8"});
  options.stop_after = stop_after;
  return options;
}

}  // namespace

TEST_CASE("pipeline: the stages in the order they run, each named and described") {
  std::vector<std::string> names;
  for (const kiln::compiler::StageDef& s : kiln::compiler::Stages()) {
    names.emplace_back(s.name);
    CHECK(&kiln::compiler::StageOf(s.stage) == &s);
    CHECK_FALSE(s.description.empty());
  }
  CHECK(names == std::vector<std::string>{"import", "canonical", "precision", "fusion", "executors", "plan", "codegen",
                                          "serialize"});
  CHECK(kiln::compiler::StageNames() == "import, canonical, precision, fusion, executors, plan, codegen, serialize");
}

TEST_CASE("pipeline: ParseStage finds a stage by name, and an unknown name's error names every stage") {
  auto plan = kiln::compiler::ParseStage("plan");
  REQUIRE(plan.ok());
  CHECK(*plan == Stage::kPlan);
  auto fuse = kiln::compiler::ParseStage("fuse");
  REQUIRE_FALSE(fuse.ok());
  CHECK(fuse.status().code() == kiln::StatusCode::kInvalidArgument);
  CHECK(fuse.status().message() ==
        "unknown stage 'fuse'; the stages are import, canonical, precision, fusion, executors, plan, codegen, "
        "serialize");
}

TEST_CASE("pipeline: precision runs where it changes a dtype, fusion unless off, and the artifact records what ran") {
  kiln::compiler::CompileOptions options = kiln::testing::CpuOnly();
  const auto enabled = [&](Stage s) { return kiln::compiler::StageOf(s).enabled(options); };
  CHECK_FALSE(enabled(Stage::kPrecision));
  CHECK(enabled(Stage::kFusion));
  auto stage_names = [&] {
    auto model = kiln::Model::Load(kiln::testing::CompileModel(AddConstantModel(), options));
    REQUIRE_MESSAGE(model.ok(), model.status().ToString());
    return model->entries()[0].compile.stage_names;
  };
  options.precision.io_dtype = kiln::DType::kFloat16;
  CHECK(enabled(Stage::kPrecision));
  options.fuse = false;
  CHECK_FALSE(enabled(Stage::kFusion));
  CHECK(stage_names() == std::vector<std::string>{"import", "canonical", "precision", "executors", "plan", "codegen"});
  options.precision.io_dtype = kiln::DType::kFloat32;
  options.precision.precision = kiln::passes::Precision::kBf16;
  options.fuse = true;
  CHECK(stage_names() ==
        std::vector<std::string>{"import", "canonical", "precision", "fusion", "executors", "plan", "codegen"});
}

TEST_CASE("pipeline: work done once for several entries reports its time in each (one import, one codegen)") {
  // No fixed dim: one import.
  kiln::compiler::CompileOptions options = kiln::testing::WithProfiles({"x:N=1..4", "x:N=5..8"});
  CompileSummary summary;
  auto model = kiln::Model::Load(kiln::testing::CompileModel(AddConstantModel(), options, &summary));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(summary.entries.size() == 2);
  const auto& a = summary.entries[0].stages;
  const auto& b = summary.entries[1].stages;
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() == model->entries()[0].compile.stage_names.size());
  for (size_t s = 0; s < a.size(); ++s) {
    INFO(a[s].name);
    CHECK(a[s].name == model->entries()[0].compile.stage_names[s]);
    CHECK(a[s].ops == model->entries()[0].compile.stage_ops[s]);
    CHECK(a[s].time_ns > 0);
    if (a[s].name == "import" || a[s].name == "codegen") CHECK(a[s].time_ns == b[s].time_ns);
  }
}

TEST_CASE("pipeline: a compile stopped after a stage makes no artifact and gives each entry's trace of it") {
  for (Stage stop :
       {Stage::kImport, Stage::kCanonical, Stage::kFusion, Stage::kExecutors, Stage::kPlan, Stage::kCodegen}) {
    const std::string name(kiln::compiler::StageOf(stop).name);
    INFO("stop after " << name);
    CompileSummary summary;
    std::vector<std::string> log;
    kiln::compiler::CompileOptions options = TwoProfiles(stop);
    options.log = [&](const std::string& line) { log.push_back(line); };
    auto bytes = kiln::testing::TryCompileModel(AddConstantModel(), options, &summary);
    REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
    CHECK(bytes->empty());
    CHECK(std::find(log.begin(), log.end(), "serialize") == log.end());
    REQUIRE(summary.entries.size() == 2);
    CHECK(summary.entries[0].name == "N=1");
    CHECK(summary.entries[1].name == "N in 2..8");
    for (const kiln::compiler::EntrySummary& e : summary.entries) {
      CHECK_MESSAGE(e.last_trace.starts_with("# stage: " + name + "\n"), e.last_trace);
      CHECK(e.instructions == (stop >= Stage::kPlan ? 1 : -1));  // x + c: one generated kernel
    }
  }
  // The whole compile: an artifact, and no trace in the summary.
  CompileSummary summary;
  auto bytes = kiln::testing::TryCompileModel(AddConstantModel(), TwoProfiles(Stage::kSerialize), &summary);
  REQUIRE(bytes.ok());
  CHECK_FALSE(bytes->empty());
  REQUIRE(summary.entries.size() == 2);
  CHECK(summary.entries[0].last_trace.empty());
}

TEST_CASE("pipeline: stopping after a stage these options leave off is an error saying which option turns it on") {
  kiln::compiler::CompileOptions fusion_off = TwoProfiles(Stage::kFusion);
  fusion_off.fuse = false;
  auto a = kiln::testing::TryCompileModel(AddConstantModel(), fusion_off);
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().code() == kiln::StatusCode::kInvalidArgument);
  CHECK(a.status().message() ==
        "the fusion stage does not run for this compile (it is off with --no-fuse): there is no trace of it to stop "
        "after");
  auto b = kiln::testing::TryCompileModel(AddConstantModel(), TwoProfiles(Stage::kPrecision));
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message() ==
        "the precision stage does not run for this compile (it runs only with --precision fp16 or bf16, or "
        "--io-precision fp16 or bf16): there is no trace of it to stop after");
  kiln::compiler::CompileOptions fp16 = TwoProfiles(Stage::kPrecision);
  fp16.precision.precision = kiln::passes::Precision::kFp16;
  CompileSummary summary;
  auto c = kiln::testing::TryCompileModel(AddConstantModel(), fp16, &summary);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  REQUIRE(summary.entries.size() == 2);
  CHECK(summary.entries[0].last_trace.starts_with("# stage: precision\n"));
}
