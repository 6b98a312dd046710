// Modules and kernels of the emulated CUDA device (CUDA Driver API: Module Management,
// Execution Control). Test support only.
//
// cuModuleLoadData gets a cubin or PTX image and must run the kernel it holds. The emulated
// device runs a kernel's CUDA source, compiled for the host through Kiln's host shim
// (compiler/codegen/host_shim.h), and finds that source where every image Kiln loads comes
// from: the Kiln artifact in this process's memory that holds the image (a .kiln file mapped
// by Model::Load, or its bytes copied by Model::Load(bytes)). It looks for the artifact's
// 64-byte header at 256-byte steps below the image, inside the mapping the image lies in
// (/proc/self/maps), verifies the FlatBuffer, finds the kernel whose image starts at that
// address and checks that the image names that kernel (PTX: its .entry; cubin: the symbol).
// An image found in no artifact is CUDA_ERROR_INVALID_IMAGE, with a message on stderr.
//
// Each kernel is compiled once (the host shim, the source and a launcher that unpacks
// kernelParams) with `$CXX -O1` into a shared library, cached by the kernel's name and a hash
// of what was compiled in $KILN_EMULATED_CUDA_CACHE (default $XDG_CACHE_HOME/kiln/emulated-cuda,
// else ~/.cache/kiln/emulated-cuda). A kernel missing there is compiled together with every
// other kernel of its artifact not yet there, in one compiler run (starting the compiler costs
// more than a kernel), and the library is hard-linked into the cache under each kernel's name;
// processes share the cache (links are atomic).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::emulated_cuda {

// One kernel parameter as the kernel's signature declares it.
struct Param {
  std::string type;  // e.g. "const float*", "long long", "unsigned int*"
  std::string name;
  bool pointer = false;
  size_t bytes = 8;
};

struct Kernel {
  std::string name;
  std::vector<Param> params;
  unsigned max_threads = 1024;  // __launch_bounds__, else the device's limit
  // Runs the whole grid on the calling thread: params[i] points to parameter i's value.
  void (*launch)(void* const* params, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                 unsigned bz) = nullptr;
  // Launches of one kernel library run one at a time: its __shared__ arrays and block state are
  // the library's statics.
  std::shared_ptr<std::mutex> mu;
};

// Loads the module of `image` (see above). Errors: CUDA_ERROR_INVALID_IMAGE (not an image of a
// Kiln artifact, or the image does not name its kernel), CUDA_ERROR_NO_BINARY_FOR_GPU (a cubin
// of another arch, or PTX of an arch above the device's), CUDA_ERROR_INVALID_SOURCE (the host
// compiler failed; its output is on stderr).
CUresult LoadModule(const void* image, std::vector<std::shared_ptr<Kernel>>* kernels, std::string* arch);

// Parses `extern "C" __global__ void [__launch_bounds__(N)] name(params)` out of a kernel's
// CUDA source. False when no such declaration of `name` is found.
bool ParseSignature(const std::string& source, const std::string& name, Kernel* kernel);

}  // namespace kiln::emulated_cuda

struct CUmod_st {
  std::vector<std::shared_ptr<kiln::emulated_cuda::Kernel>> kernels;
  std::string arch;  // of the image loaded: "sm_90", or "compute_90" for PTX
};
struct CUfunc_st {
  std::shared_ptr<kiln::emulated_cuda::Kernel> kernel;
  CUmodule module = nullptr;
};
