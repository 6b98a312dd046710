// The driver API through dlopen + cuGetProcAddress. Only cuGetProcAddress_v2 is looked up by
// its exported name; every other entry point is asked for by its base name ("cuMemAlloc") and
// the ABI version of the cuda.h Kiln was compiled with (CUDA_VERSION), so the driver hands back
// the variant (_v2, _v3, ...) whose signature is the one decltype saw in that header.
#include "runtime/cuda/driver.h"
#include "runtime/fault_injection.h"

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>

namespace kiln::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";
constexpr int kBuiltMajor = CUDA_VERSION / 1000;

// cuGetProcAddress_v2's exported signature. Not decltype(&::cuGetProcAddress_v2): with
// per-thread default streams that name is a macro for an inline wrapper.
using GetProcAddressFn = CUresult (*)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* symbol_status);

std::string VersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// dlerror's message, which names the file; for a failure it did not see (an injected fault,
// runtime/fault_injection.h), the file and that.
std::string DlError(const std::string& file) {
  const char* e = dlerror();
  return e ? e : file + ": not opened, and dlerror() has no message";
}

// "CUDA_ERROR_NAME: description", or "CUDA error N" when the table cannot name it.
std::string Describe(const Driver& drv, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (drv.GetErrorName == nullptr || drv.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUDA error " + std::to_string(static_cast<int>(result));
  }
  std::string s = name;
  if (drv.GetErrorString != nullptr && drv.GetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) {
    s += ": ";
    s += text;
  }
  return s;
}

class Resolver {
 public:
  Resolver(GetProcAddressFn gpa, std::string path) : gpa_(gpa), path_(std::move(path)) {}

  template <typename Fn>
  Status operator()(const char* name, Fn& fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult r = gpa_(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
      // The toolkit's lib64/stubs/libcuda.so has the driver's soname, so a library path that
      // reaches the stubs folder finds it instead of a driver; every call of it fails.
      return FailedPrecondition(
          "no CUDA driver found (" + path_ +
          " is the CUDA toolkit's stub library, not a driver: cuGetProcAddress(" + name +
          ") returned CUDA_ERROR_STUB_LIBRARY; remove the stubs folder from the library path)");
    }
    if (r != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || p == nullptr) {
      const char* why = found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "not in that version"
                        : found == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND     ? "symbol not found"
                                                                            : "lookup failed";
      return FailedPrecondition("the CUDA driver (" + path_ + ") lacks " + name + " for CUDA " +
                                VersionString(CUDA_VERSION) + " (cuGetProcAddress: " + why + ", CUresult " +
                                std::to_string(static_cast<int>(r)) + "); update the NVIDIA driver");
    }
    fn = reinterpret_cast<Fn>(p);
    return Status::Ok();
  }

 private:
  GetProcAddressFn gpa_;
  std::string path_;
};

}  // namespace

