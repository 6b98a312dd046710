#include "compiler/compile.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <new>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/codegen/nvrtc_compiler.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/attention.h"
#include "compiler/passes/channels_last.h"
#include "compiler/passes/qdq.h"
#include "compiler/passes/value_inputs.h"
#include "compiler/pipeline/stage_work.h"
#include "compiler/provenance.h"
#include "runtime/clock.h"

namespace kiln::compiler {
namespace {

// The profile's name, then the If outcomes the entry was compiled for: "N in 1..64; T > 1".
std::string EntryName(const std::string& profile, const std::vector<passes::Assumption>& assumptions) {
  std::string s;
  for (const auto& a : assumptions)
    s += (s.empty() ? "" : ", ") + (a.holds ? a.condition.ToString() : "not " + a.condition.ToString());
  if (s.empty()) return profile;
  return profile == "default" ? s : profile + "; " + s;
}

// The entry from the fusion stage to the plan stage, into `plans`. An artifact with GPU archs
// folds into epilogues only the activations the CUDA libraries apply (passes/epilogue.h) and
// keeps NCHW; the CPU backend folds every activation, runs 2-D Convs in NHWC
// (passes/channels_last.h), quantized groups as integer ops (passes/qdq.h: the CUDA plan's
// are its quantized MatMuls on cuBLASLt's int8 GEMM) and attention as one
// op (passes/attention.h), where the CUDA plan
// makes one op only of the attentions cuDNN's fused attention takes (passes/cudnn_sdpa_filter.h).
// Where the two differ, the entry gets a plan for each backend
// (EntryRecord::backend: "cuda" first, then "cpu", the same prologue), so that a machine
// without the GPU runs the plan the CPU is fastest with. Otherwise one plan serves every
// backend. `plans` holds what was compiled when a stage fails.
Status CompilePlans(StageWork& work, EntryWork entry, std::vector<EntryWork>* plans) {
  const CompileOptions& options = work.options;
  using passes::EpilogueActivations;
  const bool fusion = options.fuse && options.stop_after >= Stage::kFusion;
  bool split = false;
  if (!options.archs.empty()) {
    entry.activations = EpilogueActivations::kGpuLibraries;
    entry.cuda_attention = fusion;
    entry.qdq = fusion ? passes::QdqTarget::kCuda : passes::QdqTarget::kNone;
    if (fusion) {
      std::vector<std::string> gpu, cpu;  // one line per annotated node, naming what it folded
      KILN_RETURN_IF_ERROR(passes::FoldEpilogues(entry.trace, &gpu, EpilogueActivations::kGpuLibraries).status());
      KILN_ASSIGN_OR_RETURN(const ir::Trace cpu_trace,
                            passes::FoldEpilogues(entry.trace, &cpu, EpilogueActivations::kAny));
      split = gpu != cpu || (options.cpu_channels_last && passes::ChannelsLastChanges(cpu_trace)) ||
              passes::AttentionChanges(entry.trace) || passes::QdqChanges(entry.trace);
    }
  } else {
    entry.channels_last = fusion && options.cpu_channels_last;  // no GPU plan: the CPU backend's
    entry.attention = fusion;
    entry.qdq = fusion ? passes::QdqTarget::kCpu : passes::QdqTarget::kNone;
  }
  plans->push_back(std::move(entry));
  if (split) {
    plans->push_back(plans->front());
    plans->front().record.backend = "cuda";
    plans->back().record.backend = "cpu";
    plans->back().activations = EpilogueActivations::kAny;
    plans->back().channels_last = options.cpu_channels_last;
    plans->back().attention = true;
    plans->back().cuda_attention = false;
    plans->back().qdq = passes::QdqTarget::kCpu;
  }
  for (EntryWork& plan : *plans) {
    work.entry = &plan;
    work.record = &plan.record;
    const Status st = RunStages(Stage::kFusion, Stage::kPlan, work);
    work.entry = nullptr;
    work.record = nullptr;
    KILN_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

// The entries of one profile, each through the entry stages (canonical to plan) into
// work.artifact: one for the profile, then one for each outcome of every If on shapes or values
// that no assumption decides (at most options.max_entries). An entry whose assumption makes
// the model invalid is dropped; when every one is, the first such error.
Status CompileEntries(StageWork& work) {
  const CompileOptions& options = work.options;
  ProfileWork& profile = *work.profile;
  std::deque<std::vector<passes::Assumption>> pending{{}};
  Status first_error;
  int made = 0;
  while (!pending.empty()) {
    EntryWork entry;
    entry.assumptions = std::move(pending.front());
    pending.pop_front();
    entry.record.name = EntryName(profile.profile->name, entry.assumptions);
    entry.record.ranges = profile.ranges;
    entry.record.stages = profile.record.stages;
    const std::string name = entry.record.name;  // the entry is moved into CompilePlans
    work.entry = &entry;
    work.record = &entry.record;
    Status st = RunStages(Stage::kCanonical, Stage::kPrecision, work);
    work.entry = nullptr;
    work.record = nullptr;
    if (entry.undecided) {
      const ir::Sym c = *entry.undecided;
      if (made + static_cast<int>(pending.size()) + 2 > options.max_entries)
        return ResourceExhausted(fmt::format("If conditions on input shapes or values need more than {} entries", options.max_entries));
      work.log(fmt::format("entry '{}': If condition {} depends on input shapes or values; compiling one entry for "
                           "each outcome",
                           name, c.ToString()));
      auto yes = entry.assumptions, no = entry.assumptions;
      yes.push_back({c, true});
      no.push_back({c, false});
      pending.push_back(std::move(yes));
      pending.push_back(std::move(no));
      continue;
    }
    const bool speculative = !entry.assumptions.empty();
    std::vector<EntryWork> plans;
    if (st.ok()) st = CompilePlans(work, std::move(entry), &plans);
    if (!st.ok()) {
      // A precision error is the options', not an assumption's.
      if (!speculative || work.failed == Stage::kPrecision) return st;
      // A speculative entry whose assumption makes the model invalid is dropped: inputs
      // satisfying it could not have run anywhere.
      work.log(fmt::format("entry '{}' dropped: {}", name, st.message()));
      if (first_error.ok()) first_error = st;
      continue;
    }
    for (EntryWork& plan_work : plans) {
      if (options.stop_after >= Stage::kPlan) {
        const passes::MemoryPlan& plan = plan_work.record.plan;
        for (const ir::Node& n : plan.trace.body.nodes)
          for (const auto* ids : {&n.inputs, &n.outputs})
            for (ir::ValueId id : *ids)
              if (id != ir::kNoValue && plan.trace.value(id).rank() > kMaxRank)
                return Unimplemented(fmt::format("node '{}' ({}): tensor '{}' has rank {}; the runtime supports rank "
                                                 "<= {}",
                                                 n.name, n.op, plan.trace.value(id).name, plan.trace.value(id).rank(),
                                                 kMaxRank));
        const int instructions = static_cast<int>(plan.trace.body.nodes.size());
        if (work.summary && work.artifact.entries.empty()) {
          work.summary->ops_before_fusion = plan_work.ops_before_fusion;
          work.summary->ops_after_fusion = plan_work.ops_after_fusion;
        }
        if (work.summary)
          work.summary->entries.push_back(
              {name, instructions, plan_work.arena_text, plan.lower_bound_bytes.value_or(-1), "",
               plan_work.record.backend, {}});
        work.log(fmt::format("{}: {} instructions, arena {}", EntryLabel(plan_work.record), instructions,
                             plan_work.arena_text));
      }
      work.artifact.entries.push_back(std::move(plan_work.record));
    }
    ++made;
  }
  return made ? Status::Ok() : first_error;
}

// A compile error about a value Kiln needs at compile time (a Reduce's axes, a Resize's sizes)
// that comes from runtime inputs, with the profile that would specialise the entry on their
// values (compiler/profile.h) added: "...; it depends on the values of input 'axes' (int64[2]):
// compile an entry per value the callers send, for example --profile 'axes=[V0,V1]', ...".
// Inputs every profile already fixes are not named again; no profile is shown when the value
// also depends on an input whose elements a profile cannot fix (a large tensor).
Status WithValueProfileHint(const Status& st, const ir::Trace& imported, const std::vector<ResolvedProfile>& profiles) {
  const std::string msg(st.message());
  if (st.code() != StatusCode::kUnimplemented ||
      (msg.find("not known at compile time") == std::string::npos && msg.find("data-dependent") == std::string::npos))
    return st;
  // The values the message names, in quotes or parentheses.
  std::vector<ir::ValueId> named;
  for (size_t id = 0; id < imported.values.size(); ++id) {
    const std::string& name = imported.values[id].name;
    if (!name.empty() && (msg.find("'" + name + "'") != std::string::npos || msg.find("(" + name + ")") != std::string::npos))
      named.push_back(static_cast<ir::ValueId>(id));
  }
  const std::set<ir::ValueId> reaching = passes::ValuesReaching(imported, named);
  // A loop body's parameter (a carried value) changes from iteration to iteration: no profile
  // fixes it.
  std::function<bool(const ir::Block&)> reads_parameter = [&](const ir::Block& block) {
    for (ir::ValueId id : block.inputs)
      if (reaching.count(id)) return true;
    for (const ir::Node& n : block.nodes)
      for (const auto& [name, sub] : n.blocks)
        if (sub && reads_parameter(*sub)) return true;
    return false;
  };
  if (reads_parameter(imported.body)) return st;
  std::vector<std::string> inputs, templates;
  for (ir::ValueId id : imported.inputs) {
    const ir::Value& v = imported.value(id);
    const int64_t count = passes::ValueElements(v);
    const bool fixable = !v.is_const() && passes::CanFixValues(v.dtype) && count >= 1 &&
                         count <= passes::kMaxValueElements;
    if (!reaching.count(id)) continue;
    // The value also depends on an input's data no profile can fix (a tensor's elements):
    // fixing the others would not make it known.
    if (!fixable && !v.is_const()) return st;
    if (!profiles.empty() && std::all_of(profiles.begin(), profiles.end(),
                                         [&](const ResolvedProfile& p) { return p.values.count(v.name) > 0; }))
      continue;
    inputs.push_back(fmt::format("'{}' ({}{})", v.name, DTypeName(v.dtype), ir::ShapeToString(v.shape)));
    std::vector<std::string> elements;
    for (int64_t e = 0; e < passes::ValueElements(v); ++e) elements.push_back(fmt::format("V{}", e));
    templates.push_back(v.shape.empty() ? v.name + "=V" : fmt::format("{}=[{}]", v.name, fmt::join(elements, ",")));
  }
  if (inputs.empty()) return st;
  return Status(st.code(),
                fmt::format("{}; it depends on the values of input{} {}: compile an entry for each value the callers "
                            "send, for example --profile '{}' (the prologue checks the values, which must be in host "
                            "memory), or remove the input with --constant-input NAME=FILE",
                            msg, inputs.size() > 1 ? "s" : "", fmt::join(inputs, ", "), fmt::join(templates, ";")));
}

// The model through every stage (options.stop_after ends it early): import, then for each
// profile its import and entries, then the artifact's code generation and serialisation.
// Errors as CompileImported's; std::bad_alloc escapes, for CompileImported to report.
Result<std::vector<uint8_t>> RunPipeline(const std::string& source, const std::string& model_sha256,
                                         const ImportFn& import, const CompileOptions& options,
                                         CompileSummary* summary) {
  KILN_RETURN_IF_ERROR(CheckStopAfter(options));
  // GPU archs need NVRTC (opened at run time, codegen/nvrtc_compiler.h): say so before the
  // stages' work rather than at the codegen stage, whether or not the model has kernels to
  // compile, so that the same flags make an artifact everywhere or fail everywhere alike.
  if (!options.archs.empty() && options.stop_after >= Stage::kCodegen) KILN_RETURN_IF_ERROR(codegen::LoadNvrtc());
  auto log = [&](const std::string& line) { if (options.log) options.log(line); };
  const std::function<void(const std::string&)> log_fn = log;
  const int64_t start = NowNs();
  log(fmt::format("import {}", source));
  int64_t t0 = NowNs();
  KILN_ASSIGN_OR_RETURN(const ir::Trace plain, import(options.input_shapes));
  ir::Trace imported = plain;
  const std::vector<std::string> value_symbols = passes::MarkValueInputs(imported);
  const int64_t import_ns = NowNs() - t0;
  if (!value_symbols.empty())
    log(fmt::format("value inputs: If conditions or shape operands depend on {}; the prologue binds them from the input's values, "
                    "which must be in host memory",
                    fmt::join(value_symbols, ", ")));
  KILN_RETURN_IF_ERROR(CheckKeepFp32(imported, options.precision.keep_fp32));

  const std::vector<Profile> profiles =
      options.profiles.empty() ? std::vector<Profile>{Profile{"default", {}, {}}} : options.profiles;
  std::vector<ResolvedProfile> resolved;
  for (size_t i = 0; i < profiles.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(ResolvedProfile r, ResolveProfile(profiles[i], imported));
    for (size_t j = 0; j < resolved.size(); ++j)
      if (resolved[j].Includes(r) && r.Includes(resolved[j]))
        return InvalidArgument(fmt::format("profiles '{}' and '{}' admit the same shapes ({})", profiles[j].text,
                                           profiles[i].text, r.name));
    resolved.push_back(std::move(r));
  }
  // Run takes the first entry whose prologue passes: specialised entries go first.
  const std::vector<size_t> order = TryOrder(resolved);
  if (!std::is_sorted(order.begin(), order.end())) {
    std::string names;
    for (size_t i : order) names += (names.empty() ? "'" : ", '") + resolved[i].name + "'";
    log("entries ordered so that one whose shapes fit inside another's is tried first: " + names);
  }

  serialize::ArtifactRecord record;
  record.source = source;
  record.provenance = {ProvenanceFlags(options), model_sha256, ProvenanceLibraries(options)};
  record.precision = passes::PrecisionName(options.precision.precision);
  for (ir::ValueId id : imported.inputs) {
    record.inputs.push_back(imported.value(id));
    if (record.inputs.back().dtype == DType::kFloat32) record.inputs.back().dtype = options.precision.io_dtype;
  }
  StageWork work{options, import, log_fn, record, summary};
  // The entries, with value inputs (`values`) or without. Value inputs only ever add models: when
  // the entries cannot be compiled with them, they are compiled as before them, where an input
  // whose values the model needs is refused or bound with --constant-input.
  auto compile_entries = [&](bool values) -> Status {
    record.entries.clear();
    if (summary) summary->entries.clear();
    for (size_t i : order) {
      ProfileWork profile;
      profile.profile = &resolved[i];
      profile.model = values ? &imported : &plain;
      profile.model_ns = import_ns;
      profile.value_inputs = values;
      profile.record.name = resolved[i].name;
      work.profile = &profile;
      work.record = &profile.record;
      Status st = RunStages(Stage::kImport, Stage::kImport, work);
      work.record = nullptr;
      if (st.ok() && options.stop_after == Stage::kImport)
        record.entries.push_back(std::move(profile.record));  // its trace is the compile's output
      else if (st.ok())
        st = CompileEntries(work);
      work.profile = nullptr;
      if (!st.ok()) return options.profiles.empty() ? st : st.WithContext("profile '" + profiles[i].text + "'");
    }
    return Status::Ok();
  };
  Status st = compile_entries(!value_symbols.empty());
  if (!st.ok() && !value_symbols.empty()) {
    log(fmt::format("value inputs: {}; compiling without them", st.message()));
    const Status with_values = st;
    st = compile_entries(false);
    // When both fail, a value the compiler needs even with value symbols (a Slice's axes beside
    // its symbolic starts) is the one to name: fixing it is what lets the model compile.
    if (!st.ok() && with_values.code() == StatusCode::kUnimplemented &&
        with_values.message().find(") is not known at compile time") != std::string_view::npos)
      st = with_values;
  }
  if (!st.ok()) return WithValueProfileHint(st, plain, resolved);
  for (serialize::EntryRecord& e : record.entries) {
    work.record = &e;
    KILN_RETURN_IF_ERROR(RunStages(Stage::kCodegen, Stage::kCodegen, work));
  }
  work.record = nullptr;
  KILN_RETURN_IF_ERROR(RunStages(Stage::kSerialize, Stage::kSerialize, work));
  if (summary) {
    summary->total_ns = NowNs() - start;
    for (size_t i = 0; i < record.entries.size() && i < summary->entries.size(); ++i)
      for (const serialize::StageRecord& st : record.entries[i].stages)
        summary->entries[i].stages.push_back({st.name, st.time_ns, st.num_ops});
    // Stopped before serialize: the compile's output is each entry's trace of that stage.
    if (options.stop_after != Stage::kSerialize)
      for (size_t i = 0; i < record.entries.size(); ++i) {
        if (i == summary->entries.size()) summary->entries.push_back({record.entries[i].name, -1, "", -1, "", record.entries[i].backend, {}});
        summary->entries[i].last_trace = record.entries[i].stages.back().trace;
      }
  }
  return std::move(work.bytes);
}

}  // namespace

Result<std::vector<uint8_t>> CompileImported(const std::string& source, const std::string& model_sha256,
                                             const ImportFn& import, const CompileOptions& options,
                                             CompileSummary* summary) {
  // The stages bound what they allocate (folded constants, tensor and arena sizes); a machine
  // short of memory is still an error, never an abort.
  try {
    return RunPipeline(source, model_sha256, import, options, summary);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory compiling " + source);
  }
}

Result<std::vector<uint8_t>> CompileOnnxFile(const std::string& path, const CompileOptions& options,
                                             CompileSummary* summary) {
  auto import = [&](const std::map<std::string, std::vector<int64_t>>& shapes) {
    onnx_import::ImportOptions import_options;
    import_options.input_shapes = shapes;
    import_options.constant_inputs = options.constant_inputs;
    return onnx_import::ImportOnnxFile(path, import_options);
  };
  // A file that cannot be read is the importer's error to report, with its own words.
  Result<std::string> sha256 = FileSha256Hex(path);
  return CompileImported(std::filesystem::path(path).filename().string(), sha256.ok() ? *sha256 : std::string(),
                         import, options, summary);
}

}  // namespace kiln::compiler
