// NVRTC compilation of generated kernels: a job per (kernel, arch) on a pool of threads,
// each first looking in the on-disk cache. NVRTC programs are independent objects, and the
// NVRTC API may be called from several threads at once.
//
// NVRTC is opened with dlopen + dlsym into a table of entry points typed with decltype of
// nvrtc.h's prototypes (as runtime/cuda/dynamic_symbols.cc does cuBLASLt and cuDNN): its exported
// names carry no ABI suffix, and the major-version check stands in for the ABI check.
#include "compiler/codegen/nvrtc_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "compiler/codegen/kernel_cache.h"

#ifdef KILN_HAVE_NVRTC
#include <cuda.h>  // CUDA_VERSION: NVRTC's major is the toolkit's
#include <nvrtc.h>
#endif

namespace kiln::codegen {
namespace {

bool ValidArch(const std::string& arch, bool* ptx) {
  std::string digits;
  if (arch.rfind("sm_", 0) == 0) {
    *ptx = false;
    digits = arch.substr(3);
  } else if (arch.rfind("compute_", 0) == 0) {
    *ptx = true;
    digits = arch.substr(8);
  } else {
    return false;
  }
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) digits.pop_back();
  if (digits.size() < 2 || digits.size() > 3) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

#ifdef KILN_HAVE_NVRTC

constexpr int kNvrtcMajor = CUDA_VERSION / 1000;

// What to do when NVRTC is missing, for every error LoadNvrtc returns.
std::string NvrtcHint() {
  const std::string major = std::to_string(kNvrtcMajor);
  return "install CUDA " + major + "'s NVRTC (apt install cuda-nvrtc-" + major +
         "-0 from NVIDIA's CUDA repository, or pip install 'nvidia-cuda-nvrtc>=" + major + ",<" +
         std::to_string(kNvrtcMajor + 1) +
         "'), or set KILN_NVRTC_LIBRARY to its file; a CPU-only artifact (kiln compile --arch none, "
         "archs=\"none\" in Python) needs no NVRTC";
}

// NVRTC's entry points, named without their prefix.
struct Nvrtc {
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  std::string version;  // "13.0"
};

// dlerror's message, which names the file.
std::string DlError(const std::string& file) {
  const char* e = dlerror();
  return e ? e : file + ": not opened, and dlerror() has no message";
}

Status LoadFrom(const std::vector<std::string>& names, Nvrtc& out) {
  const std::string major = std::to_string(kNvrtcMajor);
  void* handle = nullptr;
  std::string name, errors;
  for (const std::string& n : names) {
    // RTLD_LOCAL: nothing else in the process binds to NVRTC's symbols by accident. The handle
    // is never closed: the table lives as long as the process.
    handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      name = n;
      break;
    }
    errors += (errors.empty() ? "" : "; ") + DlError(n);
  }
  if (handle == nullptr) {
    return FailedPrecondition("NVRTC, which compiles the generated kernels for GPU archs, was not found (" +
                              (names.empty() ? std::string("no file name given") : errors) + "); " + NvrtcHint());
  }
  Nvrtc t;
  auto sym = [&](const char* symbol, auto& fn) -> Status {
    dlerror();  // clear a stale error, so a failure below reports its own
    void* p = dlsym(handle, symbol);
    if (p == nullptr)
      return FailedPrecondition("NVRTC (" + name + ") lacks " + symbol + " (" + DlError(name) + "); " + NvrtcHint());
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    return Status::Ok();
  };
  // The version first: a library of another major version is reported as such, not by the first
  // entry point it happens to lack.
  KILN_RETURN_IF_ERROR(sym("nvrtcVersion", t.Version));
  int got_major = 0, got_minor = 0;
  if (t.Version(&got_major, &got_minor) != NVRTC_SUCCESS)
    return FailedPrecondition("NVRTC (" + name + "): nvrtcVersion failed; " + NvrtcHint());
  t.version = fmt::format("{}.{}", got_major, got_minor);
  if (got_major != kNvrtcMajor) {
    return Incompatible("NVRTC " + t.version + " (" + name + ") is not major version " + major +
                        ", which Kiln was built with; " + NvrtcHint());
  }
  KILN_RETURN_IF_ERROR(sym("nvrtcGetErrorString", t.GetErrorString));
  KILN_RETURN_IF_ERROR(sym("nvrtcCreateProgram", t.CreateProgram));
  KILN_RETURN_IF_ERROR(sym("nvrtcDestroyProgram", t.DestroyProgram));
  KILN_RETURN_IF_ERROR(sym("nvrtcCompileProgram", t.CompileProgram));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetProgramLogSize", t.GetProgramLogSize));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetProgramLog", t.GetProgramLog));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetPTXSize", t.GetPTXSize));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetPTX", t.GetPTX));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetCUBINSize", t.GetCUBINSize));
  KILN_RETURN_IF_ERROR(sym("nvrtcGetCUBIN", t.GetCUBIN));
  out = std::move(t);
  return Status::Ok();
}

