// The emulated CUDA driver's entry points: exactly those Kiln's runtime resolves through
// cuGetProcAddress_v2 (runtime/cuda/driver.cc), each following the CUDA Driver API reference
// section named above it, plus the control API of control.h. Test support only.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/emulated_cuda/control.h"
#include "tests/emulated_cuda/device.h"
#include "tests/emulated_cuda/emulator.h"
#include "tests/emulated_cuda/modules.h"

namespace kiln::emulated_cuda {
namespace {

bool g_initialised = false;

// ---- errors (Driver API: Error Handling) ----------------------------------------------------------

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult r) {
  for (const ErrorText& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

// cuGetErrorName / cuGetErrorString: CUDA_ERROR_INVALID_VALUE and *pStr = NULL for an unknown code.
CUresult GetErrorName(CUresult error, const char** str) {
  const ErrorText* e = FindError(error);
  if (str) *str = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult GetErrorString(CUresult error, const char** str) {
  const ErrorText* e = FindError(error);
  if (str) *str = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- a device fault in host code: say where before the process dies ----------------------------------

thread_local const char* t_running = nullptr;  // the kernel a worker is running
struct sigaction g_previous_segv;

void OnSegv(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  if (InDeviceRange(a)) {
    char buf[256];
    const int n = std::snprintf(buf, sizeof buf,
                                "emulated CUDA device: %s touched device address 0x%llx, outside every live "
                                "allocation (freed memory, or past an allocation's end)\n",
                                t_running ? t_running : "host code", static_cast<unsigned long long>(a));
    if (n > 0) (void)!::write(2, buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
  }
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction) return g_previous_segv.sa_sigaction(sig, info, uctx);
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    return g_previous_segv.sa_handler(sig);
  }
  ::signal(SIGSEGV, SIG_DFL);  // returning re-executes the access, which now kills the process
}

// ---- initialisation and devices (Driver API: Initialization, Version Management, Device Management)

// cuInit: Flags must be 0.
CUresult Init(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!ConfigValid()) return CUDA_ERROR_INVALID_VALUE;
  static const bool once = [] {
    std::string why;
    if (!GetConfig().faults.empty() && !SetFaults(GetConfig().faults, &why)) {
      Diagnose("KILN_EMULATED_CUDA_FAULTS", why);
      return false;
    }
    struct sigaction sa {};
    sa.sa_sigaction = OnSegv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &g_previous_segv);
    return true;
  }();
  if (!once) return CUDA_ERROR_INVALID_VALUE;
  g_initialised = true;
  return CUDA_SUCCESS;
}

CUresult DriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult DeviceGetCount(int* count) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult DeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult DeviceGetName(char* name, int len, CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const std::string n = GetConfig().Name();
  std::snprintf(name, static_cast<size_t>(len), "%s", n.c_str());
  return CUDA_SUCCESS;
}

// cuDeviceGetAttribute: the attributes of an sm_XY part with the configured multiprocessor count;
// attributes the emulation does not model are CUDA_ERROR_INVALID_VALUE.
CUresult DeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Config& c = GetConfig();
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = c.cc_major; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = c.cc_minor; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = c.multiprocessors; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 * 1024; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult DeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = GetConfig().memory_bytes;
  return CUDA_SUCCESS;
}

// ---- contexts (Driver API: Primary Context Management, Context Management) -----------------------

CUresult DevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = RetainPrimary(dev);
  return CUDA_SUCCESS;
}

void FreeModules();

// The last release destroys the context, and the modules loaded in it go too: a context whose
// sticky error refused cuModuleUnload frees them here, as the driver does.
CUresult DevicePrimaryCtxRelease(CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  const CUresult r = ReleasePrimary(dev);
  if (r == CUDA_SUCCESS && !HasPrimary(dev)) FreeModules();
  return r;
}

CUresult CtxSetCurrent(CUcontext ctx) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != nullptr && !LiveContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  SetCurrent(ctx);
  return CUDA_SUCCESS;
}

CUresult CtxGetCurrent(CUcontext* ctx) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = Current();
  return CUDA_SUCCESS;
}

// ---- memory (Driver API: Memory Management) --------------------------------------------------------

