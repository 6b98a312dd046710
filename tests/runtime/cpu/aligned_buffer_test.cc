// runtime/cpu/host_memory.h's AlignedBuffer: 64-byte alignment, 2 MiB alignment from 2 MiB (the
// blocks advised for transparent huge pages), growth only, and every byte writable.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/host_memory.h"

namespace kiln::cpu {
namespace {

TEST_CASE("AlignedBuffer: 64-byte blocks, 2 MiB-aligned ones from 2 MiB, growing only") {
  AlignedBuffer b;
  CHECK(b.data() == nullptr);
  REQUIRE(b.Reserve(100));
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % 64 == 0);
  CHECK(b.size() >= 100);
  const uint64_t small = b.size();
  REQUIRE(b.Reserve(50));  // smaller: kept as it is
  CHECK(b.size() == small);
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  for (const uint64_t bytes : {2 * kMiB, 3 * kMiB + 100, 9 * kMiB}) {
    CAPTURE(bytes);
    REQUIRE(b.Reserve(bytes));
    CHECK(reinterpret_cast<uintptr_t>(b.data()) % (2 * kMiB) == 0);
    CHECK(b.size() >= bytes);
    std::memset(b.data(), 0x5a, static_cast<size_t>(b.size()));  // every byte is ours (ASan checks)
    CHECK(b.data()[b.size() - 1] == 0x5a);
  }
}

}  // namespace
}  // namespace kiln::cpu
