#include "runtime/executor/run_entry.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/clock.h"
#include "runtime/device_resident.h"
#include "runtime/executor/binder.h"
#include "runtime/executor/entry_run.h"
#include "runtime/kernels/selective.h"

namespace kiln {
namespace {

using std::to_string;

uint64_t Bytes(const cpu::TensorRef& r) { return static_cast<uint64_t>(r.num_elements) * DTypeSize(r.dtype); }

bool IsLastDelivered(const ExecutionContext::Impl& c, const std::vector<TensorView>& outputs) {
  if (outputs.size() != c.delivered.size() || outputs.empty()) return false;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].data != c.delivered[i]) return false;
  return true;
}

// Checks the caller's output views (Run's `outputs`, when they are not the views the last Run
// handed out) against the entry's outputs as bound, before anything is written to them.
template <typename Views>
Status CheckCallerOutputs(const ExecutionContext::Impl& c, const PreparedEntry& pe, const EntryState& s,
                          const Views& outputs) {
  const size_t n = pe.outputs.size();
  if (outputs.size() != n) return InvalidArgument("expected " + to_string(n) + " outputs, got " + to_string(outputs.size()));
  const MemoryKind writable = c.backend->input_memory();
  for (size_t i = 0; i < n; ++i) {
    const cpu::TensorRef& r = s.refs[pe.outputs[i]];
    const TensorView& o = outputs[i];
    auto name = [&] { return "output " + to_string(i) + " '" + c.mi->outputs[i].name + "'"; };
    if (o.dtype != r.dtype)
      return InvalidArgument(name() + " dtype " + std::string(DTypeName(o.dtype)) + ", expected " +
                             std::string(DTypeName(r.dtype)));
    if (o.rank != r.rank || !std::equal(r.dims, r.dims + r.rank, o.dims))
      return InvalidArgument(name() + " shape " + ViewShapeText(o.dims, o.rank) + ", expected " + ViewShapeText(r.dims, r.rank));
    if (writable != kAnyMemory && o.memory != writable)
      return InvalidArgument(name() + " is not in " + (writable == MemoryKind::kHost ? "host" : "device") + " memory");
    if (o.data == nullptr && r.num_elements > 0) return InvalidArgument(name() + " data pointer is null");
  }
  return Status::Ok();
}

// The CPU backend of fallback segments runs no observer (InstructionObserver: the CPU backend's).
const InstructionObserver kNoObserver;

}  // namespace

EntryRun::EntryRun(ExecutionContext::Impl& c, const BackendRun& run, RuntimeDims& dims)
    : c_(c), run_(run), pe_(run.pe), s_(run.state), backend_(*c.backend), dims_(dims), x_(c.scratch) {}

Status EntryRun::Go() {
  x_.fallbacks = 0;
  Stats& st = run_.stats;
  st.last_host_to_device_bytes = st.last_device_to_host_bytes = st.last_control_transfers = 0;
  st.last_cpu_region_ns = 0;
  x_.loops.clear();
  x_.loop_iterations = 0;
  if (pe_.has_predicates) x_.conditions.assign(pe_.tensors.size(), -1);  // no allocation once this size was seen
  KILN_RETURN_IF_ERROR(backend_.Begin(run_));
  place_ = backend_.Where(run_);
  if (c_.profile)  // no allocation once this size was seen
    run_.stats.last_instruction_library.assign(place_.library.begin(), place_.library.end());
  for (size_t k = 0, n = pe_.instructions.size(); k < n;) {
    const PreparedInstruction& pi = pe_.instructions[k];
    bool holds = true;
    KILN_RETURN_IF_ERROR(Holds(pi, &holds));
    size_t next = k + 1;
    if (!holds) {
      next = static_cast<size_t>(pe_.segment_end[k]);  // every instruction of a segment has its predicates
      KILN_RETURN_IF_ERROR(backend_.Mark(run_, k, next));
    } else if (cpu::KeepsLoopControl() && pi.control == Control::kLoopBegin) {
      // KeepsLoopControl() is false only in a selective runtime without loops, whose load refuses
      // their instructions (runtime/kernels/selective.h): the loop code is then left out.
      KILN_RETURN_IF_ERROR(LoopBegin(k, &next).WithContext(pi.label));
    } else if (cpu::KeepsLoopControl() && pi.control == Control::kLoopEnd) {
      KILN_RETURN_IF_ERROR(LoopEnd(k, &next).WithContext(pi.label));
    } else {
      KILN_RETURN_IF_ERROR(RunSegment(k, &next));
    }
    k = next;
  }
  run_.stats.last_fallbacks.resize(x_.fallbacks);
  return backend_.End(run_);
}

