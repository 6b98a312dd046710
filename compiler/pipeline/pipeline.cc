#include "compiler/pipeline/pipeline.h"

#include <iterator>

#include "compiler/compile.h"
#include "compiler/pipeline/stage_work.h"
#include "runtime/clock.h"

namespace kiln::compiler {
namespace {

bool Always(const CompileOptions&) { return true; }
bool Fuses(const CompileOptions& o) { return o.fuse; }
bool ChangesPrecision(const CompileOptions& o) {
  return o.precision.precision != passes::Precision::kFp32 || o.precision.io_dtype != DType::kFloat32;
}

constexpr StageDef kStages[] = {
    {Stage::kImport, "import",
     "the model as its frontend reads it, op for op, with the profile's fixed dims and values", Always, RunImport},
    {Stage::kCanonical, "canonical",
     "shapes inferred and specialised for the entry, constants and shape arithmetic folded, control flow lowered, "
     "dead code removed",
     Always, RunCanonical},
    {Stage::kPrecision, "precision",
     "weights and activations converted to fp16 or bf16, with Casts around what stays float32", ChangesPrecision,
     RunPrecision},
    {Stage::kFusion, "fusion", "epilogues folded into MatMul, Gemm and Conv; fused regions of generated kernels",
     Fuses, RunFusion},
    {Stage::kExecutors, "executors", "the backend and library of every op, and why", Always, RunExecutors},
    {Stage::kPlan, "plan", "the memory plan: each tensor's place in the arena, and the arena's size", Always, RunPlan},
    {Stage::kCodegen, "codegen", "the generated kernels' CUDA source, compiled by NVRTC for the target archs (--arch)",
     Always, RunCodegen},
    {Stage::kSerialize, "serialize", "the .kiln artifact written", Always, RunSerialize},
};
// One row per stage, in the enum's order (StageOf indexes by it).
static_assert(std::size(kStages) == static_cast<size_t>(Stage::kSerialize) + 1);

}  // namespace

std::span<const StageDef> Stages() { return kStages; }

const StageDef& StageOf(Stage stage) { return kStages[static_cast<size_t>(stage)]; }

std::string StageNames() {
  std::string names;
  for (const StageDef& s : kStages) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

Result<Stage> ParseStage(std::string_view name) {
  for (const StageDef& s : kStages)
    if (s.name == name) return s.stage;
  return InvalidArgument("unknown stage '" + std::string(name) + "'; the stages are " + StageNames());
}

Status CheckStopAfter(const CompileOptions& options) {
  const StageDef& s = StageOf(options.stop_after);
  if (s.enabled(options)) return Status::Ok();
  // Fusion and precision are the stages that can be off.
  const std::string why = options.stop_after == Stage::kFusion
                              ? "it is off with --no-fuse"
                              : "it runs only with --precision fp16 or bf16, or --io-precision fp16 or bf16";
  return InvalidArgument("the " + std::string(s.name) + " stage does not run for this compile (" + why +
                         "): there is no trace of it to stop after");
}

Status RunStages(Stage first, Stage last, StageWork& work) {
  for (const StageDef& s : kStages) {
    if (s.stage < first || s.stage > last || s.stage > work.options.stop_after || !s.enabled(work.options)) continue;
    StageOutput out;
    const int64_t start = NowNs();
    const Status st = s.run(work, out);
    const int64_t ns = NowNs() - start;
    if (!st.ok()) {
      work.failed = s.stage;
      return st;
    }
    if (work.entry != nullptr && work.entry->undecided) return Status::Ok();
    for (const std::string& line : out.log) work.log(line);
    if (work.record == nullptr) continue;
    std::string text = out.print ? out.print() : "";
    for (const std::string& note : out.notes) text += "# " + note + "\n";
    const int64_t time_ns = out.shared_ns >= 0 ? out.shared_ns : ns;
    work.record->stages.push_back({std::string(s.name), std::move(text), time_ns, out.ops});
  }
  return Status::Ok();
}

}  // namespace kiln::compiler
