#include "tests/emulated_cuda/modules.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/codegen/host_shim.h"
#include "runtime/artifact_header.h"
#include "schema/kiln_generated.h"
#include "tests/emulated_cuda/device.h"
#include "tests/emulated_cuda/emulator.h"

namespace kiln::emulated_cuda {
namespace {

// ---- finding the artifact that holds an image --------------------------------------------------

// The readable range of this process's memory that contains `p` (adjacent readable mappings
// joined), from /proc/self/maps; false when `p` is in none.
bool ReadableRange(uintptr_t p, uintptr_t* lo, uintptr_t* hi) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::vector<std::pair<uintptr_t, uintptr_t>> readable;
  while (std::getline(maps, line)) {
    unsigned long long a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &a, &b, perms) != 3 || perms[0] != 'r') continue;
    if (!readable.empty() && readable.back().second == a) readable.back().second = b;
    else readable.emplace_back(a, b);
  }
  for (const auto& [a, b] : readable) {
    if (p >= a && p < b) {
      *lo = a;
      *hi = b;
      return true;
    }
  }
  return false;
}

struct FoundKernel {
  std::string name, source, arch;
  bool ptx = false;
  size_t image_bytes = 0;
  // Every kernel of the artifact (name, source), this one included: compiled together.
  std::vector<std::pair<std::string, std::string>> siblings;
};

// The kernel of the Kiln artifact in memory whose image starts at `image`.
bool FindInArtifact(const void* image, FoundKernel* out, std::string* why) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(image);
  uintptr_t lo = 0, hi = 0;
  if (!ReadableRange(p, &lo, &hi)) {
    *why = "the image is in no readable mapping";
    return false;
  }
  // Model::Load maps a file (page-aligned) or copies bytes to a kWeightsAlignment-aligned block.
  for (uintptr_t h = p / kWeightsAlignment * kWeightsAlignment; h >= lo && h + sizeof(ArtifactHeader) <= hi;
       h -= kWeightsAlignment) {
    ArtifactHeader header;
    std::memcpy(&header, reinterpret_cast<const void*>(h), sizeof header);
    if (std::memcmp(header.magic, kArtifactMagic, sizeof header.magic) == 0 &&
        header.header_bytes == sizeof(ArtifactHeader) && header.flatbuffer_offset <= hi - h &&
        header.flatbuffer_size <= hi - h - header.flatbuffer_offset &&
        p >= h + header.flatbuffer_offset && p < h + header.flatbuffer_offset + header.flatbuffer_size) {
      const auto* fbuf = reinterpret_cast<const uint8_t*>(h + header.flatbuffer_offset);
      flatbuffers::Verifier::Options opts;
      opts.max_tables = 50'000'000;
      flatbuffers::Verifier verifier(fbuf, static_cast<size_t>(header.flatbuffer_size), opts);
      if (!fb::VerifyArtifactBuffer(verifier)) continue;
      const fb::Artifact* art = fb::GetArtifact(fbuf);
      if (art->kernels() == nullptr) continue;
      for (const fb::Kernel* k : *art->kernels()) {
        if (k->images() == nullptr) continue;
        for (const fb::KernelImage* im : *k->images()) {
          if (im->data() == nullptr || im->data()->data() != image) continue;
          out->name = k->name() ? k->name()->str() : "";
          out->source = k->source() ? k->source()->str() : "";
          out->arch = im->arch() ? im->arch()->str() : "";
          out->ptx = im->ptx();
          out->image_bytes = im->data()->size();
          for (const fb::Kernel* sib : *art->kernels())
            if (sib->name() && sib->source()) out->siblings.emplace_back(sib->name()->str(), sib->source()->str());
          return true;
        }
      }
      *why = "the Kiln artifact around it has no kernel image at that address";
      return false;
    }
    if (h < kWeightsAlignment) break;
  }
  *why = "no Kiln artifact holds it (the emulated device runs the kernels of Kiln artifacts only)";
  return false;
}

