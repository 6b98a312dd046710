// ExecutionContext: entry selection through the prologues, binding of tensor shapes for a
// symbol assignment (cached per entry), and the Run's phases around its backend
// (runtime/backend.h), which places, runs and delivers the entry. The success path of a
// steady-state Run allocates nothing and builds no strings: failures are recorded as PODs and
// formatted only when returned.

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "runtime/clock.h"
#include "runtime/context_impl.h"

namespace kiln {

namespace {

using std::to_string;

// A caller's view may carry any rank; only kMaxRank dims exist to read.
std::string ShapeText(const int64_t* dims, int32_t rank) {
  if (rank < 0 || rank > kMaxRank) return "of rank " + to_string(rank);
  std::string s = "[";
  for (int32_t i = 0; i < rank; ++i) s += (i ? ", " : "") + to_string(dims[i]);
  return s + "]";
}

bool IsLastDelivered(const ExecutionContext::Impl& c, const std::vector<TensorView>& outputs) {
  if (outputs.size() != c.delivered.size() || outputs.empty()) return false;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].data != c.delivered[i]) return false;
  return true;
}

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

}  // namespace

class Binder {
 public:
  explicit Binder(ExecutionContext::Impl& c) : c_(c) {}

  // Evaluates the entry's exprs for the symbols its prologue just bound and lays out every
  // tensor: dims, data pointer, arena size; then the backend places it (Backend::Prepare).
  // Runs when the symbols changed since the entry was last bound, or the backend's memory
  // moved. Checks the memory plan for these shapes (unless load did) before the backend
  // allocates anything. Run-time dims start at their bounds, unless `runtime_dims_set` (a
  // run-time dim changed during the run: RuntimeDimSetter).
  Status Bind(int32_t e, std::span<const TensorView> inputs, bool runtime_dims_set = false) {
    const PreparedEntry& pe = c_.mi->prepared[e];
    EntryState& s = c_.entries[e];
    s.bound = false;
    if (!runtime_dims_set)
      for (const PrologueBound& b : pe.prologue.bounds)
        s.scratch.symbol_values[static_cast<size_t>(b.symbol)] = s.scratch.expr_values[static_cast<size_t>(b.expr)];
    s.host_placement = 0;  // LayOut clears the arena pointers: the backend places them again
    ExprFailure why;
    if (!EvalExprs(pe.exprs, s.scratch.symbol_values, s.values.data(), &why))
      return InvalidArgument(pe.label + ": cannot compute shapes for these inputs: " +
                             FormatExprFailure(pe.exprs, pe.prologue.symbols, why));
    // A branch that cannot run for these shapes (its guard, checked if it is taken, fails)
    // has empty tensors, not negative dims.
    EvaluateDims(pe, s.values.data(), s.dims.data());
    for (size_t t = 0; t < pe.tensors.size(); ++t)
      KILN_RETURN_IF_ERROR(LayOut(pe, s, static_cast<int32_t>(t), inputs));
    if (!pe.plan_checked) KILN_RETURN_IF_ERROR(CheckArenaPlan(pe, s.values.data(), s.dims.data(), s.arena_scratch));
    s.arena_needed = static_cast<uint64_t>(s.values[pe.arena_expr]);  // >= 0: the plan check
    // An empty tensor's offset is never read.
    const ArenaLiveness& l = pe.liveness;
    for (size_t p = 0; p < l.tensors.size(); ++p) {
      const int32_t t = l.tensors[p];
      s.arena_offsets[t] = s.refs[t].num_elements == 0 ? 0 : static_cast<uint64_t>(s.values[l.offset_expr[p]]);
    }
    for (size_t k = 0; k < pe.operands.size(); ++k)
      s.operands[k] = pe.operands[k] < 0 ? cpu::TensorRef{} : s.refs[pe.operands[k]];
    for (size_t k = 0; k < pe.size_exprs.size(); ++k) s.sizes[k] = s.values[pe.size_exprs[k]];
    KILN_RETURN_IF_ERROR(c_.backend->Prepare(pe, s));
    std::copy(s.scratch.symbol_values.begin(), s.scratch.symbol_values.end(), s.binding.begin());
    s.bound = true;
    return Status::Ok();
  }

  const PreparedEntry& entry(int32_t e) const { return c_.mi->prepared[e]; }

  int32_t RuntimeSymbol(int32_t e, int32_t dim) const {
    return c_.mi->prepared[e].runtime_dims[static_cast<size_t>(dim)].symbol;
  }

