#include "runtime/cpu/native/image.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "runtime/cpu/native/target.h"
#include "schema/kiln_generated.h"

namespace kiln::native {
namespace {

using std::to_string;

}  // namespace

NativeImage::~NativeImage() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

Result<NativeImage::Loaded> NativeImage::Load(const fb::Artifact& a, uint32_t num_kernels, bool allowed) {
  Loaded out;
  const auto* all = a.native_code();
  const uint32_t n = all ? all->size() : 0;
  if (n == 0) {
    out.note = "the artifact has no native code";
    return out;
  }
  if (!allowed) {
    out.note = "native code refused (LoadOptions::native_code is false)";
    return out;
  }
  std::vector<std::string_view> targets(n);
  for (uint32_t i = 0; i < n; ++i) {
    const flatbuffers::String* t = all->Get(i)->target();
    targets[i] = t ? t->string_view() : std::string_view();
  }
  const TargetChoice choice = ChooseTarget(targets);
  out.note = choice.why;
  if (choice.index < 0) return out;
  const fb::NativeCode& nc = *all->Get(static_cast<uint32_t>(choice.index));
  const std::string where = "native_code " + to_string(choice.index) + " '" + std::string(targets[choice.index]) + "'";
  if (nc.abi() != kAbiVersion) {
    out.note = where + ": calling convention " + to_string(nc.abi()) + ", this runtime's is " +
               to_string(kAbiVersion) + " (runtime/cpu/native/abi.h)";
    return out;
  }
  const auto* code = nc.code();
  const uint64_t bytes = code ? code->size() : 0;
  if (bytes == 0) return DataLoss(where + ": code is empty");
  if (bytes > kMaxCodeBytes)
    return DataLoss(where + ": code of " + to_string(bytes) + " bytes is above the limit of " +
                    to_string(kMaxCodeBytes) + " bytes");
  const bool aarch64 = targets[choice.index] == "aarch64";
  const auto* kernels = nc.kernels();
  const uint32_t nk = kernels ? kernels->size() : 0;
  for (uint32_t j = 0; j < nk; ++j) {
    const fb::NativeKernel* k = kernels->Get(j);
    const std::string at = where + " kernels " + to_string(j);
    if (k->kernel() >= num_kernels)
      return DataLoss(at + ": kernel " + to_string(k->kernel()) + " out of range (kernels: " + to_string(num_kernels) + ")");
    if (j > 0 && k->kernel() <= kernels->Get(j - 1)->kernel())
      return DataLoss(at + ": kernel " + to_string(k->kernel()) + " after kernel " +
                      to_string(kernels->Get(j - 1)->kernel()) + " (kernels must be strictly ascending)");
    if (k->offset() >= bytes)
      return DataLoss(at + ": offset " + to_string(k->offset()) + " out of range (code bytes: " + to_string(bytes) + ")");
    if (aarch64 && k->offset() % 4 != 0)
      return DataLoss(at + ": offset " + to_string(k->offset()) + " is not a multiple of 4");
  }

  // Map: anonymous read + write, copy, then read + execute.
  const long page = ::sysconf(_SC_PAGESIZE);
  const size_t psize = page > 0 ? static_cast<size_t>(page) : 4096;
  const size_t map_bytes = (static_cast<size_t>(bytes) + psize - 1) / psize * psize;
  void* map = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return ResourceExhausted(where + ": cannot map " + to_string(bytes) + " bytes of code: " + std::strerror(errno));
  std::unique_ptr<NativeImage> image(new NativeImage);
  image->map_ = map;
  image->map_bytes_ = map_bytes;
  image->bytes_ = bytes;
  std::memcpy(map, code->data(), static_cast<size_t>(bytes));
  if (::mprotect(map, map_bytes, PROT_READ | PROT_EXEC) != 0) {
    out.note = where + ": the system refuses executable memory (mprotect: " + std::strerror(errno) + ")";
    return out;  // `image` unmaps it
  }
#if defined(__aarch64__)
  __builtin___clear_cache(static_cast<char*>(map), static_cast<char*>(map) + bytes);  // copied code to the instruction cache
#endif
  image->functions_.assign(num_kernels, nullptr);
  for (uint32_t j = 0; j < nk; ++j) {
    const fb::NativeKernel* k = kernels->Get(j);
    // The documented way to make a function pointer from an address in mapped code (POSIX dlsym does the same).
    image->functions_[k->kernel()] = reinterpret_cast<KernelFn>(static_cast<uint8_t*>(map) + k->offset());
  }
  out.image = std::move(image);
  out.target = std::string(targets[choice.index]);
  return out;
}

}  // namespace kiln::native
