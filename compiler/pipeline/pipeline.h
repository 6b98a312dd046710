// The compiler's pipeline: its stages in the order they run, each with a name (the name of its
// trace in the artifact, and `kiln compile --to`'s value), a one-line description, whether it
// runs for a compile's options, and what it does; and the one loop that runs them (RunStages),
// timing each stage, recording its printed trace for the artifact (`kiln inspect`), writing
// what it found to the compile log, and stopping after CompileOptions::stop_after. IREE's
// compiler/src/iree/compiler/Pipelines/Pipelines.h enumerates its phases the same way.
//
//   for (const StageDef& s : Stages()) std::cout << s.name << ": " << s.description << "\n";
//   KILN_ASSIGN_OR_RETURN(options.stop_after, ParseStage("fusion"));
//
// Stages run at three levels (compile.cc): `import` once per profile; `canonical` to `plan` once
// per entry (the canonical stage makes an entry for each outcome of an If on shapes); `codegen`
// and `serialize` once per artifact (codegen records its text in every entry).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln::compiler {

struct CompileOptions;  // compile.h
struct StageWork;       // pipeline/stage_work.h: what the stages read and write
struct StageOutput;

enum class Stage { kImport, kCanonical, kPrecision, kFusion, kExecutors, kPlan, kCodegen, kSerialize };

struct StageDef {
  Stage stage;
  std::string_view name;
  std::string_view description;
  // Whether the stage runs for `options` (the precision stage only where it changes a dtype,
  // the fusion stage unless --no-fuse); a stage that does not run records no trace.
  bool (*enabled)(const CompileOptions& options);
  // Runs the stage on `work`; `out` says what to record and log.
  Status (*run)(StageWork& work, StageOutput& out);
};

// Every stage, in the order they run.
std::span<const StageDef> Stages();
const StageDef& StageOf(Stage stage);

// The names of the stages in order, joined by ", ".
std::string StageNames();

// The stage called `name`; kInvalidArgument naming every stage otherwise.
Result<Stage> ParseStage(std::string_view name);

// kInvalidArgument when options.stop_after names a stage that does not run for `options`,
// saying which option turns it on or off.
Status CheckStopAfter(const CompileOptions& options);

// Runs the stages from `first` to `last` that are enabled for work.options, in order, none past
// options.stop_after. For each: times it, writes the lines it found (StageOutput::log) to the
// compile log, and records its name, trace, time and op count in work.record, if any. Stops
// early, with work.entry->undecided set, when the canonical stage meets an If that no
// assumption decides. An error is the stage's, with work.failed set to it.
Status RunStages(Stage first, Stage last, StageWork& work);

}  // namespace kiln::compiler