  // Run-time dim `dim`'s bound for this Run, as the prologue evaluated it.
  int64_t RuntimeBound(int32_t e, int32_t dim) const {
    const PreparedRuntimeDim& d = c_.mi->prepared[e].runtime_dims[static_cast<size_t>(dim)];
    return c_.entries[e].scratch.expr_values[static_cast<size_t>(d.bound_expr)];
  }

  // The guards checked once run-time dim `dim` is set, on the binding's values: a failure is
  // kInvalidArgument naming the guard and the symbols it reads, as bound in this run.
  Status CheckRuntimeGuards(int32_t e, int32_t dim) const {
    const PreparedEntry& pe = c_.mi->prepared[e];
    const EntryState& s = c_.entries[e];
    for (const int32_t g : pe.guards_after[static_cast<size_t>(dim)]) {
      const PreparedRuntimeGuard& guard = pe.runtime_guards[static_cast<size_t>(g)];
      if (s.values[static_cast<size_t>(guard.expr)] != 0) continue;
      std::string values;
      for (const int32_t k : guard.symbols)
        values += (values.empty() ? "" : ", ") + pe.prologue.symbols[static_cast<size_t>(k)] + " = " +
                  to_string(s.scratch.symbol_values[static_cast<size_t>(k)]);
      return InvalidArgument(pe.label + ": guard " + guard.text + " does not hold for " + values);
    }
    return Status::Ok();
  }

  // Whether the entry must be bound before it runs: its symbols changed, the backend's memory
  // moved, or a run-time dim is not at its bound (a Run starts there, so that the instruction
  // that reports it has room for any size: each call whose sizes changed binds twice or more).
  bool NeedsBind(int32_t e) const {
    const EntryState& s = c_.entries[e];
    if (!s.bound || !c_.backend->Holds(s)) return true;
    const auto& v = s.scratch.symbol_values;
    for (size_t k = 0; k < v.size(); ++k)
      if (v[k] != s.binding[k]) return true;
    for (const PrologueBound& b : c_.mi->prepared[e].prologue.bounds)
      if (v[static_cast<size_t>(b.symbol)] != s.scratch.expr_values[static_cast<size_t>(b.expr)]) return true;
    return false;
  }

 private:
  Status LayOut(const PreparedEntry& pe, EntryState& s, int32_t t, std::span<const TensorView> inputs) {
    const PreparedTensor& pt = pe.tensors[t];
    cpu::TensorRef& r = s.refs[t];
    r = cpu::TensorRef{};
    if (pt.storage == StorageKind::kAbsent) return Status::Ok();
    r.dtype = pt.dtype;
    r.rank = pt.rank;
    r.dims = s.dims.data() + pt.dims_begin;
    for (int32_t d = 0; d < r.rank; ++d)
      if (r.dims[d] < 0)
        return DataLoss(pe.TensorLabel(t) + ": dim " + to_string(d) + " evaluates to " + to_string(r.dims[d]));
    uint64_t bytes = 0;
    if (!ShapeBytes(r.dims, r.rank, DTypeSize(r.dtype), &r.num_elements, &bytes))
      return InvalidArgument(pe.TensorLabel(t) + ": shape " + ShapeText(r.dims, r.rank) + " is too large");
    switch (pt.storage) {
      case StorageKind::kInput: {
        const TensorView& v = inputs[pt.index];
        if (v.rank != r.rank || !std::equal(r.dims, r.dims + r.rank, v.dims))
          return DataLoss(pe.TensorLabel(t) + ": planned shape " + ShapeText(r.dims, r.rank) +
                          " differs from input " + to_string(pt.index) + "'s " + ShapeText(v.dims, v.rank));
        r.data = v.data;
        break;
      }
      case StorageKind::kWeight: {
        const PreparedWeight& w = c_.mi->weight_table[pt.index];
        if (bytes > w.size)
          return DataLoss(pe.TensorLabel(t) + ": needs " + to_string(bytes) + " bytes, weight " +
                          to_string(pt.index) + " has " + to_string(w.size));
        r.data = const_cast<uint8_t*>(c_.mi->weights + w.offset);  // kernels only read inputs
        break;
      }
      case StorageKind::kArena: break;  // placed by the backend (Backend::Prepare) once the plan is checked
      case StorageKind::kSymbolic: {
        if (r.num_elements != pt.num_values)
          return DataLoss(pe.TensorLabel(t) + ": shape " + ShapeText(r.dims, r.rank) + " but " +
                          to_string(pt.num_values) + " values");
        int64_t* base = s.symbolic.data() + pt.values_begin;
        for (int32_t v = 0; v < pt.num_values; ++v) {
          const int64_t x = s.values[pe.value_exprs[pt.values_begin + v]];
          if (pt.dtype == DType::kInt64) {
            base[v] = x;
          } else {
            if (x < INT32_MIN || x > INT32_MAX)
              return InvalidArgument(pe.TensorLabel(t) + ": value " + to_string(x) + " does not fit int32");
            reinterpret_cast<int32_t*>(base)[v] = static_cast<int32_t>(x);
          }
        }
        r.data = base;
        break;
      }
      case StorageKind::kAbsent: break;
    }
    return Status::Ok();
  }

