// ExecutionContext: the context's backend, chosen at Create, and entry selection through the
// prologues; the executor (runtime/executor/run_entry.h) binds, runs and delivers the entry the
// prologue chose. The success path of a steady-state Run allocates nothing and builds no
// strings: failures are recorded as PODs and formatted only when returned.

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "runtime/clock.h"
#include "runtime/context_impl.h"
#include "runtime/device_resident.h"
#include "runtime/executor/run_entry.h"

namespace kiln {

namespace {

using std::to_string;

void InitEntryState(const PreparedEntry& pe, EntryState& s) {
  s.scratch.Resize(pe.prologue);
  for (const PreparedRoom& r : pe.rooms) s.scratch.symbol_values[static_cast<size_t>(r.symbol)] = r.initial;
  s.binding.assign(pe.prologue.symbols.size(), 0);
  s.values.assign(pe.exprs.size(), 0);
  s.dims.assign(pe.dim_exprs.size(), 0);
  s.refs.assign(pe.tensors.size(), cpu::TensorRef{});
  s.arena_offsets.assign(pe.tensors.size(), 0);
  s.symbolic.assign(static_cast<size_t>(pe.num_symbolic_values) + 1, 0);
  s.operands.assign(pe.operands.size(), cpu::TensorRef{});
  s.sizes.assign(pe.size_exprs.size(), 0);
  s.arena_scratch.Resize(pe.liveness);
  for (size_t k = 0; k < pe.operands.size(); ++k) {
    const int32_t t = pe.operands[k];
    if (t >= 0 && pe.tensors[t].storage == StorageKind::kInput)
      s.input_slots.emplace_back(static_cast<int32_t>(k), static_cast<int32_t>(pe.tensors[t].index));
    if (t >= 0 && pe.tensors[t].storage == StorageKind::kArena) s.arena_slots.emplace_back(static_cast<int32_t>(k), t);
  }
}

Status MissError(ExecutionContext::Impl& c) {
  Stats& st = c.stats;
  st.last_miss_reasons.clear();
  std::string msg;
  for (size_t e = 0; e < c.entries.size(); ++e) {
    if (!c.runs_entry[e]) continue;
    const PreparedEntry& pe = c.mi->prepared[e];
    std::string line = pe.label + ": " +
                       FormatPrologueFailure(pe.prologue, pe.exprs, c.entries[e].failure, MemoryKind::kHost,
                                             &c.entries[e].scratch);
    if (!msg.empty()) msg += "\n";
    msg += line;
    st.last_miss_reasons.push_back(std::move(line));
  }
  return InvalidArgument(std::move(msg));
}

// The first entry this context runs whose prologue passes for `inputs` (Run's choice), or -1.
int32_t ChooseEntry(ExecutionContext::Impl& c, std::span<const TensorView> inputs) {
  const MemoryKind memory = c.backend->input_memory();
  for (size_t e = 0; e < c.entries.size(); ++e) {
    if (!c.runs_entry[e]) continue;
    const PreparedEntry& pe = c.mi->prepared[e];
    EntryState& s = c.entries[e];
    if (RunPrologue(pe.prologue, pe.exprs, inputs, memory, s.scratch, &s.failure)) return static_cast<int32_t>(e);
  }
  return -1;
}

#if KILN_KEEPS_WARM_UP  // runtime/kernels/selective.h
// Where a warm-up's input has no data: never read (Backend::Warm), aligned for every dtype.
alignas(64) const uint8_t kPlaceholder[64] = {};

// The CPU backend's warm-up runs of entry `e` on `inputs` (zeros where their data is the
// placeholder), so that what planning cannot do before a first execution happens here, not in
// the caller's first Run: oneDNN's first execution of each primitive (its GEMM-based forms make
// their JIT kernels then), the first faults on native code pages, the caches' and branch
// predictors' first fill, the vector units' wake-up. Not with a KV cache bound (a run appends
// to it) or an instruction observer (it would see the runs). Zeros can make a model's run-time
// Loop run long or fail its own checks: the runs stop at kWarmLoopIterations, and an error ends
// them, left for the next Run to meet. At most ContextOptions::warm_runs. The stats are as before.
constexpr int64_t kWarmLoopIterations = 10'000;
// After the first run, no more once the runs have taken this long (ns): a model that runs for
// milliseconds gains little from a second run (its first-execution work is done in the first),
// and each would add its time to Create.
constexpr int64_t kWarmBudgetNs = 10'000'000;
void WarmRun(ExecutionContext::Impl& c, int32_t e, std::span<const TensorView> inputs) {
  const bool bound_cache = std::any_of(c.caches.begin(), c.caches.end(), [](const auto& k) { return !k.empty(); });
  if (c.backend->device() != Device::kCpu || c.warm_runs == 0 || bound_cache || c.instruction_observer) return;
  std::vector<TensorView> views(inputs.begin(), inputs.end());
  std::vector<std::unique_ptr<uint64_t[]>> zeros;  // 8-byte aligned, as every dtype needs
  for (TensorView& v : views) {
    if (v.data != kPlaceholder) continue;
    zeros.emplace_back(new (std::nothrow) uint64_t[v.num_bytes() / 8 + 1]());
    if (!zeros.back()) return;
    v.data = zeros.back().get();
  }
  // As before the runs: the stats, and which views the last Run handed out (a caller passing
  // that vector back, as Run allows, still gets new views rather than a copy into stale ones).
  const Stats saved = c.stats;
  const std::vector<const void*> delivered = c.delivered;
  const int64_t max_loop_iterations = c.max_loop_iterations;
  c.max_loop_iterations = std::min(max_loop_iterations, kWarmLoopIterations);
  std::vector<TensorView> outputs;
  // Until a run is no more than 10% faster than the one before (the caches and branch
  // predictors settled, the vector units awake), or the runs have taken kWarmBudgetNs.
  int64_t previous = -1;  // the last run's ns; none yet
  const int64_t first = NowNs();
  for (int i = 0; i < c.warm_runs; ++i) {
    const int64_t start = NowNs();
    if (!RunEntry(c, e, views, outputs, nullptr).ok()) break;
    const int64_t ns = NowNs() - start;
    if ((previous >= 0 && ns * 10 > previous * 9) || NowNs() - first >= kWarmBudgetNs) break;
    previous = ns;
  }
  c.max_loop_iterations = max_loop_iterations;
  c.stats = saved;
  c.delivered = delivered;
  c.last_ok_entry = -1;
}

// ExecutionContext::Warm's inputs with a placeholder where `data` is null (a prologue that reads
// an input's values still finds it null, and says so).
Status WarmFor(ExecutionContext::Impl& c, std::span<const TensorView> inputs) {
  std::vector<TensorView> views(inputs.begin(), inputs.end());
  for (size_t i = 0; i < views.size(); ++i) {
    const bool read = std::any_of(c.mi->prepared.begin(), c.mi->prepared.end(), [&](const PreparedEntry& pe) {
      return i < pe.prologue.inputs.size() && !pe.prologue.inputs[i].values.empty();
    });
    if (views[i].data == nullptr && !read) views[i].data = const_cast<uint8_t*>(kPlaceholder);
  }
  const int32_t e = ChooseEntry(c, views);
  if (e < 0) return MissError(c);
  // The last Run's outputs end here, as at a Run: the memory may move, and WarmRun writes it.
  c.last_ok_entry = -1;
  KILN_RETURN_IF_ERROR(WarmEntry(c, e, views));
  // The memory grew for this entry: the entries placed before it are placed again, at the
  // symbol values they were bound for.
  for (size_t k = 0; k < c.entries.size(); ++k) {
    EntryState& s = c.entries[k];
    if (!s.bound || c.backend->Holds(s)) continue;
    std::copy(s.binding.begin(), s.binding.end(), s.scratch.symbol_values.begin());
    KILN_RETURN_IF_ERROR(c.backend->Prepare(c.mi->prepared[k], s));
  }
  WarmRun(c, e, views);
  return Status::Ok();
}

// An entry's inputs as host views of its constant shapes (kPlaceholder data), when every dim is
// a constant and the prologue reads no input's values; else false.
bool FixedInputs(const Prologue& p, std::vector<TensorView>& views) {
  views.clear();
  for (const PrologueInput& in : p.inputs) {
    if (!in.values.empty() || in.dims.size() > static_cast<size_t>(kMaxRank)) return false;
    int64_t dims[kMaxRank] = {};
    for (size_t d = 0; d < in.dims.size(); ++d) {
      const PrologueDim& pd = in.dims[d];
      if (pd.symbol >= 0 && pd.min != pd.max) return false;
      dims[d] = pd.symbol < 0 ? pd.value : pd.min;
    }
    views.push_back(TensorView::Host(kPlaceholder, in.dtype, dims, static_cast<int32_t>(in.dims.size())));
  }
  return true;
}

// Create's warm-up (ExecutionContext::Create): each entry this context runs with FixedInputs.
// An error is left for the entry's first Run to return.
void WarmFixedEntries(ExecutionContext::Impl& c) {
  std::vector<TensorView> views;
  for (size_t e = 0; e < c.entries.size(); ++e)
    if (c.runs_entry[e] && FixedInputs(c.mi->prepared[e].prologue, views)) (void)WarmFor(c, views);
  c.stats.last_miss_reasons.clear();
}
#endif  // KILN_KEEPS_WARM_UP

// The CPU backend that runs a device backend's CPU fallback segments: on the calling thread, on
// Kiln's CPU kernels (no oneDNN), untimed (the device backend times them: Backend::Mark).
Result<std::unique_ptr<Backend>> CreateHostBackend(const Model& model) {
  ContextOptions host;
  host.device = Device::kCpu;
  host.cpu.threads = 1;
  host.cpu.onednn = false;
  host.profile = false;
  for (const BackendRegistration& r : RegisteredBackends())
    if (r.device == Device::kCpu) return r.create(model, host);
  return Internal("no CPU backend is registered");
}

}  // namespace

Result<ExecutionContext> ExecutionContext::Create(const Model& model, const ContextOptions& options) {
  const auto backends = RegisteredBackends();
  if (options.device != Device::kAuto &&
      std::none_of(backends.begin(), backends.end(), [&](const BackendRegistration& r) { return r.device == options.device; })) {
    std::string names;
    for (const BackendRegistration& r : backends) names += std::string(names.empty() ? "" : ", ") + r.name;
    return InvalidArgument("unknown device " + to_string(static_cast<int>(options.device)) +
                           "; the registered backends are " + names + ", or Device::kAuto");
  }
  if (options.warm_runs < 0 || options.warm_runs > 100)
    return InvalidArgument("warm_runs is " + to_string(options.warm_runs) + ", expected 0 to 100");
  if (options.max_loop_iterations < 1)
    return InvalidArgument("max_loop_iterations is " + to_string(options.max_loop_iterations) + ", expected at least 1");
  if (options.cpu.threads < 0 || options.cpu.threads > CpuOptions::kMaxThreads)
    return InvalidArgument("cpu.threads is " + to_string(options.cpu.threads) + ", expected 0 (one per core) to " +
                           to_string(CpuOptions::kMaxThreads));
  auto impl = std::make_unique<Impl>(model);
  // kAuto tries the registered backends in order (the CPU backend last) and notes why each
  // before the one it took was unavailable.
  std::string unavailable;
  const char* backend_name = nullptr;
  for (const BackendRegistration& r : backends) {
    if (options.device != Device::kAuto && r.device != options.device) continue;
    if (r.create == nullptr) {
      if (options.device != Device::kAuto)
        return FailedPrecondition(std::string(r.missing) + ", so it has no " + r.title + " backend; use --device cpu");
      unavailable += std::string("; ") + r.missing;
      continue;
    }
    auto backend = r.create(model, options);
    if (backend.ok()) {
      impl->backend = std::move(*backend);
      backend_name = r.name;
      break;
    }
    if (options.device != Device::kAuto || r.device == Device::kCpu) return backend.status();
    unavailable += std::string("; ") + r.title + " unavailable: " + std::string(backend.status().message());
  }
  if (!impl->backend) return Internal("no backend is registered for this device");
  impl->runs_entry.resize(impl->mi->prepared.size());
  for (size_t e = 0; e < impl->mi->prepared.size(); ++e) {
    const std::string& b = impl->mi->prepared[e].backend;
    impl->runs_entry[e] = b.empty() || b == backend_name;
  }
  if (std::find(impl->runs_entry.begin(), impl->runs_entry.end(), 1) == impl->runs_entry.end()) {
    std::string plans;  // each backend named once, in entry order
    for (const PreparedEntry& pe : impl->mi->prepared)
      if (plans.find("'" + pe.backend + "'") == std::string::npos) plans += (plans.empty() ? "'" : ", '") + pe.backend + "'";
    return FailedPrecondition(std::string("the artifact has no entry for the ") + backend_name +
                              " backend: its entries are plans for " + plans);
  }
  impl->device_note = impl->backend->note() + unavailable;
  if (impl->backend->device() != Device::kCpu) {
    KILN_ASSIGN_OR_RETURN(impl->host, CreateHostBackend(model));
  }
  impl->max_loop_iterations = options.max_loop_iterations;
  impl->warm_runs = options.warm_runs;
  impl->profile = options.profile;
  impl->require_device_resident = options.cuda.require_device_resident;
  if (impl->require_device_resident) KILN_RETURN_IF_ERROR(CheckResidentPlan(*impl, backend_name));
  impl->scratch.loops.reserve(16);  // a run-time Loop's frame holds the scalars it copies to the device
  impl->scratch.host_inputs.resize(model.inputs().size());
  impl->entries.resize(impl->mi->prepared.size());
  impl->stats.entries.resize(impl->entries.size());
  impl->stats.native_code_target = model.native_code_target();
  impl->stats.native_code_note = model.native_code_note();
  for (size_t e = 0; e < impl->entries.size(); ++e) {
    InitEntryState(impl->mi->prepared[e], impl->entries[e]);
    impl->stats.entries[e].compile = model.entries()[e].compile;
  }
#if KILN_KEEPS_WARM_UP
  WarmFixedEntries(*impl);
#endif
  return ExecutionContext(std::move(impl));
}

Status ExecutionContext::Run(std::span<const TensorView> inputs, std::vector<TensorView>& outputs,
                             void* stream) {
  if (!impl_) return FailedPrecondition("Run on a moved-from ExecutionContext");
  Impl& c = *impl_;
  Stats& st = c.stats;
  ++st.calls;
  c.last_ok_entry = -1;
  // Phases this call does not reach read 0, not the previous call's times.
  st.last_prologue_start = st.last_prologue_stop = 0;
  st.last_computation_start = st.last_computation_stop = 0;
  const int64_t start = NowNs();  // a clock read costs ~20 ns: none per entry tried
  st.last_host_start = st.last_cache_lookup_start = start;
  const int32_t hit = ChooseEntry(c, inputs);
  st.last_cache_lookup_stop = NowNs();
  if (hit == 0) {
    st.last_prologue_start = start;
    st.last_prologue_stop = st.last_cache_lookup_stop;
  } else if (hit > 0) {
    // The lookup also ran the entries that failed: time the hit's prologue on its own by
    // running it again (same inputs, same result), cheaper than a clock read per entry.
    const PreparedEntry& pe = c.mi->prepared[hit];
    EntryState& s = c.entries[hit];
    st.last_prologue_start = NowNs();
    (void)RunPrologue(pe.prologue, pe.exprs, inputs, c.backend->input_memory(), s.scratch, &s.failure);
    st.last_prologue_stop = NowNs();
  }
  if (hit < 0) {
    ++st.cache_misses;
    Status miss = MissError(c);
    st.last_host_stop = NowNs();
    return miss;
  }
  ++st.cache_hits;
  ++st.entries[hit].hits;
  st.last_entry = hit;
  const Status run = RunEntry(c, hit, inputs, outputs, stream);
  st.last_host_stop = NowNs();
  return run;
}

#if KILN_KEEPS_WARM_UP
Status ExecutionContext::Warm(std::span<const TensorView> inputs) {
  if (!impl_) return FailedPrecondition("Warm on a moved-from ExecutionContext");
  return WarmFor(*impl_, inputs);
}
#endif

Status ExecutionContext::CopyOutputs(std::span<const TensorView> outputs, void* stream) {
  if (!impl_) return FailedPrecondition("CopyOutputs on a moved-from ExecutionContext");
  return CopyLastOutputs(*impl_, outputs, stream);
}

Status ExecutionContext::Synchronize(void* stream) {
  if (!impl_) return FailedPrecondition("Synchronize on a moved-from ExecutionContext");
  return impl_->backend->Synchronize(stream, impl_->stats);
}
const std::string& ExecutionContext::device_note() const { return impl_->device_note; }
const Stats& ExecutionContext::stats() const { return impl_->stats; }
Device ExecutionContext::device() const { return impl_->backend->device(); }
uint64_t ExecutionContext::arena_bytes() const { return memory_usage().host_bytes; }
ExecutionContext::MemoryUsage ExecutionContext::memory_usage() const {
  if (!impl_) return MemoryUsage{};  // moved-from: holds nothing
  MemoryUsage m = impl_->backend->memory_usage();
  // A device backend's CPU fallback segments: the host memory they ran in, and the host copies
  // of the device inputs they read.
  if (impl_->host) m.host_bytes += impl_->host->memory_usage().host_bytes;
  for (const std::vector<uint8_t>& h : impl_->scratch.host_inputs) m.host_bytes += h.capacity();
  return m;
}

void SetInstructionObserver(ExecutionContext& ctx, InstructionObserver observer) {
  ctx.impl().instruction_observer = std::move(observer);
}

ExecutionContext::ExecutionContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExecutionContext::ExecutionContext(ExecutionContext&&) noexcept = default;
ExecutionContext& ExecutionContext::operator=(ExecutionContext&&) noexcept = default;
ExecutionContext::~ExecutionContext() = default;

}  // namespace kiln
