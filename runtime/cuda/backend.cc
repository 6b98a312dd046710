#include "runtime/cuda/backend.h"

#include <string>

#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cuda/runner.h"

namespace kiln::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, std::unique_ptr<Runner> runner)
      : max_context_bytes_(model.impl().max_context_bytes), runner_(std::move(runner)) {
    const DeviceInfo& d = runner_->device();
    note_ = "CUDA device " + std::to_string(d.ordinal) + ": " + d.name + " (" + d.arch() + ")";
    if (!runner_->library_note().empty()) note_ += "; " + runner_->library_note();
  }

  Device device() const override { return Device::kCuda; }
  const std::string& note() const override { return note_; }
  MemoryKind input_memory() const override { return kAnyMemory; }
  // Device addresses come from the plan's offsets when used, and the host memory of CPU
  // fallback regions is placed when a region needs it (cuda/runner.h): no binding goes stale.
  bool Holds(const EntryState&) const override { return true; }
  // The device arena is reserved when the entry runs; its size is checked here, before.
  Status Prepare(const PreparedEntry& pe, EntryState& s) override {
    if (AllocationBytes(s.arena_needed) <= max_context_bytes_) return Status::Ok();
    return ResourceExhausted(pe.label + ": these shapes need a device arena of " + std::to_string(s.arena_needed) +
                             " bytes, above LoadOptions::max_context_bytes (" + std::to_string(max_context_bytes_) +
                             ")");
  }

  Status Execute(const BackendRun& run) override {
    return runner_->Execute(run.entry, run.pe, run.state, host_, max_context_bytes_, run.inputs,
                              Stream(run.stream), views_, run.stats, run.runtime_dims);
  }

  Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) override {
    if (!into_caller) {
      outputs = views_;
      return Status::Ok();
    }
    for (size_t i = 0; i < views_.size(); ++i) {
      const TensorView& r = views_[i];
      if (r.num_bytes() > 0)
        KILN_RETURN_IF_ERROR(runner_->Copy(outputs[i].data, outputs[i].memory, r.data, r.num_bytes(),
                                             Stream(run.stream)));
    }
    return Status::Ok();
  }

  Status Synchronize(void* stream, Stats& stats) override {
    return runner_->Synchronize(Stream(stream), stats);
  }

  ExecutionContext::MemoryUsage memory_usage() const override {
    ExecutionContext::MemoryUsage m;
    m.host_bytes = host_.bytes() + runner_->host_bytes();
    m.device_bytes = runner_->device_bytes();
    return m;
  }

 private:
  // A caller's stream, or where it is null the context's own (ContextOptions::own_stream).
  CUstream Stream(void* stream) const { return stream ? static_cast<CUstream>(stream) : runner_->default_stream(); }

  uint64_t max_context_bytes_;
  std::unique_ptr<Runner> runner_;
  std::string note_;
  cpu::HostMemory host_;
  std::vector<TensorView> views_;  // the outputs of the last Execute, in the device arena
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options) {
  KILN_RETURN_IF_ERROR(cpu::MaxCpuIsaSetting());  // CPU fallback instructions run CPU kernels
  auto runner =
      Runner::Create(model, options.device_ordinal, options.cuda_graphs && !options.profile, options.profile,
                     options.max_loop_iterations, options.own_stream);
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<Backend>(new CudaBackend(model, std::move(*runner)));
}

}  // namespace kiln::cuda
