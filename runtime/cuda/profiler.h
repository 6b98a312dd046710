// Timing of a CUDA context's Runs with CUDA events, read once the stream's work is done
// (Synchronize): the GPU time of each Run between a start and a stop event (Stats::last_gpu_ns,
// cheap, always on), and with ContextOptions::profile each instruction's time
// (Stats::last_instruction_ns): mark k + 1 is recorded after instruction k, whatever ran it (a
// kernel, a library call, a CPU fallback segment, whose time goes to its first instruction, or
// the executor's control). A run-time Loop's body records its marks again in each iteration, so
// at each jump back the stream is waited for and the iteration's times are banked.
//
// Thread-compatible: owned by one context's backend.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/stats.h"
#include "kiln/status.h"
#include "runtime/cuda/driver.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

class Profiler {
 public:
  // `per_instruction`: ContextOptions::profile. Errors: kDeviceError (cuEventCreate).
  static Result<Profiler> Create(const Driver& drv, bool per_instruction);
  Profiler(Profiler&& other) noexcept;
  Profiler& operator=(Profiler&&) = delete;
  ~Profiler();

  bool per_instruction() const { return per_instruction_; }
  // The start of a Run of entry `pe` (before its inputs are staged).
  Status Start(const PreparedEntry& pe, CUstream stream);
  // After the inputs are staged: where the first instruction's time begins.
  Status Staged(CUstream stream);
  // Instructions [first, last) ended (the marks after each); a kiln.LoopBegin among them starts
  // its loop's sums anew.
  Status Mark(const PreparedEntry& pe, size_t first, size_t last, CUstream stream);
  // The loop from kiln.LoopBegin `begin` to kiln.LoopEnd `end` - 1 jumps back: waits for the
  // stream, banks the iteration's times, and marks the body's start again.
  Status Repeat(size_t begin, size_t end, CUstream stream);
  // The end of the Run's work.
  Status Stop(CUstream stream);
  // Once the stream's work is done: Stats::last_gpu_ns and last_instruction_ns.
  void Read(Stats& stats);

 private:
  Profiler(const Driver& drv, bool per_instruction) : drv_(&drv), per_instruction_(per_instruction) {}

  const Driver* drv_;
  bool per_instruction_;
  CUevent start_ = nullptr, stop_ = nullptr;
  bool timing_ = false;  // events recorded by the last Run, not read yet
  std::vector<CUevent> marks_;  // event k is recorded after instruction k - 1
  size_t marked_ = 0;           // marks of the last Run, not read yet
  // A run-time Loop's instructions' times in the iterations before the last (summed at each jump
  // back, since the next iteration records their marks again), and per kiln.LoopBegin whether its
  // last run jumped back (then its own time is all in loop_ns_).
  std::vector<int64_t> loop_ns_;
  std::vector<uint8_t> begin_jumped_;
};

}  // namespace kiln::cuda
