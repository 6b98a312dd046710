// The kernel cache: compiled kernels on disk, keyed by the XXH64 of everything that decides
// their bytes, shared by every compile on the machine (and by several processes at once).
// NVRTC's cubins and PTX (nvrtc_compiler.h) and LLVM's native CPU objects (cpu/llvm_image.h)
// both live in it, told apart by their file suffix.
//
//   KernelCache cache(options.cache_dir, options.use_cache);
//   const uint64_t key = KernelCache::Key(source + '\0' + arch + '\0' + compiler_version);
//   if (!cache.Read(key, ".cubin", &bytes)) { bytes = Compile(); cache.Write(key, ".cubin", bytes); }
//
// An entry is one file, <16 hex digits of the key><suffix>: an 8-byte magic, the payload's size,
// its XXH64 and the key (little-endian u64s), then the payload. Entries are written to a
// temporary file and renamed, so readers never see half a file; an entry that cannot be read,
// names another key or fails its checksum is a miss, and the caller rewrites it. The cache is
// an optimisation: no failure in it ever fails a compile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::codegen {

// $XDG_CACHE_HOME/kiln/kernels (an absolute XDG_CACHE_HOME), else $HOME/.cache/kiln/kernels;
// empty when neither is set.
std::string DefaultKernelCacheDir();

class KernelCache {
 public:
  // The cache in `dir` (empty: DefaultKernelCacheDir()), created if missing. Off when `enabled`
  // is false, or when the folder cannot be created (compiles then simply miss).
  KernelCache(const std::string& dir, bool enabled);

  bool enabled() const { return !dir_.empty(); }

  // The key of an entry: XXH64 of `text`, which must hold everything that decides the bytes.
  static uint64_t Key(std::string_view text);

  // The payload stored under `key` with file suffix `suffix` (".cubin", ".ptx", ".o-x86-64-v3"),
  // or false (a miss). Thread-safe.
  bool Read(uint64_t key, std::string_view suffix, std::vector<uint8_t>* payload) const;

  // Stores `payload` under `key`. Failures are ignored. Thread-safe; concurrent writers of one
  // key leave one whole entry.
  void Write(uint64_t key, std::string_view suffix, const std::vector<uint8_t>& payload) const;

 private:
  std::string Path(uint64_t key, std::string_view suffix) const;
  std::string dir_;
};

}  // namespace kiln::codegen
