// ExecutionContext: entry selection through the prologues, binding of tensor shapes and
// pointers for a symbol assignment (cached per entry), and instruction execution on the
// CPU backend. The success path of a steady-state Run allocates nothing and builds no
// strings: failures are recorded as PODs and formatted only when returned.

#include <chrono>
#include <cstring>
#include <string>

#include "kiln/runtime.h"
#include "runtime/context_impl.h"
#include "runtime/cpu/cpu_isa.h"
#include "runtime/cpu/fused.h"
#include "runtime/cpu/run_instruction.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/widen.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/executor.h"
#endif

namespace kiln {

bool AlignedBuffer::Reserve(uint64_t bytes) {
  if (bytes <= size_) return true;
  const uint64_t rounded = AllocationBytes(bytes);
  if (rounded < bytes || rounded > static_cast<uint64_t>(PTRDIFF_MAX)) return false;
  void* p = std::aligned_alloc(64, static_cast<size_t>(rounded));
  if (p == nullptr) return false;
  std::free(data_);
  data_ = static_cast<uint8_t*>(p);
  size_ = rounded;
  return true;
}

namespace {

using std::to_string;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
  s.binding.assign(pe.prologue.symbols.size(), 0);
  s.values.assign(pe.exprs.size(), 0);
  s.dims.assign(pe.dim_exprs.size(), 0);
  s.refs.assign(pe.tensors.size(), cpu::TensorRef{});
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

class ContextRunner {
 public:
  ContextRunner(ExecutionContext::Impl& c) : c_(c) {}

  // Evaluates the entry's exprs for the symbols its prologue just bound and lays out every
  // tensor: dims, data pointer, arena and workspace sizes. Runs when the symbols or the
  // arena changed since the entry was last bound. Checks the memory plan for these shapes
  // (unless load did) and the context's memory limit before allocating anything.
  Status Bind(int32_t e, std::span<const TensorView> inputs) {
    const PreparedEntry& pe = c_.mi->prepared[e];
    EntryState& s = c_.entries[e];
    s.bound = false;
    ExprFailure why;
    if (!EvalExprs(pe.exprs, s.scratch.symbol_values, s.values.data(), &why))
      return InvalidArgument(pe.label + ": cannot compute shapes for these inputs: " +
                             FormatExprFailure(pe.exprs, pe.prologue.symbols, why));
    for (size_t k = 0; k < pe.dim_exprs.size(); ++k) s.dims[k] = s.values[pe.dim_exprs[k]];
    for (size_t t = 0; t < pe.tensors.size(); ++t)
      KILN_RETURN_IF_ERROR(LayOut(pe, s, static_cast<int32_t>(t), inputs));
    if (!pe.plan_checked) KILN_RETURN_IF_ERROR(CheckArenaPlan(pe, s.values.data(), s.dims.data(), s.arena_scratch));
    s.arena_needed = static_cast<uint64_t>(s.values[pe.arena_expr]);  // >= 0: the plan check
    for (size_t k = 0; k < pe.operands.size(); ++k)
      s.operands[k] = pe.operands[k] < 0 ? cpu::TensorRef{} : s.refs[pe.operands[k]];
    for (size_t k = 0; k < pe.size_exprs.size(); ++k) s.sizes[k] = s.values[pe.size_exprs[k]];
    s.workspace_needed = 0;
    for (const PreparedInstruction& pi : pe.instructions) {
      if (pi.program) {
        const int threads = c_.threads ? c_.threads->size() : 1;
        s.workspace_needed = std::max<uint64_t>(s.workspace_needed, cpu::FusedWorkspaceBytes(*pi.program, threads));
        continue;
      }
      const cpu::TensorRef* ops = s.operands.data() + pi.operands_begin;
      const size_t ws = cpu::KernelWorkspaceBytes(*pi.kernel, pi.attrs, {ops, static_cast<size_t>(pi.num_inputs)},
                                                  {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)});
      s.workspace_needed = std::max<uint64_t>(s.workspace_needed, ws);
    }
    KILN_RETURN_IF_ERROR(CheckMemoryLimit(pe, s));
    if (!c_.arena.Reserve(s.arena_needed))
      return ResourceExhausted(pe.label + ": cannot allocate an arena of " + to_string(s.arena_needed) + " bytes");
    if (!c_.workspace.Reserve(s.workspace_needed))
      return ResourceExhausted(pe.label + ": cannot allocate " + to_string(s.workspace_needed) +
                               " bytes of kernel workspace");
    // Arena pointers, now that the arena is placed; an empty tensor's offset is never read.
    const ArenaLiveness& l = pe.liveness;
    for (size_t p = 0; p < l.tensors.size(); ++p) {
      cpu::TensorRef& r = s.refs[l.tensors[p]];
      r.data = c_.arena.data() + (r.num_elements == 0 ? 0 : s.values[l.offset_expr[p]]);
    }
    for (const auto& [slot, t] : s.arena_slots) s.operands[slot].data = s.refs[t].data;
    std::copy(s.scratch.symbol_values.begin(), s.scratch.symbol_values.end(), s.binding.begin());
    s.arena_base = c_.arena.data();
    s.bound = true;
    return Status::Ok();
  }

