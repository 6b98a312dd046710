// Ahead-of-time compilation of generated kernels with NVRTC: every kernel for every target
// arch, in parallel, with a content-hash cache on disk.
//
//   CompileKernelOptions opts;                       // default archs, cache, threads
//   opts.progress = TerminalProgress();              // "compiling kernels: 37/120 (12 cached)"
//   Result<std::vector<KernelImages>> images = CompileKernels(kernels, opts);
//
// One job is one (kernel, arch) pair. Its entry in the kernel cache (kernel_cache.h) is keyed
// by the source, the arch, the NVRTC version and the compile options, so a changed kernel,
// toolkit or option never reuses a stale image.
//
// NVRTC is opened with dlopen on first use (LoadNvrtc), as the runtime opens the driver,
// cuBLASLt and cuDNN: nothing links libnvrtc, so the compiler starts without it and compiles
// CPU-only artifacts (--arch none); GPU archs need it. NVRTC's headers are used at build time;
// a build without the CUDA toolkit has none, and LoadNvrtc then returns kUnimplemented.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/codegen/cuda_source.h"
#include "kiln/status.h"

namespace kiln::codegen {

// sm_80, sm_86, sm_87, sm_89, sm_90 cubins plus compute_90 PTX for newer GPUs.
std::vector<std::string> DefaultArchs();

struct CompileStats {
  int jobs = 0;      // (kernel, arch) pairs, after merging kernels with identical sources
  int cached = 0;    // served from the cache
  int compiled = 0;  // compiled by NVRTC
};

struct CompileKernelOptions {
  std::vector<std::string> archs = DefaultArchs();  // "sm_NN" (cubin) or "compute_NN" (PTX)
  // Cache folder; empty: $XDG_CACHE_HOME/kiln/kernels, else $HOME/.cache/kiln/kernels.
  std::string cache_dir;
  bool use_cache = true;
  int threads = 0;  // 0: std::thread::hardware_concurrency()
  // Called after each job, from the worker that finished it (calls are serialised):
  // jobs done so far, total jobs, how many of the done ones came from the cache.
  std::function<void(int done, int total, int cached)> progress;
  CompileStats* stats = nullptr;  // filled when not null
};

struct KernelImage {
  std::string arch;           // as requested: "sm_90" or "compute_90"
  bool ptx = false;           // data is PTX text (NUL-terminated, as cuModuleLoadData wants)
  std::vector<uint8_t> data;  // cubin or PTX
};

struct KernelImages {
  std::string kernel;               // EmittedKernel::name
  std::vector<KernelImage> images;  // one per arch, in options.archs order
};

// The files LoadNvrtc tries, in order: $KILN_NVRTC_LIBRARY alone when it is set (a file name or
// a path); else libnvrtc.so.<the CUDA major of the build's headers>, then libnvrtc.so, each
// through dlopen's search (the RPATH of the library calling it, LD_LIBRARY_PATH, ldconfig's
// cache), and last /usr/local/cuda/lib64/libnvrtc.so.<major>, the toolkit's default folder.
std::vector<std::string> NvrtcLibraryNames();

// Opens NVRTC from NvrtcLibraryNames(), once per process (the first call's result, success or
// error, is kept; thread-safe). Errors:
//   kFailedPrecondition  no file opens (naming each file tried and dlerror's message), or the
//                        library lacks an entry point; with the remedy: install CUDA's NVRTC
//                        (apt cuda-nvrtc-13-0, pip nvidia-cuda-nvrtc), set KILN_NVRTC_LIBRARY,
//                        or compile a CPU-only artifact (--arch none);
//   kIncompatible        its major version is not the build's;
//   kUnimplemented       this build had no NVRTC headers (no CUDA toolkit at build time).
Status LoadNvrtc();

// LoadNvrtc's loader, uncached, trying `names` in order, for tests of its errors; `version`
// ("13.0") is set on success.
Status LoadNvrtcFrom(const std::vector<std::string>& names, std::string* version);

// True when NVRTC loads (LoadNvrtc is OK): a run-time answer, not the build's.
bool HaveNvrtc();

// The version of the NVRTC library this process compiles with, "13.0"; empty when NVRTC does not
// load. Part of the kernel cache's key and of the provenance of artifacts with GPU archs.
std::string NvrtcVersion();

// Compiles `kernels` (results in the same order). Errors: kInvalidArgument for a malformed
// arch name; kInternal naming the kernel, the arch and NVRTC's log when a kernel does not
// compile; LoadNvrtc's error when there is something to compile and NVRTC does not load.
Result<std::vector<KernelImages>> CompileKernels(const std::vector<EmittedKernel>& kernels,
                                                 const CompileKernelOptions& options);

// A progress callback that redraws "compiling kernels: 37/120 (12 cached)" on one line of
// stderr, and ends the line when all jobs are done; it prints nothing when stderr is not a
// terminal (logs and CI stay clean).
std::function<void(int done, int total, int cached)> TerminalProgress();

}  // namespace kiln::codegen