// Every call below checks its device pointers (DeviceRange) and says on stderr which was bad.
CUresult BadPointer(const char* call, const char* which, const std::string& why) {
  Diagnose(call, std::string(which) + ": " + why);
  return CUDA_ERROR_INVALID_VALUE;
}

// A host pointer argument: not null, and not a device address.
CUresult CheckHost(const char* call, const char* which, const void* p) {
  if (p == nullptr) return BadPointer(call, which, "a null host pointer");
  if (InDeviceRange(reinterpret_cast<uintptr_t>(p))) return BadPointer(call, which, "a device address where a host pointer is expected");
  return CUDA_SUCCESS;
}

// Drains every stream of the current context (cuMemFree, like cudaFree, synchronises).
void DrainContext() {
  CUcontext ctx = Current();
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(DeviceMutex());
    streams.assign(ctx->streams.begin(), ctx->streams.end());
    streams.push_back(ctx->legacy);
  }
  for (Stream* s : streams) Drain(s);
}

CUresult MemAllocEntry(CUdeviceptr* ptr, size_t bytes) {
  if (CUresult r = CheckCaptureAllows("cuMemAlloc"); r != CUDA_SUCCESS) return r;
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (ptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (FaultDue("alloc-oom")) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = MemAlloc(ptr, bytes, Current());
  if (r == CUDA_SUCCESS) Count("device_allocations");
  return r;
}

CUresult MemFreeEntry(CUdeviceptr ptr) {
  if (CUresult r = CheckCaptureAllows("cuMemFree"); r != CUDA_SUCCESS) return r;
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (ptr == 0) return CUDA_SUCCESS;
  std::string why;
  if (DeviceRange(ptr, 0, &why) == nullptr) return BadPointer("cuMemFree", "dptr", why);
  DrainContext();
  const CUresult r = MemFree(ptr);
  if (r == CUDA_SUCCESS) Count("device_frees");
  else Diagnose("cuMemFree", "dptr is not the start of an allocation");
  return r;
}

CUresult MemAllocHost(void** p, size_t bytes) {
  if (CUresult r = CheckCaptureAllows("cuMemAllocHost"); r != CUDA_SUCCESS) return r;
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *p = PinnedAlloc(bytes);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult MemFreeHost(void* p) {
  if (CUresult r = CheckCaptureAllows("cuMemFreeHost"); r != CUDA_SUCCESS) return r;
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  return PinnedFree(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// cuMemcpyHtoDAsync. API synchronization behavior: from pageable host memory the source is
// staged before the call returns (so it may change afterwards); from page-locked memory
// (cuMemAllocHost) it is read when the copy runs.
CUresult MemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::string why;
  void* d = DeviceRange(dst, n, &why);
  if (d == nullptr) return BadPointer("cuMemcpyHtoDAsync", "dstDevice", why);
  if (CUresult r = CheckHost("cuMemcpyHtoDAsync", "srcHost", src); r != CUDA_SUCCESS) return r;
  Count("memcpys");
  const std::string what = "cuMemcpyHtoDAsync " + std::to_string(n);
  LogCall(what);
  if (IsPinned(src, n)) return EnqueueOn(s, what, [d, src, n] { std::memcpy(d, src, n); });
  auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + n);
  return EnqueueOn(s, what, [d, staged] { std::memcpy(d, staged->data(), staged->size()); });
}

// cuMemcpyDtoHAsync. API synchronization behavior: to pageable host memory the call returns
// only once the copy has completed; to page-locked memory it is asynchronous, and the host
// sees the data after a synchronisation.
CUresult MemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::string why;
  const void* h = DeviceRange(src, n, &why);
  if (h == nullptr) return BadPointer("cuMemcpyDtoHAsync", "srcDevice", why);
  if (CUresult r = CheckHost("cuMemcpyDtoHAsync", "dstHost", dst); r != CUDA_SUCCESS) return r;
  Count("memcpys");
  const std::string what = "cuMemcpyDtoHAsync " + std::to_string(n);
  LogCall(what);
  const bool pinned = IsPinned(dst, n);
  bool capturing = false;
  {
    std::lock_guard<std::mutex> lock(DeviceMutex());
    capturing = s->capturing;
  }
  if (CUresult r = EnqueueOn(s, what, [dst, h, n] { std::memcpy(dst, h, n); }); r != CUDA_SUCCESS) return r;
  if (!pinned && !capturing) {
    Drain(s);
    return ContextError();
  }
  return CUDA_SUCCESS;
}

CUresult MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::string why;
  void* d = DeviceRange(dst, n, &why);
  if (d == nullptr) return BadPointer("cuMemcpyDtoDAsync", "dstDevice", why);
  const void* h = DeviceRange(src, n, &why);
  if (h == nullptr) return BadPointer("cuMemcpyDtoDAsync", "srcDevice", why);
  Count("memcpys");
  const std::string what = "cuMemcpyDtoDAsync " + std::to_string(n);
  LogCall(what);
  return EnqueueOn(s, what, [d, h, n] { std::memmove(d, h, n); });
}