  bool NeedsBind(int32_t e) const {
    const EntryState& s = c_.entries[e];
    if (!s.bound || s.arena_base != c_.arena.data()) return true;
    const auto& v = s.scratch.symbol_values;
    for (size_t k = 0; k < v.size(); ++k)
      if (v[k] != s.binding[k]) return true;
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
      case StorageKind::kArena: break;  // placed by Bind once the plan is checked and the arena reserved
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

  // The context's arena and workspace, grown for this binding, within
  // LoadOptions::max_context_bytes.
  Status CheckMemoryLimit(const PreparedEntry& pe, const EntryState& s) const {
    const uint64_t arena = std::max(c_.arena.size(), AllocationBytes(s.arena_needed));
    const uint64_t workspace = std::max(c_.workspace.size(), AllocationBytes(s.workspace_needed));
    uint64_t total = 0;
    if (__builtin_add_overflow(arena, workspace, &total)) total = UINT64_MAX;
    if (total <= c_.mi->max_context_bytes) return Status::Ok();
    return ResourceExhausted(pe.label + ": these shapes need an arena of " + to_string(s.arena_needed) + " bytes and " +
                             to_string(s.workspace_needed) + " bytes of kernel workspace; the context would hold " +
                             to_string(total) + " bytes, above LoadOptions::max_context_bytes (" +
                             to_string(c_.mi->max_context_bytes) + ")");
  }

  ExecutionContext::Impl& c_;
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

Status Execute(ExecutionContext::Impl& c, const PreparedEntry& pe, EntryState& s) {
  std::vector<int64_t>& times = c.stats.last_instruction_ns;
  if (c.profile) times.assign(pe.instructions.size(), 0);  // no allocation once this size was seen
  int64_t t = c.profile ? NowNs() : 0;
  for (size_t k = 0; k < pe.instructions.size(); ++k) {
    const PreparedInstruction& pi = pe.instructions[k];
    const cpu::TensorRef* ops = s.operands.data() + pi.operands_begin;
    const cpu::KernelCall call{pi.attrs,
                               {ops, static_cast<size_t>(pi.num_inputs)},
                               {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)},
                               c.workspace.data(),
                               static_cast<size_t>(c.workspace.size()),
                               c.threads.get()};
    Status st = cpu::RunInstruction(pi, call, s.sizes);
    if (!st.ok()) return st.WithContext(pi.label);
    if (c.instruction_observer) [[unlikely]]
      c.instruction_observer(pe, pi, call.outputs);
    if (c.profile) {
      const int64_t now = NowNs();
      times[k] = now - t;
      t = now;
    }
  }
  return Status::Ok();
}

Status DeliverOutputs(ExecutionContext::Impl& c, const PreparedEntry& pe, const EntryState& s,
                      std::vector<TensorView>& outputs) {
  const size_t n = pe.outputs.size();
  if (outputs.empty() || IsLastDelivered(c, outputs)) {
    outputs.resize(n);
    c.delivered.resize(n);  // sized once; no allocation after the first call
    for (size_t i = 0; i < n; ++i) {
      const cpu::TensorRef& r = s.refs[pe.outputs[i]];
      outputs[i] = TensorView::Host(r.data, r.dtype, r.dims, r.rank);
      c.delivered[i] = r.data;
    }
    return Status::Ok();
  }
  if (outputs.size() != n)
    return InvalidArgument("expected " + to_string(n) + " outputs, got " + to_string(outputs.size()));
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
    if (o.memory != MemoryKind::kHost) return InvalidArgument(name() + " is not in host memory");
    if (o.data == nullptr && r.num_elements > 0) return InvalidArgument(name() + " data pointer is null");
  }
  for (size_t i = 0; i < n; ++i) {
    const cpu::TensorRef& r = s.refs[pe.outputs[i]];
    const size_t bytes = static_cast<size_t>(r.num_elements) * DTypeSize(r.dtype);
    if (outputs[i].data != r.data && bytes > 0) std::memmove(outputs[i].data, r.data, bytes);
  }
  return Status::Ok();
}

#if KILN_HAVE_CUDA
// The CUDA backend's Run after the prologue and Bind: enqueue, then hand out device views
// of the outputs, or copy into the caller's buffers (host or device) on the stream.
Status RunCuda(ExecutionContext::Impl& c, int32_t hit, const PreparedEntry& pe, EntryState& s,
               std::span<const TensorView> inputs, std::vector<TensorView>& outputs, CUstream stream) {
  const bool into_caller = !outputs.empty() && !IsLastDelivered(c, outputs);
  if (into_caller && outputs.size() != pe.outputs.size())
    return InvalidArgument("expected " + to_string(pe.outputs.size()) + " outputs, got " + to_string(outputs.size()));
  std::vector<TensorView>& views = c.device_views;
  KILN_RETURN_IF_ERROR(c.cuda->Execute(hit, pe, s, c.arena.data(), c.workspace.data(),
                                       static_cast<size_t>(c.workspace.size()), inputs, stream, views, c.stats));
  if (!into_caller) {
    outputs = views;
    c.delivered.resize(views.size());
    for (size_t i = 0; i < views.size(); ++i) c.delivered[i] = views[i].data;
    return Status::Ok();
  }
  for (size_t i = 0; i < views.size(); ++i) {
    const TensorView& o = outputs[i];
    const TensorView& r = views[i];
    auto name = [&] { return "output " + to_string(i) + " '" + c.mi->outputs[i].name + "'"; };  // errors only
    if (o.dtype != r.dtype || o.rank != r.rank || !std::equal(r.dims, r.dims + r.rank, o.dims))
      return InvalidArgument(name() + " is " + std::string(DTypeName(o.dtype)) + ShapeText(o.dims, o.rank) +
                             ", expected " + std::string(DTypeName(r.dtype)) + ShapeText(r.dims, r.rank));
    if (o.data == nullptr && r.num_elements() > 0) return InvalidArgument(name() + " data pointer is null");
    if (r.num_bytes() > 0) KILN_RETURN_IF_ERROR(c.cuda->Copy(o.data, o.memory, r.data, r.num_bytes(), stream));
  }
  return Status::Ok();
}
#endif

}  // namespace

