// The hooks the emulated libraries' self-tests need (check_hooks.h), implemented with the
// emulated driver they run on: its entry points through cuGetProcAddress_v2, its faults
// through the control API (control.h).
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "tests/emulated_cuda/control.h"
#include "tests/emulated_cuda/check_hooks.h"

namespace {

template <typename Fn>
Fn Entry(const char* name) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult found{};
  if (cuGetProcAddress_v2(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || p == nullptr) {
    std::fprintf(stderr, "check: the emulated driver has no %s\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

void Must(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "check: %s failed with CUresult %d\n", what, static_cast<int>(r));
  std::abort();
}

CUcontext g_ctx = nullptr;

}  // namespace

bool CheckInit() {
  Must(Entry<decltype(&cuInit)>("cuInit")(0), "cuInit");
  Must(Entry<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain")(&g_ctx, 0), "cuDevicePrimaryCtxRetain");
  Must(Entry<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent")(g_ctx), "cuCtxSetCurrent");
  return true;
}

void* CheckAlloc(size_t bytes) {
  CUdeviceptr p = 0;
  Must(Entry<decltype(&cuMemAlloc)>("cuMemAlloc")(&p, bytes), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

void CheckFree(void* p) { Must(Entry<decltype(&cuMemFree)>("cuMemFree")(reinterpret_cast<CUdeviceptr>(p)), "cuMemFree"); }

void CheckSync() { Must(Entry<decltype(&cuStreamSynchronize)>("cuStreamSynchronize")(nullptr), "cuStreamSynchronize"); }

void CheckSetFault(const char* name) {
  if (kiln_emulated_cuda_set_faults(name) != 0) std::abort();
}

void CheckContextCurrent(bool current) {
  Must(Entry<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent")(current ? g_ctx : nullptr), "cuCtxSetCurrent");
}
