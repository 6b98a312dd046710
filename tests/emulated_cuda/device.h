// The emulated CUDA device's state behind the driver API (driver_api.cc): its configuration,
// device memory, contexts, streams with their worker threads, events, captured graphs, fault
// injection, counters and the call log. Test support only.
//
// Semantics follow the CUDA Driver API reference (sections named at each type); what the
// emulation does not model is said where it matters: one device arch and memory size per
// process, set by environment variables read at cuInit:
//   KILN_EMULATED_CUDA_ARCH    the compute capability, "sm_90" (default), "sm_86", ...
//   KILN_EMULATED_CUDA_MEMORY  device memory in bytes, with an optional K, M or G (default 16G)
//   KILN_EMULATED_CUDA_SMS     multiprocessor count (default 4: the grids Kiln launches scale
//                              with it, and each block runs on the host)
//   KILN_EMULATED_CUDA_FAULTS  faults to inject, as control.h's kiln_emulated_cuda_set_faults
//   KILN_EMULATED_CUDA_CACHE   where host-compiled kernels are kept (modules.h)
#pragma once

#include <cuda.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kiln::emulated_cuda {

struct Config {
  int cc_major = 9, cc_minor = 0;
  uint64_t memory_bytes = uint64_t{16} << 30;
  int multiprocessors = 4;
  std::string faults;  // the initial fault spec
  std::string Arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  std::string Name() const { return "Kiln emulated CUDA device (" + Arch() + ")"; }
};

// Parsed once, at the first call (cuInit). A malformed variable is reported on stderr and makes
// cuInit fail with CUDA_ERROR_INVALID_VALUE.
const Config& GetConfig();
bool ConfigValid();

// ---- Faults and counters (control.h) -----------------------------------------------------------
// "name@N,name2": each fault fires at its Nth due check from now (N defaults to 1), once.
bool SetFaults(std::string_view spec, std::string* why);
uint64_t Counter(std::string_view name);
void Count(std::string_view name, int64_t delta = 1);
void LogBegin();
std::string LogTake();
bool Logging();

// ---- Device memory (CUDA Driver API: Memory Management) ----------------------------------------
// One reserved address range; each allocation is 256-byte aligned, page-granular, followed by
// an unmapped guard page, and never reused: a freed allocation is poisoned (0xFF bytes, NaN as
// float) and unmapped, so a stale pointer faults or fails the checks below.
CUresult MemAlloc(CUdeviceptr* ptr, size_t bytes, CUcontext owner);
CUresult MemFree(CUdeviceptr ptr);
// Frees every allocation `owner` still holds (its context is destroyed); returns their count.
int FreeAllOf(CUcontext owner);
bool InDeviceRange(uintptr_t address);
// Pinned host memory (cuMemAllocHost): copies from or to it are asynchronous.
void* PinnedAlloc(size_t bytes);
bool PinnedFree(void* p);
bool IsPinned(const void* p, size_t bytes);

// ---- Streams (CUDA Driver API: Stream Management; CUDA Programming Guide: "Default Stream") -----
struct Dep {
  struct Stream* stream;
  uint64_t seq;
};
struct Op {
  std::string what;
  std::function<void()> work;
  std::vector<Dep> deps;
};

struct Stream {
  CUcontext ctx = nullptr;
  bool legacy = false;     // the context's NULL stream
  bool blocking = true;    // CU_STREAM_DEFAULT: ordered with the legacy stream
  uint64_t enqueued = 0;   // ops enqueued so far; guarded by the device mutex
  uint64_t completed = 0;
  std::deque<Op> queue;
  bool stopping = false;
  // Capture (cuStreamBeginCapture): ops are recorded instead of run.
  bool capturing = false;
  bool capture_invalid = false;
  CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id capture_thread;
  std::vector<Op> captured;
  std::thread worker;
};

// The device mutex guards every stream, event and context field; `progress` is notified
// whenever an op completes.
std::mutex& DeviceMutex();
std::condition_variable& Progress();

}  // namespace kiln::emulated_cuda

// The handles' types, which cuda.h leaves incomplete.
struct CUctx_st {
  int device = 0;
  int refcount = 0;
  CUresult sticky = CUDA_SUCCESS;  // a fault no later call on this context can clear
  kiln::emulated_cuda::Stream* legacy = nullptr;
  std::set<kiln::emulated_cuda::Stream*> streams;  // created with cuStreamCreate
};
struct CUstream_st : kiln::emulated_cuda::Stream {};
struct CUevent_st {
  CUcontext ctx = nullptr;
  bool timing = true;           // not CU_EVENT_DISABLE_TIMING
  bool recorded = false;        // cuEventRecord was called at least once
  kiln::emulated_cuda::Stream* stream = nullptr;  // of the last record
  uint64_t seq = 0;             // that record's op
  bool done = true;             // the last record has executed
  int64_t ns = 0;               // when it executed (steady clock)
};
struct CUgraph_st {
  CUcontext ctx = nullptr;
  std::vector<kiln::emulated_cuda::Op> ops;
};
struct CUgraphExec_st {
  CUcontext ctx = nullptr;
  std::vector<kiln::emulated_cuda::Op> ops;
};

namespace kiln::emulated_cuda {

// The calling thread's current context, or null.
CUcontext Current();
void SetCurrent(CUcontext ctx);
// The primary context of `device`, created at its first retain; released at refcount 0.
CUcontext RetainPrimary(int device);
CUresult ReleasePrimary(int device);
bool HasPrimary(int device);  // whether the device's primary context exists (retained at least once, not yet gone)
bool LiveContext(CUcontext ctx);
bool LiveContextLocked(CUcontext ctx);  // the same, with the device mutex held

// Resolves a stream handle of the current context (nullptr: its legacy stream). Fails with
// CUDA_ERROR_INVALID_CONTEXT (no current context), CUDA_ERROR_INVALID_HANDLE (not a live
// stream of it), or the context's sticky error.
CUresult ResolveStream(CUstream handle, Stream** out);
// Enqueues on a resolved stream (or records into its capture).
CUresult EnqueueOn(Stream* s, std::string what, std::function<void()> work);
// Waits until every op enqueued on `s` so far has run.
void Drain(Stream* s);
// Fails when the calling thread is capturing in a mode that forbids `what` (a synchronising
// or allocating call during CU_STREAM_CAPTURE_MODE_GLOBAL or _THREAD_LOCAL capture): returns
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates that capture.
CUresult CheckCaptureAllows(const char* what);
CUresult CreateStream(CUstream* out, unsigned flags);
CUresult DestroyStream(CUstream handle);
CUresult BeginCapture(CUstream handle, CUstreamCaptureMode mode);
CUresult EndCapture(CUstream handle, CUgraph* graph);

// The first error of the current context: its sticky error, or CUDA_ERROR_INVALID_CONTEXT.
CUresult ContextError();
// Makes the context's sticky error `error` (from a worker thread, as a faulting kernel does).
void MakeSticky(CUcontext ctx, CUresult error);

int64_t NowNs();

}  // namespace kiln::emulated_cuda
