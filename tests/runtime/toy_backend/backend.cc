#include "tests/runtime/toy_backend/backend.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpu/host_memory.h"
#include "runtime/fused/interpreter.h"

namespace kiln::toy {
namespace {

class ToyBackend final : public Backend {
 public:
  Device device() const override { return kToyDevice; }
  const std::string& note() const override { return note_; }
  MemoryKind input_memory() const override { return MemoryKind::kHost; }

  // The arena is addressed by offset, as a device's: no binding goes stale.
  bool Holds(const EntryState&) const override { return true; }
  Status Prepare(const PreparedEntry& pe, EntryState& s) override {
    size_t workspace = 0;
    for (const PreparedInstruction& pi : pe.instructions)
      if (pi.program != nullptr) workspace = std::max(workspace, cpu::FusedWorkspaceBytes(*pi.program));
    if (!arena_.Reserve(s.arena_needed) || !workspace_.Reserve(workspace))
      return ResourceExhausted(pe.label + ": the toy's memory cannot hold " + std::to_string(s.arena_needed) + " bytes");
    return Status::Ok();
  }

  Status Begin(const BackendRun&) override { return Status::Ok(); }
  Status Bound(const BackendRun&) override { return Status::Ok(); }

  // Generated kernels here; everything else on the host, from the claims the artifact records.
  Placement Where(const BackendRun& run) override {
    const std::vector<PreparedInstruction>& ins = run.pe.instructions;
    host_.assign(ins.size(), 0);
    library_.assign(ins.size(), Library::kGenerated);
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].program != nullptr && ins[k].LibraryOn("toy") == Library::kGenerated) continue;
      host_[k] = 1;
      library_[k] = ins[k].control != Control::kNone ? Library::kControl : Library::kCpuKernel;
    }
    return {host_, library_, {}};
  }

  Status RunSegment(const BackendRun& run, const Segment& seg, size_t* done) override {
    ++Counters().segments;
    const EntryState& s = run.state;
    for (size_t k = seg.begin; k < seg.end; ++k) {
      const PreparedInstruction& pi = run.pe.instructions[k];
      if (pi.program == nullptr) return Internal(pi.label + ": the toy runs generated kernels only");
      refs_.assign(s.operands.begin() + pi.operands_begin,
                   s.operands.begin() + pi.operands_begin + pi.num_inputs + pi.num_outputs);
      for (int32_t j = 0; j < pi.num_inputs + pi.num_outputs; ++j) {
        const int32_t t = run.pe.operands[static_cast<size_t>(pi.operands_begin + j)];
        if (t >= 0 && run.pe.tensors[static_cast<size_t>(t)].storage == StorageKind::kArena) refs_[j].data = At(run, t);
      }
      const std::span<const cpu::TensorRef> ops(refs_);
      KILN_RETURN_IF_ERROR(cpu::RunFused(*pi.program, ops.first(static_cast<size_t>(pi.num_inputs)),
                                         ops.subspan(static_cast<size_t>(pi.num_inputs)),
                                         {s.sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes)},
                                         workspace_.data(), static_cast<size_t>(workspace_.size()))
                               .WithContext(pi.label));
    }
    *done = seg.end;
    return Status::Ok();
  }

  Status ToHost(const BackendRun& run, int32_t t, void* host, uint64_t bytes) override {
    ++Counters().to_host;
    std::memcpy(host, Source(run, t), bytes);
    return Status::Ok();
  }
  Status FromHost(const BackendRun& run, int32_t t, uint64_t offset, const void* host, uint64_t bytes) override {
    ++Counters().from_host;
    std::memcpy(At(run, t) + offset, host, bytes);
    return Status::Ok();
  }
  Status Copy(const BackendRun& run, int32_t from, int32_t to, uint64_t offset, uint64_t bytes) override {
    ++Counters().copies;
    std::memmove(At(run, to) + offset, Source(run, from), bytes);
    return Status::Ok();
  }
  Status Wait(const BackendRun&) override { return Status::Ok(); }
  Status End(const BackendRun&) override { return Status::Ok(); }
  Status Mark(const BackendRun&, size_t, size_t) override { return Status::Ok(); }
  Status Repeat(const BackendRun&, size_t, size_t) override { return Status::Ok(); }

  // The outputs come back to the host, each copied from the toy's memory.
  Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) override {
    const size_t n = run.pe.outputs.size();
    if (!into_caller) {
      delivered_.resize(n);
      outputs.resize(n);
    }
    for (size_t i = 0; i < n; ++i) {
      const int32_t t = run.pe.outputs[i];
      const cpu::TensorRef& r = run.state.refs[t];
      const size_t bytes = static_cast<size_t>(r.num_elements) * DTypeSize(r.dtype);
      void* to = into_caller ? outputs[i].data : nullptr;
      if (!into_caller) {
        delivered_[i].resize(bytes + 1);
        to = delivered_[i].data();
        outputs[i] = TensorView::Host(to, r.dtype, r.dims, r.rank);
      }
      if (bytes > 0) std::memcpy(to, Source(run, t), bytes);
    }
    return Status::Ok();
  }
  Status Synchronize(void*, Stats&) override { return Status::Ok(); }
  ExecutionContext::MemoryUsage memory_usage() const override { return {0, arena_.size()}; }

 private:
  // Tensor t's bytes in the toy's memory (an arena tensor), or in the host's (weights, inputs,
  // symbolic values, which the toy reads in place).
  uint8_t* At(const BackendRun& run, int32_t t) {
    return arena_.data() + run.state.arena_offsets[static_cast<size_t>(t)];
  }
  const void* Source(const BackendRun& run, int32_t t) {
    return run.pe.tensors[static_cast<size_t>(t)].storage == StorageKind::kArena ? At(run, t)
                                                                                  : run.state.refs[static_cast<size_t>(t)].data;
  }

  std::string note_ = "toy backend (test only)";
  cpu::AlignedBuffer arena_, workspace_;  // 64-byte aligned, only growing
  std::vector<uint8_t> host_;
  std::vector<Library> library_;
  std::vector<cpu::TensorRef> refs_;
  std::vector<std::vector<uint8_t>> delivered_;
};

Result<std::unique_ptr<Backend>> Create(const Model&, const ContextOptions&) {
  return std::unique_ptr<Backend>(new ToyBackend());
}

// Its claims: a fused region is a generated kernel; every other op the CPU kernel, on the host.
Claim ClaimOp(std::string_view, bool fused) {
  return fused ? Claim{Library::kGenerated, "a generated kernel, interpreted in the toy's memory"}
               : Claim{Library::kCpuKernel, "the toy runs generated kernels only"};
}

}  // namespace

ToyCounters& Counters() {
  static ToyCounters counters;
  return counters;
}

BackendRegistration ToyRegistration() { return {kToyDevice, "toy", "Toy", &Create, &ClaimOp, nullptr}; }

}  // namespace kiln::toy
