// The emulated CUDA device's internal API: what the emulated driver (libcuda.so.1, built from
// driver_api.cc, device.cc and modules.cc) exports to the emulated cuBLASLt and cuDNN, which
// link it. Test support only: never installed, never linked into libkiln_runtime.
//
// Device memory is host memory in the emulated device's own address range (device.cc): a
// CUdeviceptr is an address there, readable by host code once DeviceRange has checked it. Work
// a library enqueues runs on the stream's worker thread, in stream order, after the work
// enqueued before it; during stream capture it is recorded into the graph instead.
//
//   std::string why;
//   float* y = static_cast<float*>(emulated_cuda::DeviceRange(d_ptr, n * 4, &why));
//   if (y == nullptr) { emulated_cuda::Diagnose("cublasLtMatmul", "D: " + why); return CUBLAS_STATUS_INVALID_VALUE; }
//   CUresult r = emulated_cuda::Enqueue(stream, "cublasLtMatmul", [=] { ... compute into y ... });
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

// Exported from libcuda.so.1 (built with hidden visibility and a version script).
#define KILN_EMULATED_API __attribute__((visibility("default")))

namespace kiln::emulated_cuda {

// A host pointer to the device bytes [ptr, ptr + bytes), when the whole range lies inside one
// live allocation of the emulated device; else nullptr, with *why saying what is wrong (not a
// device address, freed, past the end of an allocation of N bytes at ...). bytes == 0 checks
// ptr alone. Thread-safe.
KILN_EMULATED_API void* DeviceRange(CUdeviceptr ptr, size_t bytes, std::string* why);

// Enqueues `work` on `stream` (nullptr: the current context's legacy default stream), to run
// on that stream's worker thread after everything enqueued on it before (and, for the legacy
// stream or a blocking stream, after the other's earlier work, as CUDA's legacy default
// stream semantics say). While the stream is being captured, `work` is recorded into the
// graph instead and runs at each cuGraphLaunch. `what` names the operation in the call log
// (LogCall) and in diagnostics. Returns CUDA_SUCCESS, or what a driver call would return:
// CUDA_ERROR_INVALID_CONTEXT without a current context, CUDA_ERROR_INVALID_HANDLE for a
// destroyed stream, the context's sticky error after a fault. Thread-safe.
KILN_EMULATED_API CUresult Enqueue(CUstream stream, std::string what, std::function<void()> work);

// What the CUDA runtime, which cuBLASLt and cuDNN are built on, does at a library's first call
// on a thread without a current context (CUDA Runtime API, "Initialization"): it initialises the
// driver and makes the primary context of device 0 current, retaining it for the life of the
// process. CUDA_SUCCESS when a context is current afterwards (library handles need one).
KILN_EMULATED_API CUresult ImplicitContext();

// Fault injection (control.h): true when the fault `name` (e.g. "blas-not-supported",
// "dnn-not-supported") is due at this call, counting calls since the fault was set; each
// due fault fires once. Thread-safe.
KILN_EMULATED_API bool FaultDue(std::string_view name);

// Appends one line to the call log when logging is on (control.h), e.g. "cublasLtMatmul" or
// "cudnnConvolutionForward". Libraries log each compute call they enqueue, from the calling
// thread, at enqueue time (or capture time). Thread-safe.
KILN_EMULATED_API void LogCall(std::string_view entry);

// Counts one library plan (control.h's counter "library_plans"): a call that chooses an algorithm
// or builds an execution plan (cublasLtMatmulAlgoGetHeuristic, cudnnGetConvolution*Algorithm_v7,
// cudnnBackendFinalize of an execution plan). Thread-safe.
KILN_EMULATED_API void CountLibraryPlan();

// Writes "<library call>: <message>" to stderr, for a refused call whose status code alone
// would not say why (the real libraries print nothing; this is a test aid).
KILN_EMULATED_API void Diagnose(std::string_view call, std::string_view message);

}  // namespace kiln::emulated_cuda
