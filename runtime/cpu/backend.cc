#include "runtime/cpu/backend.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/clock.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/gemm.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/onednn/onednn.h"
#include "runtime/cpu/run_instruction.h"
#include "runtime/kernels/selective.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, std::unique_ptr<ThreadPool> threads, std::string note, bool profile, bool onednn)
      : max_context_bytes_(model.impl().max_context_bytes),
        threads_(std::move(threads)),
        note_(std::move(note)),
        profile_(profile),
        onednn_(onednn) {}

  Device device() const override { return Device::kCpu; }
  const std::string& note() const override { return note_; }
  MemoryKind input_memory() const override { return MemoryKind::kHost; }
  bool Holds(const EntryState& s) const override { return memory_.Holds(s); }
  Status Prepare(const PreparedEntry& pe, EntryState& s) override {
    const LibraryPlans* p = Choose(pe, s);
    return memory_.Place(pe, s, threads_->size(), max_context_bytes_, p != nullptr ? p->workspace : 0);
  }

#if KILN_KEEPS_WARM_UP  // runtime/kernels/selective.h
  // Where sizes its table. With oneDNN: OpenMP's team of threads, which starts at its first
  // parallel region, starts; the binding's oneDNN ops put their model weights in their layouts.
  // Prepare touched new arena and workspace pages (AlignedBuffer::Reserve).
  Status Warm(const BackendRun& run) override {
    (void)Where(run);
    if (!KeepsOneDnn() || !onednn_) return Status::Ok();  // Kiln's own pool started its workers at Create
    if (threads_->size() > 1) threads_->Run(threads_->size(), threads_->size(), [](void*, int64_t, int64_t, int) {}, nullptr);
    const LibraryPlans* plans = Current(run.pe);
    if (plans == nullptr) return Status::Ok();
    for (size_t k = 0; k < plans->ops.size(); ++k) {
      if (!plans->ops[k]) continue;
      const PreparedInstruction& pi = run.pe.instructions[k];
      const TensorRef* ops = run.state.operands.data() + pi.operands_begin;
      const KernelCall call{pi.attrs,
                            {ops, static_cast<size_t>(pi.num_inputs)},
                            {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)}};
      KILN_RETURN_IF_ERROR(plans->ops[k]->PackWeights(call).WithContext(pi.label));
    }
    return Status::Ok();
  }