// cuMemcpyHtoD: synchronous; ordered like work on the legacy stream.
CUresult MemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  if (CUresult r = CheckCaptureAllows("cuMemcpyHtoD"); r != CUDA_SUCCESS) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(nullptr, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::string why;
  void* d = DeviceRange(dst, n, &why);
  if (d == nullptr) return BadPointer("cuMemcpyHtoD", "dstDevice", why);
  if (CUresult r = CheckHost("cuMemcpyHtoD", "srcHost", src); r != CUDA_SUCCESS) return r;
  Count("memcpys");
  const std::string what = "cuMemcpyHtoD " + std::to_string(n);
  LogCall(what);
  if (CUresult r = EnqueueOn(s, what, [d, src, n] { std::memcpy(d, src, n); }); r != CUDA_SUCCESS) return r;
  Drain(s);
  return ContextError();
}

CUresult MemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  std::string why;
  void* d = DeviceRange(dst, n, &why);
  if (d == nullptr) return BadPointer("cuMemsetD8Async", "dstDevice", why);
  const std::string what = "cuMemsetD8Async " + std::to_string(n);
  LogCall(what);
  return EnqueueOn(s, what, [d, value, n] { std::memset(d, value, n); });
}

// cuPointerGetAttribute: MEMORY_TYPE, DEVICE_POINTER and CONTEXT; host memory not allocated by
// the driver is CUDA_ERROR_INVALID_VALUE, as documented.
CUresult PointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool device = DeviceRange(ptr, 0, nullptr) != nullptr;
  const bool pinned = !device && IsPinned(reinterpret_cast<const void*>(ptr), 1);
  if (!device && !pinned) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = Current(); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

// ---- modules (Driver API: Module Management) ------------------------------------------------------

std::mutex g_modules_mu;
std::set<CUmodule> g_modules;
std::map<std::pair<CUmodule, std::string>, CUfunction> g_functions;

CUresult ModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (FaultDue("no-binary")) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  auto* m = new CUmod_st();
  if (CUresult r = LoadModule(image, &m->kernels, &m->arch); r != CUDA_SUCCESS) {
    delete m;
    return r;
  }
  Count("module_loads");
  LogCall("cuModuleLoadData " + m->arch + " " + m->kernels.front()->name);
  std::lock_guard<std::mutex> lock(g_modules_mu);
  g_modules.insert(m);
  *module = m;
  return CUDA_SUCCESS;
}

