#include "runtime/cuda/backend.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/device_model.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/graphs.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/placement.h"
#include "runtime/cuda/profiler.h"

namespace kiln::cuda {
namespace {

using std::to_string;

// Check(), with the message built only on failure (a steady-state run builds no string).
template <typename What>
Status CheckLazy(const Driver& drv, CUresult result, What what) {
  return result == CUDA_SUCCESS ? Status::Ok() : Check(drv, result, what());
}

// The device's primary context, retained while the backend lives.
struct PrimaryContext {
  const Driver* drv = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  ~PrimaryContext() {
    if (ctx) drv->DevicePrimaryCtxRelease(device);
  }
};

// A stream the context owns (CudaOptions::own_stream).
struct OwnStream {
  const Driver* drv = nullptr;
  CUstream stream = nullptr;
  ~OwnStream() {
    if (stream) drv->StreamDestroy(stream);
  }
};

class CudaBackend final : public Backend {
 public:
  // Members are destroyed in reverse order: everything on the device before the device model
  // and the context reference that keep it valid.
  CudaBackend(const Model& model, const Driver& drv, const DeviceInfo& dev) : drv_(drv), dev_(dev), graphs_(drv) {
    max_context_bytes_ = model.impl().max_context_bytes;
    ctx_.drv = own_.drv = &drv;
    ctx_.device = dev.device;
  }

