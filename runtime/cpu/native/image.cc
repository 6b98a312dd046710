#include "runtime/cpu/native/image.h"
#include "runtime/fault_injection.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kiln::native {

using std::to_string;

NativeImage::~NativeImage() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

Result<std::unique_ptr<NativeImage>> NativeImage::Map(const uint8_t* code, uint64_t bytes,
                                                      std::span<const std::pair<uint32_t, uint32_t>> functions,
                                                      uint32_t num_kernels, std::string* refused) {
  // Map: anonymous read + write, copy, then read + execute.
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t psize = page > 0 ? static_cast<size_t>(page) : 4096;
  const size_t map_bytes = (static_cast<size_t>(bytes) + psize - 1) / psize * psize;
  void* map = fault::Inject("native code mapping")
                  ? (errno = ENOMEM, MAP_FAILED)
                  : ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return ResourceExhausted("cannot map " + to_string(bytes) + " bytes of code: " + std::strerror(errno));
  std::unique_ptr<NativeImage> image(new NativeImage);
  image->map_ = map;
  image->map_bytes_ = map_bytes;
  image->bytes_ = bytes;
  std::memcpy(map, code, static_cast<size_t>(bytes));
  if (::mprotect(map, map_bytes, PROT_READ | PROT_EXEC) != 0) {
    *refused = std::string("the system refuses executable memory (mprotect: ") + std::strerror(errno) + ")";
    return std::unique_ptr<NativeImage>();  // `image` unmaps it
  }
#if defined(__aarch64__)
  __builtin___clear_cache(static_cast<char*>(map), static_cast<char*>(map) + bytes);  // copied code to the instruction cache
#endif
  image->functions_.assign(num_kernels, nullptr);
  for (const auto& [kernel, offset] : functions)  // an address in mapped code as a function, as dlsym gives one
    if (kernel < num_kernels && offset < bytes)
      image->functions_[kernel] = reinterpret_cast<KernelFn>(static_cast<uint8_t*>(map) + offset);
  return image;
}

}  // namespace kiln::native