// The process's table: loaded on first use, the result kept.
struct Loaded {
  Status status;
  Nvrtc api;
};
const Loaded& Load() {
  static const Loaded loaded = [] {
    Loaded l;
    l.status = LoadFrom(NvrtcLibraryNames(), l.api);
    return l;
  }();
  return loaded;
}

// NVRTC's defaults are kept where they give IEEE results (-ftz=false: denormals kept,
// -prec-div=true, -prec-sqrt=true), and -fmad=false turns off a * b + c contracted into one
// fused multiply-add: the CPU backend rounds the product, so a contracted kernel would differ
// in the last bit and break docs/semantics.md's rule that one correctly rounded op per element
// gives the same bits on every path. The kernels are memory-bound; the FMAs saved nothing.
const std::vector<std::string>& BaseOptions() {
  static const std::vector<std::string> opts = {"-std=c++17", "-fmad=false"};
  return opts;
}

Status NvrtcCompile(const Nvrtc& api, const EmittedKernel& k, const std::string& arch, bool ptx, std::vector<uint8_t>* out) {
  nvrtcProgram prog = nullptr;
  const std::string file = k.name + ".cu";
  nvrtcResult r = api.CreateProgram(&prog, k.source.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return Internal(fmt::format("NVRTC could not create a program for kernel '{}': {}", k.name, api.GetErrorString(r)));
  }
  std::vector<std::string> opts = BaseOptions();
  opts.push_back("--gpu-architecture=" + arch);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  r = api.CompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  Status st;
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (api.GetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (api.GetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    st = Internal(fmt::format("NVRTC failed to compile kernel '{}' for {}: {}\n{}", k.name, arch,
                              api.GetErrorString(r), log));
  } else {
    size_t size = 0;
    r = ptx ? api.GetPTXSize(prog, &size) : api.GetCUBINSize(prog, &size);
    if (r == NVRTC_SUCCESS) {
      out->resize(size);
      r = ptx ? api.GetPTX(prog, reinterpret_cast<char*>(out->data()))
              : api.GetCUBIN(prog, reinterpret_cast<char*>(out->data()));
    }
    if (r != NVRTC_SUCCESS) {
      st = Internal(fmt::format("NVRTC could not return the {} of kernel '{}' for {}: {}", ptx ? "PTX" : "cubin",
                                k.name, arch, api.GetErrorString(r)));
    }
  }
  api.DestroyProgram(&prog);
  return st;
}

#endif  // KILN_HAVE_NVRTC

}  // namespace

std::vector<std::string> DefaultArchs() { return {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "compute_90"}; }

std::vector<std::string> NvrtcLibraryNames() {
  if (const char* env = std::getenv("KILN_NVRTC_LIBRARY"); env != nullptr && *env != '\0') return {env};
#ifdef KILN_HAVE_NVRTC
  const std::string versioned = "libnvrtc.so." + std::to_string(kNvrtcMajor);
  return {versioned, "libnvrtc.so", "/usr/local/cuda/lib64/" + versioned};
#else
  return {};
#endif
}

#ifndef KILN_HAVE_NVRTC
namespace {
Status NoNvrtcHeaders() {
  return Unimplemented(
      "this kiln was built without NVRTC's headers (no CUDA toolkit at build time) and compiles CPU-only "
      "artifacts only: use --arch none (archs=\"none\" in Python)");
}
}  // namespace
#endif

Status LoadNvrtc() {
#ifdef KILN_HAVE_NVRTC
  return Load().status;
#else
  return NoNvrtcHeaders();
#endif
}

Status LoadNvrtcFrom(const std::vector<std::string>& names, std::string* version) {
#ifdef KILN_HAVE_NVRTC
  Nvrtc t;
  KILN_RETURN_IF_ERROR(LoadFrom(names, t));
  if (version) *version = t.version;
  return Status::Ok();
#else
  (void)names;
  (void)version;
  return NoNvrtcHeaders();
#endif
}

bool HaveNvrtc() { return LoadNvrtc().ok(); }

std::string NvrtcVersion() {
#ifdef KILN_HAVE_NVRTC
  return Load().status.ok() ? Load().api.version : "";
#else
  return "";
#endif
}

