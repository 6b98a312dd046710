// The checksums in a .kiln file header (runtime/artifact_header.h): which hash each format
// version uses, in one place for the writer (compiler/serialize) and the loader
// (runtime/model.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

// The first format whose header checksums are XXH3-64; formats before it use XXH64.
inline constexpr uint32_t kXxh3FormatVersion = 3;

// The checksum of `size` bytes at `data` for an artifact of `format_version`, seed 0: XXH64
// for formats 1 and 2, XXH3-64 from format 3. XXH3 is the same library's newer, faster hash
// (benchmarks/load_benchmark.cc: hashing the weights is most of Model::Load), compiled in
// from the header for the target's baseline vector unit (checksum.cc). Thread-safe, no
// allocation.
uint64_t ArtifactChecksum(uint32_t format_version, const void* data, size_t size);

}  // namespace kiln