  ExecutionContext::Impl& c_;
};

// Sets the run-time dims of one Run's entry (runtime/backend.h).
class RunRuntimeDims final : public RuntimeDimSetter {
 public:
  RunRuntimeDims(Binder& binder, int32_t entry, EntryState& state, std::span<const TensorView> inputs, Stats& stats)
      : binder_(binder), entry_(entry), state_(state), inputs_(inputs), stats_(stats) {}

  Status Set(int32_t dim, int64_t value) override {
    const int32_t symbol = binder_.RuntimeSymbol(entry_, dim);
    int64_t& bound = state_.scratch.symbol_values[static_cast<size_t>(symbol)];
    if (bound != value) {
      bound = value;
      ++stats_.runtime_dim_binds;
      KILN_RETURN_IF_ERROR(binder_.Bind(entry_, inputs_, /*runtime_dims_set=*/true));
    }
    return binder_.CheckRuntimeGuards(entry_, dim);
  }

  Status Reset(int32_t dim, bool* rebound) override {
    int64_t& value = state_.scratch.symbol_values[static_cast<size_t>(binder_.RuntimeSymbol(entry_, dim))];
    const int64_t bound = binder_.RuntimeBound(entry_, dim);
    *rebound = value != bound;
    if (!*rebound) return Status::Ok();
    value = bound;
    ++stats_.runtime_dim_binds;
    return binder_.Bind(entry_, inputs_, /*runtime_dims_set=*/true);
  }

  Status Grow(int32_t dim, Status full) override {
    const PreparedEntry& pe = binder_.entry(entry_);
    const int32_t room = pe.runtime_dims[static_cast<size_t>(dim)].room;
    if (room < 0) return full;
    int64_t& rows = state_.scratch.symbol_values[static_cast<size_t>(pe.rooms[static_cast<size_t>(room)].symbol)];
    if (rows >= kMaxRoom) return full;
    grown_ = &rows;
    rows *= 2;
    ++stats_.room_growths;
    grew_ = true;
    return ResourceExhausted("the room grew to " + std::to_string(rows) + " rows; the call runs again");
  }

  // Whether a Grow since the last call asked for the call to run again.
  bool TakeGrowth() { return std::exchange(grew_, false); }
  // Halves the room the last Grow doubled (its binding failed: over max_context_bytes), so
  // that later calls keep the room that fit.
  void UndoGrowth() {
    if (grown_ != nullptr) *grown_ /= 2;
    grown_ = nullptr;
  }

 private:
  Binder& binder_;
  int32_t entry_;
  EntryState& state_;
  std::span<const TensorView> inputs_;
  Stats& stats_;
  bool grew_ = false;
  int64_t* grown_ = nullptr;  // the room the last Grow doubled
};

