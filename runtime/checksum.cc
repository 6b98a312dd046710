#include "runtime/checksum.h"

#include <xxhash.h>
#if defined(__x86_64__)
// Debian's libxxhash exports the x86 dispatcher, which picks the widest vector unit at run
// time (the plain XXH3_64bits symbol is its SSE2 build). Other architectures' builds use
// their vector unit (NEON on aarch64) in XXH3_64bits itself.
#include <xxh_x86dispatch.h>
#endif

namespace kiln {

uint64_t ArtifactChecksum(uint32_t format_version, const void* data, size_t size) {
  if (format_version < kXxh3FormatVersion) return XXH64(data, size, 0);
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, size);
#else
  return XXH3_64bits(data, size);
#endif
}

}  // namespace kiln
