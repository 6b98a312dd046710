// NVRTC: every test program's kernel compiles for every default arch; the cache serves a
// second compile, and a corrupt or truncated entry is recompiled. Skipped where NVRTC does not
// load (or the build had no CUDA toolkit), where CompileKernels must say so. The loader's
// errors (NVRTC opened with dlopen) name the files tried and how to get NVRTC.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/cuda_source.h"
#include "compiler/codegen/nvrtc_compiler.h"
#include "tests/compiler/codegen/test_programs.h"
#include "tests/temp_dir.h"

namespace kiln {
namespace {

using codegen::CompileKernelOptions;
using codegen::CompileStats;
using codegen::EmittedKernel;
using codegen::KernelImages;

std::vector<EmittedKernel> TestKernels() {
  std::vector<fused::Program> programs = {
      testing::BroadcastProgram(),       testing::VectorProgram(),      testing::SoftmaxProgram(5, 37, 0),
      testing::SoftmaxProgram(-1, -2, 2), testing::LeadingReduceProgram(), testing::MiddleReduceProgram(),
      testing::GatherProgram(),          testing::CastProgram(),        testing::SymbolicProgram(),
      testing::AllOpsProgram(),          testing::IndexMathProgram(),   testing::LoadedIndexProgram(),
      testing::SignedIndexProgram(),     testing::SizeDivisorProgram(), testing::RowIndexProgram(7),
      testing::RowIndexProgram(-2),      testing::RandomIntProgram(7, false), testing::RandomIntProgram(8, true)};
  std::vector<EmittedKernel> kernels;
  for (const fused::Program& p : programs) {
    Result<EmittedKernel> k = codegen::EmitCuda(p);
    REQUIRE_MESSAGE(k.ok(), k.status().ToString());
    kernels.push_back(*k);
  }
  return kernels;
}

TEST_CASE("NVRTC: every test kernel compiles for the default archs, then comes from the cache") {
  const std::vector<EmittedKernel> kernels = TestKernels();
  if (!codegen::HaveNvrtc()) {
    Result<std::vector<KernelImages>> r = codegen::CompileKernels(kernels, {});
    CHECK(r.status().code() == codegen::LoadNvrtc().code());
    CHECK(r.status().message().find("--arch none") != std::string::npos);
    return;
  }
  testing::TempDir dir;
  CompileKernelOptions opts;
  opts.cache_dir = dir / "cache";
  CompileStats stats;
  opts.stats = &stats;
  int last_done = -1, last_total = -1, last_cached = -1, calls = 0;
  opts.progress = [&](int done, int total, int cached) {
    CHECK(done == last_done + 1);  // calls are serialised and counted one job at a time
    last_done = done;
    last_total = total;
    last_cached = cached;
    ++calls;
  };
  const int archs = static_cast<int>(codegen::DefaultArchs().size());
  REQUIRE(archs == 6);
  const int jobs = static_cast<int>(kernels.size()) * archs;

  // Cold: everything compiled.
  last_done = 0;
  Result<std::vector<KernelImages>> cold = codegen::CompileKernels(kernels, opts);
  REQUIRE_MESSAGE(cold.ok(), cold.status().ToString());
  CHECK(stats.jobs == jobs);
  CHECK(stats.compiled == jobs);
  CHECK(stats.cached == 0);
  CHECK(calls == jobs);
  CHECK(last_total == jobs);
  REQUIRE(cold->size() == kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) {
    const KernelImages& ki = (*cold)[k];
    CHECK(ki.kernel == kernels[k].name);
    REQUIRE(ki.images.size() == 6);
    for (int a = 0; a < archs; ++a) {
      const codegen::KernelImage& img = ki.images[a];
      CHECK(img.arch == codegen::DefaultArchs()[a]);
      REQUIRE(img.data.size() > 16);
      if (img.ptx) {
        const std::string ptx(img.data.begin(), img.data.end());
        CHECK(img.arch == "compute_90");
        CHECK(ptx.back() == '\0');
        CHECK(ptx.find(".target sm_90") != std::string::npos);
        CHECK(ptx.find(".entry " + kernels[k].name) != std::string::npos);
      } else {
        CHECK(std::memcmp(img.data.data(), "\x7f" "ELF", 4) == 0);
      }
    }
  }

  // Warm: everything from the cache, byte for byte the same.
  calls = 0;
  last_done = 0;
  Result<std::vector<KernelImages>> warm = codegen::CompileKernels(kernels, opts);
  REQUIRE(warm.ok());
  CHECK(stats.cached == jobs);
  CHECK(stats.compiled == 0);
  CHECK(last_cached == jobs);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int a = 0; a < archs; ++a) CHECK((*warm)[k].images[a].data == (*cold)[k].images[a].data);
  }

