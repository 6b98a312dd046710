#include "runtime/cpu/backend.h"

#include <cstring>
#include <string>
#include <utility>

#include "runtime/clock.h"
#include "runtime/cpu/cpu_isa.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/run_instruction.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, std::unique_ptr<ThreadPool> threads, std::string note, bool profile,
             int64_t max_loop_iterations)
      : max_context_bytes_(model.impl().max_context_bytes),
        threads_(std::move(threads)),
        note_(std::move(note)),
        profile_(profile),
        max_loop_iterations_(max_loop_iterations) {}

  Device device() const override { return Device::kCpu; }
  const std::string& note() const override { return note_; }
  MemoryKind input_memory() const override { return MemoryKind::kHost; }
  bool Holds(const EntryState& s) const override { return memory_.Holds(s); }
  Status Prepare(const PreparedEntry& pe, EntryState& s) override {
    return memory_.Place(pe, s, threads_->size(), max_context_bytes_);
  }

  Status Execute(const BackendRun& run) override {
    const PreparedEntry& pe = run.pe;
    EntryState& s = run.state;
    std::vector<int64_t>& times = run.stats.last_instruction_ns;
    if (profile_) times.assign(pe.instructions.size(), 0);  // no allocation once this size was seen
    int64_t t = profile_ ? NowNs() : 0;
    LoopStep step;  // a run-time Loop's control (runtime/cpu/loop.cc)
    step.max_iterations = max_loop_iterations_;
    bool skipped_body = false;
    for (size_t k = 0; k < pe.instructions.size();) {
      const PreparedInstruction& pi = pe.instructions[k];
      bool runs = true;  // a run-time If's branch runs when its conditions hold
      for (size_t w = 0; w < pi.when.size() && runs; ++w) {
        const TensorRef& c = s.refs[pi.when[w].tensor];
        const uint8_t first = c.num_elements == 1 ? *static_cast<const uint8_t*>(c.data) : 0;
        KILN_ASSIGN_OR_RETURN(runs, pi.Holds(w, c.num_elements, first));
      }
      if (!runs) {
        if (profile_) t = NowNs();
        ++k;
        continue;
      }
      const int32_t dim = pe.runtime_dim_of[k];
      if (dim >= 0) {  // at its bound again, in a later iteration of a run-time Loop's body
        bool rebound = false;
        KILN_RETURN_IF_ERROR(run.runtime_dims.Reset(dim, &rebound).WithContext(pi.label));
      }
      const TensorRef* ops = s.operands.data() + pi.operands_begin;
      int64_t size = 0;
      const KernelCall call{pi.attrs,
                            {ops, static_cast<size_t>(pi.num_inputs)},
                            {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)},
                            memory_.workspace(),
                            static_cast<size_t>(memory_.workspace_bytes()),
                            threads_.get(),
                            dim >= 0 ? &size : nullptr,
                            !pe.loop_pair.empty() && pe.loop_pair[k] >= 0 ? &step : nullptr};
      step.skipped_body = std::exchange(skipped_body, false);
      step.again = step.full = false;
      Status st = RunInstruction(pi, call, s.sizes);
      if (step.full && dim >= 0) st = run.runtime_dims.Grow(dim, std::move(st));
      // A run-time dim: the outputs' dims (in s.operands, which call.outputs views) become the
      // size the kernel found (a LoopEnd's once the loop ends).
      if (st.ok() && dim >= 0 && !step.again) st = run.runtime_dims.Set(dim, size);
      if (!st.ok()) return st.WithContext(pi.label);
      if (run.observer) [[unlikely]]
        run.observer(pe, pi, call.outputs);
      if (profile_) {
        const int64_t now = NowNs();
        times[k] += now - t;  // summed over a loop's iterations
        t = now;
      }
      k = NextInstruction(pe, k, step, &skipped_body);
    }
    return Status::Ok();
  }

  Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) override {
    const PreparedEntry& pe = run.pe;
    const size_t n = pe.outputs.size();
    if (!into_caller) {
      outputs.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const TensorRef& r = run.state.refs[pe.outputs[i]];
        outputs[i] = TensorView::Host(r.data, r.dtype, r.dims, r.rank);
      }
      return Status::Ok();
    }
    for (size_t i = 0; i < n; ++i) {
      const TensorRef& r = run.state.refs[pe.outputs[i]];
      const size_t bytes = static_cast<size_t>(r.num_elements) * DTypeSize(r.dtype);
      if (outputs[i].data != r.data && bytes > 0) std::memmove(outputs[i].data, r.data, bytes);
    }
    return Status::Ok();
  }

  Status Synchronize(void*, Stats&) override { return Status::Ok(); }

  ExecutionContext::MemoryUsage memory_usage() const override {
    ExecutionContext::MemoryUsage m;
    m.host_bytes = memory_.bytes();
    return m;
  }

 private:
  uint64_t max_context_bytes_;
  std::unique_ptr<ThreadPool> threads_;
  std::string note_;
  bool profile_;
  int64_t max_loop_iterations_;
  HostMemory memory_;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options) {
  KILN_RETURN_IF_ERROR(MaxCpuIsaSetting());
  const int threads = options.cpu_threads > 0 ? options.cpu_threads : DefaultThreadCount();
  std::string note = "CPU backend, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (CpuIsaCapped()) note += ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)";
  auto pool = ThreadPool::Create(threads);
  if (!pool.ok()) return pool.status();
  PrepareGemmThreads();
  return std::unique_ptr<Backend>(new CpuBackend(model, std::move(*pool), std::move(note), options.profile,
                                                    options.max_loop_iterations));
}

}  // namespace kiln::cpu
