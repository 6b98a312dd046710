#include "tests/emulated_cuda/device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/emulated_cuda/emulator.h"

namespace kiln::emulated_cuda {
namespace {

// ---- configuration --------------------------------------------------------------------------

bool ParseBytes(const char* text, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = uint64_t{1} << 10, ++end;
  else if (*end == 'M' || *end == 'm') scale = uint64_t{1} << 20, ++end;
  else if (*end == 'G' || *end == 'g') scale = uint64_t{1} << 30, ++end;
  if (*end != '\0' || v == 0) return false;
  *out = v * scale;
  return true;
}

struct LoadedConfig {
  Config config;
  bool valid = true;
};

const LoadedConfig& Loaded() {
  static const LoadedConfig loaded = [] {
    LoadedConfig l;
    auto bad = [&](const char* var, const char* value, const char* expected) {
      std::fprintf(stderr, "emulated CUDA device: %s='%s', expected %s\n", var, value, expected);
      l.valid = false;
    };
    if (const char* a = std::getenv("KILN_EMULATED_CUDA_ARCH"); a && *a) {
      int cc = 0;
      if (std::sscanf(a, "sm_%d", &cc) != 1 || cc < 50 || cc > 129) {
        bad("KILN_EMULATED_CUDA_ARCH", a, "sm_NN, e.g. sm_86");
      } else {
        l.config.cc_major = cc / 10;
        l.config.cc_minor = cc % 10;
      }
    }
    if (const char* m = std::getenv("KILN_EMULATED_CUDA_MEMORY"); m && *m) {
      if (!ParseBytes(m, &l.config.memory_bytes) || l.config.memory_bytes > (uint64_t{256} << 30))
        bad("KILN_EMULATED_CUDA_MEMORY", m, "a byte count up to 256G, with an optional K, M or G");
    }
    if (const char* s = std::getenv("KILN_EMULATED_CUDA_SMS"); s && *s) {
      const int n = std::atoi(s);
      if (n < 1 || n > 1024) bad("KILN_EMULATED_CUDA_SMS", s, "1 to 1024");
      else l.config.multiprocessors = n;
    }
    if (const char* f = std::getenv("KILN_EMULATED_CUDA_FAULTS"); f && *f) l.config.faults = f;
    return l;
  }();
  return loaded;
}

// ---- faults, counters, log --------------------------------------------------------------------

std::mutex& g_control_mu = *new std::mutex();  // never destroyed, as the device's state below
std::map<std::string, int64_t, std::less<>>& g_faults = *new std::map<std::string, int64_t, std::less<>>();  // due checks left
std::map<std::string, uint64_t, std::less<>>& g_counters = *new std::map<std::string, uint64_t, std::less<>>();
bool g_logging = false;
std::string& g_log = *new std::string();

// ---- memory -----------------------------------------------------------------------------------

constexpr uint64_t kReserve = uint64_t{1} << 40;  // address space, not memory
constexpr uint64_t kAlign = 256;

struct Allocation {
  uint64_t bytes = 0;   // as requested
  uint64_t mapped = 0;  // whole pages
  CUcontext owner = nullptr;
};

struct Memory {
  std::mutex mu;
  uintptr_t base = 0;
  uint64_t next = 0;  // offset of the next allocation
  uint64_t used = 0;  // bytes allocated, page-rounded
  std::map<uintptr_t, Allocation> live;
  std::map<void*, size_t> pinned;
  uint64_t page = 4096;

  Memory() {
    page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "emulated CUDA device: cannot reserve its address range\n");
      std::abort();
    }
    base = reinterpret_cast<uintptr_t>(p);
    next = page;  // address `base` itself is never handed out
  }
};

Memory& Mem() {
  static Memory* m = new Memory();  // never destroyed: workers may still run at exit
  return *m;
}

// ---- contexts ---------------------------------------------------------------------------------

// Never destroyed: stream workers may still wait on them while the process exits.
std::mutex& g_device_mu = *new std::mutex();
std::condition_variable& g_progress = *new std::condition_variable();
std::map<int, CUcontext>& g_primary = *new std::map<int, CUcontext>();  // device -> live primary context
std::set<CUcontext>& g_contexts = *new std::set<CUcontext>();
thread_local CUcontext t_current = nullptr;