// ---- compiling a kernel for the host --------------------------------------------------------------

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string CacheDir() {
  if (const char* d = std::getenv("KILN_EMULATED_CUDA_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln/emulated-cuda";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln/emulated-cuda";
  return "/tmp/kiln-emulated-cuda";
}

bool MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      const std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One kernel's part of a translation unit: its source, then its launcher
//   extern "C" void kiln_emulated_launch_<name>(void* const* p, unsigned gx, gy, gz, bx, by, bz)
// that passes each parameter's value (p[i] points to it) to the kernel, for every thread. The
// host shim goes once in front of all parts (its sections have include guards, as the kernels'
// prelude sections do).
std::string KernelPart(const Kernel& k, const std::string& source) {
  std::string tu = source;
  tu += "\nextern \"C\" void kiln_emulated_launch_" + k.name +
        "(void* const* p, unsigned gx, unsigned gy, unsigned gz,\n"
        "    unsigned bx, unsigned by, unsigned bz) {\n"
        "  kiln_dim3 grid, block;\n"
        "  grid.x = gx; grid.y = gy; grid.z = gz; block.x = bx; block.y = by; block.z = bz;\n"
        "  kiln_host_launch(grid, block, [&] { " + k.name + "(";
  for (size_t i = 0; i < k.params.size(); ++i) {
    tu += (i ? ", " : "") + std::string("*(") + k.params[i].type + "*)p[" + std::to_string(i) + "]";
  }
  tu += "); });\n}\n";
  return tu;
}

const char* Compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "c++";
}
constexpr const char* kFlags = codegen::kHostShimFlags;

// The cache file of one kernel: its name and a hash of what compiling it depends on.
std::string CachePath(const std::string& dir, const Kernel& k, const std::string& source) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(
                    Fnv1a(std::string(codegen::kHostShim) + KernelPart(k, source) + Compiler() + kFlags)));
  return dir + "/" + k.name + "-" + hash + ".so";
}

// Compiles the kernels of `batch` (kernel, source) into one library, then links it into the
// cache under each kernel's name (one compiler start for a whole artifact's kernels).
CUresult CompileBatch(const std::vector<std::pair<const Kernel*, const std::string*>>& batch, const std::string& dir) {
  std::string tu = codegen::kHostShim;
  for (const auto& [k, source] : batch) tu += KernelPart(*k, *source);
  const std::string tmp = dir + "/batch-" + std::to_string(::getpid()) + "-" + batch.front().first->name;
  const std::string src = tmp + ".cc", log = tmp + ".log", lib = tmp + ".so";
  {
    std::ofstream out(src, std::ios::binary);
    out << tu;
    if (!out) {
      Diagnose("cuModuleLoadData", "cannot write " + src);
      return CUDA_ERROR_INVALID_SOURCE;
    }
  }
  const std::string cmd = std::string(Compiler()) + " " + kFlags + " -o '" + lib + "' '" + src + "' > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  Count("host_compiles");
  if (rc != 0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    Diagnose("cuModuleLoadData", "compiling " + std::to_string(batch.size()) + " kernel(s) for the host failed: " + cmd +
                                     "\n" + text.str().substr(0, 4000));
    return CUDA_ERROR_INVALID_SOURCE;
  }
  std::remove(src.c_str());
  std::remove(log.c_str());
  for (const auto& [k, source] : batch) {
    const std::string path = CachePath(dir, *k, *source);
    // A hard link is atomic; another process may have linked the same kernel first.
    if (::link(lib.c_str(), path.c_str()) != 0 && errno != EEXIST) {
      Diagnose("cuModuleLoadData", "cannot link " + lib + " to " + path);
      std::remove(lib.c_str());
      return CUDA_ERROR_INVALID_SOURCE;
    }
  }
  std::remove(lib.c_str());
  return CUDA_SUCCESS;
}

// Finds the kernel's host library in the cache, compiling it (with every other kernel of its
// artifact not yet there) first when missing, and loads it.
CUresult Compile(Kernel* k, const FoundKernel& found) {
  const std::string dir = CacheDir();
  const std::string lib = CachePath(dir, *k, found.source);
  if (::access(lib.c_str(), R_OK) != 0) {
    if (!MakeDirs(dir)) {
      Diagnose("cuModuleLoadData", "cannot create the kernel cache folder " + dir);
      return CUDA_ERROR_INVALID_SOURCE;
    }
    std::vector<Kernel> siblings;
    siblings.reserve(found.siblings.size());
    std::vector<std::pair<const Kernel*, const std::string*>> batch = {{k, &found.source}};
    for (const auto& [name, source] : found.siblings) {
      if (name == k->name) continue;
      Kernel sib;
      if (!ParseSignature(source, name, &sib) || ::access(CachePath(dir, sib, source).c_str(), R_OK) == 0) continue;
      siblings.push_back(std::move(sib));
      batch.emplace_back(&siblings.back(), &source);
    }
    if (CUresult r = CompileBatch(batch, dir); r != CUDA_SUCCESS) return r;
  }
  void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    Diagnose("cuModuleLoadData", std::string("dlopen ") + lib + ": " + ::dlerror());
    return CUDA_ERROR_INVALID_SOURCE;
  }
  const std::string symbol = "kiln_emulated_launch_" + k->name;
  k->launch = reinterpret_cast<decltype(k->launch)>(::dlsym(handle, symbol.c_str()));
  if (k->launch == nullptr) {
    Diagnose("cuModuleLoadData", lib + " has no " + symbol);
    return CUDA_ERROR_INVALID_SOURCE;
  }
  // One mutex per library: a kernel's statics are its library's.
  static std::mutex mu;
  static std::map<void*, std::shared_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> lock(mu);
  auto& m = locks[handle];
  if (!m) m = std::make_shared<std::mutex>();
  k->mu = m;
  return CUDA_SUCCESS;
}