  static Result<std::unique_ptr<Backend>> Create(const Model& model, const ContextOptions& options) {
    KILN_ASSIGN_OR_RETURN(const Driver* drv, LoadDriver());
    KILN_ASSIGN_OR_RETURN(const DeviceInfo dev, QueryDevice(*drv, options.cuda.device_ordinal));
    auto b = std::make_unique<CudaBackend>(model, *drv, dev);
    KILN_RETURN_IF_ERROR(Check(*drv, drv->DevicePrimaryCtxRetain(&b->ctx_.ctx, dev.device), "cuDevicePrimaryCtxRetain"));
    KILN_RETURN_IF_ERROR(Check(*drv, drv->CtxSetCurrent(b->ctx_.ctx), "cuCtxSetCurrent"));
    KILN_ASSIGN_OR_RETURN(b->dm_, SharedDeviceModel(*drv, model, dev));
    b->memory_.emplace(*drv, model.inputs().size());
    KILN_RETURN_IF_ERROR(b->memory_->err.Reserve(16, "kernel error words"));
    KILN_RETURN_IF_ERROR(
        Check(*drv, drv->MemsetD8Async(b->memory_->err.ptr, 0, 16, nullptr), "cuMemsetD8Async (error words)"));
    KILN_ASSIGN_OR_RETURN(Profiler profiler, Profiler::Create(*drv, options.profile));
    b->profiler_.emplace(std::move(profiler));
    if (options.cuda.own_stream)
      KILN_RETURN_IF_ERROR(
          Check(*drv, drv->StreamCreate(&b->own_.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate (own_stream)"));
    b->graphs_enabled_ = options.cuda.graphs && !options.profile;
    b->placement_ = LibraryPlacement::Create(dev, model.impl().prepared.size());
    b->note_ = "CUDA device " + to_string(dev.ordinal) + ": " + dev.name + " (" + dev.arch() + ")";
    if (!b->placement_->note().empty()) b->note_ += "; " + b->placement_->note();
    return std::unique_ptr<Backend>(std::move(b));
  }

  Device device() const override { return Device::kCuda; }
  const std::string& note() const override { return note_; }
  MemoryKind input_memory() const override { return kAnyMemory; }
  // Device addresses come from the plan's offsets when used: no binding goes stale.
  bool Holds(const EntryState&) const override { return true; }
  // The device arena is reserved when the entry runs; its size is checked here, before.
  Status Prepare(const PreparedEntry& pe, EntryState& s) override {
    if (AllocationBytes(s.arena_needed) <= max_context_bytes_) return Status::Ok();
    return ResourceExhausted(pe.label + ": these shapes need a device arena of " + to_string(s.arena_needed) +
                             " bytes, above LoadOptions::max_context_bytes (" + to_string(max_context_bytes_) + ")");
  }

  Status Begin(const BackendRun& run) override {
    const CUstream stream = Stream(run);
    KILN_RETURN_IF_ERROR(Check(drv_, drv_.CtxSetCurrent(ctx_.ctx), "cuCtxSetCurrent"));
    KILN_RETURN_IF_ERROR(memory_->Reserve(run.state, run.inputs));
    KILN_RETURN_IF_ERROR(profiler_->Start(run.pe, stream));
    KILN_RETURN_IF_ERROR(memory_->Stage(run.state, run.inputs, stream));
    for (const TensorView& in : run.inputs)
      if (in.memory != MemoryKind::kDevice) run.stats.last_host_to_device_bytes += in.num_bytes();
    CountSymbolic(run);
    KILN_RETURN_IF_ERROR(profiler_->Staged(stream));
    return Decide(run);
  }

  Status Bound(const BackendRun& run) override {
    KILN_RETURN_IF_ERROR(memory_->UploadSymbolic(run.state, Stream(run)));
    CountSymbolic(run);
    return Decide(run);
  }

  // The symbol values DeviceMemory::UploadSymbolic copied: a control transfer (Stats).
  static void CountSymbolic(const BackendRun& run) {
    if (run.state.symbolic.empty()) return;
    ++run.stats.last_control_transfers;
    run.stats.last_host_to_device_bytes += run.state.symbolic.size() * sizeof(int64_t);
  }

  Placement Where(const BackendRun& run) override {
    const LibraryPlacement::Decisions& d = placement_->Decide(run.entry, run.pe, run.state, *dm_, *memory_);
    return {d.host, d.library, d.why};
  }

  Status RunSegment(const BackendRun& run, const Segment& seg, size_t* done) override {
    const CUstream stream = Stream(run);
    if (!graphs_enabled_ || stream == nullptr) return Enqueue(run, seg, false, done);
    // Everything a captured launch bakes in: buffer addresses and, through the binding, sizes.
    std::vector<int64_t>& key = graphs_.key();
    key.clear();
    key.insert(key.end(), {run.entry, static_cast<int64_t>(seg.begin), static_cast<int64_t>(seg.end),
                           static_cast<int64_t>(memory_->arena.ptr), static_cast<int64_t>(memory_->symbolic.ptr),
                           static_cast<int64_t>(memory_->library_ws.ptr),
                           static_cast<int64_t>(memory_->library_ws.bytes)});
    for (CUdeviceptr p : memory_->input_ptrs) key.push_back(static_cast<int64_t>(p));
    key.insert(key.end(), run.state.binding.begin(), run.state.binding.end());
    switch (graphs_.Find(run.stats)) {
      case GraphCache::Step::kRun: return Enqueue(run, seg, false, done);
      case GraphCache::Step::kReplay: break;
      case GraphCache::Step::kCapture: {
        KILN_RETURN_IF_ERROR(graphs_.BeginCapture(stream));
        const Status enqueued = Enqueue(run, seg, true, done);
        const bool whole = *done == seg.end;
        KILN_RETURN_IF_ERROR(graphs_.EndCapture(stream, enqueued, whole));
        // A library refused an instruction when it ran: nothing captured ran, and the executor
        // goes on from the segment's start with that instruction on the host.
        if (!whole) {
          *done = seg.begin;
          return Status::Ok();
        }
        break;
      }
    }
    *done = seg.end;
    return graphs_.Replay(stream);
  }

  Status ToHost(const BackendRun& run, int32_t t, void* host, uint64_t bytes) override {
    return CheckLazy(drv_, drv_.MemcpyDtoHAsync(host, Address(run, t), bytes, Stream(run)),
                     [&] { return "copy " + run.pe.TensorName(t) + " to the host"; });
  }
  Status FromHost(const BackendRun& run, int32_t t, uint64_t offset, const void* host, uint64_t bytes) override {
    return CheckLazy(drv_, drv_.MemcpyHtoDAsync(Address(run, t) + offset, host, bytes, Stream(run)),
                     [&] { return "copy " + run.pe.TensorName(t) + " to the device"; });
  }
  Status Copy(const BackendRun& run, int32_t from, int32_t to, uint64_t offset, uint64_t bytes) override {
    return CheckLazy(drv_, drv_.MemcpyDtoDAsync(Address(run, to) + offset, Address(run, from), bytes, Stream(run)),
                     [&] { return "copy " + run.pe.TensorName(from) + " on the device"; });
  }
  Status Wait(const BackendRun& run) override {
    return CheckLazy(drv_, drv_.StreamSynchronize(Stream(run)), [] { return std::string("wait for the device"); });
  }

  Status End(const BackendRun& run) override {
    KILN_RETURN_IF_ERROR(profiler_->Stop(Stream(run)));
    run.stats.last_gpu_ns = -1;
    views_.resize(run.pe.outputs.size());
    for (size_t o = 0; o < run.pe.outputs.size(); ++o) {
      const int32_t t = run.pe.outputs[o];
      const cpu::TensorRef& r = run.state.refs[t];
      views_[o] = TensorView::Host(reinterpret_cast<void*>(Address(run, t)), r.dtype, r.dims, r.rank);
      views_[o].memory = MemoryKind::kDevice;
    }
    return Status::Ok();
  }

  Status Mark(const BackendRun& run, size_t first, size_t last) override {
    return profiler_->Mark(run.pe, first, last, Stream(run));
  }
  Status Repeat(const BackendRun& run, size_t begin, size_t end) override {
    return profiler_->Repeat(begin, end, Stream(run));
  }

  Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) override {
    if (!into_caller) {
      outputs = views_;
      return Status::Ok();
    }
    for (size_t i = 0; i < views_.size(); ++i) {
      const TensorView& r = views_[i];
      if (r.num_bytes() == 0) continue;
      const CUdeviceptr from = reinterpret_cast<CUdeviceptr>(r.data);
      if (outputs[i].memory == MemoryKind::kDevice)
        KILN_RETURN_IF_ERROR(Check(drv_, drv_.MemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(outputs[i].data), from,
                                                              r.num_bytes(), Stream(run)),
                                   "copy an output into a device buffer"));
      else {
        KILN_RETURN_IF_ERROR(Check(drv_, drv_.MemcpyDtoHAsync(outputs[i].data, from, r.num_bytes(), Stream(run)),
                                   "copy an output to the host"));
        run.stats.last_device_to_host_bytes += r.num_bytes();
      }
    }
    return Status::Ok();
  }

  // Waits for `stream`; then reports a generated kernel's failed index check (Launcher) and
  // reads the Run's times (Profiler).
  Status Synchronize(void* stream_arg, Stats& stats) override {
    const CUstream stream = stream_arg != nullptr ? static_cast<CUstream>(stream_arg) : own_.stream;
    KILN_RETURN_IF_ERROR(Check(drv_, drv_.CtxSetCurrent(ctx_.ctx), "cuCtxSetCurrent"));
    KILN_RETURN_IF_ERROR(Check(drv_, drv_.StreamSynchronize(stream), "cuStreamSynchronize"));
    profiler_->Read(stats);
    uint32_t words[4] = {};
    KILN_RETURN_IF_ERROR(
        Check(drv_, drv_.MemcpyDtoHAsync(words, memory_->err.ptr, 16, stream), "read the kernels' error words"));
    KILN_RETURN_IF_ERROR(Check(drv_, drv_.StreamSynchronize(stream), "cuStreamSynchronize"));
    if (words[0] == 0) {
      launcher_.ClearChecked();
      return Status::Ok();
    }
    KILN_RETURN_IF_ERROR(
        Check(drv_, drv_.MemsetD8Async(memory_->err.ptr, 0, 16, stream), "reset the kernels' error words"));
    return launcher_.ReportIndexError(words);
  }

  ExecutionContext::MemoryUsage memory_usage() const override {
    ExecutionContext::MemoryUsage m;
    m.device_bytes = memory_->bytes() + dm_->model.impl().weights_size + placement_->held_bytes();
    return m;
  }

 private:
  // A caller's stream, or where it is null the context's own (CudaOptions::own_stream).
  CUstream Stream(const BackendRun& run) const {
    return run.stream != nullptr ? static_cast<CUstream>(run.stream) : own_.stream;
  }
  CUdeviceptr Address(const BackendRun& run, int32_t t) const { return memory_->Address(*dm_, run.pe, run.state, t); }

  // The library decisions of the current binding; their workspace is reserved before a graph key
  // is made, as the key holds its address: a shape's second run then finds its first run's key.
  Status Decide(const BackendRun& run) {
    const LibraryPlacement::Decisions& d = placement_->Decide(run.entry, run.pe, run.state, *dm_, *memory_);
    return d.workspace > 0 ? memory_->library_ws.Reserve(d.workspace, "cuBLASLt/cuDNN workspace") : Status::Ok();
  }

  // Enqueues seg's instructions: generated kernels launched, library instructions on their
  // library. *done stops at an instruction its library refused when it ran.
  Status Enqueue(const BackendRun& run, const Segment& seg, bool capturing, size_t* done) {
    const CUstream stream = Stream(run);
    for (size_t k = seg.begin; k < seg.end; ++k) {
      const PreparedInstruction& pi = run.pe.instructions[k];
      if (pi.program != nullptr) {
        KILN_RETURN_IF_ERROR(launcher_.Launch(*dm_, *memory_, dev_, run.pe, pi, run.state, stream));
      } else {
        bool ran = false;
        KILN_RETURN_IF_ERROR(
            placement_->Run(run.entry, run.pe, k, run.state, *dm_, *memory_, stream, capturing, &ran));
        if (!ran) {
          *done = k;
          return Status::Ok();
        }
      }
      KILN_RETURN_IF_ERROR(profiler_->Mark(run.pe, k, k + 1, stream));
    }
    *done = seg.end;
    return Status::Ok();
  }

  const Driver& drv_;
  DeviceInfo dev_;
  uint64_t max_context_bytes_ = 0;
  std::string note_;
  PrimaryContext ctx_;
  std::shared_ptr<DeviceModel> dm_;
  OwnStream own_;
  std::optional<DeviceMemory> memory_;
  std::optional<Profiler> profiler_;
  std::unique_ptr<LibraryPlacement> placement_;
  GraphCache graphs_;
  bool graphs_enabled_ = false;
  Launcher launcher_;
  std::vector<TensorView> views_;  // the outputs of the last Run, in the device arena
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options) {
  return CudaBackend::Create(model, options);
}

}  // namespace kiln::cuda