void RunWorker(Stream* s) {
  std::unique_lock<std::mutex> lock(g_device_mu);
  for (;;) {
    auto ready = [&] {
      if (s->queue.empty()) return s->stopping;
      for (const Dep& d : s->queue.front().deps)
        if (d.stream->completed < d.seq) return false;
      return true;
    };
    g_progress.wait(lock, ready);
    if (s->queue.empty()) return;  // stopping, nothing left
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    // After a sticky fault the context runs nothing more, as a faulted GPU context does.
    const bool run = s->ctx->sticky == CUDA_SUCCESS;
    lock.unlock();
    if (run) op.work();
    op = Op{};  // release what the work captured before reporting completion
    lock.lock();
    ++s->completed;
    g_progress.notify_all();
  }
}

Stream* NewStream(CUcontext ctx, bool legacy, bool blocking) {
  Stream* s = new CUstream_st();
  s->ctx = ctx;
  s->legacy = legacy;
  s->blocking = blocking;
  s->worker = std::thread(RunWorker, s);
  return s;
}

CUstream HandleOf(Stream* s) { return static_cast<CUstream_st*>(s); }

void StopStream(Stream* s) {
  {
    std::lock_guard<std::mutex> lock(g_device_mu);
    s->stopping = true;
  }
  g_progress.notify_all();
  s->worker.join();
  delete HandleOf(s);
}

// The dependencies CUDA's legacy default stream semantics add to an op enqueued on `s`
// (CUDA Programming Guide, "Default Stream" and "Implicit Synchronization"): the legacy stream
// waits for all earlier work of the context's blocking streams, and a blocking stream waits for
// the legacy stream's earlier work. Caller holds the device mutex.
std::vector<Dep> LegacyDeps(Stream* s) {
  std::vector<Dep> deps;
  CUcontext ctx = s->ctx;
  if (s->legacy) {
    for (Stream* other : ctx->streams)
      if (other->blocking && other->enqueued > other->completed) deps.push_back({other, other->enqueued});
  } else if (s->blocking && ctx->legacy->enqueued > ctx->legacy->completed) {
    deps.push_back({ctx->legacy, ctx->legacy->enqueued});
  }
  return deps;
}

// Which capture, if any, the calling thread is part of (caller holds the device mutex).
Stream* CapturingStreamOfThisThread() {
  for (CUcontext ctx : g_contexts) {
    for (Stream* s : ctx->streams)
      if (s->capturing && s->capture_thread == std::this_thread::get_id()) return s;
  }
  return nullptr;
}

}  // namespace

const Config& GetConfig() { return Loaded().config; }
bool ConfigValid() { return Loaded().valid; }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- faults, counters, log ----------------------------------------------------------------------

bool SetFaults(std::string_view spec, std::string* why) {
  std::map<std::string, int64_t, std::less<>> faults;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    int64_t n = 1;
    if (size_t at = item.find('@'); at != std::string_view::npos) {
      const std::string count(item.substr(at + 1));
      char* end = nullptr;
      n = std::strtoll(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || n < 1) {
        *why = "fault '" + std::string(item) + "': expected NAME or NAME@N with N >= 1";
        return false;
      }
      item = item.substr(0, at);
    }
    static constexpr std::string_view kKnown[] = {"alloc-oom",     "launch-fail",        "illegal-address",
                                                  "no-binary",     "blas-not-supported", "dnn-not-supported"};
    if (std::find(std::begin(kKnown), std::end(kKnown), item) == std::end(kKnown)) {
      *why = "unknown fault '" + std::string(item) +
             "' (known: alloc-oom, launch-fail, illegal-address, no-binary, blas-not-supported, dnn-not-supported)";
      return false;
    }
    faults[std::string(item)] = n;
  }
  std::lock_guard<std::mutex> lock(g_control_mu);
  g_faults = std::move(faults);
  return true;
}

bool FaultDue(std::string_view name) {
  std::lock_guard<std::mutex> lock(g_control_mu);
  auto it = g_faults.find(name);
  if (it == g_faults.end()) return false;
  if (--it->second > 0) return false;
  g_faults.erase(it);
  ++g_counters["faults_fired"];
  return true;
}

