// What the compiler's stages (pipeline.h) read and write while a compile runs, and the run
// function of each stage, one file each (pipeline/<stage>_stage.cc). The driver (compile.cc)
// fills a StageWork for each level a stage runs at: a profile (import), an entry (canonical to
// plan), the artifact (codegen, per entry, and serialize).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/ir/trace.h"
#include "compiler/passes/canonicalize.h"
#include "compiler/passes/epilogue.h"
#include "compiler/pipeline/pipeline.h"
#include "compiler/profile.h"
#include "compiler/serialize/artifact_writer.h"

namespace kiln::compiler {

// One profile: what its import stage starts from, and leaves for the profile's entries.
struct ProfileWork {
  const ResolvedProfile* profile = nullptr;
  // The model imported once with its own shapes (its value inputs marked when this attempt uses
  // them) and that import's time: a profile that fixes no dims starts from it, one that fixes
  // dims imports the model again.
  const ir::Trace* model = nullptr;
  int64_t model_ns = 0;
  bool value_inputs = false;  // mark value inputs in a model imported again
  // Set by the import stage: the profile's trace; every symbol's range, the profile's for dims
  // (>= 0 where it says nothing) and any int64 for the value symbols (passes/value_inputs.h),
  // which may be 0 or negative; the value symbols' inputs (symbol -> input name).
  ir::Trace trace;
  std::map<std::string, DimRange> ranges;
  std::map<std::string, std::string> value_symbols;
  // The import stage's record, which every entry of the profile starts with.
  serialize::EntryRecord record;
};

// One entry on its way through the entry stages.
struct EntryWork {
  std::vector<passes::Assumption> assumptions;  // the If outcomes it is compiled for
  ir::Trace trace;                              // the last entry stage's trace
  // Set by the canonical stage instead of a trace: an If condition on symbols no assumption
  // decides (the driver compiles one entry for each outcome).
  std::optional<ir::Sym> undecided;
  int ops_before_fusion = 0;  // nodes of the trace the fusion stage starts from (or would)
  int ops_after_fusion = 0;   // and of its result
  std::string arena_text;     // set by the plan stage: the arena size, for the log and summary
  // What the fusion stage folds into epilogues: every activation for a plan the CPU backend
  // runs, only what the CUDA libraries apply for the CUDA backend's (passes/epilogue.h).
  passes::EpilogueActivations activations = passes::EpilogueActivations::kAny;
  // Whether the fusion stage puts 2-D Convs in NHWC (passes/channels_last.h): for a plan the
  // CPU backend runs.
  bool channels_last = false;
  // Whether the fusion stage makes each recognised attention one Attention op
  // (passes/attention.h): for a plan the CPU backend runs.
  bool attention = false;
  // Whether it makes one Attention op of those cuDNN's fused attention takes
  // (passes/cudnn_sdpa_filter.h), and leaves the others written out (MatMuls on cuBLASLt, the
  // softmax a generated kernel): for the `cuda` plan.
  bool cuda_attention = false;
  // What it folds quantized Conv and MatMul groups into (passes/qdq.h): QLinearConv and
  // QLinearMatMul, which oneDNN runs, for a plan the CPU backend runs; cuBLASLt's int8 GEMM for
  // the `cuda` plan.
  passes::QdqTarget qdq = passes::QdqTarget::kNone;
  serialize::EntryRecord record;  // its name and ranges, the stages recorded, the plan stage's plan
};

// "entry 'N=1'" in the compile log, or "entry 'N=1' (cpu plan)" for an entry of one backend.
inline std::string EntryLabel(const serialize::EntryRecord& r) {
  return "entry '" + r.name + "'" + (r.backend.empty() ? "" : " (" + r.backend + " plan)");
}

// One stage's result, for RunStages to record and log.
struct StageOutput {
  // The stage's printed trace, recorded with it (kiln inspect, --to): called once the stage's
  // time is taken, since printing is not the stage's work. Then `notes`, as "# " lines.
  std::function<std::string()> print;
  std::vector<std::string> notes;
  int ops = -1;  // nodes in the trace
  // Recorded instead of this run's own time: the time of work done once for several entries
  // (one import of the model for the profiles that fix no dims; one emission and NVRTC run for
  // the whole artifact).
  int64_t shared_ns = -1;
  // What the stage found, written to the compile log once it has run ("entry 'N=1': fusion:
  // ..."). Progress (work a stage is about to do) it writes to StageWork::log itself.
  std::vector<std::string> log;
};

struct StageWork {
  const CompileOptions& options;
  const ImportFn& import;
  const std::function<void(const std::string&)>& log;  // the compile log (never empty)
  serialize::ArtifactRecord& artifact;
  CompileSummary* summary;  // may be null
  ProfileWork* profile = nullptr;  // the import stage's, and the canonical stage's input
  EntryWork* entry = nullptr;      // the entry stages'
  // Where RunStages records each stage: the profile's record (import), the entry's (canonical
  // to plan), an entry of the artifact (codegen); null for serialize.
  serialize::EntryRecord* record = nullptr;
  int64_t codegen_ns = -1;    // the first codegen run's emission and NVRTC time, for every entry
  std::vector<uint8_t> bytes = {};  // the serialize stage's artifact
  std::optional<Stage> failed = {};  // the stage whose error RunStages returned
};

// The run of each stage (pipeline.cc's list).
Status RunImport(StageWork& work, StageOutput& out);
Status RunCanonical(StageWork& work, StageOutput& out);
Status RunPrecision(StageWork& work, StageOutput& out);
Status RunFusion(StageWork& work, StageOutput& out);
Status RunExecutors(StageWork& work, StageOutput& out);
Status RunPlan(StageWork& work, StageOutput& out);
Status RunCodegen(StageWork& work, StageOutput& out);
Status RunSerialize(StageWork& work, StageOutput& out);

// The precision stage's options checked against the model (precision_stage.cc), once, before
// any profile: each --keep-fp32 name must be a node name or an op type of `model`, If branches
// included; kInvalidArgument naming the first that is not.
Status CheckKeepFp32(const ir::Trace& model, const std::vector<std::string>& names);

}  // namespace kiln::compiler