Result<ExecutionContext> ExecutionContext::Create(const Model& model, const ContextOptions& options) {
  if (options.device != Device::kCpu && options.device != Device::kAuto && options.device != Device::kCuda)
    return InvalidArgument("unknown device " + to_string(static_cast<int>(options.device)));
  if (options.cpu_threads < 0 || options.cpu_threads > cpu::ThreadPool::kMaxThreads)
    return InvalidArgument("cpu_threads is " + to_string(options.cpu_threads) + ", expected 0 (one per core) to " +
                           to_string(cpu::ThreadPool::kMaxThreads));
  auto impl = std::make_unique<Impl>(model);
  impl->device = Device::kCpu;
  impl->profile = options.profile;
  KILN_RETURN_IF_ERROR(cpu::MaxCpuIsaSetting());
  const int threads = options.cpu_threads > 0 ? options.cpu_threads : cpu::DefaultThreadCount();
  std::string cpu_note = "CPU backend, " + to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (cpu::CpuIsaCapped()) cpu_note += ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)";
  impl->device_note = cpu_note;
  if (options.device != Device::kCpu) {
#if KILN_HAVE_CUDA
    auto executor = cuda::Executor::Create(model, options.device_ordinal, options.cuda_graphs && !options.profile,
                                           options.profile);
    if (executor.ok()) {
      impl->cuda = std::move(*executor);
      impl->device = Device::kCuda;
      const cuda::DeviceInfo& d = impl->cuda->device();
      impl->device_note = "CUDA device " + to_string(d.ordinal) + ": " + d.name + " (" + d.arch() + ")";
      if (!impl->cuda->library_note().empty()) impl->device_note += "; " + impl->cuda->library_note();
    } else if (options.device == Device::kCuda) {
      return executor.status();
    } else {
      impl->device_note = cpu_note + "; CUDA unavailable: " + std::string(executor.status().message());
    }
#else
    if (options.device == Device::kCuda)
      return FailedPrecondition("this runtime was built without the CUDA toolkit, so it has no CUDA backend; "
                                "use --device cpu");
    impl->device_note = cpu_note + "; this runtime was built without CUDA";
#endif
  }
  if (impl->device == Device::kCpu) {
    auto pool = cpu::ThreadPool::Create(threads);
    if (!pool.ok()) return pool.status();
    impl->threads = std::move(*pool);
    cpu::PrepareGemmThreads();
  }
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
  // Phases this call does not reach read 0, not the previous call's times.
  st.last_prologue_start = st.last_prologue_stop = 0;
  st.last_computation_start = st.last_computation_stop = 0;
  const int64_t start = NowNs();  // a clock read costs ~20 ns: none per entry tried
  st.last_host_start = st.last_cache_lookup_start = start;
  const MemoryKind memory = c.cuda ? kAnyMemory : MemoryKind::kHost;
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
  ContextRunner runner(c);
  if (runner.NeedsBind(hit)) {
    Status bind = runner.Bind(hit, inputs);
    if (!bind.ok()) {
      st.last_host_stop = NowNs();
      return bind;
    }
  }
  for (int32_t i : pe.inputs) s.refs[i].data = inputs[pe.tensors[i].index].data;
  for (const auto& [slot, input] : s.input_slots) s.operands[slot].data = inputs[input].data;

  st.last_computation_start = NowNs();
