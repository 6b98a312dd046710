// The emulated CUDA device's control API, for tests: fault injection, counters and the call
// log. The emulated driver (libcuda.so.1 from tests/emulated_cuda/) exports these C functions;
// a test reaches them in the copy of the driver Kiln's runtime loaded, through dlopen of the
// same soname, and finds none (EmulatedCuda() is null) on a real driver.
//
//   const EmulatedCudaControl* emu = EmulatedCuda();
//   if (emu == nullptr) return;                      // a real GPU: nothing to inject
//   REQUIRE(emu->set_faults("alloc-oom@2") == 0);    // the 2nd cuMemAlloc from now fails
//   uint64_t allocs = emu->counter("device_allocations");
//
// Faults (each fires once, at its Nth due event after set_faults; "" clears them):
//   alloc-oom@N           cuMemAlloc returns CUDA_ERROR_OUT_OF_MEMORY
//   launch-fail@N         cuLaunchKernel returns CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
//   illegal-address@N     the launched kernel faults when it runs: the context's sticky error
//                         becomes CUDA_ERROR_ILLEGAL_ADDRESS, which every later call returns
//   no-binary@N           cuModuleLoadData returns CUDA_ERROR_NO_BINARY_FOR_GPU
//   blas-not-supported@N  cublasLtMatmul returns CUBLAS_STATUS_NOT_SUPPORTED
//   dnn-not-supported@N   a cuDNN convolution or pooling call returns CUDNN_STATUS_NOT_SUPPORTED
// Counters: device_allocations, device_frees, live_device_allocations, device_bytes_in_use,
// launches, module_loads, host_compiles, graph_launches, graphs_captured, memcpys,
// contexts_created, allocations_freed_with_context, faults_fired, library_plans (the libraries'
// algorithm choices and execution plans: emulator.h, CountLibraryPlan).
// The call log (log_begin, then log_take): one line per operation enqueued, in enqueue order:
// "cuLaunchKernel <kernel>", "cuMemcpyHtoDAsync <bytes>", "cuMemcpyDtoHAsync <bytes>",
// "cuMemcpyDtoDAsync <bytes>", "cuMemsetD8Async <bytes>", "cuEventRecord", "cuGraphLaunch",
// and the libraries' compute calls ("cublasLtMatmul", "cudnnConvolutionForward", ...).
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" {
int kiln_emulated_cuda_set_faults(const char* spec);          // 0, or -1 for a bad spec (stderr says why)
unsigned long long kiln_emulated_cuda_counter(const char* name);  // 0 for an unknown name
void kiln_emulated_cuda_log_begin(void);                       // clears the log and starts logging
char* kiln_emulated_cuda_log_take(void);                       // stops logging; free() the result
}

namespace kiln::testing {

struct EmulatedCudaControl {
  decltype(&kiln_emulated_cuda_set_faults) set_faults = nullptr;
  decltype(&kiln_emulated_cuda_counter) counter = nullptr;
  decltype(&kiln_emulated_cuda_log_begin) log_begin = nullptr;
  decltype(&kiln_emulated_cuda_log_take) log_take_raw = nullptr;

  std::string log_take() const {
    char* s = log_take_raw();
    std::string out = s ? s : "";
    std::free(s);
    return out;
  }
};

// The control API of the emulated driver, when libcuda.so.1 is it; null on a real driver or
// without one. Call after the runtime has loaded the driver (a CUDA context was created).
inline const EmulatedCudaControl* EmulatedCuda() {
  static const EmulatedCudaControl* control = []() -> const EmulatedCudaControl* {
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    static EmulatedCudaControl c;
    c.set_faults = reinterpret_cast<decltype(c.set_faults)>(dlsym(lib, "kiln_emulated_cuda_set_faults"));
    c.counter = reinterpret_cast<decltype(c.counter)>(dlsym(lib, "kiln_emulated_cuda_counter"));
    c.log_begin = reinterpret_cast<decltype(c.log_begin)>(dlsym(lib, "kiln_emulated_cuda_log_begin"));
    c.log_take_raw = reinterpret_cast<decltype(c.log_take_raw)>(dlsym(lib, "kiln_emulated_cuda_log_take"));
    if (!c.set_faults || !c.counter || !c.log_begin || !c.log_take_raw) return nullptr;
    return &c;
  }();
  return control;
}

}  // namespace kiln::testing
