#include "compiler/compile.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/codegen/cuda_source.h"
#include "compiler/codegen/nvrtc_compiler.h"
#include "compiler/fusion/fusion.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/epilogue.h"
#include "compiler/passes/canonicalize.h"
#include "compiler/passes/executors.h"
#include "compiler/passes/memory_plan.h"
#include "compiler/passes/prune_guards.h"
#include "compiler/passes/value_inputs.h"
#include "compiler/serialize/artifact_writer.h"
#include "runtime/clock.h"

namespace kiln::compiler {
namespace {

// The arena size for the compile log: a number, or which symbols it depends on (the full
// expression is in the plan trace and `kiln inspect`).
std::string ArenaText(const ir::Sym& bytes) {
  if (bytes.is_const()) return std::to_string(*bytes.value()) + " bytes";
  std::string vars;
  for (const std::string& v : bytes.Vars()) vars += (vars.empty() ? "" : ", ") + v;
  return "symbolic in " + vars + ", evaluated per input shape";
}

std::string PlanText(const passes::MemoryPlan& plan) {
  std::string s = plan.trace.Print();
  // Symbolic offsets are sums of slot sizes and print as long expressions: name the slot
  // instead, and leave the full arithmetic to the expression table.
  s += "# arena: " + ArenaText(plan.arena_bytes);
  if (plan.lower_bound_bytes) s += fmt::format(" (lower bound {} bytes)", *plan.lower_bound_bytes);
  s += "\n";
  for (size_t id = 0; id < plan.tensors.size(); ++id) {
    const passes::TensorPlan& p = plan.tensors[id];
    if (p.storage != passes::StorageKind::kArena) continue;
    const std::string where = p.slot >= 0 ? fmt::format("slot {}", p.slot) : "offset " + p.offset.ToString();
    s += fmt::format("#   {} @ {}: {} bytes, live [{}, {}]\n", plan.trace.values[id].name, where, p.bytes.ToString(),
                     p.first, p.last);
  }
  return s;
}

// The profile's name, then the If outcomes the entry was compiled for: "N in 1..64; T > 1".
std::string EntryName(const std::string& profile, const std::vector<passes::Assumption>& assumptions) {
  std::string s;
  for (const auto& a : assumptions)
    s += (s.empty() ? "" : ", ") + (a.holds ? a.condition.ToString() : "not " + a.condition.ToString());
  if (s.empty()) return profile;
  return profile == "default" ? s : profile + "; " + s;
}

// Emits the CUDA source of every fused node, merges identical kernels, and compiles them
// with NVRTC for options.archs (none: a CPU-only artifact).
Status BuildKernels(const CompileOptions& options, serialize::ArtifactRecord& record, CompileSummary* summary,
                    const std::function<void(const std::string&)>& log) {
  std::map<std::string, int32_t> by_name;
  std::vector<codegen::EmittedKernel> emitted;
  for (const serialize::EntryRecord& e : record.entries) {
    for (const ir::Node& n : e.plan.trace.body.nodes) {
      if (!n.fused || record.kernel_of.count(n.fused.get())) continue;
      auto k = codegen::EmitCuda(n.fused->program);
      if (!k.ok()) return k.status().WithContext("node '" + n.name + "': CUDA emission");
      auto [it, added] = by_name.emplace(k->name, static_cast<int32_t>(record.kernels.size()));
      if (added) {
        serialize::KernelRecord r;
        r.name = k->name;
        r.source = k->source;
        r.fused = n.fused;
        r.launch_kind = static_cast<int>(k->kind);
        r.block = k->block;
        r.vector = k->vector;
        r.index_bits = k->index_bits;
        record.kernels.push_back(std::move(r));
        emitted.push_back(std::move(*k));
      }
      record.kernel_of[n.fused.get()] = it->second;
    }
  }
  record.target_archs = options.archs;
  if (summary) summary->kernels = static_cast<int>(emitted.size());
  if (emitted.empty() || options.archs.empty()) {
    if (!emitted.empty()) log(fmt::format("{} kernels kept as portable programs only (--arch none)", emitted.size()));
    return Status::Ok();
  }
  std::string archs;
  for (const std::string& a : options.archs) archs += (archs.empty() ? "" : ",") + a;
  log(fmt::format("NVRTC: {} kernels for {}", emitted.size(), archs));
  codegen::CompileKernelOptions copts;
  copts.archs = options.archs;
  copts.cache_dir = options.kernel_cache_dir;
  copts.use_cache = options.use_kernel_cache;
  copts.threads = options.jobs;
  copts.progress = options.kernel_progress;
  codegen::CompileStats stats;
  copts.stats = &stats;
  KILN_ASSIGN_OR_RETURN(std::vector<codegen::KernelImages> images, codegen::CompileKernels(emitted, copts));
  for (size_t k = 0; k < images.size(); ++k) {
    record.kernels[k].compile_ns = images[k].compile_ns;
    for (codegen::KernelImage& im : images[k].images)
      record.kernels[k].images.push_back({im.arch, im.ptx, std::move(im.data)});
  }
  if (summary) summary->compile_jobs = stats.jobs, summary->cached_jobs = stats.cached;
  log(fmt::format("NVRTC: {} jobs, {} from the cache, {} compiled", stats.jobs, stats.cached, stats.compiled));
  return Status::Ok();
}

// The `codegen` stage's text for one entry: the kernel each fused node runs, its launch
// rule and its images. Its time is the whole artifact's emission and NVRTC time.
std::string CodegenText(const serialize::ArtifactRecord& record, const serialize::EntryRecord& e) {
  std::string s = "# stage: codegen\n# targets: ";
  for (size_t i = 0; i < record.target_archs.size(); ++i) s += (i ? ", " : "") + record.target_archs[i];
  s += record.target_archs.empty() ? "none (portable programs only)\n" : "\n";
  for (const ir::Node& n : e.plan.trace.body.nodes) {
    if (!n.fused) continue;
    const serialize::KernelRecord& k = record.kernels[record.kernel_of.at(n.fused.get())];
    size_t bytes = 0;
    for (const auto& im : k.images) bytes += im.data.size();
    s += fmt::format("{} <- '{}': {}, block {}, vector {}, {}-bit indices, {} images ({} bytes)\n", k.name, n.name,
                     k.launch_kind == 0 ? "elementwise" : "row reduction", k.block, k.vector, k.index_bits,
                     k.images.size(), bytes);
  }
  return s;
}

// Whether a node of `block` (If branches included) has node name or op type `name`.
bool HasNodeOrOp(const ir::Block& block, const std::string& name) {
  for (const ir::Node& n : block.nodes) {
    if (n.name == name || n.op == name) return true;
    for (const auto& [attr, sub] : n.blocks)
      if (sub && HasNodeOrOp(*sub, name)) return true;
  }
  return false;
}

// `--keep-fp32` names are the model's: each must name a node or an op type of the imported
// trace, If branches included.
Status CheckKeepNames(const ir::Trace& imported, const std::vector<std::string>& names) {
  for (const std::string& k : names)
    if (!HasNodeOrOp(imported.body, k))
      return InvalidArgument(fmt::format("--keep-fp32 '{}': no node and no op type of that name in the model "
                                         "(names are ONNX node names or op types such as Softmax)",
                                         k));
  return Status::Ok();
}

// The precision options of one entry: the --keep-fp32 names its canonical trace still has. A
// node the canonical stage folded away, or one in the other branch of a shape-dependent If,
// leaves nothing to keep there.
passes::PrecisionOptions EntryPrecision(const passes::PrecisionOptions& options, const ir::Trace& canonical) {
  passes::PrecisionOptions entry = options;
  std::erase_if(entry.keep_fp32, [&](const std::string& k) { return !HasNodeOrOp(canonical.body, k); });
  return entry;
}

Status CompileProfile(const ir::Trace& imported, const serialize::StageRecord& import_stage,
                      const ResolvedProfile& profile, const CompileOptions& options,
                      serialize::ArtifactRecord& record, CompileSummary* summary,
                      const std::function<void(const std::string&)>& log) {
  std::vector<std::vector<passes::Assumption>> work{{}};
  Status first_error;
  int made = 0;
  // The symbols' ranges: the profile's for dims (>= 1 where it says nothing), any int64 for the
  // value symbols (passes/value_inputs.h), which may be 0 or negative.
  std::map<std::string, DimRange> ranges = profile.ranges;
  std::map<std::string, std::string> value_symbols;  // symbol -> its input
  for (ir::ValueId id : imported.inputs)
    if (const ir::Value& v = imported.value(id); v.sym)
      for (const ir::Sym& s : *v.sym)
        if (s.op() == ir::SymOp::kVar) {
          ranges.emplace(s.name(), DimRange{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 1});
          value_symbols.emplace(s.name(), v.name);
        }
  // Value symbols decide If outcomes and the shapes of the value shape operands
  // (passes/value_inputs.h), whose meta functions are exact for any value. Every meta function
  // that reads elements into a shape is one of those; a shape that another op computes from a
  // value symbol (rather than passing on its input's) would break that invariant, and is an
  // internal error, after which the model compiles without value symbols.
  auto shapes_from_values = [&](const ir::Trace& t) -> Status {
    if (value_symbols.empty()) return Status::Ok();
    for (const ir::Node& n : t.body.nodes) {
      if (passes::HasValueShapeOperand(n.op)) continue;
      std::set<std::string> passed_on;
      for (ir::ValueId id : n.inputs)
        if (id != ir::kNoValue)
          for (const ir::Sym& d : t.value(id).shape)
            for (const std::string& var : d.Vars()) passed_on.insert(var);
      for (ir::ValueId id : n.outputs) {
        if (id == ir::kNoValue) continue;
        for (const ir::Sym& d : t.value(id).shape)
          for (const std::string& var : d.Vars())
            if (auto it = value_symbols.find(var); it != value_symbols.end() && !passed_on.count(var))
              return Internal(fmt::format(
                  "node '{}' ({}): output '{}' has shape {}, computed from the values of input '{}', but {} has no "
                  "value shape operand (passes/value_inputs.h)",
                  n.name, n.op, t.value(id).name, ir::ShapeToString(t.value(id).shape), it->second, n.op));
      }
    }
    return Status::Ok();
  };
  while (!work.empty()) {
    std::vector<passes::Assumption> assumptions = work.front();
    work.erase(work.begin());
    const std::string name = EntryName(profile.name, assumptions);
    int64_t t0 = NowNs();
    auto canonical = passes::Canonicalize(imported, assumptions, {options.loop_scan_bound});
    if (canonical.ok() && canonical->undecided_condition) {
      const ir::Sym c = *canonical->undecided_condition;
      if (made + static_cast<int>(work.size()) + 2 > options.max_entries)
        return ResourceExhausted(fmt::format("If conditions on input shapes or values need more than {} entries", options.max_entries));
      log(fmt::format("entry '{}': If condition {} depends on input shapes or values; compiling one entry for each outcome",
                      name, c.ToString()));
      auto yes = assumptions, no = assumptions;
      yes.push_back({c, true});
      no.push_back({c, false});
      work.push_back(yes);
      work.push_back(no);
      continue;
    }
    // The profile's ranges decide some guards at compile time; one that no shape in them
    // passes makes the entry useless.
    std::vector<std::string> dropped_guards;
    if (canonical.ok()) {
      Status pruned = passes::PruneGuards(canonical->trace, ranges, &dropped_guards);
      // A dropped guard may have been all that read a run-time dim (which branch a run-time If
      // takes): the instruction that sets it goes too.
      if (pruned.ok() && !dropped_guards.empty()) passes::EliminateDeadCode(canonical->trace);
      if (pruned.ok()) pruned = shapes_from_values(canonical->trace);
      if (!pruned.ok()) canonical = pruned;
    }
    const int64_t canonical_ns = NowNs() - t0;
    // The precision stage rewrites the canonical trace before fusion, so its Casts fuse.
    const bool lowers = options.precision.precision != passes::Precision::kFp32 ||
                        options.precision.io_dtype != DType::kFloat32;
    std::optional<ir::Trace> lowered;
    std::vector<std::string> precision_log;
    int64_t precision_ns = 0;
    if (canonical.ok() && lowers) {
      t0 = NowNs();
      auto l = passes::LowerPrecision(canonical->trace, EntryPrecision(options.precision, canonical->trace),
                                      &precision_log);
      precision_ns = NowNs() - t0;
      // Not an entry whose assumption makes the model invalid: never dropped like one.
      if (!l.ok()) return l.status().WithContext(fmt::format("entry '{}'", name));
      lowered = std::move(*l);
    }
    const ir::Trace* before_fusion = canonical.ok() ? (lowered ? &*lowered : &canonical->trace) : nullptr;
    Result<passes::MemoryPlan> plan = Status(StatusCode::kInternal, "not run");
    Result<ir::Trace> executors = Status(StatusCode::kInternal, "not run");
    Result<ir::Trace> fused = Status(StatusCode::kInternal, "not run");
    std::vector<std::string> fusion_log;
    int fused_kernels = 0;
    int64_t executors_ns = 0, plan_ns = 0, fusion_ns = 0;
    if (canonical.ok()) {
      t0 = NowNs();
      // A GPU artifact folds only the activations the CUDA libraries apply (epilogue.h).
      const auto activations = options.archs.empty() ? passes::EpilogueActivations::kAny
                                                     : passes::EpilogueActivations::kGpuLibraries;
      fused = options.fuse ? FusionStage(*before_fusion, &fusion_log, &fused_kernels, nullptr, activations)
                           : *before_fusion;
      fusion_ns = NowNs() - t0;
    }
    if (fused.ok()) {
      t0 = NowNs();
      executors = passes::AssignExecutors(*fused);
      executors_ns = NowNs() - t0;
      if (executors.ok()) {
        t0 = NowNs();
        plan = passes::PlanMemory(*executors);
        plan_ns = NowNs() - t0;
      }
    }
    Status st = !canonical.ok() ? canonical.status()
                : !fused.ok()   ? fused.status()
                : !executors.ok() ? executors.status()
                                  : plan.status();
    if (!st.ok()) {
      if (assumptions.empty()) return st;
      // A speculative entry whose assumption makes the model invalid is dropped: inputs
      // satisfying it could not have run anywhere.
      log(fmt::format("entry '{}' dropped: {}", name, st.message()));
      if (first_error.ok()) first_error = st;
      continue;
    }
    for (const ir::Node& n : plan->trace.body.nodes)
      for (const auto* ids : {&n.inputs, &n.outputs})
        for (ir::ValueId id : *ids)
          if (id != ir::kNoValue && plan->trace.value(id).rank() > kMaxRank)
            return Unimplemented(fmt::format("node '{}' ({}): tensor '{}' has rank {}; the runtime supports rank <= {}",
                                             n.name, n.op, plan->trace.value(id).name, plan->trace.value(id).rank(),
                                             kMaxRank));
    auto ops = [](const ir::Trace& t) { return static_cast<int>(t.body.nodes.size()); };
    serialize::EntryRecord entry;
    entry.name = name;
    entry.ranges = ranges;
    std::string canonical_text = canonical->trace.Print();
    for (const std::string& line : dropped_guards) canonical_text += "# " + line + "\n";
    if (!dropped_guards.empty())
      log(fmt::format("entry '{}': {} guards implied by the symbol ranges, dropped", name, dropped_guards.size()));
    entry.stages = {import_stage, {"canonical", std::move(canonical_text), canonical_ns, ops(canonical->trace)}};
    if (lowered) {
      std::string text = lowered->Print();
      for (const std::string& line : precision_log) text += "# " + line + "\n";
      entry.stages.push_back({"precision", std::move(text), precision_ns, ops(*lowered)});
      for (const std::string& line : precision_log) log(fmt::format("entry '{}': precision: {}", name, line));
    }
    if (options.fuse) {
      std::string text = fused->Print();
      for (const std::string& line : fusion_log) text += "# " + line + "\n";
      entry.stages.push_back({"fusion", std::move(text), fusion_ns, ops(*fused)});
      for (const std::string& line : fusion_log) log(fmt::format("entry '{}': fusion: {}", name, line));
      log(fmt::format("entry '{}': fusion: {} ops -> {} ({} generated kernels)", name, ops(*before_fusion),
                      ops(*fused), fused_kernels));
    }
    entry.stages.push_back({"executors", executors->Print(), executors_ns, ops(*executors)});
    entry.stages.push_back({"plan", PlanText(*plan), plan_ns, ops(plan->trace)});
    if (summary && record.entries.empty()) {
      summary->ops_before_fusion = ops(*before_fusion);
      summary->ops_after_fusion = ops(*fused);
    }
    if (summary) {
      summary->entries.push_back({name, ops(plan->trace), ArenaText(plan->arena_bytes),
                                  plan->lower_bound_bytes.value_or(-1)});
    }
    log(fmt::format("entry '{}': {} instructions, arena {}", name, ops(plan->trace), ArenaText(plan->arena_bytes)));
    entry.plan = std::move(*plan);
    record.entries.push_back(std::move(entry));
    ++made;
  }
  return made ? Status::Ok() : first_error;
}

}  // namespace

Result<ir::Trace> FusionStage(const ir::Trace& canonical, std::vector<std::string>* log, int* kernels,
                              ir::Trace* folded, passes::EpilogueActivations activations) {
  std::vector<std::string> epilogues;
  KILN_ASSIGN_OR_RETURN(ir::Trace with_epilogues, passes::FoldEpilogues(canonical, &epilogues, activations));
  fusion::FusionReport report;
  KILN_ASSIGN_OR_RETURN(ir::Trace fused, fusion::Fuse(with_epilogues, &report));
  if (log) {
    log->insert(log->end(), epilogues.begin(), epilogues.end());
    log->insert(log->end(), report.log.begin(), report.log.end());
  }
  if (kernels) *kernels = report.fused_kernels;
  if (folded) *folded = std::move(with_epilogues);
  return fused;
}

namespace {

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

Result<std::vector<uint8_t>> CompileOrThrow(const std::string& source, const ImportFn& import,
                                            const CompileOptions& options, CompileSummary* summary) {
  auto log = [&](const std::string& line) { if (options.log) options.log(line); };
  const int64_t start = NowNs();
  log(fmt::format("import {}", source));
  int64_t t0 = NowNs();
  KILN_ASSIGN_OR_RETURN(const ir::Trace plain, import(options.input_shapes));
  ir::Trace imported = plain;
  const std::vector<std::string> value_symbols = passes::MarkValueInputs(imported);
  if (!value_symbols.empty())
    log(fmt::format("value inputs: If conditions or shape operands depend on {}; the prologue binds them from the input's values, "
                    "which must be in host memory",
                    fmt::join(value_symbols, ", ")));
  const serialize::StageRecord import_stage{"import", imported.Print(), NowNs() - t0,
                                            static_cast<int>(imported.body.nodes.size())};
  KILN_RETURN_IF_ERROR(CheckKeepNames(imported, options.precision.keep_fp32));

  const std::vector<Profile> profiles = options.profiles.empty() ? std::vector<Profile>{Profile{"default", {}, {}}}
                                                                  : options.profiles;
  // A range from 0 compiles one more entry, for the empty tensors (SplitEmpty): `texts` keeps
  // each entry's profile as the user wrote it.
  std::vector<ResolvedProfile> resolved;
  std::vector<std::string> texts;
  for (size_t i = 0; i < profiles.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const ResolvedProfile whole, ResolveProfile(profiles[i], imported));
    for (ResolvedProfile& r : SplitEmpty(whole, imported)) {
      // An empty-tensor entry that a range from 0 adds is made once, however many profiles
      // add it or name it themselves ('x:N=0..4' with 'x:N=0..8', or with 'x:N=0').
      bool repeated = false;
      for (size_t j = 0; j < resolved.size() && !repeated; ++j) {
        if (!resolved[j].Includes(r) || !r.Includes(resolved[j])) continue;
        if (!r.empty_split && !resolved[j].empty_split)
          return InvalidArgument(fmt::format("profiles '{}' and '{}' admit the same shapes ({})", texts[j],
                                             profiles[i].text, r.name));
        if (resolved[j].empty_split && !r.empty_split) {
          resolved[j] = std::move(r);  // the one a profile names itself: never dropped
          texts[j] = profiles[i].text;
        }
        repeated = true;
      }
      if (repeated) continue;
      resolved.push_back(std::move(r));
      texts.push_back(profiles[i].text);
    }
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
  record.precision = passes::PrecisionName(options.precision.precision);
  for (ir::ValueId id : imported.inputs) {
    record.inputs.push_back(imported.value(id));
    if (record.inputs.back().dtype == DType::kFloat32) record.inputs.back().dtype = options.precision.io_dtype;
  }
  // The entries, with value inputs (`values`) or without. Value inputs only ever add models: when
  // the entries cannot be compiled with them, they are compiled as before them, where an input
  // whose values the model needs is refused or bound with --constant-input.
  auto compile_entries = [&](bool values) -> Status {
    record.entries.clear();
    if (summary) summary->entries.clear();
    for (size_t i : order) {
      const ResolvedProfile& profile = resolved[i];
      const size_t entries_before = record.entries.size(), summaries_before = summary ? summary->entries.size() : 0;
      Status st;
      if (profile.input_shapes.empty() && profile.values.empty()) {
        st = CompileProfile(values ? imported : plain, import_stage, profile, options, record, summary, log);
      } else if (profile.input_shapes.empty()) {
        // Fixed values (passes::BindInputValues) replace the value symbols of those inputs.
        ir::Trace bound = values ? imported : plain;
        st = passes::BindInputValues(bound, profile.values);
        if (st.ok()) {
          const serialize::StageRecord stage{"import", bound.Print(), import_stage.time_ns, import_stage.num_ops};
          st = CompileProfile(bound, stage, profile, options, record, summary, log);
        }
      } else {
        // Fixed dims are imported as constants, so every stage sees static shapes there.
        std::map<std::string, std::vector<int64_t>> shapes = options.input_shapes;
        for (const auto& [name, dims] : profile.input_shapes) {
          auto [it, added] = shapes.emplace(name, dims);
          if (!added)
            for (size_t d = 0; d < dims.size(); ++d)
              if (dims[d] >= 0) it->second[d] = dims[d];
        }
        t0 = NowNs();
        auto specialised = import(shapes);
        if (!specialised.ok()) {
          st = specialised.status();
        } else if (st = passes::BindInputValues(*specialised, profile.values); st.ok()) {
          if (values) passes::MarkValueInputs(*specialised);
          const serialize::StageRecord stage{"import", specialised->Print(), NowNs() - t0,
                                             static_cast<int>(specialised->body.nodes.size())};
          st = CompileProfile(*specialised, stage, profile, options, record, summary, log);
        }
      }
      if (!st.ok() && profile.empty_split && st.code() == StatusCode::kInvalidArgument) {
        // The empty-tensor entry a range from 0 added (SplitEmpty): the model does not take a 0
        // there (a Reshape that divides by it, a broadcast against a constant). The rest of the
        // range still compiles; calls with 0 miss, naming the range.
        record.entries.resize(entries_before);
        if (summary) summary->entries.resize(summaries_before);
        log(fmt::format("entry '{}' dropped: the model cannot take this empty tensor: {}", profile.name, st.message()));
        continue;
      }
      if (!st.ok()) return options.profiles.empty() ? st : st.WithContext("profile '" + texts[i] + "'");
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
  t0 = NowNs();
  KILN_RETURN_IF_ERROR(BuildKernels(options, record, summary, log));
  const int64_t codegen_ns = NowNs() - t0;
  if (summary) summary->nvrtc_ns = codegen_ns;
  for (serialize::EntryRecord& e : record.entries)
    e.stages.push_back({"codegen", CodegenText(record, e), codegen_ns, static_cast<int>(e.plan.trace.body.nodes.size())});
  log("serialize");
  auto bytes = serialize::WriteArtifact(record);
  if (summary) summary->total_ns = NowNs() - start;
  return bytes;
}

}  // namespace

Result<std::vector<uint8_t>> CompileImported(const std::string& source, const ImportFn& import,
                                             const CompileOptions& options, CompileSummary* summary) {
  // The stages bound what they allocate (folded constants, tensor and arena sizes); a machine
  // short of memory is still an error, never an abort.
  try {
    return CompileOrThrow(source, import, options, summary);
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
  return CompileImported(std::filesystem::path(path).filename().string(), import, options, summary);
}

}  // namespace kiln::compiler
