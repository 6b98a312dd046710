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
// NVRTC is linked into kiln_compiler only (never kiln_runtime). A build without the CUDA
// toolkit has no NVRTC: CompileKernels then returns kUnimplemented.
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

// True when this build has NVRTC.
bool HaveNvrtc();

// The version of the NVRTC library this process compiles with, "13.0" ("unknown" when NVRTC
// does not say); empty without NVRTC. Part of the kernel cache's key and of the provenance.
std::string NvrtcVersion();

// Compiles `kernels` (results in the same order). Errors: kInvalidArgument for a malformed
// arch name; kInternal naming the kernel, the arch and NVRTC's log when a kernel does not
// compile; kUnimplemented without NVRTC.
Result<std::vector<KernelImages>> CompileKernels(const std::vector<EmittedKernel>& kernels,
                                                 const CompileKernelOptions& options);

// A progress callback that redraws "compiling kernels: 37/120 (12 cached)" on one line of
// stderr, and ends the line when all jobs are done; it prints nothing when stderr is not a
// terminal (logs and CI stay clean).
std::function<void(int done, int total, int cached)> TerminalProgress();

}  // namespace kiln::codegen