namespace {

Status MissError(ExecutionContext::Impl& c) {
  Stats& st = c.stats;
  st.last_miss_reasons.clear();
  std::string msg;
  for (size_t e = 0; e < c.entries.size(); ++e) {
    const PreparedEntry& pe = c.mi->prepared[e];
    std::string line = pe.label + ": " +
                       FormatPrologueFailure(pe.prologue, pe.exprs, c.entries[e].failure, MemoryKind::kHost,
                                             &c.entries[e].scratch);
    if (e) msg += "\n";
    msg += line;
    st.last_miss_reasons.push_back(std::move(line));
  }
  return InvalidArgument(std::move(msg));
}

// Checks the caller's output views (Run's `outputs`, when they are not the views the last
// Run handed out) against the entry's outputs as bound, before anything is written to them.
Status CheckCallerOutputs(const ExecutionContext::Impl& c, const PreparedEntry& pe, const EntryState& s,
                          const std::vector<TensorView>& outputs) {
  const size_t n = pe.outputs.size();
  if (outputs.size() != n)
    return InvalidArgument("expected " + to_string(n) + " outputs, got " + to_string(outputs.size()));
  const MemoryKind writable = c.backend->input_memory();
  for (size_t i = 0; i < n; ++i) {
    const cpu::TensorRef& r = s.refs[pe.outputs[i]];
    const TensorView& o = outputs[i];
    auto name = [&] { return "output " + to_string(i) + " '" + c.mi->outputs[i].name + "'"; };
    if (o.dtype != r.dtype)
      return InvalidArgument(name() + " dtype " + std::string(DTypeName(o.dtype)) + ", expected " +
                             std::string(DTypeName(r.dtype)));
    if (o.rank != r.rank || !std::equal(r.dims, r.dims + r.rank, o.dims))
      return InvalidArgument(name() + " shape " + ShapeText(o.dims, o.rank) + ", expected " +
                             ShapeText(r.dims, r.rank));
    if (writable != kAnyMemory && o.memory != writable)
      return InvalidArgument(name() + " is not in " + (writable == MemoryKind::kHost ? "host" : "device") +
                             " memory");
    if (o.data == nullptr && r.num_elements > 0) return InvalidArgument(name() + " data pointer is null");
  }
  return Status::Ok();
}

}  // namespace

Result<ExecutionContext> ExecutionContext::Create(const Model& model, const ContextOptions& options) {
  if (options.device != Device::kCpu && options.device != Device::kAuto && options.device != Device::kCuda)
    return InvalidArgument("unknown device " + to_string(static_cast<int>(options.device)));
  if (options.max_loop_iterations < 1)
    return InvalidArgument("max_loop_iterations is " + to_string(options.max_loop_iterations) + ", expected at least 1");
  if (options.cpu_threads < 0 || options.cpu_threads > ContextOptions::kMaxCpuThreads)
    return InvalidArgument("cpu_threads is " + to_string(options.cpu_threads) + ", expected 0 (one per core) to " +
                           to_string(ContextOptions::kMaxCpuThreads));
  auto impl = std::make_unique<Impl>(model);
  // kAuto tries the registered backends in order (the CPU backend last) and notes why each
  // before the one it took was unavailable.
  std::string unavailable;
  for (const BackendRegistration& r : RegisteredBackends()) {
    if (options.device != Device::kAuto && r.device != options.device) continue;
    auto backend = r.create(model, options);
    if (backend.ok()) {
      impl->backend = std::move(*backend);
      break;
    }
    if (options.device != Device::kAuto || r.device == Device::kCpu) return backend.status();
    unavailable += std::string("; ") + r.title + " unavailable: " + std::string(backend.status().message());
  }
  const auto registered = RegisteredBackends();
  const bool has_cuda = std::any_of(registered.begin(), registered.end(),
                                    [](const BackendRegistration& r) { return r.device == Device::kCuda; });
  if (!impl->backend)
    return FailedPrecondition("this runtime was built without the CUDA toolkit, so it has no CUDA backend; "
                              "use --device cpu");
  impl->device_note = impl->backend->note() + unavailable;
  if (options.device == Device::kAuto && !has_cuda) impl->device_note += "; this runtime was built without CUDA";
  impl->entries.resize(impl->mi->prepared.size());
  impl->stats.entries.resize(impl->entries.size());
  for (size_t e = 0; e < impl->entries.size(); ++e) {
    InitEntryState(impl->mi->prepared[e], impl->entries[e]);
    impl->stats.entries[e].compile = model.entries()[e].compile;
  }
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
  const MemoryKind memory = c.backend->input_memory();
  int32_t hit = -1;
  for (size_t e = 0; e < c.entries.size() && hit < 0; ++e) {
    const PreparedEntry& pe = c.mi->prepared[e];
    EntryState& s = c.entries[e];
    if (RunPrologue(pe.prologue, pe.exprs, inputs, memory, s.scratch, &s.failure)) hit = static_cast<int32_t>(e);
  }
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
    (void)RunPrologue(pe.prologue, pe.exprs, inputs, memory, s.scratch, &s.failure);
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
  const PreparedEntry& pe = c.mi->prepared[hit];
  EntryState& s = c.entries[hit];
  Binder binder(c);
  const bool into_caller = !outputs.empty() && !IsLastDelivered(c, outputs);
  const bool runtime_dims = !pe.runtime_dims.empty();
  RunRuntimeDims setter(binder, hit, s, inputs, st);
  const BackendRun backend_run{hit, pe, s, inputs, stream, st, c.instruction_observer, setter};
  Status run;
  for (bool again = true; again;) {
    if (binder.NeedsBind(hit)) {
      Status bind = binder.Bind(hit, inputs);
      if (!bind.ok()) {
        setter.UndoGrowth();
        st.last_host_stop = NowNs();
        return bind;
      }
    }
    for (int32_t i : pe.inputs) s.refs[i].data = inputs[pe.tensors[i].index].data;
    for (const auto& [slot, input] : s.input_slots) s.operands[slot].data = inputs[input].data;

    // The caller's output views are checked before anything is written to them: before the
    // run, or after it when run-time dims give the outputs' shapes (only Deliver writes them).
    if (into_caller && !runtime_dims) {
      Status check = CheckCallerOutputs(c, pe, s, outputs);
      if (!check.ok()) {
        st.last_host_stop = NowNs();
        return check;
      }
    }
    st.last_computation_start = NowNs();
    run = c.backend->Execute(backend_run);
    st.last_computation_stop = NowNs();
    // A room grew (RuntimeDimSetter::Grow): the prologue evaluates the bounds that read it
    // again (the same inputs pass), and the call runs again from its binding.
    again = !run.ok() && setter.TakeGrowth();
    if (again) (void)RunPrologue(pe.prologue, pe.exprs, inputs, memory, s.scratch, &s.failure);
  }
  if (run.ok()) st.total_computation_ns += st.last_computation_stop - st.last_computation_start;
  if (run.ok() && into_caller && runtime_dims) run = CheckCallerOutputs(c, pe, s, outputs);
  if (run.ok()) run = c.backend->Deliver(backend_run, outputs, into_caller);
  if (run.ok() && !into_caller) {
    c.delivered.resize(outputs.size());  // sized once; no allocation after the first call
    for (size_t i = 0; i < outputs.size(); ++i) c.delivered[i] = outputs[i].data;
  }
  if (run.ok()) c.last_ok_entry = hit;
  st.last_host_stop = NowNs();
  return run;
}