// cuModuleLoadDataEx: JIT options do not change what the emulation runs; they are checked for shape only.
CUresult ModuleLoadDataEx(CUmodule* module, const void* image, unsigned n, CUjit_option* options, void** values) {
  if (n > 0 && (options == nullptr || values == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return ModuleLoadData(module, image);
}

CUresult ModuleUnload(CUmodule module) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_modules_mu);
  if (g_modules.erase(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto it = g_functions.begin(); it != g_functions.end();) {
    if (it->first.first == module) {
      delete it->second;
      it = g_functions.erase(it);
    } else {
      ++it;
    }
  }
  delete module;  // kernels queued for launch keep their library through their shared_ptr
  return CUDA_SUCCESS;
}

void FreeModules() {
  std::lock_guard<std::mutex> lock(g_modules_mu);
  for (auto& [key, f] : g_functions) delete f;
  g_functions.clear();
  Count("modules_freed_with_context", static_cast<int64_t>(g_modules.size()));
  for (CUmodule m : g_modules) delete m;
  g_modules.clear();
}

CUresult ModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (fn == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_modules_mu);
  if (g_modules.count(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  CUfunction& f = g_functions[{module, name}];
  if (f == nullptr) {
    for (const auto& k : module->kernels) {
      if (k->name == name) {
        f = new CUfunc_st();
        f->kernel = k;
        f->module = module;
      }
    }
    if (f == nullptr) {
      g_functions.erase({module, name});
      return CUDA_ERROR_NOT_FOUND;
    }
  }
  *fn = f;
  return CUDA_SUCCESS;
}

// ---- launches (Driver API: Execution Control, cuLaunchKernel) -------------------------------------

CUresult BadLaunch(const Kernel& k, const std::string& why) {
  Diagnose("cuLaunchKernel(" + k.name + ")", why);
  return CUDA_ERROR_INVALID_VALUE;
}

// cuLaunchKernel: the grid and block within the device's limits (and the kernel's
// __launch_bounds__), kernelParams holding one pointer per parameter of the kernel's signature
// (or `extra` a parameter buffer of exactly their size), each pointer parameter a device
// address in a live allocation (or null). Parameter values are copied at the call, as the
// driver does; the kernel runs when the stream reaches it.
CUresult LaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared_bytes, CUstream stream, void** params, void** extra) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Kernel> k;
  {
    std::lock_guard<std::mutex> lock(g_modules_mu);
    bool live = false;
    for (const auto& [key, fn] : g_functions) live = live || fn == f;
    if (!live) return CUDA_ERROR_INVALID_HANDLE;
    k = f->kernel;
  }
  const uint64_t threads = uint64_t{bx} * by * bz;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return BadLaunch(*k, "a zero grid or block dimension");
  if (gx > 2147483647u || gy > 65535u || gz > 65535u) return BadLaunch(*k, "a grid dimension above the device's limit");
  if (bx > 1024 || by > 1024 || bz > 64 || threads > 1024)
    return BadLaunch(*k, "a block of " + std::to_string(threads) + " threads or a dimension above the limit");
  if (threads > k->max_threads)
    return BadLaunch(*k, "a block of " + std::to_string(threads) + " threads, above its __launch_bounds__(" +
                             std::to_string(k->max_threads) + ")");
  if (shared_bytes > 48 * 1024) return BadLaunch(*k, "dynamic shared memory above 48 KiB");
  std::vector<uint64_t> values(k->params.size(), 0);
  if (params != nullptr && extra != nullptr) return BadLaunch(*k, "both kernelParams and extra");
  if (extra != nullptr) {
    void* buffer = nullptr;
    size_t size = 0;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
      else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t*>(e[1]);
      else return BadLaunch(*k, "an unknown entry in extra");
    }
    size_t offset = 0;
    for (size_t i = 0; i < k->params.size(); ++i) {
      const size_t b = k->params[i].bytes;
      offset = (offset + b - 1) / b * b;
      if (buffer == nullptr || offset + b > size) return BadLaunch(*k, "extra's parameter buffer is smaller than the signature");
      std::memcpy(&values[i], static_cast<char*>(buffer) + offset, b);
      offset += b;
    }
    if (offset != size) return BadLaunch(*k, "extra's parameter buffer is larger than the signature");
  } else {
    if (params == nullptr && !k->params.empty()) return BadLaunch(*k, "no kernelParams for a kernel with parameters");
    for (size_t i = 0; i < k->params.size(); ++i) {
      if (params[i] == nullptr) return BadLaunch(*k, "kernelParams[" + std::to_string(i) + "] is null");
      std::memcpy(&values[i], params[i], k->params[i].bytes);
    }
  }
  for (size_t i = 0; i < k->params.size(); ++i) {
    if (!k->params[i].pointer || values[i] == 0) continue;
    std::string why;
    if (DeviceRange(static_cast<CUdeviceptr>(values[i]), 0, &why) == nullptr)
      return BadLaunch(*k, "parameter " + std::to_string(i) + " (" + k->params[i].type + " " + k->params[i].name +
                               "): " + why);
  }
  if (FaultDue("launch-fail")) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  const bool fault = FaultDue("illegal-address");
  Count("launches");
  const std::string what = "cuLaunchKernel " + k->name;
  LogCall(what);
  CUcontext ctx = s->ctx;
  return EnqueueOn(s, what, [k, values, gx, gy, gz, bx, by, bz, ctx, fault]() mutable {
    if (fault) {
      MakeSticky(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
      return;
    }
    std::vector<void*> ptrs(values.size());
    for (size_t i = 0; i < values.size(); ++i) ptrs[i] = &values[i];
    std::lock_guard<std::mutex> lock(*k->mu);
    t_running = k->name.c_str();
    k->launch(ptrs.data(), gx, gy, gz, bx, by, bz);
    t_running = nullptr;
  });
}