Status EntryRun::RunSegment(size_t k, size_t* next) {
  // The static segment, cut where the placement changes between the backend and the host.
  size_t end = static_cast<size_t>(pe_.segment_end[k]);
  const bool on_host = !place_.host.empty() && place_.host[k] != 0;
  if (!place_.host.empty())
    end = static_cast<size_t>(std::find(place_.host.begin() + static_cast<ptrdiff_t>(k) + 1,
                                        place_.host.begin() + static_cast<ptrdiff_t>(end), on_host ? 0 : 1) -
                              place_.host.begin());
  const int32_t dim = pe_.runtime_dim_of[end - 1];
  if (dim >= 0) KILN_RETURN_IF_ERROR(ResetDim(dim).WithContext(pe_.instructions[end - 1].label));  // again in a loop's body
  *next = end;
  if (cpu::KeepsDeviceBackends() && on_host) return RunOnHost(k, end, dim);
  int64_t size = 0;
  size_t done = end;
  KILN_RETURN_IF_ERROR(backend_.RunSegment(run_, {k, end, dim >= 0 ? &size : nullptr}, &done));
  Report(k, done);
  if (done < end) {  // a library refused an instruction when it ran: it goes to the host now
    place_ = backend_.Where(run_);
    *next = done;
    return Status::Ok();
  }
  if (dim >= 0) KILN_RETURN_IF_ERROR(SetDim(dim, size).WithContext(pe_.instructions[end - 1].label));
  return Status::Ok();
}

// A CPU fallback segment of a device backend (run_entry.h says how it runs).
Status EntryRun::RunOnHost(size_t begin, size_t end, int32_t dim) {
  // CudaOptions::require_device_resident: Create refused the instructions the artifact places on
  // the host, so this is a library refusing one at these shapes.
  if (c_.require_device_resident)
    return FailedPrecondition("require_device_resident: " + pe_.instructions[begin].label +
                              " would run on the host in a CPU region" +
                              (place_.why.size() > begin && !place_.why[begin].empty() ? ": " + place_.why[begin] : ""));
  const int64_t start = NowNs();
  const Status st = RunOnHostTimed(begin, end, dim);
  run_.stats.last_cpu_region_ns += NowNs() - start;
  return st;
}

Status EntryRun::RunOnHostTimed(size_t begin, size_t end, int32_t dim) {
  Backend& host = *c_.host;
  const std::string& where = pe_.instructions[begin].label;  // errors only
  if (!host.Holds(s_)) KILN_RETURN_IF_ERROR(host.Prepare(pe_, s_));
  x_.copied.clear();
  auto copied = [&](int32_t t) { return std::find(x_.copied.begin(), x_.copied.end(), t) != x_.copied.end(); };
  for (size_t k = begin; k < end; ++k) {
    const PreparedInstruction& pi = pe_.instructions[k];
    const int32_t* ops = pe_.operands.data() + pi.operands_begin;
    cpu::TensorRef* refs = s_.operands.data() + pi.operands_begin;
    for (int32_t i = 0; i < pi.num_inputs; ++i) {
      const int32_t t = ops[i];
      if (t < 0 || Bytes(refs[i]) == 0) continue;
      const PreparedTensor& pt = pe_.tensors[t];
      if (pt.storage == StorageKind::kArena) {
        if (pe_.written_at[t] >= static_cast<int32_t>(begin) || copied(t)) continue;
        KILN_RETURN_IF_ERROR(backend_.ToHost(run_, t, refs[i].data, Bytes(refs[i])).WithContext(pi.label));
        run_.stats.last_device_to_host_bytes += Bytes(refs[i]);
        x_.copied.push_back(t);
      } else if (pt.storage == StorageKind::kInput && run_.inputs[pt.index].memory == MemoryKind::kDevice) {
        std::vector<uint8_t>& h = x_.host_inputs[pt.index];
        if (!copied(t)) {
          h.resize(Bytes(refs[i]));
          KILN_RETURN_IF_ERROR(backend_.ToHost(run_, t, h.data(), Bytes(refs[i])).WithContext(pi.label));
          run_.stats.last_device_to_host_bytes += Bytes(refs[i]);
          x_.copied.push_back(t);
        }
        refs[i].data = h.data();
      }
    }
  }
  KILN_RETURN_IF_ERROR(backend_.Wait(run_).WithContext(where));
  const BackendRun host_run{run_.entry, pe_, s_, run_.inputs, nullptr, run_.stats, kNoObserver};
  int64_t size = 0;
  size_t done = end;
  KILN_RETURN_IF_ERROR(host.RunSegment(host_run, {begin, end, dim >= 0 ? &size : nullptr}, &done)
                           .WithContext("(CPU fallback)"));
  if (dim >= 0) {
    // The outputs go to the device at the size found, from the host arena placed again for the
    // new binding (at the same offsets).
    KILN_RETURN_IF_ERROR(SetDim(dim, size).WithContext(pe_.instructions[end - 1].label + " (CPU fallback)"));
    if (!host.Holds(s_)) KILN_RETURN_IF_ERROR(host.Prepare(pe_, s_));
  }
  for (size_t k = begin; k < end; ++k) {
    const PreparedInstruction& pi = pe_.instructions[k];
    const int32_t* ops = pe_.operands.data() + pi.operands_begin;
    const cpu::TensorRef* refs = s_.operands.data() + pi.operands_begin;
    for (int32_t o = 0; o < pi.num_outputs; ++o) {
      const int32_t t = ops[pi.num_inputs + o];
      const cpu::TensorRef& r = refs[pi.num_inputs + o];
      if (t < 0 || Bytes(r) == 0 || pe_.last_read_at[t] < static_cast<int32_t>(end)) continue;
      KILN_RETURN_IF_ERROR(backend_.FromHost(run_, t, 0, r.data, Bytes(r)).WithContext(pi.label));
      run_.stats.last_host_to_device_bytes += Bytes(r);
    }
  }
  Report(begin, end);
  // The host arena is reused by the next segment: its data must reach the device first.
  KILN_RETURN_IF_ERROR(backend_.Wait(run_).WithContext(where));
  return backend_.Mark(run_, begin, end);
}

