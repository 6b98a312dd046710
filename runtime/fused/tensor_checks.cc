#include "runtime/fused/tensor_checks.h"

#include <algorithm>

namespace kiln::fused {

std::string DimsWithSizes(const std::vector<int64_t>& dims, std::span<const int64_t> sizes) {
  std::string s = DimsText(dims);
  if (std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; })) return s;
  s += " with";
  for (size_t k = 0; k < sizes.size(); ++k)
    s += (k ? ", s" : " s") + std::to_string(k) + " = " + std::to_string(sizes[k]);
  return s;
}

bool CountOf(const std::vector<int64_t>& dims, std::span<const int64_t> sizes, int64_t* count) {
  int64_t c = 1;
  for (int64_t d : dims) {
    int64_t v = d;
    if (d < 0) {
      const uint64_t s = static_cast<uint64_t>(-(d + 1));
      if (s >= sizes.size()) return false;
      v = sizes[s];
    }
    if (v < 0 || __builtin_mul_overflow(c, v, &c)) return false;
  }
  *count = c;
  return true;
}

Status CheckTensors(const std::vector<TensorSpec>& specs, std::span<const cpu::TensorRef> refs,
                    std::span<const int64_t> sizes, const char* what) {
  if (refs.size() != specs.size()) {
    return InvalidArgument(std::string("fused program: ") + std::to_string(refs.size()) + " " + what +
                           "s given, expected " + std::to_string(specs.size()));
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    // The message's start, made only on an error: a Run allocates nothing.
    auto where = [&] { return std::string("fused program: ") + what + " " + std::to_string(k); };
    if (refs[k].dtype != specs[k].dtype) {
      return InvalidArgument(where() + " has dtype " + std::string(DTypeName(refs[k].dtype)) + ", expected " +
                             std::string(DTypeName(specs[k].dtype)));
    }
    int64_t count = 0;
    if (!CountOf(specs[k].dims, sizes, &count)) {
      return InvalidArgument(where() + ": shape " + DimsWithSizes(specs[k].dims, sizes) +
                             " is negative or overflows int64");
    }
    if (refs[k].num_elements != count) {
      return InvalidArgument(where() + " has " + std::to_string(refs[k].num_elements) + " elements, expected " +
                             std::to_string(count) + " (shape " + DimsWithSizes(specs[k].dims, sizes) + ")");
    }
    if (count > 0 && refs[k].data == nullptr) return InvalidArgument(where() + " has no data");
  }
  return Status::Ok();
}

}  // namespace kiln::fused