#if KILN_HAVE_CUDA
  if (c.cuda) {
    Status run = RunCuda(c, hit, pe, s, inputs, outputs, static_cast<CUstream>(stream));
    st.last_computation_stop = st.last_host_stop = NowNs();
    if (run.ok()) st.total_computation_ns += st.last_computation_stop - st.last_computation_start;
    return run;
  }
#endif
  Status run = Execute(c, pe, s);
  st.last_computation_stop = NowNs();
  if (run.ok()) {
    st.total_computation_ns += st.last_computation_stop - st.last_computation_start;
    run = DeliverOutputs(c, pe, s, outputs);
  }
  st.last_host_stop = NowNs();
  return run;
}

Status ExecutionContext::Synchronize(void* stream) {
  if (!impl_) return FailedPrecondition("Synchronize on a moved-from ExecutionContext");
#if KILN_HAVE_CUDA
  if (impl_->cuda) return impl_->cuda->Synchronize(static_cast<CUstream>(stream), impl_->stats);
#else
  (void)stream;
#endif
  return Status::Ok();
}
const std::string& ExecutionContext::device_note() const { return impl_->device_note; }
ExecutionContext::Impl::~Impl() = default;
const Stats& ExecutionContext::stats() const { return impl_->stats; }
Device ExecutionContext::device() const { return impl_->device; }
uint64_t ExecutionContext::arena_bytes() const { return impl_->arena.size() + impl_->workspace.size(); }
ExecutionContext::MemoryUsage ExecutionContext::memory_usage() const {
  MemoryUsage m;
  if (!impl_) return m;  // moved-from: holds nothing
  m.host_bytes = arena_bytes();
#if KILN_HAVE_CUDA
  if (impl_->cuda) {
    m.host_bytes += impl_->cuda->host_bytes();
    m.device_bytes = impl_->cuda->device_bytes();
  }
#endif
  return m;
}

ExecutionContext::ExecutionContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExecutionContext::ExecutionContext(ExecutionContext&&) noexcept = default;
ExecutionContext& ExecutionContext::operator=(ExecutionContext&&) noexcept = default;
ExecutionContext::~ExecutionContext() = default;

}  // namespace kiln