Status LoadDriverFrom(const std::string& path, Driver& out) {
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, so nothing else in the
  // process binds to them by accident. The handle is never closed: the table outlives callers.
  void* lib = fault::Inject("dlopen") ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return FailedPrecondition("no CUDA driver found (" + DlError(path) +
                              "); install an NVIDIA driver for CUDA " + std::to_string(kBuiltMajor) +
                              " or later, or run on the CPU backend");
  }
  auto gpa = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (gpa == nullptr) {
    return FailedPrecondition("the CUDA driver (" + path +
                              ") is older than CUDA 12: it lacks cuGetProcAddress_v2 (" + DlError(path) +
                              "); Kiln needs a CUDA " + std::to_string(kBuiltMajor) + " driver");
  }
  Driver d;
  Resolver resolve(gpa, path);
  // What the version check and cuInit's error message need comes first.
  KILN_RETURN_IF_ERROR(resolve("cuGetErrorName", d.GetErrorName));
  KILN_RETURN_IF_ERROR(resolve("cuGetErrorString", d.GetErrorString));
  KILN_RETURN_IF_ERROR(resolve("cuDriverGetVersion", d.DriverGetVersion));
  KILN_RETURN_IF_ERROR(resolve("cuInit", d.Init));

  if (CUresult r = d.DriverGetVersion(&d.version); r != CUDA_SUCCESS) {
    return FailedPrecondition("the CUDA driver (" + path +
                              ") does not report its version (cuDriverGetVersion: " + Describe(d, r) + ")");
  }
  // Generated kernels (PTX and cubins from this toolkit's NVRTC) and the CUDA 13 libraries need a
  // driver of at least the same major version; minor versions are compatible.
  if (d.version / 1000 < kBuiltMajor) {
    return FailedPrecondition("the CUDA driver supports CUDA " + VersionString(d.version) +
                              ", older than the CUDA " + VersionString(CUDA_VERSION) +
                              " Kiln was built with; update the NVIDIA driver");
  }
  if (CUresult r = d.Init(0); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_DEVICE)
      return FailedPrecondition("no CUDA device (cuInit: " + Describe(d, r) + ")");
    return FailedPrecondition("the CUDA driver failed to initialise (cuInit: " + Describe(d, r) + ")");
  }

  KILN_RETURN_IF_ERROR(resolve("cuDeviceGetCount", d.DeviceGetCount));
  KILN_RETURN_IF_ERROR(resolve("cuDeviceGet", d.DeviceGet));
  KILN_RETURN_IF_ERROR(resolve("cuDeviceGetName", d.DeviceGetName));
  KILN_RETURN_IF_ERROR(resolve("cuDeviceGetAttribute", d.DeviceGetAttribute));
  KILN_RETURN_IF_ERROR(resolve("cuDeviceTotalMem", d.DeviceTotalMem));
  KILN_RETURN_IF_ERROR(resolve("cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain));
  KILN_RETURN_IF_ERROR(resolve("cuDevicePrimaryCtxRelease", d.DevicePrimaryCtxRelease));
  KILN_RETURN_IF_ERROR(resolve("cuCtxSetCurrent", d.CtxSetCurrent));
  KILN_RETURN_IF_ERROR(resolve("cuCtxGetCurrent", d.CtxGetCurrent));
  KILN_RETURN_IF_ERROR(resolve("cuMemAlloc", d.MemAlloc));
  KILN_RETURN_IF_ERROR(resolve("cuMemFree", d.MemFree));
  KILN_RETURN_IF_ERROR(resolve("cuMemAllocHost", d.MemAllocHost));
  KILN_RETURN_IF_ERROR(resolve("cuMemFreeHost", d.MemFreeHost));
  KILN_RETURN_IF_ERROR(resolve("cuMemcpyHtoDAsync", d.MemcpyHtoDAsync));
  KILN_RETURN_IF_ERROR(resolve("cuMemcpyDtoHAsync", d.MemcpyDtoHAsync));
  KILN_RETURN_IF_ERROR(resolve("cuMemcpyDtoDAsync", d.MemcpyDtoDAsync));
  KILN_RETURN_IF_ERROR(resolve("cuMemcpyHtoD", d.MemcpyHtoD));
  KILN_RETURN_IF_ERROR(resolve("cuMemsetD8Async", d.MemsetD8Async));
  KILN_RETURN_IF_ERROR(resolve("cuPointerGetAttribute", d.PointerGetAttribute));
  KILN_RETURN_IF_ERROR(resolve("cuModuleLoadData", d.ModuleLoadData));
  KILN_RETURN_IF_ERROR(resolve("cuModuleLoadDataEx", d.ModuleLoadDataEx));
  KILN_RETURN_IF_ERROR(resolve("cuModuleUnload", d.ModuleUnload));
  KILN_RETURN_IF_ERROR(resolve("cuModuleGetFunction", d.ModuleGetFunction));
  KILN_RETURN_IF_ERROR(resolve("cuLaunchKernel", d.LaunchKernel));
  KILN_RETURN_IF_ERROR(resolve("cuStreamCreate", d.StreamCreate));
  KILN_RETURN_IF_ERROR(resolve("cuStreamDestroy", d.StreamDestroy));
  KILN_RETURN_IF_ERROR(resolve("cuStreamSynchronize", d.StreamSynchronize));
  KILN_RETURN_IF_ERROR(resolve("cuEventCreate", d.EventCreate));
  KILN_RETURN_IF_ERROR(resolve("cuEventDestroy", d.EventDestroy));
  KILN_RETURN_IF_ERROR(resolve("cuEventRecord", d.EventRecord));
  KILN_RETURN_IF_ERROR(resolve("cuEventSynchronize", d.EventSynchronize));
  KILN_RETURN_IF_ERROR(resolve("cuEventElapsedTime", d.EventElapsedTime));
  KILN_RETURN_IF_ERROR(resolve("cuStreamBeginCapture", d.StreamBeginCapture));
  KILN_RETURN_IF_ERROR(resolve("cuStreamEndCapture", d.StreamEndCapture));
  // cuda.h maps cuGraphInstantiate to cuGraphInstantiateWithFlags, whose type decltype saw.
  KILN_RETURN_IF_ERROR(resolve("cuGraphInstantiateWithFlags", d.GraphInstantiate));
  KILN_RETURN_IF_ERROR(resolve("cuGraphLaunch", d.GraphLaunch));
  KILN_RETURN_IF_ERROR(resolve("cuGraphExecDestroy", d.GraphExecDestroy));
  KILN_RETURN_IF_ERROR(resolve("cuGraphDestroy", d.GraphDestroy));
  // What a fault-injection build may refuse (runtime/fault_injection.h): device memory, a
  // kernel's module, a stream, an event.
  KILN_FAULT_REFUSABLE(d, MemAlloc, "cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
  KILN_FAULT_REFUSABLE(d, ModuleLoadData, "cuModuleLoadData", CUDA_ERROR_OUT_OF_MEMORY);
  KILN_FAULT_REFUSABLE(d, StreamCreate, "cuStreamCreate", CUDA_ERROR_OUT_OF_MEMORY);
  KILN_FAULT_REFUSABLE(d, EventCreate, "cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);
  out = d;
  return Status::Ok();
}

Result<const Driver*> LoadDriver() {
  // A function-local static: initialised once, thread-safe, and the first outcome (including
  // cuInit's) is what every later caller sees.
  struct Loaded {
    Driver table;
    Status status;
  };
  static const Loaded loaded = [] {
    Loaded l;
    l.status = LoadDriverFrom(kDriverLibrary, l.table);
    return l;
  }();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.table;
}

// The errors the CUDA Driver API reference documents as leaving the process "in an inconsistent
// state": every later call on the context returns them again.
bool IsSticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
      return true;
    default:
      return false;
  }
}

Status Check(const Driver& drv, CUresult result, std::string_view what) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  std::string msg = std::string(what) + ": " + Describe(drv, result);
  if (IsSticky(result))
    msg += " (a sticky error: this process's CUDA context refuses all further work; restart the process)";
  return Status(StatusCode::kDeviceError, std::move(msg));
}

