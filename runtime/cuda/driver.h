// The CUDA driver API, cuBLASLt and cuDNN, loaded at run time with dlopen: the runtime
// starts on machines without a driver or without the libraries, and reports their absence
// as a Status when a CUDA context is asked for (IREE's dynamic_symbols, in spirit).
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Driver* drv, cuda::LoadDriver());
//   KILN_RETURN_IF_ERROR(cuda::Check(*drv, drv->cuMemAlloc(&ptr, bytes), "cuMemAlloc (arena)"));
//
// Types come from the toolkit's headers (cuda.h, cublasLt.h, cudnn.h), which are needed at
// build time only; no CUDA library is linked. Every table is loaded once per process and
// is immutable afterwards: thread-safe.
#pragma once

#include <cuda.h>

#include <string>
#include <string_view>

#include "kiln/status.h"

namespace kiln::cuda {

// Driver entry points Kiln uses. Each is resolved with cuGetProcAddress by its base name for
// the ABI of the cuda.h Kiln was built with (CUDA_VERSION: cuMemAlloc is the _v2 form,
// GraphInstantiate is cuGraphInstantiateWithFlags), after libcuda.so.1 is opened. A driver
// older than that header's major version is refused: the generated kernels and the CUDA
// libraries of that toolkit need it.
struct Driver {
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemAllocHost) MemAllocHost = nullptr;
  decltype(&::cuMemFreeHost) MemFreeHost = nullptr;
  decltype(&::cuMemcpyHtoDAsync) MemcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) MemcpyDtoHAsync = nullptr;
  decltype(&::cuMemcpyDtoDAsync) MemcpyDtoDAsync = nullptr;
  decltype(&::cuMemcpyHtoD) MemcpyHtoD = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuPointerGetAttribute) PointerGetAttribute = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleLoadDataEx) ModuleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;
  decltype(&::cuStreamBeginCapture) StreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) StreamEndCapture = nullptr;
  decltype(&::cuGraphInstantiate) GraphInstantiate = nullptr;
  decltype(&::cuGraphLaunch) GraphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) GraphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) GraphDestroy = nullptr;
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The driver, loaded and initialised (cuInit) on first call. Errors: kFailedPrecondition
// "no CUDA driver found (libcuda.so.1: <dlerror>)" when the library is missing (or is the
// toolkit's stub library), naming the missing entry point when one is, for a driver older
// than CUDA_VERSION's major, or with cuInit's error ("no CUDA device (cuInit: ...)" for
// CUDA_ERROR_NO_DEVICE). The result of the first call is kept: later calls return it again.
// Thread-safe.
Result<const Driver*> LoadDriver();

// LoadDriver's loader, uncached, for a given file (a soname or a path), filling `out` on
// success: for tests of the error paths. It calls cuInit when the library is a driver.
Status LoadDriverFrom(const std::string& path, Driver& out);

// OK for CUDA_SUCCESS; else kDeviceError "<what>: CUDA_ERROR_NAME: description", or
// "<what>: CUDA error N" with a table that has no GetErrorName (e.g. Driver{}). A sticky error
// (IsSticky) adds that the context refuses all further work and the process must restart.
Status Check(const Driver& drv, CUresult result, std::string_view what);

// True for the errors the Driver API reference documents as sticky: after one, every later call
// on the context returns it (CUDA_ERROR_ILLEGAL_ADDRESS, _LAUNCH_FAILED, _ILLEGAL_INSTRUCTION, ...).
bool IsSticky(CUresult result);

struct DeviceInfo {
  int ordinal = 0;
  CUdevice device = 0;
  std::string name;         // "NVIDIA H200"
  int cc_major = 0;         // compute capability, e.g. 9
  int cc_minor = 0;         //                       0
  int sm_count = 0;
  uint64_t total_bytes = 0;
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

// Device `ordinal`. Errors: kFailedPrecondition "no CUDA device" when the driver sees none,
// kOutOfRange for an ordinal past the count, driver errors as kDeviceError naming the call,
// kInternal for a table that is not loaded.
Result<DeviceInfo> QueryDevice(const Driver& drv, int ordinal);

}  // namespace kiln::cuda