Status ExecutionContext::CopyOutputs(std::span<const TensorView> outputs, void* stream) {
  if (!impl_) return FailedPrecondition("CopyOutputs on a moved-from ExecutionContext");
  Impl& c = *impl_;
  if (c.last_ok_entry < 0) return FailedPrecondition("CopyOutputs: the last Run failed, or there was none");
  const int32_t e = c.last_ok_entry;
  const PreparedEntry& pe = c.mi->prepared[e];
  EntryState& s = c.entries[e];
  c.copy_views.assign(outputs.begin(), outputs.end());  // reuses its capacity
  KILN_RETURN_IF_ERROR(CheckCallerOutputs(c, pe, s, c.copy_views));
  Binder binder(c);
  RunRuntimeDims setter(binder, e, s, {}, c.stats);  // Deliver sets no run-time dim
  const BackendRun run{e, pe, s, {}, stream, c.stats, c.instruction_observer, setter};
  return c.backend->Deliver(run, c.copy_views, /*into_caller=*/true);
}

Status ExecutionContext::Synchronize(void* stream) {
  if (!impl_) return FailedPrecondition("Synchronize on a moved-from ExecutionContext");
  return impl_->backend->Synchronize(stream, impl_->stats);
}
const std::string& ExecutionContext::device_note() const { return impl_->device_note; }
const Stats& ExecutionContext::stats() const { return impl_->stats; }
Device ExecutionContext::device() const { return impl_->backend->device(); }
uint64_t ExecutionContext::arena_bytes() const { return impl_->backend->memory_usage().host_bytes; }
ExecutionContext::MemoryUsage ExecutionContext::memory_usage() const {
  if (!impl_) return MemoryUsage{};  // moved-from: holds nothing
  return impl_->backend->memory_usage();
}

void SetInstructionObserver(ExecutionContext& ctx, InstructionObserver observer) {
  ctx.impl().instruction_observer = std::move(observer);
}

ExecutionContext::ExecutionContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExecutionContext::ExecutionContext(ExecutionContext&&) noexcept = default;
ExecutionContext& ExecutionContext::operator=(ExecutionContext&&) noexcept = default;
ExecutionContext::~ExecutionContext() = default;

}  // namespace kiln
