// Choosing, verifying and mapping a Model's native CPU code at load: the one
// Artifact.native_code entry (schema/kiln.fbs) chosen for this CPU (target.h), verified, then
// mapped read + execute (image.h).
//
// Verified before any byte becomes executable: the calling convention (NativeCode.abi equals
// kAbiVersion, abi.h; another version is not an error: the programs are interpreted and the
// note says why); the code's size (1 byte to kMaxCodeBytes); each NativeKernel: `kernel` below
// the artifact's kernel count and above the previous entry's, `offset` inside the code (and a
// multiple of 4 on aarch64). The FlatBuffer itself, these bytes included, already passed
// flatbuffers::Verifier and the header's checksum (runtime/model.cc CheckFlatBuffer). Only
// the chosen target is verified; the others are never mapped. What the code does when called
// cannot be verified: docs/security.md says what that means.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/status.h"
#include "runtime/cpu/native/image.h"
#include "schema/kiln_generated.h"

namespace kiln::native {

// Largest NativeCode.code accepted, bytes.
inline constexpr uint64_t kMaxCodeBytes = uint64_t{256} << 20;

struct LoadedNativeCode {
  std::unique_ptr<NativeImage> image;  // null: every fused region is interpreted
  std::string target;                  // the chosen target, when image is set
  std::string note;                    // why none, or what the cap left out; "" when nothing to say
};

// Chooses among `a`'s native code (none when `allowed` is false: LoadOptions::native_code),
// verifies the choice against `num_kernels` (Artifact.kernels' size) and maps it.
// Errors: kDataLoss naming the NativeCode entry, its target and the field ("native_code 0
// 'x86-64' kernels 2: offset 4096 out of range (code bytes: 512)"); kResourceExhausted when
// no memory can be mapped.
Result<LoadedNativeCode> LoadNativeCode(const fb::Artifact& a, uint32_t num_kernels, bool allowed);

}  // namespace kiln::native
