// NVRTC: every test program's kernel compiles for every default arch; the cache serves a
// second compile, and a corrupt or truncated entry is recompiled. Skipped in a build
// without the CUDA toolkit, where CompileKernels must say so.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
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
    CHECK(r.status().code() == StatusCode::kUnimplemented);
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

}  // namespace
}  // namespace kiln