// Whether `image` (of `bytes` bytes) is the image of kernel `name` for `arch` as it claims:
// PTX text with `.entry name` and `.target sm_NN`, or an ELF cubin containing the name.
bool ImageNames(const uint8_t* image, size_t bytes, bool ptx, const std::string& name, std::string* why) {
  if (ptx) {
    const std::string text(reinterpret_cast<const char*>(image), strnlen(reinterpret_cast<const char*>(image), bytes));
    if (text.find(".entry " + name) == std::string::npos) {
      *why = "the PTX has no .entry " + name;
      return false;
    }
    return true;
  }
  if (bytes < 4 || std::memcmp(image, "\x7f" "ELF", 4) != 0) {
    *why = "the cubin is not an ELF image";
    return false;
  }
  if (memmem(image, bytes, name.data(), name.size()) == nullptr) {
    *why = "the cubin does not name " + name;
    return false;
  }
  return true;
}

// CUDA's rules for which image a device runs (CUDA C++ Programming Guide, "Binary
// Compatibility" and "PTX Compatibility"): a cubin for sm_XY runs on devices of major X and
// minor >= Y; PTX for compute_XY is JIT-compiled for any device of compute capability >= XY.
bool ArchRuns(const std::string& arch, bool ptx) {
  int cc = 0;
  if (std::sscanf(arch.c_str(), ptx ? "compute_%d" : "sm_%d", &cc) != 1) return false;
  const Config& c = GetConfig();
  const int dev = c.cc_major * 10 + c.cc_minor;
  if (ptx) return cc <= dev;
  return cc / 10 == c.cc_major && cc % 10 <= c.cc_minor;
}

}  // namespace

bool ParseSignature(const std::string& source, const std::string& name, Kernel* kernel) {
  size_t pos = 0;
  for (;;) {
    pos = source.find("extern \"C\" __global__ void", pos);
    if (pos == std::string::npos) return false;
    size_t open = source.find('(', pos);
    if (open == std::string::npos) return false;
    std::string head = source.substr(pos, open - pos);
    kernel->max_threads = 1024;
    if (head.find("__launch_bounds__") != std::string::npos) {
      const size_t close = source.find(')', open);
      kernel->max_threads = static_cast<unsigned>(std::atoi(source.c_str() + open + 1));
      open = source.find('(', close);
      head = source.substr(pos, open - pos);
    }
    const size_t name_start = head.find_last_of(" \n");
    if (Trim(head.substr(name_start + 1)) != name) {
      pos = open;
      continue;
    }
    const size_t close = source.find(')', open);
    if (close == std::string::npos) return false;
    kernel->name = name;
    kernel->params.clear();
    std::stringstream list(source.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(list, item, ',')) {
      item = Trim(item);
      if (item.empty()) continue;
      const size_t last = item.find_last_of(" *");
      Param p;
      p.name = item.substr(last + 1);
      std::string type = Trim(item.substr(0, last + 1));
      for (size_t r; (r = type.find("__restrict__")) != std::string::npos;) type.erase(r, 12);
      p.type = Trim(type);
      p.pointer = p.type.find('*') != std::string::npos;
      p.bytes = p.pointer ? sizeof(void*) : p.type == "int" || p.type == "unsigned int" || p.type == "float" ? 4 : 8;
      kernel->params.push_back(std::move(p));
    }
    return true;
  }
}

CUresult LoadModule(const void* image, std::vector<std::shared_ptr<Kernel>>* kernels, std::string* arch) {
  FoundKernel found;
  std::string why;
  if (!FindInArtifact(image, &found, &why)) {
    Diagnose("cuModuleLoadData", "cannot identify the kernel of the image at " +
                                     std::to_string(reinterpret_cast<uintptr_t>(image)) + ": " + why);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (!ImageNames(static_cast<const uint8_t*>(image), found.image_bytes, found.ptx, found.name, &why)) {
    Diagnose("cuModuleLoadData", "the " + found.arch + " image of kernel " + found.name + " is not one: " + why);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (!ArchRuns(found.arch, found.ptx)) {
    Diagnose("cuModuleLoadData", "the " + found.arch + " image of kernel " + found.name + " does not run on a " +
                                     GetConfig().Arch() + " device");
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  auto k = std::make_shared<Kernel>();
  if (!ParseSignature(found.source, found.name, k.get())) {
    Diagnose("cuModuleLoadData", "kernel " + found.name + ": no `extern \"C\" __global__ void " + found.name +
                                     "(...)` in its source");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (CUresult r = Compile(k.get(), found); r != CUDA_SUCCESS) return r;
  kernels->push_back(std::move(k));
  *arch = found.arch;
  return CUDA_SUCCESS;
}

}  // namespace kiln::emulated_cuda