std::function<void(int, int, int)> TerminalProgress() {
  if (!::isatty(STDERR_FILENO)) return [](int, int, int) {};
  return [](int done, int total, int cached) {
    std::fprintf(stderr, "\rcompiling kernels: %d/%d (%d cached)%s", done, total, cached, done == total ? "\n" : "");
    std::fflush(stderr);
  };
}

Result<std::vector<KernelImages>> CompileKernels(const std::vector<EmittedKernel>& kernels,
                                                 const CompileKernelOptions& options) {
  std::vector<bool> arch_ptx(options.archs.size());
  for (size_t a = 0; a < options.archs.size(); ++a) {
    bool ptx = false;
    if (!ValidArch(options.archs[a], &ptx)) {
      return InvalidArgument(fmt::format("arch '{}': expected sm_NN (a cubin) or compute_NN (PTX), e.g. sm_90",
                                         options.archs[a]));
    }
    arch_ptx[a] = ptx;
  }
#ifndef KILN_HAVE_NVRTC
  if (kernels.empty() || options.archs.empty()) {
    if (options.stats) *options.stats = CompileStats{};
    std::vector<KernelImages> none;
    for (const EmittedKernel& k : kernels) none.push_back({k.name, {}});
    return none;
  }
  return LoadNvrtc();
#else
  if (kernels.empty() || options.archs.empty()) {
    if (options.stats) *options.stats = CompileStats{};
    std::vector<KernelImages> none;
    for (const EmittedKernel& k : kernels) none.push_back({k.name, {}});
    return none;
  }
  KILN_RETURN_IF_ERROR(Load().status);
  const Nvrtc& api = Load().api;
  // Kernels with identical sources are compiled once.
  std::vector<size_t> unique;            // kernel index of each unique source
  std::vector<size_t> unique_of(kernels.size());
  {
    std::map<std::string_view, size_t> seen;
    for (size_t k = 0; k < kernels.size(); ++k) {
      auto [it, added] = seen.emplace(kernels[k].source, unique.size());
      if (added) unique.push_back(k);
      unique_of[k] = it->second;
    }
  }
  struct Job {
    size_t kernel;  // index into kernels
    size_t arch;    // index into options.archs
    std::vector<uint8_t> data;
    Status status;
  };
  std::vector<Job> jobs;
  for (size_t u : unique) {
    for (size_t a = 0; a < options.archs.size(); ++a) jobs.push_back({u, a, {}, Status()});
  }

  const KernelCache cache(options.cache_dir, options.use_cache);
  std::string key_suffix = "nvrtc " + NvrtcVersion();
  for (const std::string& o : BaseOptions()) key_suffix += '\0' + o;

  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  int done = 0, cached = 0, compiled = 0;
  const int total = static_cast<int>(jobs.size());
  auto worker = [&]() {
    for (;;) {
      const size_t j = next.fetch_add(1);
      if (j >= jobs.size() || failed.load()) return;
      Job& job = jobs[j];
      const EmittedKernel& k = kernels[job.kernel];
      const std::string& arch = options.archs[job.arch];
      const bool ptx = arch_ptx[job.arch];
      std::string key_text = k.source;
      key_text += '\0';
      key_text += arch;
      key_text += '\0';
      key_text += key_suffix;
      const uint64_t key = KernelCache::Key(key_text);
      const char* suffix = ptx ? ".ptx" : ".cubin";
      const bool hit = cache.Read(key, suffix, &job.data);
      if (!hit) {
        job.status = NvrtcCompile(api, k, arch, ptx, &job.data);
        if (!job.status.ok()) failed.store(true);
        if (job.status.ok()) cache.Write(key, suffix, job.data);
      }
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (hit) ++cached;
      else if (job.status.ok()) ++compiled;
      if (options.progress) options.progress(done, total, cached);
    }
  };
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min(threads, total));
  if (total > 0) {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
  }
  if (options.stats) *options.stats = CompileStats{total, cached, compiled};
  for (Job& job : jobs) {
    if (!job.status.ok()) return job.status;
  }

  std::vector<KernelImages> out(kernels.size());
  std::vector<size_t> first_job(unique.size());
  for (size_t u = 0; u < unique.size(); ++u) first_job[u] = u * options.archs.size();
  for (size_t k = 0; k < kernels.size(); ++k) {
    out[k].kernel = kernels[k].name;
    const size_t base = first_job[unique_of[k]];
    for (size_t a = 0; a < options.archs.size(); ++a) {
      const Job& job = jobs[base + a];
      out[k].images.push_back({options.archs[a], arch_ptx[a], job.data});
    }
  }
  return out;
#endif
}

}  // namespace kiln::codegen