uint64_t Counter(std::string_view name) {
  if (name == "live_device_allocations") {
    std::lock_guard<std::mutex> lock(Mem().mu);
    return Mem().live.size();
  }
  if (name == "device_bytes_in_use") {
    std::lock_guard<std::mutex> lock(Mem().mu);
    return Mem().used;
  }
  std::lock_guard<std::mutex> lock(g_control_mu);
  auto it = g_counters.find(name);
  return it == g_counters.end() ? 0 : it->second;
}

void Count(std::string_view name, int64_t delta) {
  std::lock_guard<std::mutex> lock(g_control_mu);
  auto it = g_counters.find(name);
  if (it == g_counters.end()) it = g_counters.emplace(std::string(name), 0).first;
  it->second += static_cast<uint64_t>(delta);
}

void CountLibraryPlan() { Count("library_plans"); }

void LogBegin() {
  std::lock_guard<std::mutex> lock(g_control_mu);
  g_logging = true;
  g_log.clear();
}

std::string LogTake() {
  std::lock_guard<std::mutex> lock(g_control_mu);
  g_logging = false;
  return std::move(g_log);
}

bool Logging() {
  std::lock_guard<std::mutex> lock(g_control_mu);
  return g_logging;
}

void LogCall(std::string_view entry) {
  std::lock_guard<std::mutex> lock(g_control_mu);
  if (!g_logging) return;
  g_log.append(entry);
  g_log.push_back('\n');
}

void Diagnose(std::string_view call, std::string_view message) {
  std::fprintf(stderr, "emulated CUDA device: %.*s: %.*s\n", static_cast<int>(call.size()), call.data(),
               static_cast<int>(message.size()), message.data());
}

// ---- memory -------------------------------------------------------------------------------------

