// The native code a Model runs its generated kernels with: the one Artifact.native_code entry
// (schema/kiln.fbs) chosen for this CPU (target.h), verified, then copied into memory of its
// own that is made read + execute (never writable and executable at once). Loading runs none
// of it: the CPU backend calls a kernel's function when it runs that kernel (dispatch.h).
//
// Verified before any byte becomes executable: the calling convention (NativeCode.abi equals
// kAbiVersion, abi.h; another version is not an error, the programs are interpreted and the
// note says why); the code's size (1 byte to kMaxCodeBytes); each NativeKernel: `kernel` below
// the artifact's kernel count and above the previous entry's, `offset` inside the code (and a
// multiple of 4 on aarch64). The FlatBuffer itself, these bytes included, already passed
// flatbuffers::Verifier and the header's checksum (runtime/model.cc CheckFlatBuffer). What
// the code does when called is not verifiable: docs/security.md says what that means.
//
// Owned by Model::Impl, shared by its contexts, unmapped with it. Immutable after Load:
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "runtime/cpu/native/abi.h"

namespace kiln::fb {
struct Artifact;  // schema/kiln_generated.h
}  // namespace kiln::fb

namespace kiln::native {

// Largest NativeCode.code accepted, bytes.
inline constexpr uint64_t kMaxCodeBytes = uint64_t{256} << 20;

class NativeImage {
 public:
  // What Load decided.
  struct Loaded {
    std::unique_ptr<NativeImage> image;  // null: every fused region is interpreted
    std::string target;                  // the chosen target, when image is set
    std::string note;                    // why none, or what the cap left out; "" when nothing to say
  };
  // Chooses among `a`'s native code (none when `allowed` is false: LoadOptions::native_code),
  // verifies the choice against `num_kernels` (Artifact.kernels' size) and maps it.
  // Errors: kDataLoss naming the NativeCode entry, its target and the field ("native_code 0
  // 'x86-64' kernels 2: offset 4096 out of range (code bytes: 512)"); kResourceExhausted when
  // no memory can be mapped. A system that refuses executable memory (mprotect fails) is no
  // error: the note says so and the programs are interpreted.
  static Result<Loaded> Load(const fb::Artifact& a, uint32_t num_kernels, bool allowed);

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
