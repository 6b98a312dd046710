// Native CPU code mapped for running: a copy of verified bytes (load.h) in memory of its own,
// written while read + write, then made read + execute (never writable and executable at
// once), with each generated kernel's function. Mapping runs none of it: the CPU backend calls
// a kernel's function when it runs that kernel (dispatch.h).
//
// Owned by Model::Impl, shared by its contexts, unmapped with it. Immutable once mapped:
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "runtime/cpu/native/abi.h"

namespace kiln::native {

class NativeImage {
 public:
  // Copies `bytes` of `code` into a new mapping and makes it read + execute; `functions` are
  // (kernel, offset) pairs, already verified (load.h), for kernels [0, num_kernels).
  // Errors: kResourceExhausted when no memory can be mapped. A system that refuses executable
  // memory (mprotect fails) returns null and says why in `refused`.
  static Result<std::unique_ptr<NativeImage>> Map(const uint8_t* code, uint64_t bytes,
                                                  std::span<const std::pair<uint32_t, uint32_t>> functions,
                                                  uint32_t num_kernels, std::string* refused);

  ~NativeImage();
  NativeImage(const NativeImage&) = delete;
  NativeImage& operator=(const NativeImage&) = delete;

  // Kernel k's function (Artifact.kernels index), or null when this code has none for it.
  KernelFn kernel(uint32_t k) const { return k < functions_.size() ? functions_[k] : nullptr; }
  uint64_t code_bytes() const { return bytes_; }

 private:
  NativeImage() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t bytes_ = 0;
  std::vector<KernelFn> functions_;  // per Artifact.kernels index
};

}  // namespace kiln::native