Result<DeviceInfo> QueryDevice(const Driver& drv, int ordinal) {
  if (drv.DeviceGetCount == nullptr) return Internal("QueryDevice: the driver table is not loaded");
  int count = 0;
  KILN_RETURN_IF_ERROR(Check(drv, drv.DeviceGetCount(&count), "cuDeviceGetCount"));
  if (count <= 0)
    return FailedPrecondition("no CUDA device (the CUDA driver " + VersionString(drv.version) +
                              " sees none)");
  if (ordinal < 0 || ordinal >= count) {
    return OutOfRange("CUDA device " + std::to_string(ordinal) + " does not exist: the driver sees " +
                      std::to_string(count) + " device" + (count == 1 ? "" : "s") + " (0.." +
                      std::to_string(count - 1) + ")");
  }
  const std::string where = " (device " + std::to_string(ordinal) + ")";
  DeviceInfo info;
  info.ordinal = ordinal;
  KILN_RETURN_IF_ERROR(Check(drv, drv.DeviceGet(&info.device, ordinal), "cuDeviceGet" + where));
  std::array<char, 256> name{};
  KILN_RETURN_IF_ERROR(Check(drv,
                             drv.DeviceGetName(name.data(), static_cast<int>(name.size()) - 1, info.device),
                             "cuDeviceGetName" + where));
  info.name = name.data();
  const struct {
    CUdevice_attribute attr;
    int* value;
    const char* what;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major, "compute capability major"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor, "compute capability minor"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count, "multiprocessor count"},
  };
  for (const auto& a : attrs) {
    KILN_RETURN_IF_ERROR(Check(drv, drv.DeviceGetAttribute(a.value, a.attr, info.device),
                               std::string("cuDeviceGetAttribute(") + a.what + ")" + where));
  }
  size_t bytes = 0;
  KILN_RETURN_IF_ERROR(Check(drv, drv.DeviceTotalMem(&bytes, info.device), "cuDeviceTotalMem" + where));
  info.total_bytes = bytes;
  return info;
}

}  // namespace kiln::cuda