Status EntryRun::Holds(const PreparedInstruction& pi, bool* holds) {
  *holds = true;
  for (size_t w = 0; w < pi.when.size() && *holds; ++w) {
    const int32_t t = pi.when[w].tensor;
    const int64_t elements = s_.refs[t].num_elements;
    if (x_.conditions[t] < 0 && elements == 1) {
      uint8_t byte = 0;
      KILN_RETURN_IF_ERROR(ReadScalar(t, DType::kBool, &byte, {"its condition"}).WithContext(pi.label));
      x_.conditions[t] = byte != 0 ? 1 : 0;
    }
    KILN_ASSIGN_OR_RETURN(*holds, pi.Holds(w, elements, static_cast<uint8_t>(x_.conditions[t] > 0)));
  }
  return Status::Ok();
}

Status EntryRun::SetDim(int32_t dim, int64_t size) {
  bool rebound = false;
  KILN_RETURN_IF_ERROR(dims_.Set(dim, size, &rebound));
  return rebound ? Rebound() : Status::Ok();
}

Status EntryRun::ResetDim(int32_t dim) {
  bool rebound = false;
  KILN_RETURN_IF_ERROR(dims_.Reset(dim, &rebound));
  return rebound ? Rebound() : Status::Ok();
}

Status EntryRun::Rebound() {
  KILN_RETURN_IF_ERROR(backend_.Bound(run_));
  place_ = backend_.Where(run_);
  return Status::Ok();
}

void EntryRun::Report(size_t begin, size_t end) {
  if (c_.profile && place_.library.size() >= end)
    std::copy(place_.library.begin() + static_cast<ptrdiff_t>(begin), place_.library.begin() + static_cast<ptrdiff_t>(end),
              run_.stats.last_instruction_library.begin() + static_cast<ptrdiff_t>(begin));
  if (place_.why.empty()) return;
  std::vector<Stats::Fallback>& out = run_.stats.last_fallbacks;
  for (size_t k = begin; k < end; ++k) {
    if (place_.why[k].empty()) continue;  // runs where the artifact says: nothing to report
    if (x_.fallbacks == out.size()) out.emplace_back();
    Stats::Fallback& f = out[x_.fallbacks++];
    f.instruction = static_cast<int32_t>(k);
    f.reason.assign(place_.why[k]);  // reuses the string's storage from the last run
  }
}

