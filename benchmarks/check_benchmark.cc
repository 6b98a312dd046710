// The preflight's cost (kiln/check.h) against Model::Load's, per artifact (Google Benchmark).
//
//   build/benchmarks/check_benchmark ARTIFACT.kiln... [--benchmark_min_time=0.5]
//
// BM_Check/NAME: CheckArtifact(ARTIFACT, --device cpu): the header, the FlatBuffer's checksum,
//     flatbuffers::Verifier, Kiln's semantic checks, the fixed memory plans and the report; no
//     weight page. BM_CheckCuda/NAME: the same with --device auto, which adds the CUDA driver's
//     lookup (on a machine without one, the failed dlopen) and the CUDA paths.
// BM_Load/NAME: Model::Load(ARTIFACT): the same checks plus the weights' checksum, which reads
//     every weight page.
// The file stays in the page cache (warm) after the first iteration. The target of issue 46 is
// at most 1 ms for BM_Check, whatever the weights' size.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "kiln/check.h"
#include "kiln/runtime.h"

namespace {

void BM_Check(benchmark::State& state, const std::string& path, kiln::Device device) {
  kiln::CheckOptions options;
  options.device = device;
  for (auto _ : state) {
    auto r = kiln::CheckArtifact(path, options);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r->usable);
  }
}

void BM_Load(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    auto m = kiln::Model::Load(path);
    if (!m.ok()) return state.SkipWithError(m.status().ToString().c_str());
    benchmark::DoNotOptimize(m->weights_bytes());
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: check_benchmark ARTIFACT.kiln... [--benchmark_* options]\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i], name = std::filesystem::path(path).stem().string();
    benchmark::RegisterBenchmark(("BM_Check/" + name).c_str(), BM_Check, path, kiln::Device::kCpu)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_CheckCuda/" + name).c_str(), BM_Check, path, kiln::Device::kAuto)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Load/" + name).c_str(), BM_Load, path)->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