#endif

  Status Begin(const BackendRun& run) override {
    if (profile_) {  // no allocation once this size was seen
      run.stats.last_instruction_ns.assign(run.pe.instructions.size(), 0);
      run.stats.last_instruction_bytes.assign(run.pe.instructions.size(), 0);
      mark_ = NowNs();
    }
    return Status::Ok();
  }

  // Prepare chose the plans of the new binding (Choose), which Where and RunSegment read.
  Status Bound(const BackendRun&) override { return Status::Ok(); }

  Placement Where(const BackendRun& run) override {
    const LibraryPlans* plans = Current(run.pe);
    const std::vector<PreparedInstruction>& ins = run.pe.instructions;
    libraries_.resize(ins.size());  // no allocation once this size was seen
    for (size_t k = 0; k < ins.size(); ++k)
      libraries_[k] = plans != nullptr && plans->ops[k]            ? Library::kOneDnn
                      : ins[k].program != nullptr                  ? Library::kGenerated
                      : ins[k].control != Control::kNone           ? Library::kControl
                                                                   : KernelLibrary(ins[k], run.state);
    return {{}, libraries_, plans != nullptr ? std::span<const std::string>(plans->why) : std::span<const std::string>()};
  }

  // What runs a CPU kernel's instruction: the GEMM library of a MatMul's or Gemm's products
  // (gemm.h SgemmLibrary, from the bound shapes: one batch item's product, as the kernel calls
  // it), else Kiln's CPU kernel.
  static Library KernelLibrary(const PreparedInstruction& pi, const EntryState& s) {
    if (pi.kernel == nullptr || pi.num_inputs < 2 || (pi.kernel->op != "MatMul" && pi.kernel->op != "Gemm"))
      return Library::kCpuKernel;
    const TensorRef &a = s.operands[pi.operands_begin], &b = s.operands[pi.operands_begin + 1];
    if (a.rank < 1 || b.rank < 1) return Library::kCpuKernel;
    int64_t m = a.rank >= 2 ? a.dims[a.rank - 2] : 1, k = a.dims[a.rank - 1];
    int64_t n = b.rank >= 2 ? b.dims[b.rank - 1] : 1;
    if (pi.kernel->op == "Gemm" && a.rank == 2 && b.rank == 2) {
      if (pi.attrs.GetInt("transA", 0) != 0) std::swap(m, k);
      n = pi.attrs.GetInt("transB", 0) != 0 ? b.dims[0] : b.dims[1];
    }
    return SgemmLibrary(m, n, k);
  }

  Status RunSegment(const BackendRun& run, const Segment& seg, size_t* done) override {
    const PreparedEntry& pe = run.pe;
    EntryState& s = run.state;
    const LibraryPlans* plans = Current(pe);
    for (size_t k = seg.begin; k < seg.end; ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      const TensorRef* ops = s.operands.data() + pi.operands_begin;
      const int32_t index = KeepsBoundCache() && run.caches ? run.caches->of_instruction[k] : -1;
      const CacheAppend* append = index >= 0 ? &run.caches->appends[static_cast<size_t>(index)] : nullptr;
      if (append) ops = CacheOperands(run, pi, *append);
      const KernelCall call{pi.attrs,
                            {ops, static_cast<size_t>(pi.num_inputs)},
                            {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)},
                            memory_.workspace(),
                            static_cast<size_t>(memory_.workspace_bytes()),
                            threads_.get(),
                            k + 1 == seg.end ? seg.runtime_size : nullptr,
                            append ? append->capacity : 0};
      const Status st = plans != nullptr && plans->ops[k] ? plans->ops[k]->Run(call) : RunInstruction(pi, call, s.sizes);
      if (!st.ok()) return st.WithContext(pi.label);
      if (run.observer) [[unlikely]]
        run.observer(pe, pi, call.outputs);
      if (profile_) {
        std::vector<int64_t>& bytes = run.stats.last_instruction_bytes;
        (void)Mark(run, k, k + 1);
        for (int32_t j = 0; j < pi.num_inputs + pi.num_outputs; ++j)
          if (ops[j].present()) bytes[k] += ops[j].num_elements * static_cast<int64_t>(DTypeSize(ops[j].dtype));
      }
    }
    *done = seg.end;
    return Status::Ok();
  }

  // The operands of Attention instruction `pi` with its present_key and present_value the
  // caller's cache buffers, which its past_key and past_value point at (cache_ops_).
  const TensorRef* CacheOperands(const BackendRun& run, const PreparedInstruction& pi, const CacheAppend& a) {
    const TensorRef* ops = run.state.operands.data() + pi.operands_begin;
    std::copy_n(ops, std::min<size_t>(cache_ops_.size(), static_cast<size_t>(pi.num_inputs + pi.num_outputs)),
                cache_ops_.begin());
    cache_ops_[static_cast<size_t>(pi.num_inputs + 1)].data = run.inputs[static_cast<size_t>(a.past_key)].data;
    cache_ops_[static_cast<size_t>(pi.num_inputs + 2)].data = run.inputs[static_cast<size_t>(a.past_value)].data;
    return cache_ops_.data();
  }

  // Every tensor is in host memory: the transfers are copies, complete on return.
  Status ToHost(const BackendRun& run, int32_t t, void* host, uint64_t bytes) override {
    std::memcpy(host, run.state.refs[t].data, bytes);
    return Status::Ok();
  }
  Status FromHost(const BackendRun& run, int32_t t, uint64_t offset, const void* host, uint64_t bytes) override {
    std::memcpy(static_cast<uint8_t*>(run.state.refs[t].data) + offset, host, bytes);
    return Status::Ok();
  }
  Status Copy(const BackendRun& run, int32_t from, int32_t to, uint64_t offset, uint64_t bytes) override {
    std::memmove(static_cast<uint8_t*>(run.state.refs[to].data) + offset, run.state.refs[from].data, bytes);
    return Status::Ok();
  }
  Status Wait(const BackendRun&) override { return Status::Ok(); }
  Status End(const BackendRun&) override { return Status::Ok(); }

  // Host wall time: each instruction's ends at its mark, counted from the one before (summed
  // over a run-time Loop's iterations).
  Status Mark(const BackendRun& run, size_t first, size_t) override {
    if (!profile_) return Status::Ok();
    const int64_t now = NowNs();
    run.stats.last_instruction_ns[first] += now - mark_;
    mark_ = now;
    return Status::Ok();
  }
  Status Repeat(const BackendRun&, size_t, size_t) override { return Status::Ok(); }

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
      if (KeepsBoundCache() && run.caches && run.caches->bound_output[i]) continue;  // the kernel wrote it there
      const TensorRef& r = run.state.refs[pe.outputs[i]];
      const size_t bytes = static_cast<size_t>(r.num_elements) * DTypeSize(r.dtype);
      if (outputs[i].data != r.data && bytes > 0) std::memmove(outputs[i].data, r.data, bytes);
    }
    return Status::Ok();
  }

  Status Synchronize(void*, Stats&) override { return Status::Ok(); }

  ExecutionContext::MemoryUsage memory_usage() const override {
    ExecutionContext::MemoryUsage m;
    m.host_bytes = memory_.bytes() + (packs_ ? packs_->bytes() : 0);
    for (const auto& [pe, e] : plans_)
      for (const LibraryPlans& p : e.bindings)
        for (const auto& op : p.ops)
          if (op) m.host_bytes += op->held_bytes();
    return m;
  }

 private:
  uint64_t max_context_bytes_;
  std::unique_ptr<ThreadPool> threads_;
  std::string note_;
  bool profile_;
  int64_t mark_ = 0;  // profiling: when the last instruction's time ended
  std::vector<Library> libraries_;  // Where's, per instruction
  // CacheOperands': an Attention instruction's operands (runtime/op_table.h: at most 7 inputs
  // and 4 outputs, which Load checks).
  std::array<TensorRef, 16> cache_ops_;
  HostMemory memory_;

  // The oneDNN ops of one entry at one binding of its symbols (onednn.h), planned by Prepare.
  struct LibraryPlans {
    std::vector<int64_t> binding;
    std::vector<std::unique_ptr<OneDnnOp>> ops;  // per instruction; null: its CPU kernel runs
    std::vector<std::string> why;                // per instruction: oneDNN's refusal, else ""
    size_t workspace = 0;                        // bytes the ops need (HostMemory's workspace)
  };
  // An entry's plans for the last kMaxBindings bindings it ran at, so that calls alternating
  // between shapes (a server's batch sizes) plan nothing once each shape has been seen.
  static constexpr size_t kMaxBindings = 8;
  struct EntryPlans {
    bool claims = false;  // some instruction's op is oneDNN's (the artifact's placement on "cpu")
    std::vector<LibraryPlans> bindings;
    size_t current = 0;  // into bindings: the binding Prepare chose last
    size_t next = 0;     // the one a new binding replaces once there are kMaxBindings
  };
  bool onednn_;
  // The model weights in oneDNN's layouts, shared by every binding's ops (declared before plans_,
  // whose ops read it, so it outlives them); null without oneDNN.
  std::unique_ptr<WeightPacks> packs_ = NewWeightPacks();
  std::vector<std::pair<const PreparedEntry*, EntryPlans>> plans_;  // per entry, once prepared

  // Whether the artifact places `pi` on oneDNN on this backend (runtime/cpu/claims.cc).
  static bool OneDnnClaims(const PreparedInstruction& pi) {
    return pi.kernel != nullptr && pi.LibraryOn("cpu") == Library::kOneDnn;
  }

  // The plans of `pe`, made at its first Prepare; null when oneDNN is off (always in a selective
  // runtime: KeepsOneDnn(), a constant, leaves the planning below out of it).
  EntryPlans* PlansOf(const PreparedEntry& pe) {
    if (!KeepsOneDnn() || !onednn_) return nullptr;
    for (auto& [e, p] : plans_)
      if (e == &pe) return &p;
    EntryPlans& p = plans_.emplace_back(&pe, EntryPlans{}).second;
    p.bindings.reserve(kMaxBindings);  // never moved: RunSegment and Where hold pointers into it
    for (const PreparedInstruction& pi : pe.instructions) p.claims = p.claims || OneDnnClaims(pi);
    return &p;
  }

  // The plans for the binding of `pe` that `s` is being bound to (its symbol values: Prepare
  // comes before EntryState::binding is updated), made now if it is not one of the last
  // kMaxBindings;
  // null when no instruction of `pe` is oneDNN's (or oneDNN is off).
  const LibraryPlans* Choose(const PreparedEntry& pe, const EntryState& s) {
    EntryPlans* e = PlansOf(pe);
    if (e == nullptr || !e->claims) return nullptr;
    for (size_t i = 0; i < e->bindings.size(); ++i)
      if (e->bindings[i].binding == s.scratch.symbol_values) return &e->bindings[e->current = i];
    if (e->bindings.size() < kMaxBindings) {
      e->current = e->bindings.size();
      e->bindings.emplace_back();
    } else {
      e->current = e->next;
      e->next = (e->next + 1) % kMaxBindings;
    }
    LibraryPlans& p = e->bindings[e->current];
    Plan(pe, s, p);
    return &p;
  }

  // The plans Prepare chose last for `pe`; null as Choose.
  const LibraryPlans* Current(const PreparedEntry& pe) {
    const EntryPlans* e = PlansOf(pe);
    return e == nullptr || !e->claims || e->bindings.empty() ? nullptr : &e->bindings[e->current];
  }

  // Plans every instruction of `pe` the artifact places on oneDNN on "cpu" (OneDnnClaims), for the
  // binding `s`; an instruction oneDNN refuses keeps its CPU kernel, with the reason.
  void Plan(const PreparedEntry& pe, const EntryState& s, LibraryPlans& p) {
    p.ops.clear();
    p.ops.resize(pe.instructions.size());
    p.why.assign(pe.instructions.size(), std::string());
    p.workspace = 0;
    for (size_t k = 0; k < pe.instructions.size(); ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      if (!OneDnnClaims(pi)) continue;
      const TensorRef* ops = s.operands.data() + pi.operands_begin;
      const KernelCall call{pi.attrs,
                            {ops, static_cast<size_t>(pi.num_inputs)},
                            {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)}};
      // Input 1 (W, B) a model weight; for LSTM, GRU and RNN also R and B (inputs 2 and 3), which oneDNN
      // reorders with W.
      auto weight = [&](int i) {
        const int32_t w = pi.num_inputs > i ? pe.operands[static_cast<size_t>(pi.operands_begin + i)] : -1;
        return w >= 0 && pe.tensors[static_cast<size_t>(w)].storage == StorageKind::kWeight;
      };
      const bool recurrent = pi.kernel->op == "LSTM" || pi.kernel->op == "GRU" || pi.kernel->op == "RNN";
      bool constant = weight(1) && (!recurrent || (weight(2) && (pi.num_inputs <= 3 || weight(3) ||
                                                                 pe.operands[pi.operands_begin + 3] < 0)));
      // QLinearConv and QLinearMatMul: every input but X (W or B, the bias, scales and zero
      // points), which oneDNN reads when planning.
      // MatMulInteger and ConvInteger: B (W) and its zero point (A's, X's, is read at each call).
      if (pi.kernel->op == "MatMulInteger" || pi.kernel->op == "ConvInteger")
        constant = weight(1) && (pi.num_inputs <= 3 || weight(3) || pe.operands[pi.operands_begin + 3] < 0);
      if (pi.kernel->op == "QLinearConv" || pi.kernel->op == "QLinearMatMul" || pi.kernel->op == "QGemm") {
        constant = pi.num_inputs >= 6;
        for (int i = 1; i < pi.num_inputs && constant; ++i)
          constant = weight(i) || pe.operands[static_cast<size_t>(pi.operands_begin + i)] < 0;
      }
      auto op = PlanOneDnn(pi.kernel->op, call, threads_->size(), constant, *packs_);
      if (op.ok()) {
        p.ops[k] = std::move(*op);
      } else {
        // A malformed call too: its CPU kernel reports the error if the instruction runs (it
        // may never, in a run-time If's other branch).
        p.why[k] = "Kiln's kernel, not oneDNN: " + std::string(op.status().message());
      }
    }
    KeepLayouts(pe, p);
    for (const auto& op : p.ops)
      if (op) p.workspace = std::max(p.workspace, op->workspace_bytes());
    p.binding = s.scratch.symbol_values;
  }

  // Tensors between oneDNN ops stay in oneDNN's layout (OneDnnOp::CanFeed, Place): first a
  // pooling takes its producer's layout for its X (OneDnnOp::Follow); then an op's Y
  // that is no entry output and is read only by oneDNN ops that take it in its layout, as
  // their X or their residual. An op with a residual keeps its Y so only when its residual is
  // kept too (its Y may share the residual's memory, which a reorder into Y would overwrite as
  // it reads it), so a dropped tensor may drop others: repeated until nothing changes. A
  // pointwise Conv with neither its X nor its Y kept goes back to Kiln's kernel (faster on
  // NCHW), which may break its neighbours' pairs: the whole decision is repeated then.
  static void KeepLayouts(const PreparedEntry& pe, LibraryPlans& p) {
    const size_t n = pe.instructions.size();
    std::vector<std::vector<std::pair<int32_t, int32_t>>> readers(pe.tensors.size());  // (instruction, slot)
    std::vector<int32_t> producer(pe.tensors.size(), -1);  // the instruction whose Y each tensor is
    const auto operand = [&](size_t k, int32_t j) {
      const PreparedInstruction& pi = pe.instructions[k];
      return j < pi.num_inputs + pi.num_outputs ? pe.operands[static_cast<size_t>(pi.operands_begin + j)] : -1;
    };
    for (size_t k = 0; k < n; ++k) {
      const PreparedInstruction& pi = pe.instructions[k];
      for (int32_t j = 0; j < pi.num_inputs; ++j)
        if (const int32_t t = operand(k, j); t >= 0)
          readers[static_cast<size_t>(t)].emplace_back(static_cast<int32_t>(k), j);
      for (const PreparedInstruction::Predicate& w : pi.when)
        readers[static_cast<size_t>(w.tensor)].emplace_back(static_cast<int32_t>(k), -1);
      if (const int32_t y = pi.num_outputs > 0 ? operand(k, pi.num_inputs) : -1; y >= 0)
        producer[static_cast<size_t>(y)] = static_cast<int32_t>(k);
    }
    for (const int32_t t : pe.outputs) readers[static_cast<size_t>(t)].emplace_back(-1, -1);
    // An op that runs in whatever layout its X arrives in (pooling) takes its producer's, in
    // instruction order, so that a chain of them follows the first Conv's layout.
    for (size_t k = 0; k < n; ++k)
      if (const int32_t x = p.ops[k] ? operand(k, 0) : -1; x >= 0)
        if (const int32_t from = producer[static_cast<size_t>(x)]; from >= 0 && p.ops[static_cast<size_t>(from)])
          p.ops[k]->Follow(*p.ops[static_cast<size_t>(from)]);
    constexpr int32_t kResidual = static_cast<int32_t>(kEpilogueResidualInput);
    std::vector<bool> x_kept(n), y_kept(n), r_kept(n);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t k = 0; k < n; ++k) {
        y_kept[k] = false;
        if (!p.ops[k]) continue;
        const int32_t y = operand(k, pe.instructions[k].num_inputs);
        if (y < 0) continue;
        const auto& r = readers[static_cast<size_t>(y)];
        bool keep = !r.empty();
        for (const auto& [i, slot] : r)
          keep = keep && i >= 0 && (slot == 0 || slot == kResidual) && p.ops[static_cast<size_t>(i)] &&
                 p.ops[k]->CanFeed(*p.ops[static_cast<size_t>(i)], slot);
        y_kept[k] = keep;
      }
      for (bool dropped = true; dropped;) {
        dropped = false;
        for (size_t k = 0; k < n; ++k) {
          if (!y_kept[k] || !p.ops[k]->residual()) continue;
          const int32_t r = operand(k, kResidual);
          const int32_t from = r >= 0 ? producer[static_cast<size_t>(r)] : -1;
          if (from < 0 || !y_kept[static_cast<size_t>(from)]) {
            y_kept[k] = false;
            dropped = true;
          }
        }
      }
      std::fill(x_kept.begin(), x_kept.end(), false);
      std::fill(r_kept.begin(), r_kept.end(), false);
      for (size_t k = 0; k < n; ++k) {
        if (!y_kept[k]) continue;
        for (const auto& [i, slot] : readers[static_cast<size_t>(operand(k, pe.instructions[k].num_inputs))])
          (slot == 0 ? x_kept : r_kept)[static_cast<size_t>(i)] = true;
      }
      for (size_t k = 0; k < n; ++k)
        if (p.ops[k] && p.ops[k]->pointwise() && !x_kept[k] && !y_kept[k]) {
          p.ops[k].reset();
          changed = true;
        }
    }
    for (size_t k = 0; k < n; ++k) {
      if (!p.ops[k]) continue;
      if (const Status st = p.ops[k]->Place(x_kept[k], y_kept[k], r_kept[k]); !st.ok()) {
        // Its neighbours may expect a kept layout from it: every op of this binding goes back
        // to Kiln's kernels, each with the reason.
        for (size_t i = 0; i < n; ++i)
          if (p.ops[i]) {
            p.ops[i].reset();
            p.why[i] = "Kiln's kernel, not oneDNN: " + std::string(st.message());
          }
        return;
      }
    }
  }
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options) {
  KILN_RETURN_IF_ERROR(MaxCpuIsaSetting());
  const int threads = options.cpu.threads > 0 ? options.cpu.threads : DefaultThreadCount();
  std::string note = "CPU backend, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (CpuIsaCapped()) {
    const CpuIsa isa = ActiveCpuIsa();
    note += std::string(", ") + CpuIsaName(isa) + " kernels (KILN_MAX_CPU_ISA=" +
            (isa == CpuIsa::kBaseline ? "baseline" : "avx2") + ")";  // a cap is below what the CPU has
  }
  if (!model.native_code_target().empty()) note += ", generated kernels as native code (" + model.native_code_target() + ")";
  const bool onednn = KeepsOneDnn() && options.cpu.onednn && OneDnnBuilt();
  if (onednn) note += ", Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on " + OneDnnVersion();
  // With oneDNN, Kiln's kernels split their loops over oneDNN's OpenMP team (onednn.h).
  auto pool = ThreadPool::Create(threads, onednn ? OpenMpTeam() : nullptr);
  if (!pool.ok()) return pool.status();
  PrepareGemmThreads();
  if (KILN_KEEPS_WARM_UP) WarmSgemm();
  return std::unique_ptr<Backend>(new CpuBackend(model, std::move(*pool), std::move(note), options.profile, onednn));
}

}  // namespace kiln::cpu