Status EntryRun::ReadScalar(int32_t t, DType dtype, void* out, const TransferName& name) {
  const cpu::TensorRef& r = s_.refs[t];
  if (r.dtype != dtype || r.num_elements != 1)
    return DataLoss(name.str() + ": " + pe_.TensorName(t) + " is " + std::string(DTypeName(r.dtype)) + " of " +
                    to_string(r.num_elements) + " elements, not one " + std::string(DTypeName(dtype)));
  const size_t bytes = DTypeSize(dtype);
  // A weight, a symbolic value or a host input is in host memory; an arena tensor is in the
  // backend's (on the CPU backend, host memory too: its ToHost is a copy).
  const PreparedTensor& pt = pe_.tensors[t];
  const bool host = pt.storage == StorageKind::kWeight || pt.storage == StorageKind::kSymbolic ||
                    (pt.storage == StorageKind::kInput && run_.inputs[pt.index].memory != MemoryKind::kDevice);
  if (host) {
    std::memcpy(out, r.data, bytes);
    return Status::Ok();
  }
  Status st = backend_.ToHost(run_, t, out, bytes);
  if (st.ok()) st = backend_.Wait(run_);
  if (cpu::KeepsDeviceBackends() && c_.host != nullptr) {  // a device backend: a control transfer
    ++run_.stats.last_control_transfers;
    run_.stats.last_device_to_host_bytes += bytes;
  }
  return st.ok() ? st : st.WithContext(name.str());
}

Status EntryRun::WriteScalar(int32_t t, DType dtype, const void* value, const TransferName& name) {
  const cpu::TensorRef& r = s_.refs[t];
  if (r.dtype != dtype || r.num_elements != 1)
    return DataLoss(name.str() + ": " + pe_.TensorName(t) + " is " + std::string(DTypeName(r.dtype)) + " of " +
                    to_string(r.num_elements) + " elements, not one " + std::string(DTypeName(dtype)));
  const Status st = backend_.FromHost(run_, t, 0, value, DTypeSize(dtype));
  if (cpu::KeepsDeviceBackends() && c_.host != nullptr) {  // a device backend: a control transfer
    ++run_.stats.last_control_transfers;
    run_.stats.last_host_to_device_bytes += DTypeSize(dtype);
  }
  return st.ok() ? st : st.WithContext(name.str());
}

Status EntryRun::CopyTensor(int32_t from, int32_t to, uint64_t offset, bool whole, const TransferName& name) {
  const cpu::TensorRef &a = s_.refs[from], &b = s_.refs[to];
  const uint64_t bytes = Bytes(a);
  if (a.dtype != b.dtype || (whole ? a.num_elements != b.num_elements : offset + bytes > Bytes(b)))
    return DataLoss(name.str() + ": " + pe_.TensorName(from) + " (" + std::string(DTypeName(a.dtype)) + ", " +
                    to_string(a.num_elements) + " elements) does not fit " + pe_.TensorName(to) + " (" +
                    std::string(DTypeName(b.dtype)) + ", " + to_string(b.num_elements) + " elements) at byte " +
                    to_string(offset));
  if (bytes == 0 || (from == to && offset == 0)) return Status::Ok();
  const Status st = backend_.Copy(run_, from, to, offset, bytes);
  return st.ok() ? st : st.WithContext(name.str());
}