// ---- streams and events (Driver API: Stream Management, Event Management) ------------------------

CUresult StreamCreate(CUstream* stream, unsigned flags) {
  if (stream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateStream(stream, flags);
}

CUresult StreamDestroy(CUstream stream) { return DestroyStream(stream); }

CUresult StreamSynchronize(CUstream stream) {
  Stream* s = nullptr;
  {
    // cuStreamSynchronize on a capturing stream is not permitted (and invalidates the capture).
    if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
    std::lock_guard<std::mutex> lock(DeviceMutex());
    if (s->capturing) {
      s->capture_invalid = true;
      Diagnose("cuStreamSynchronize", "the stream is capturing; the capture is invalidated");
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  if (CUresult r = CheckCaptureAllows("cuStreamSynchronize"); r != CUDA_SUCCESS) return r;
  Drain(s);
  return ContextError();
}

CUresult EventCreate(CUevent* event, unsigned flags) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<unsigned>(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st();
  e->ctx = Current();
  e->timing = (flags & CU_EVENT_DISABLE_TIMING) == 0;
  *event = e;
  return CUDA_SUCCESS;
}

// Waits for the event's last record to run; a record that will never run (its context has a
// sticky fault, which stops all its work, or is gone) ends the wait too.
void WaitEvent(CUevent e) {
  std::unique_lock<std::mutex> lock(DeviceMutex());
  Progress().wait(lock, [&] { return e->done || !LiveContextLocked(e->ctx) || e->ctx->sticky != CUDA_SUCCESS; });
}

CUresult EventDestroy(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  WaitEvent(event);  // a record still queued refers to it
  delete event;
  return CUDA_SUCCESS;
}

// cuEventRecord: captures the stream's work so far; the event completes when the stream
// reaches it. During capture it becomes a node of the graph.
CUresult EventRecord(CUevent event, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (event->ctx != s->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard<std::mutex> lock(DeviceMutex());
    if (!s->capturing) {
      event->recorded = true;
      event->done = false;
      event->stream = s;
    }
  }
  LogCall("cuEventRecord");
  return EnqueueOn(s, "cuEventRecord", [event] {
    const int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(DeviceMutex());
    event->recorded = true;
    event->ns = now;
    event->done = true;
  });
}

CUresult EventSynchronize(CUevent event) {
  if (CUresult r = CheckCaptureAllows("cuEventSynchronize"); r != CUDA_SUCCESS) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  WaitEvent(event);
  return ContextError();
}

// cuEventElapsedTime: milliseconds between two completed records, ~0.5 us resolution on a GPU;
// here the host's steady clock (an emulated figure, never a GPU time).
CUresult EventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(DeviceMutex());
  if (!start->timing || !end->timing || !start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->done || !end->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(end->ns - start->ns) / 1e6);
  return CUDA_SUCCESS;
}

// ---- graphs (Driver API: Stream Management capture, Graph Management) -----------------------------

CUresult StreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  return BeginCapture(stream, mode);
}

CUresult StreamEndCapture(CUstream stream, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return EndCapture(stream, graph);
}

CUresult GraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (CUresult r = ContextError(); r != CUDA_SUCCESS) return r;
  if (exec == nullptr || graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;  // no instantiate flags are emulated
  auto* e = new CUgraphExec_st();
  e->ctx = graph->ctx;
  e->ops = graph->ops;
  *exec = e;
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec exec, CUstream stream) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(stream, &s); r != CUDA_SUCCESS) return r;
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (exec->ctx != s->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  Count("graph_launches");
  LogCall("cuGraphLaunch");
  for (const Op& op : exec->ops)
    if (CUresult r = EnqueueOn(s, op.what, op.work); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}

CUresult GraphExecDestroy(CUgraphExec exec) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  delete exec;  // queued replays hold their own copies of the work
  return CUDA_SUCCESS;
}

