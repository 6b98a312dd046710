// kiln/stats.h: per-context call statistics, in the spirit of Lightning Thunder's
// CompileStats.
//
//   const kiln::Stats& s = ctx.stats();
//   printf("%llu calls, %llu hits, prologue %lld ns\n", s.calls, s.cache_hits,
//          s.last_prologue_time());
//
// All times are nanoseconds of std::chrono::steady_clock since its epoch; a phase the last
// call did not reach (the prologue and computation of a miss) reads start = stop = 0. Stats belong to one ExecutionContext and share its
// threading rule: read them from the thread that calls Run, or after it has returned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/library.h"

namespace kiln {

// What the compiler made of one entry, as the artifact records it (Thunder's compile-time
// statistics, less the times: those are the compile's report's, CompileReport::Entry, so that the
// artifact's bytes do not depend on them). Stage vectors are in stage order and of equal length.
struct EntryCompileStats {
  // "import", "canonical", "fusion" (absent with --no-fuse), "executors", "plan", "codegen".
  std::vector<std::string> stage_names;
  // Ops (trace nodes) in each stage's output trace; the ops a stage started from are the
  // previous stage's. -1 where the artifact predates the field.
  std::vector<int32_t> stage_ops;
  // Distinct generated kernels the entry launches.
  int32_t kernels = 0;
};

// One entry's share of a context's calls, and its compile statistics.
struct EntryStats {
  uint64_t hits = 0;          // calls this entry served (its prologue was the first to pass)
  EntryCompileStats compile;  // a copy of Model::entries()[i].compile, made at Create
};

struct Stats {
  uint64_t calls = 0;         // Run calls, successful or not
  uint64_t cache_hits = 0;    // calls whose inputs passed some entry's prologue
  uint64_t cache_misses = 0;  // calls whose inputs passed no entry's prologue
  int32_t last_entry = -1;    // index of the entry the last hit chose, -1 before any hit
  // The target of the native CPU code this context runs the generated kernels with
  // (Model::native_code_target(): "x86-64-v3"), on the CPU backend and in a device backend's
  // CPU fallback regions; empty when it interprets their portable programs, and then
  // native_code_note says why ("the artifact has no native code", "native code refused
  // (LoadOptions::native_code is false)", "this CPU runs none of its targets (x86-64-v4)",
  // "x86-64-v3 left out by KILN_MAX_CPU_ISA=baseline"; Model::native_code_note()). A kernel the
  // chosen code has no function for is interpreted too. Set at Create.
  std::string native_code_target;
  std::string native_code_note;
  // One per entry of the model, in entry order (the order prologues are tried), sized at
  // Create: the sum of hits over entries is cache_hits.
  std::vector<EntryStats> entries;
  // One line per entry for the last miss: the first check that failed and why. Cleared
  // by the next miss, kept across hits (so it always describes the latest miss).
  std::vector<std::string> last_miss_reasons;

