#include "runtime/checksum.h"

// Header-only: XXH_INLINE_ALL compiles xxHash into this file (static functions), so the
// runtime needs no libxxhash at run time and a cross build needs none for its target. The
// header picks the target's baseline vector unit at compile time (SSE2 on x86-64, NEON on
// aarch64); libxxhash's run-time dispatch to AVX2/AVX-512 is not in the header.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kiln {

uint64_t ArtifactChecksum(uint32_t format_version, const void* data, size_t size) {
  if (format_version < kXxh3FormatVersion) return XXH64(data, size, 0);
  return XXH3_64bits(data, size);
}

}  // namespace kiln