Status RunEntry(ExecutionContext::Impl& c, int32_t e, std::span<const TensorView> inputs,
                std::vector<TensorView>& outputs, void* stream) {
  Stats& st = c.stats;
  const PreparedEntry& pe = c.mi->prepared[e];
  EntryState& s = c.entries[e];
  Binder binder(c);
  const bool into_caller = !outputs.empty() && !IsLastDelivered(c, outputs);
  const bool runtime_dims = !pe.runtime_dims.empty();
  RuntimeDims dims(binder, e, s, inputs, st);
  const EntryCaches* caches =
      !cpu::KeepsBoundCache() || c.caches.empty() || c.caches[e].empty() ? nullptr : &c.caches[e];
  if (caches && !into_caller)
    return InvalidArgument("a KV cache is bound (ExecutionContext::BindCache): Run needs the caller's output views, "
                           "each bound present pointing at its past's buffer");
  if (cpu::KeepsDeviceBackends() && c.require_device_resident)
    KILN_RETURN_IF_ERROR(
        CheckResidentTensors(c, inputs, into_caller ? std::span<const TensorView>(outputs) : std::span<const TensorView>()));
  const BackendRun run{e, pe, s, inputs, stream, st, c.instruction_observer, caches};
  const MemoryKind memory = c.backend->input_memory();
  Status status;
  for (bool again = true; again;) {
    if (binder.NeedsBind(e)) {
      Status bind = binder.Bind(e, inputs);
      if (!bind.ok()) {
        dims.UndoGrowth();
        return bind;
      }
    }
    for (int32_t i : pe.inputs) s.refs[i].data = inputs[pe.tensors[i].index].data;
    for (const auto& [slot, input] : s.input_slots) s.operands[slot].data = inputs[input].data;
    // The caller's output views are checked before anything is written to them: before the
    // run, or after it when run-time dims give the outputs' shapes (only Deliver writes them).
    if (into_caller && !runtime_dims) KILN_RETURN_IF_ERROR(CheckCallerOutputs(c, pe, s, outputs));
#if KILN_KEEPS_BOUND_CACHE
    if (caches) KILN_RETURN_IF_ERROR(CheckCaches(c, pe, s, *caches, inputs, outputs));
#endif
    st.last_computation_start = NowNs();
    status = EntryRun(c, run, dims).Go();
    st.last_computation_stop = NowNs();
    // A room grew (RuntimeDims::Grow): the prologue evaluates the bounds that read it again (the
    // same inputs pass), and the call runs again from its binding.
    again = !status.ok() && dims.TakeGrowth();
    if (again) (void)RunPrologue(pe.prologue, pe.exprs, inputs, memory, s.scratch, &s.failure);
  }
  KILN_RETURN_IF_ERROR(status);
  st.total_computation_ns += st.last_computation_stop - st.last_computation_start;
  if (into_caller && runtime_dims) KILN_RETURN_IF_ERROR(CheckCallerOutputs(c, pe, s, outputs));
  KILN_RETURN_IF_ERROR(c.backend->Deliver(run, outputs, into_caller));
  if (!into_caller) {
    c.delivered.resize(outputs.size());  // sized once; no allocation after the first call
    for (size_t i = 0; i < outputs.size(); ++i) c.delivered[i] = outputs[i].data;
  }
  c.last_ok_entry = e;
  return Status::Ok();
}

#if KILN_KEEPS_WARM_UP  // runtime/kernels/selective.h
Status WarmEntry(ExecutionContext::Impl& c, int32_t e, std::span<const TensorView> inputs) {
  const PreparedEntry& pe = c.mi->prepared[e];
  EntryState& s = c.entries[e];
  Binder binder(c);
  if (binder.NeedsBind(e)) KILN_RETURN_IF_ERROR(binder.Bind(e, inputs));
  for (int32_t i : pe.inputs) s.refs[i].data = inputs[pe.tensors[i].index].data;
  for (const auto& [slot, input] : s.input_slots) s.operands[slot].data = inputs[input].data;
  // Sized once, as RunEntry's first call would: the predicates' conditions, the views handed out,
  // the profile's figures per instruction.
  if (pe.has_predicates) c.scratch.conditions.reserve(pe.tensors.size());
  c.delivered.reserve(pe.outputs.size());
  if (c.profile) {
    c.stats.last_instruction_ns.reserve(pe.instructions.size());
    c.stats.last_instruction_bytes.reserve(pe.instructions.size());
    c.stats.last_instruction_library.reserve(pe.instructions.size());
  }
  const BackendRun run{e, pe, s, inputs, nullptr, c.stats, c.instruction_observer};
  KILN_RETURN_IF_ERROR(c.backend->Warm(run));
  if (!c.host) return Status::Ok();
  const Placement place = c.backend->Where(run);
  if (std::find(place.host.begin(), place.host.end(), 1) == place.host.end()) return Status::Ok();
  if (!c.host->Holds(s)) KILN_RETURN_IF_ERROR(c.host->Prepare(pe, s));
  return c.host->Warm(run);
}
#endif  // KILN_KEEPS_WARM_UP

Status CopyLastOutputs(ExecutionContext::Impl& c, std::span<const TensorView> outputs, void* stream) {
  if (c.last_ok_entry < 0) return FailedPrecondition("CopyOutputs: the last Run failed, or there was none, or Warm came after it");
  if (cpu::KeepsBoundCache() && !c.caches.empty() && !c.caches[c.last_ok_entry].empty())
    return FailedPrecondition("CopyOutputs: a KV cache is bound (ExecutionContext::BindCache); its present is the "
                              "caller's buffer already");
  const int32_t e = c.last_ok_entry;
  const PreparedEntry& pe = c.mi->prepared[e];
  EntryState& s = c.entries[e];
  c.copy_views.assign(outputs.begin(), outputs.end());  // reuses its capacity
  KILN_RETURN_IF_ERROR(CheckCallerOutputs(c, pe, s, c.copy_views));
  const BackendRun run{e, pe, s, {}, stream, c.stats, c.instruction_observer};
  return c.backend->Deliver(run, c.copy_views, /*into_caller=*/true);
}

}  // namespace kiln