  // A corrupt entry (one flipped byte) and a truncated one are recompiled, and rewritten.
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path / "cache")) files.push_back(e.path());
  REQUIRE(files.size() == static_cast<size_t>(jobs));
  std::string bytes = testing::ReadBytes(files[0].string());
  bytes[bytes.size() / 2] ^= 0x5a;
  testing::WriteBytes(files[0].string(), bytes);
  testing::WriteBytes(files[1].string(), testing::ReadBytes(files[1].string()).substr(0, 20));
  last_done = 0;
  Result<std::vector<KernelImages>> fixed = codegen::CompileKernels(kernels, opts);
  REQUIRE(fixed.ok());
  CHECK(stats.cached == jobs - 2);
  CHECK(stats.compiled == 2);
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (int a = 0; a < archs; ++a) CHECK((*fixed)[k].images[a].data == (*cold)[k].images[a].data);
  }
  last_done = 0;
  REQUIRE(codegen::CompileKernels(kernels, opts).ok());
  CHECK(stats.cached == jobs);
}

TEST_CASE("NVRTC: errors name the kernel, the arch and the log") {
  if (!codegen::HaveNvrtc()) return;
  EmittedKernel bad;
  bad.name = "kiln_broken";
  bad.source = "extern \"C\" __global__ void kiln_broken() { undefined_thing(); }\n";
  CompileKernelOptions opts;
  opts.use_cache = false;
  opts.archs = {"sm_80"};
  Result<std::vector<KernelImages>> r = codegen::CompileKernels({bad}, opts);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kInternal);
  CHECK(r.status().message().find("kiln_broken") != std::string::npos);
  CHECK(r.status().message().find("sm_80") != std::string::npos);
  CHECK(r.status().message().find("undefined_thing") != std::string::npos);  // from NVRTC's log

  opts.archs = {"sm80"};
  CHECK(codegen::CompileKernels({bad}, opts).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("NVRTC: identical kernels compile once, no archs means no images") {
  if (!codegen::HaveNvrtc()) return;
  Result<EmittedKernel> k = codegen::EmitCuda(testing::BroadcastProgram());
  REQUIRE(k.ok());
  CompileKernelOptions opts;
  opts.use_cache = false;
  opts.archs = {"sm_86"};
  CompileStats stats;
  opts.stats = &stats;
  Result<std::vector<KernelImages>> r = codegen::CompileKernels({*k, *k}, opts);
  REQUIRE(r.ok());
  CHECK(stats.jobs == 1);
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].images[0].data == (*r)[1].images[0].data);
  opts.archs = {};
  r = codegen::CompileKernels({*k}, opts);
  REQUIRE(r.ok());
  CHECK((*r)[0].images.empty());
}

// Sets an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_CASE("NVRTC: the files looked for, and KILN_NVRTC_LIBRARY in their place") {
  {
    ScopedEnv env("KILN_NVRTC_LIBRARY", nullptr);
    const std::vector<std::string> names = codegen::NvrtcLibraryNames();
    if (codegen::LoadNvrtc().code() != StatusCode::kUnimplemented) {  // a build with NVRTC's headers
      REQUIRE(names.size() == 3);
      CHECK(names[0].rfind("libnvrtc.so.", 0) == 0);  // the build's major first, then any
      CHECK(names[1] == "libnvrtc.so");
      CHECK(names[2] == "/usr/local/cuda/lib64/" + names[0]);
    }
  }
  ScopedEnv env("KILN_NVRTC_LIBRARY", "/opt/nvrtc/libnvrtc.so.13");
  CHECK(codegen::NvrtcLibraryNames() == std::vector<std::string>{"/opt/nvrtc/libnvrtc.so.13"});
}

TEST_CASE("NVRTC: a library that is not found is named, with how to install NVRTC") {
  const std::vector<std::string> names = {"libkiln-test-no-such-nvrtc.so.13", "/nonexistent/kiln-test/libnvrtc.so"};
  std::string version = "untouched";
  const Status st = codegen::LoadNvrtcFrom(names, &version);
  REQUIRE_FALSE(st.ok());
  CHECK(version == "untouched");
  const std::string& m = st.message();
  CHECK(m.find("--arch none") != std::string::npos);
  if (st.code() == StatusCode::kUnimplemented) return;  // no NVRTC headers in this build
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  for (const std::string& name : names) CHECK_MESSAGE(m.find(name) != std::string::npos, m);
  CHECK_MESSAGE(m.find("apt install cuda-nvrtc-") != std::string::npos, m);
  CHECK_MESSAGE(m.find("pip install 'nvidia-cuda-nvrtc>=") != std::string::npos, m);
  CHECK_MESSAGE(m.find("KILN_NVRTC_LIBRARY") != std::string::npos, m);

  // A library that opens but is not NVRTC: the entry point it lacks, and the file.
  const Status other = codegen::LoadNvrtcFrom({"libm.so.6"}, &version);
  CHECK(other.code() == StatusCode::kFailedPrecondition);
  CHECK_MESSAGE(other.message().find("libm.so.6") != std::string::npos, other.message());
  CHECK_MESSAGE(other.message().find("nvrtcVersion") != std::string::npos, other.message());
  CHECK(version == "untouched");

  // No names at all.
  CHECK(codegen::LoadNvrtcFrom({}, &version).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("NVRTC: the library found reports the version the cache key and the provenance use") {
  if (!codegen::HaveNvrtc()) {
    CHECK(codegen::NvrtcVersion().empty());
    return;
  }
  std::string version;
  const Status st = codegen::LoadNvrtcFrom(codegen::NvrtcLibraryNames(), &version);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(version == codegen::NvrtcVersion());
  CHECK(version.find('.') != std::string::npos);
}

}  // namespace
}  // namespace kiln