  // Whole Run call.
  int64_t last_host_start = 0, last_host_stop = 0;
  // Finding the entry: includes running the prologues that failed before the hit.
  int64_t last_cache_lookup_start = 0, last_cache_lookup_stop = 0;
  // The prologue of the entry that passed. When entry 0 passed this is the lookup's interval;
  // for a later entry its prologue is timed again on its own (the lookup reads no clock per
  // entry tried).
  int64_t last_prologue_start = 0, last_prologue_stop = 0;
  // Executing (on the CPU backend) or enqueueing (on a GPU backend) the instructions.
  int64_t last_computation_start = 0, last_computation_stop = 0;
  // Sum of computation times over all successful calls, for averages.
  int64_t total_computation_ns = 0;
  // CUDA backend: GPU time of the last Run from CUDA events around its work on the stream,
  // in ns; known once Synchronize has returned, -1 until then and on the CPU backend.
  int64_t last_gpu_ns = -1;
  // CUDA graphs (CudaOptions::graphs): replays of a captured (entry, segment of device
  // work, shape, buffers) graph, and captures, counted per segment: an entry whose device work a
  // CPU fallback region splits in two counts two per Run. A shape's first run is not captured
  // (it does the libraries' lazy set-up); its second is.
  uint64_t graph_hits = 0;
  uint64_t graph_misses = 0;
  // Bindings made because an instruction reported a run-time dim (EntryInfo::runtime_dims)
  // other than its bound or its size at the last such binding: each evaluates every shape of
  // the entry again (no allocation). A call whose sizes changed makes one per changed dim, and
  // one more at its start to return the dims to their bounds; inside a run-time Loop's body,
  // one more before each iteration's instruction whose dim an earlier iteration changed.
  uint64_t runtime_dim_binds = 0;
  // Rooms doubled (EntryInfo::runtime_dims: a run-time Loop with scan outputs whose iterations
  // nothing bounds, compiled without --loop-scan-bound): each time a call's loop needs more rows
  // than its context's room, the room doubles, the entry's memory is planned again (growing
  // the arena) and the call runs again from its prologue, its times those of the last run. The
  // context keeps the room for later calls, so a steady state makes none.
  uint64_t room_growths = 0;
  // CUDA backend: the instructions of the last Run's entry that did not run where their
  // artifact says (InstructionInfo::executor "cublaslt" or "cudnn") but on the CPU backend,
  // in a CPU fallback region with the CPU instructions next to it (one copy to the host, one
  // back), in instruction order. `reason` says why: the library
  // is unavailable ("cuDNN is unavailable"), refuses the op's form ("cuDNN refused it:
  // pooling with ceil_mode adds a window ..."), or refused it when it ran ("cuDNN refused it
  // when it ran: ...": no algorithm, or the call returned NOT_SUPPORTED). The decision is kept
  // for later runs at the same shapes. CPU backend with CpuOptions::onednn: the
  // instructions whose op oneDNN runs (Conv, MaxPool, AveragePool, MatMul, Gemm) that oneDNN
  // refused at these shapes and that ran on Kiln's CPU kernel ("Kiln's kernel, not oneDNN:
  // ..."). An instruction a run-time If skipped is not listed. Empty when every instruction ran
  // where its artifact (or on the CPU, the op table) says. Updated by every successful Run; a
  // steady-state Run allocates nothing here.
  struct Fallback {
    int32_t instruction = -1;  // index into EntryInfo::instructions of the entry that ran
    std::string reason;
  };
  std::vector<Fallback> last_fallbacks;
  // ContextOptions::profile: the time of each instruction of the last Run's entry, in ns, in
  // instruction order (each one's InstructionInfo: EntryInfo::instructions). Host wall time on the CPU backend;
  // CUDA-event time on the CUDA backend, filled by Synchronize, where a CPU fallback region's
  // time, copies included, is its first instruction's. Empty when not profiling.
  std::vector<int64_t> last_instruction_ns;
  // ContextOptions::profile: what ran each instruction of the last Run's entry, in instruction
  // order: the library the backend ran it on (its placement, InstructionInfo::placements), or
  // Kiln's CPU kernel where the library refused it (Stats::last_fallbacks) or, on a device, where
  // it ran on the host in a CPU fallback region. An instruction that did not run reads its
  // placement. Empty when not profiling.
  std::vector<Library> last_instruction_library;
  // ContextOptions::profile, CPU backend: the bytes each instruction of the last Run's entry
  // read and wrote, in instruction order: the sum over its operands (inputs and outputs) of
  // elements x dtype size, each operand counted once; summed over a run-time Loop's iterations,
  // 0 for an instruction that did not run. Divided by last_instruction_ns, an instruction's
  // throughput in GB/s, to hold against the memory's bandwidth (`kiln bench --profile` reports
  // the generated kernels' portable programs so, by kind). Empty on the CUDA backend and when
  // not profiling.
  std::vector<int64_t> last_instruction_bytes;

  // Device backends (0 on the CPU backend): the bytes the last Run copied from host to device
  // memory and back: inputs in host memory staged to the device, a CPU region's tensors both ways,
  // outputs delivered into host memory (by Run, and by a CopyOutputs after it), and the control
  // transfers below. A silent fallback to the host shows here and in last_cpu_region_ns without a
  // profile. Reset by every Run that reaches its entry's computation.
  uint64_t last_host_to_device_bytes = 0;
  uint64_t last_device_to_host_bytes = 0;
  // Of those, the executor's small control transfers, counted: a run-time If's or Loop's condition
  // or a run-time size read to the host, a loop's scalar written to the device, the entry's symbol
  // values uploaded at a new binding. The only copies CudaOptions::require_device_resident allows.
  uint64_t last_control_transfers = 0;
  // Host wall time of the last Run's CPU regions on a device backend, copies and waits included, ns.
  int64_t last_cpu_region_ns = 0;

  int64_t last_host_time() const { return last_host_stop - last_host_start; }
  int64_t last_cache_lookup_time() const { return last_cache_lookup_stop - last_cache_lookup_start; }
  int64_t last_prologue_time() const { return last_prologue_stop - last_prologue_start; }
  int64_t last_computation_time() const { return last_computation_stop - last_computation_start; }
};

}  // namespace kiln