CUresult GraphDestroy(CUgraph graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  delete graph;
  return CUDA_SUCCESS;
}

}  // namespace

CUresult ImplicitContext() {
  if (ContextError() == CUDA_SUCCESS) return CUDA_SUCCESS;
  if (CUresult r = Init(0); r != CUDA_SUCCESS) return r;
  static CUcontext primary = RetainPrimary(0);  // the runtime's retain, never released
  if (!LiveContext(primary)) primary = RetainPrimary(0);  // released by others since: the runtime retains anew
  SetCurrent(primary);
  return ContextError();
}

namespace {

// ---- cuGetProcAddress ----------------------------------------------------------------------------

struct Entry {
  const char* name;
  void* fn;
};

template <typename Want, typename Have>
void* Checked(Have fn) {
  static_assert(std::is_same_v<Want, Have>, "an emulated entry point's type differs from cuda.h's");
  return reinterpret_cast<void*>(fn);
}

// The names Kiln's runtime resolves (runtime/cuda/driver.cc), and nothing more; each typed as
// the cuda.h prototype of the version Kiln asks for.
const std::vector<Entry>& Table() {
  static const std::vector<Entry> table = {
      {"cuInit", Checked<decltype(&::cuInit)>(&Init)},
      {"cuDriverGetVersion", Checked<decltype(&::cuDriverGetVersion)>(&DriverGetVersion)},
      {"cuGetErrorName", Checked<decltype(&::cuGetErrorName)>(&GetErrorName)},
      {"cuGetErrorString", Checked<decltype(&::cuGetErrorString)>(&GetErrorString)},
      {"cuDeviceGetCount", Checked<decltype(&::cuDeviceGetCount)>(&DeviceGetCount)},
      {"cuDeviceGet", Checked<decltype(&::cuDeviceGet)>(&DeviceGet)},
      {"cuDeviceGetName", Checked<decltype(&::cuDeviceGetName)>(&DeviceGetName)},
      {"cuDeviceGetAttribute", Checked<decltype(&::cuDeviceGetAttribute)>(&DeviceGetAttribute)},
      {"cuDeviceTotalMem", Checked<decltype(&::cuDeviceTotalMem)>(&DeviceTotalMem)},
      {"cuDevicePrimaryCtxRetain", Checked<decltype(&::cuDevicePrimaryCtxRetain)>(&DevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", Checked<decltype(&::cuDevicePrimaryCtxRelease)>(&DevicePrimaryCtxRelease)},
      {"cuCtxSetCurrent", Checked<decltype(&::cuCtxSetCurrent)>(&CtxSetCurrent)},
      {"cuCtxGetCurrent", Checked<decltype(&::cuCtxGetCurrent)>(&CtxGetCurrent)},
      {"cuMemAlloc", Checked<decltype(&::cuMemAlloc)>(&MemAllocEntry)},
      {"cuMemFree", Checked<decltype(&::cuMemFree)>(&MemFreeEntry)},
      {"cuMemAllocHost", Checked<decltype(&::cuMemAllocHost)>(&MemAllocHost)},
      {"cuMemFreeHost", Checked<decltype(&::cuMemFreeHost)>(&MemFreeHost)},
      {"cuMemcpyHtoDAsync", Checked<decltype(&::cuMemcpyHtoDAsync)>(&MemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync", Checked<decltype(&::cuMemcpyDtoHAsync)>(&MemcpyDtoHAsync)},
      {"cuMemcpyDtoDAsync", Checked<decltype(&::cuMemcpyDtoDAsync)>(&MemcpyDtoDAsync)},
      {"cuMemcpyHtoD", Checked<decltype(&::cuMemcpyHtoD)>(&MemcpyHtoD)},
      {"cuMemsetD8Async", Checked<decltype(&::cuMemsetD8Async)>(&MemsetD8Async)},
      {"cuPointerGetAttribute", Checked<decltype(&::cuPointerGetAttribute)>(&PointerGetAttribute)},
      {"cuModuleLoadData", Checked<decltype(&::cuModuleLoadData)>(&ModuleLoadData)},
      {"cuModuleLoadDataEx", Checked<decltype(&::cuModuleLoadDataEx)>(&ModuleLoadDataEx)},
      {"cuModuleUnload", Checked<decltype(&::cuModuleUnload)>(&ModuleUnload)},
      {"cuModuleGetFunction", Checked<decltype(&::cuModuleGetFunction)>(&ModuleGetFunction)},
      {"cuLaunchKernel", Checked<decltype(&::cuLaunchKernel)>(&LaunchKernel)},
      {"cuStreamCreate", Checked<decltype(&::cuStreamCreate)>(&StreamCreate)},
      {"cuStreamDestroy", Checked<decltype(&::cuStreamDestroy)>(&StreamDestroy)},
      {"cuStreamSynchronize", Checked<decltype(&::cuStreamSynchronize)>(&StreamSynchronize)},
      {"cuEventCreate", Checked<decltype(&::cuEventCreate)>(&EventCreate)},
      {"cuEventDestroy", Checked<decltype(&::cuEventDestroy)>(&EventDestroy)},
      {"cuEventRecord", Checked<decltype(&::cuEventRecord)>(&EventRecord)},
      {"cuEventSynchronize", Checked<decltype(&::cuEventSynchronize)>(&EventSynchronize)},
      {"cuEventElapsedTime", Checked<decltype(&::cuEventElapsedTime)>(&EventElapsedTime)},
      {"cuStreamBeginCapture", Checked<decltype(&::cuStreamBeginCapture)>(&StreamBeginCapture)},
      {"cuStreamEndCapture", Checked<decltype(&::cuStreamEndCapture)>(&StreamEndCapture)},
      {"cuGraphInstantiateWithFlags", Checked<decltype(&::cuGraphInstantiate)>(&GraphInstantiate)},
      {"cuGraphLaunch", Checked<decltype(&::cuGraphLaunch)>(&GraphLaunch)},
      {"cuGraphExecDestroy", Checked<decltype(&::cuGraphExecDestroy)>(&GraphExecDestroy)},
      {"cuGraphDestroy", Checked<decltype(&::cuGraphDestroy)>(&GraphDestroy)},
  };
  return table;
}

}  // namespace
}  // namespace kiln::emulated_cuda

extern "C" {

// cuGetProcAddress (Driver Entry Point Access): the entry point `symbol` for CUDA version
// `cudaVersion`. The emulation has one version of each, that of the cuda.h it was built with;
// an older requested version than that is CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                                     cuuint64_t flags,
                                                                     CUdriverProcAddressQueryResult* status) {
  using namespace kiln::emulated_cuda;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  for (const Entry& e : Table()) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    if (cudaVersion < CUDA_VERSION) {
      if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = e.fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

// ---- control API (control.h) ----------------------------------------------------------------------

__attribute__((visibility("default"))) int kiln_emulated_cuda_set_faults(const char* spec) {
  std::string why;
  if (kiln::emulated_cuda::SetFaults(spec ? spec : "", &why)) return 0;
  kiln::emulated_cuda::Diagnose("kiln_emulated_cuda_set_faults", why);
  return -1;
}

__attribute__((visibility("default"))) unsigned long long kiln_emulated_cuda_counter(const char* name) {
  return name ? kiln::emulated_cuda::Counter(name) : 0;
}

__attribute__((visibility("default"))) void kiln_emulated_cuda_log_begin(void) { kiln::emulated_cuda::LogBegin(); }

__attribute__((visibility("default"))) char* kiln_emulated_cuda_log_take(void) {
  const std::string log = kiln::emulated_cuda::LogTake();
  char* out = static_cast<char*>(std::malloc(log.size() + 1));
  if (out) std::memcpy(out, log.c_str(), log.size() + 1);
  return out;
}

}  // extern "C"