CUresult MemAlloc(CUdeviceptr* ptr, size_t bytes, CUcontext owner) {
  Memory& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  const uint64_t mapped = std::max<uint64_t>((bytes + m.page - 1) / m.page * m.page, m.page);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;  // cuMemAlloc: "If bytesize is 0, ... returns CUDA_ERROR_INVALID_VALUE"
  if (m.used + mapped > GetConfig().memory_bytes || m.next + mapped + m.page > kReserve) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t addr = m.base + m.next;
  if (::mprotect(reinterpret_cast<void*>(addr), mapped, PROT_READ | PROT_WRITE) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  m.next += mapped + m.page;  // one unmapped guard page after each allocation
  m.used += mapped;
  m.live[addr] = {bytes, mapped, owner};
  static_assert(kAlign <= 4096, "allocations are page-aligned, so 256-byte aligned");
  *ptr = static_cast<CUdeviceptr>(addr);
  return CUDA_SUCCESS;
}

namespace {
void ReleaseLocked(Memory& m, std::map<uintptr_t, Allocation>::iterator it) {
  void* p = reinterpret_cast<void*>(it->first);
  std::memset(p, 0xff, it->second.mapped);  // poison: NaN as float, -1 as integers
  ::mprotect(p, it->second.mapped, PROT_NONE);
  m.used -= it->second.mapped;
  m.live.erase(it);
}
}  // namespace

CUresult MemFree(CUdeviceptr ptr) {
  Memory& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.live.find(static_cast<uintptr_t>(ptr));
  if (it == m.live.end()) return CUDA_ERROR_INVALID_VALUE;
  ReleaseLocked(m, it);
  return CUDA_SUCCESS;
}

int FreeAllOf(CUcontext owner) {
  Memory& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  int n = 0;
  for (auto it = m.live.begin(); it != m.live.end();) {
    auto cur = it++;
    if (cur->second.owner == owner) ReleaseLocked(m, cur), ++n;
  }
  return n;
}

bool InDeviceRange(uintptr_t address) {
  const Memory& m = Mem();
  return address >= m.base && address < m.base + kReserve;
}

void* DeviceRange(CUdeviceptr ptr, size_t bytes, std::string* why) {
  Memory& m = Mem();
  const uintptr_t a = static_cast<uintptr_t>(ptr);
  char buf[160];
  if (a == 0) {
    if (why) *why = "a null device pointer";
    return nullptr;
  }
  if (!InDeviceRange(a)) {
    std::snprintf(buf, sizeof buf, "0x%llx is not a device address (a host pointer?)", static_cast<unsigned long long>(a));
    if (why) *why = buf;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.live.upper_bound(a);
  if (it == m.live.begin() || a >= std::prev(it)->first + std::prev(it)->second.mapped) {
    std::snprintf(buf, sizeof buf, "0x%llx is in no live allocation (freed, or never allocated)",
                  static_cast<unsigned long long>(a));
    if (why) *why = buf;
    return nullptr;
  }
  --it;
  const uint64_t offset = a - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) {
    std::snprintf(buf, sizeof buf, "[0x%llx, +%zu) runs past the end of the %llu-byte allocation at 0x%llx",
                  static_cast<unsigned long long>(a), bytes, static_cast<unsigned long long>(it->second.bytes),
                  static_cast<unsigned long long>(it->first));
    if (why) *why = buf;
    return nullptr;
  }
  return reinterpret_cast<void*>(a);
}

void* PinnedAlloc(size_t bytes) {
  void* p = std::aligned_alloc(4096, (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096);
  if (p == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(Mem().mu);
  Mem().pinned[p] = bytes;
  return p;
}

bool PinnedFree(void* p) {
  {
    std::lock_guard<std::mutex> lock(Mem().mu);
    if (Mem().pinned.erase(p) == 0) return false;
  }
  std::free(p);
  return true;
}

bool IsPinned(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(Mem().mu);
  const auto& pinned = Mem().pinned;
  auto it = pinned.upper_bound(const_cast<void*>(p));
  if (it == pinned.begin()) return false;
  --it;
  const auto* start = static_cast<const char*>(it->first);
  const auto* q = static_cast<const char*>(p);
  return q >= start && q + bytes <= start + it->second;
}

// ---- contexts -------------------------------------------------------------------------------------

std::mutex& DeviceMutex() { return g_device_mu; }
std::condition_variable& Progress() { return g_progress; }

CUcontext Current() { return t_current; }
void SetCurrent(CUcontext ctx) { t_current = ctx; }

bool LiveContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  return LiveContextLocked(ctx);
}

bool LiveContextLocked(CUcontext ctx) { return g_contexts.count(ctx) != 0; }

CUcontext RetainPrimary(int device) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  CUcontext& ctx = g_primary[device];
  if (ctx == nullptr) {
    ctx = new CUctx_st();
    ctx->device = device;
    ctx->legacy = NewStream(ctx, /*legacy=*/true, /*blocking=*/true);
    g_contexts.insert(ctx);
    Count("contexts_created");
  }
  ++ctx->refcount;
  return ctx;
}

CUresult ReleasePrimary(int device) {
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_device_mu);
    auto it = g_primary.find(device);
    if (it == g_primary.end() || it->second == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (--it->second->refcount > 0) return CUDA_SUCCESS;
    ctx = it->second;
    g_primary.erase(it);
    g_contexts.erase(ctx);
  }
  // The context goes: its streams finish their work, and what it still holds is freed (the
  // driver does that too; the count tells a test about leaks).
  for (Stream* s : std::vector<Stream*>(ctx->streams.begin(), ctx->streams.end())) StopStream(s);
  StopStream(ctx->legacy);
  Count("allocations_freed_with_context", FreeAllOf(ctx));
  if (t_current == ctx) t_current = nullptr;
  delete ctx;
  return CUDA_SUCCESS;
}

bool HasPrimary(int device) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  auto it = g_primary.find(device);
  return it != g_primary.end() && it->second != nullptr;
}

CUresult ContextError() {
  CUcontext ctx = t_current;
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (ctx == nullptr || g_contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  return ctx->sticky;
}

void MakeSticky(CUcontext ctx, CUresult error) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (g_contexts.count(ctx) != 0 && ctx->sticky == CUDA_SUCCESS) ctx->sticky = error;
  g_progress.notify_all();  // whoever waits for this context's work: none of it will run now
}


// ---- streams ------------------------------------------------------------------------------------

