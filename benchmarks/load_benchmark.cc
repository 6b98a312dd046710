// The cost of Model::Load per megabyte of weights (Google Benchmark).
//
//   build/benchmarks/load_benchmark [--benchmark_min_time=0.5]
//
// BM_Load/weights_MB:W/flushed:F
//     Model::Load(path) of an artifact file with W MB (W * 10^6 bytes) of weights:
//     y = Add(x, w), x, w, y float32[W * 250000], w the one weight. The file is written once
//     per W (to the temp directory, removed at exit).
//     Timed: open, fstat, mmap (MAP_PRIVATE, pages faulted in on first touch), the header
//     checks, the checksum of the FlatBuffer, flatbuffers::Verifier, the checksum of the weights
//     blob (XXH3-64 from format 3, runtime/checksum.h; it reads every weights page), the semantic checks (runtime/verify.cc) and the copy into the
//     prepared structs. Not timed: the Model's release (munmap) after each load, and the flush.
//     The file stays in the page cache throughout (it was just written): no byte comes from
//     disk, so this is a warm-page-cache load. A cold one adds the disk read of the whole file,
//     which this does not measure.
//     F = 0: the file's bytes are in the CPU caches as far as the last load left them there
//     (all of them when W MB fit in the last-level cache). F = 1 (x86-64 only): before each
//     load the file's cache lines are flushed (clflush), so the bytes come from DRAM, as for a
//     process that loads a model the kernel cached earlier.
//     The FlatBuffer is a few hundred bytes, so nearly all the time is per byte of weights; a
//     real model's many tables add their own Verifier and semantic-check cost on top.
//     ms_per_10MB: load time per 10 MB of weights (target: < 1 ms).
//     bytes_per_second: weights bytes loaded per second.
//
// The per-call costs of Run are in prologue_benchmark (entry selection) and
// dispatch_benchmark (per instruction on the CPU backend).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kiln/runtime.h"
#include "benchmarks/weights_artifact.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {


// One artifact file per weights size, written on first use and removed at exit.
class ArtifactFiles {
 public:
  ~ArtifactFiles() {
    std::error_code ignored;
    for (const auto& [mb, path] : paths_) std::filesystem::remove(path, ignored);
  }

  // The file's path, or "" if it cannot be written.
  std::string Path(int64_t mb) {
    auto it = paths_.find(mb);
    if (it != paths_.end()) return it->second;
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (ec) return "";
    const std::string path = (dir / ("kiln_load_benchmark_" + std::to_string(::getpid()) + "_" +
                                     std::to_string(mb) + "MB.kiln")).string();
    const std::vector<uint8_t> bytes = testing::BuildArtifact(WeightsSpec(mb));
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::filesystem::remove(path, ec);
      return "";
    }
    paths_[mb] = path;
    return path;
  }

 private:
  std::map<int64_t, std::string> paths_;
};

ArtifactFiles artifact_files;

// A second, read-only mapping of a file: the same page-cache pages Model::Load maps, so
// flushing its lines evicts the file's bytes from every CPU cache.
class FileLines {
 public:
  explicit FileLines(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return;
    if (::fstat(fd, &st) == 0) {
      void* addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
      if (addr != MAP_FAILED) {
        addr_ = static_cast<const uint8_t*>(addr);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  FileLines(const FileLines&) = delete;
  FileLines& operator=(const FileLines&) = delete;
  ~FileLines() {
    if (addr_) ::munmap(const_cast<uint8_t*>(addr_), size_);
  }

  // False if the file could not be mapped or this CPU has no clflush.
  bool Flush() const {
#if defined(__x86_64__)
    if (addr_ == nullptr) return false;
    for (size_t i = 0; i < size_; i += 64) _mm_clflush(addr_ + i);
    _mm_mfence();
    return true;
#else
    return false;
#endif
  }

 private:
  const uint8_t* addr_ = nullptr;
  size_t size_ = 0;
};

void BM_Load(benchmark::State& state) {
  const int64_t mb = state.range(0);
  const bool flushed = state.range(1) != 0;
  const std::string path = artifact_files.Path(mb);
  if (path.empty()) {
    state.SkipWithError("cannot write the artifact to the temp directory");
    return;
  }
  const FileLines lines(path);
  double seconds = 0;
  for (auto _ : state) {
    if (flushed && !lines.Flush()) {
      state.SkipWithError("cannot flush the file from the CPU caches (x86-64 only)");
      break;
    }
    if (!TimedLoad(state, path, {}, &seconds)) break;
  }
  state.SetBytesProcessed(state.iterations() * mb * kMB);
  state.counters["ms_per_10MB"] =
      benchmark::Counter(seconds * 1e3 * 10 / static_cast<double>(mb), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_Load)
    ->ArgNames({"weights_MB", "flushed"})
    ->ArgsProduct({{1, 10, 100}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
