#include "compiler/validate/tensor_compare.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "compiler/ir/trace.h"
#include "runtime/kernels/float_storage.h"

namespace kiln::validate {
namespace {

std::string Describe(const TensorView& t) {
  std::string dims;
  for (int32_t d = 0; d < std::min(t.rank, kMaxRank); ++d) dims += (d ? "," : "") + std::to_string(t.dims[d]);
  return fmt::format("{}[{}]", DTypeName(t.dtype), dims);
}

bool Numeric(DType d) { return d != DType::kUndefined && DTypeSize(d) > 0; }

// The view's elements, readable as double through ir::ConstData::FloatAt.
ir::ConstData Copy(const TensorView& t) {
  ir::ConstData c;
  c.dtype = t.dtype;
  c.dims.assign(t.dims, t.dims + t.rank);
  const size_t bytes = static_cast<size_t>(t.num_bytes());
  c.bytes.resize(bytes);
  if (bytes) std::memcpy(c.bytes.data(), t.data, bytes);
  return c;
}

}  // namespace

int64_t CountNonFinite(const void* data, DType dtype, int64_t elements) {
  if (!cpu::IsFloatStorage(dtype)) return 0;
  cpu::TensorRef t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  int64_t n = 0;
  for (int64_t i = 0; i < elements; ++i) n += !std::isfinite(cpu::LoadFloat(t, i));
  return n;
}

Result<ErrorMetrics> CompareTensors(const TensorView& tested, const TensorView& reference) {
  if (!Numeric(tested.dtype) || !Numeric(reference.dtype) || tested.rank != reference.rank ||
      !std::equal(tested.dims, tested.dims + std::min(tested.rank, kMaxRank), reference.dims))
    return InvalidArgument(fmt::format("cannot compare {} with reference {}", Describe(tested), Describe(reference)));
  const ir::ConstData a = Copy(tested), b = Copy(reference);
  ErrorMetrics m;
  m.elements = tested.num_elements();
  double ref_max = 0;
  for (int64_t i = 0; i < m.elements; ++i)
    if (std::isfinite(b.FloatAt(i))) ref_max = std::max(ref_max, std::fabs(b.FloatAt(i)));
  const double floor = ref_max > 0 ? 1e-3 * ref_max : FLT_MIN;
  double dot = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < m.elements; ++i) {
    const double x = a.FloatAt(i), y = b.FloatAt(i);
    if (!std::isfinite(y)) {
      ++m.ref_nonfinite;
      continue;
    }
    if (!std::isfinite(x)) {
      ++m.nonfinite;
      continue;
    }
    ++m.compared;
    const double err = std::fabs(x - y);
    if (err > m.max_abs || m.max_abs_index < 0) {
      m.max_abs = err;
      m.max_abs_index = i;
    }
    m.max_rel = std::max(m.max_rel, err / std::max(std::fabs(y), floor));
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  m.cosine = aa == 0 && bb == 0 ? 1.0 : aa == 0 || bb == 0 ? 0.0 : dot / (std::sqrt(aa) * std::sqrt(bb));
  return m;
}

}  // namespace kiln::validate
