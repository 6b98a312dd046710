#include "runtime/cpu/native/load.h"

#include <string_view>
#include <utility>

#include "runtime/cpu/native/target.h"
#include "schema/kiln_generated.h"

namespace kiln::native {

using std::to_string;

Result<LoadedNativeCode> LoadNativeCode(const fb::Artifact& a, uint32_t num_kernels, bool allowed) {
  LoadedNativeCode out;
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

  std::vector<std::pair<uint32_t, uint32_t>> functions(nk);
  for (uint32_t j = 0; j < nk; ++j) functions[j] = {kernels->Get(j)->kernel(), kernels->Get(j)->offset()};
  std::string refused;
  KILN_ASSIGN_OR_RETURN(out.image, NativeImage::Map(code->data(), bytes, functions, num_kernels, &refused));
  if (!out.image) {
    out.note = where + ": " + refused;
    return out;
  }
  out.target = std::string(targets[choice.index]);
  return out;
}

}  // namespace kiln::native
