// Counting the heap allocations Kiln makes, for the tests that a steady-state Run allocates
// nothing (tests/runtime/run_allocations_test.cc on the CPU backend,
// tests/runtime/cuda/emulated_device_test.cc on the emulated CUDA device).
//
// The global operator new and delete are replaced, once for the whole kiln_tests binary, in
// run_allocations_test.cc: by malloc/free versions that call NoteAllocation() below. While a
// counting window is open, NoteAllocation counts every call, on any thread (a context's CPU
// workers included); outside a window it does nothing. Only allocation through operator new is
// seen: the runtime's arena uses aligned_alloc directly (and only when an entry first sees
// larger shapes).
//
//   long n = CountAllocations([&] { ok = ctx.Run(in, out).ok(); });      // every allocation
//   long k = CountKilnAllocations([&] { ... });   // not those made inside the emulated CUDA
//                                                 // libraries (their API calls, their threads)
//   if (k != 0) MESSAGE(CountedAllocationStacks());                      // where they were made
//
// No doctest macro may run inside a window: doctest allocates.
//
// CountKilnAllocations skips an allocation when any frame of its call stack (backtrace(3), up
// to kStackFrames deep) lies in a shared object loaded from a ".../emulated_cuda/lib/" folder:
// the stand-in libcuda, libcublasLt and libcudnn (tests/emulated_cuda/). What those libraries
// allocate, on Kiln's thread inside an API call or on their stream worker threads, is theirs,
// as a real driver's would be. Their address ranges are found with dl_iterate_phdr when the
// window opens (after the runtime has loaded them).
#pragma once

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace kiln::testing {

namespace count_allocations_detail {

inline constexpr int kStackFrames = 64;  // frames examined per allocation
inline constexpr int kKeptStacks = 8;    // stacks kept for CountedAllocationStacks
inline constexpr int kMaxRanges = 64;

struct Range {
  uintptr_t begin = 0, end = 0;
};

inline std::atomic<bool> counting{false};
inline std::atomic<bool> skip_emulated{false};
inline std::atomic<long> allocations{0};
inline Range ranges[kMaxRanges];
inline int num_ranges = 0;  // written only while no window is open
inline void* stacks[kKeptStacks][kStackFrames];
inline int stack_depth[kKeptStacks];
inline std::size_t stack_bytes[kKeptStacks];

inline bool InEmulatedLibrary(void* const* frames, int depth) {
  for (int f = 0; f < depth; ++f) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(frames[f]);
    for (int r = 0; r < num_ranges; ++r)
      if (a >= ranges[r].begin && a < ranges[r].end) return true;
  }
  return false;
}

// The loaded segments of every object whose path holds "/emulated_cuda/lib/".
inline void FindEmulatedLibraries() {
  num_ranges = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) -> int {
        if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "/emulated_cuda/lib/") == nullptr) return 0;
        for (int h = 0; h < info->dlpi_phnum && num_ranges < kMaxRanges; ++h) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[h];
          if (ph.p_type != PT_LOAD) continue;
          ranges[num_ranges++] = {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
        }
        return 0;
      },
      nullptr);
}

template <typename F>
long Count(F&& body, bool skip) {
  if (skip) {
    FindEmulatedLibraries();
    void* warm[4];
    (void)backtrace(warm, 4);  // its first call loads the unwinder, which allocates
  }
  allocations = 0;
  skip_emulated = skip;
  counting = true;
  body();
  counting = false;
  skip_emulated = false;
  return allocations;
}

}  // namespace count_allocations_detail

// Called by the replaced operator new (run_allocations_test.cc) for every allocation.
inline void NoteAllocation(std::size_t bytes) {
  namespace d = count_allocations_detail;
  if (!d::counting.load(std::memory_order_relaxed)) return;
  if (!d::skip_emulated.load(std::memory_order_relaxed)) {
    ++d::allocations;
    return;
  }
  void* frames[d::kStackFrames];
  const int depth = backtrace(frames, d::kStackFrames);
  if (d::InEmulatedLibrary(frames, depth)) return;
  const long k = d::allocations++;
  if (k < d::kKeptStacks) {
    std::memcpy(d::stacks[k], frames, sizeof(void*) * static_cast<size_t>(depth));
    d::stack_depth[k] = depth;
    d::stack_bytes[k] = bytes;
  }
}

// The number of operator new calls made while `body` runs, on any thread.
template <typename F>
long CountAllocations(F&& body) {
  return count_allocations_detail::Count(body, false);
}

// The same, less the allocations made inside the emulated CUDA libraries (see above). Keeps the
// call stacks of the first allocations counted, for CountedAllocationStacks().
template <typename F>
long CountKilnAllocations(F&& body) {
  return count_allocations_detail::Count(body, true);
}

// The call stacks kept by the last CountKilnAllocations, one frame a line as
// "object+0xoffset symbol" (`addr2line -f -C -e object offset` names a frame of a static
// function). Allocates: call it after the window.
inline std::string CountedAllocationStacks() {
  namespace d = count_allocations_detail;
  std::string out;
  const long kept = std::min<long>(d::allocations.load(), d::kKeptStacks);
  for (long k = 0; k < kept; ++k) {
    out += "allocation " + std::to_string(k + 1) + " (" + std::to_string(d::stack_bytes[k]) + " bytes):\n";
    for (int f = 0; f < d::stack_depth[k]; ++f) {
      Dl_info info{};
      char line[512];
      if (dladdr(d::stacks[k][f], &info) != 0 && info.dli_fname != nullptr) {
        const uintptr_t offset =
            reinterpret_cast<uintptr_t>(d::stacks[k][f]) - reinterpret_cast<uintptr_t>(info.dli_fbase);
        std::snprintf(line, sizeof line, "  %s+0x%zx %s\n", info.dli_fname, static_cast<size_t>(offset),
                      info.dli_sname != nullptr ? info.dli_sname : "");
      } else {
        std::snprintf(line, sizeof line, "  %p\n", d::stacks[k][f]);
      }
      out += line;
    }
  }
  return out;
}

}  // namespace kiln::testing