CUresult ResolveStream(CUstream handle, Stream** out) {
  CUcontext ctx = t_current;
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (ctx == nullptr || g_contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  // CU_STREAM_LEGACY (0x1) names the legacy stream too; CU_STREAM_PER_THREAD is not emulated.
  if (handle == nullptr || handle == CU_STREAM_LEGACY) {
    *out = ctx->legacy;
    return CUDA_SUCCESS;
  }
  for (Stream* s : ctx->streams) {
    if (HandleOf(s) == handle) {
      *out = s;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult EnqueueOn(Stream* s, std::string what, std::function<void()> work) {
  std::unique_lock<std::mutex> lock(g_device_mu);
  if (s->ctx->sticky != CUDA_SUCCESS) return s->ctx->sticky;
  if (s->capturing) {
    s->captured.push_back(Op{std::move(what), std::move(work), {}});
    return CUDA_SUCCESS;
  }
  // The legacy stream cannot take work while a blocking stream of its context is capturing
  // (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT): the implicit dependency would cross the capture.
  if (s->legacy) {
    for (Stream* other : s->ctx->streams) {
      if (other->capturing && other->blocking) {
        other->capture_invalid = true;
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
    }
  }
  Op op{std::move(what), std::move(work), LegacyDeps(s)};
  s->queue.push_back(std::move(op));
  ++s->enqueued;
  lock.unlock();
  g_progress.notify_all();
  return CUDA_SUCCESS;
}

CUresult Enqueue(CUstream stream, std::string what, std::function<void()> work) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  return EnqueueOn(s, std::move(what), std::move(work));
}

void Drain(Stream* s) {
  std::unique_lock<std::mutex> lock(g_device_mu);
  const uint64_t target = s->enqueued;
  g_progress.wait(lock, [&] { return s->completed >= target; });
}

CUresult CheckCaptureAllows(const char* what) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  Stream* s = CapturingStreamOfThisThread();
  if (s == nullptr || s->capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  s->capture_invalid = true;
  Diagnose(what, "not allowed while this thread captures a stream (CU_STREAM_CAPTURE_MODE_GLOBAL/THREAD_LOCAL); "
                 "the capture is invalidated");
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult CreateStream(CUstream* out, unsigned flags) {
  CUcontext ctx = t_current;
  {
    std::lock_guard<std::mutex> lock(g_device_mu);
    if (ctx == nullptr || g_contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  }
  if (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = NewStream(ctx, false, (flags & CU_STREAM_NON_BLOCKING) == 0);
  {
    std::lock_guard<std::mutex> lock(g_device_mu);
    ctx->streams.insert(s);
  }
  *out = HandleOf(s);
  return CUDA_SUCCESS;
}

CUresult DestroyStream(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_device_mu);
    for (CUcontext ctx : g_contexts) {
      for (Stream* c : ctx->streams) {
        if (HandleOf(c) == handle) s = c;
      }
    }
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    s->ctx->streams.erase(s);
  }
  // "the function will return immediately and the resources ... released automatically once
  // the device has completed all work": the emulation waits for that work instead.
  StopStream(s);
  return CUDA_SUCCESS;
}

CUresult BeginCapture(CUstream handle, CUstreamCaptureMode mode) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(handle, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_device_mu);
  // cuStreamBeginCapture: "Capture may not be initiated if stream is CU_STREAM_LEGACY".
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  s->capturing = true;
  s->capture_invalid = false;
  s->capture_mode = mode;
  s->capture_thread = std::this_thread::get_id();
  s->captured.clear();
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream handle, CUgraph* graph) {
  Stream* s = nullptr;
  {
    CUcontext ctx = t_current;
    std::lock_guard<std::mutex> lock(g_device_mu);
    if (ctx == nullptr || g_contexts.count(ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
    for (Stream* c : ctx->streams)
      if (HandleOf(c) == handle) s = c;
    if (s == nullptr) return handle == nullptr ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
    if (!s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    // cuStreamEndCapture: "must be called on the same thread" for a non-relaxed capture.
    if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED && s->capture_thread != std::this_thread::get_id())
      return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    s->capturing = false;
    if (s->capture_invalid) {
      s->captured.clear();
      *graph = nullptr;
      return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    auto* g = new CUgraph_st();
    g->ctx = ctx;
    g->ops = std::move(s->captured);
    s->captured.clear();
    *graph = g;
  }
  Count("graphs_captured");
  return CUDA_SUCCESS;
}

}  // namespace kiln::emulated_cuda
