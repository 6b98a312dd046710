#include "tools/io/compare.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/half.h"

namespace kiln::io {
namespace {

bool IsFloat(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kFloat16 || dt == DType::kBFloat16;
}

double FloatAt(DType dt, const uint8_t* data, int64_t i) {
  switch (dt) {
    case DType::kFloat32: { float v; std::memcpy(&v, data + 4 * i, 4); return v; }
    case DType::kFloat64: { double v; std::memcpy(&v, data + 8 * i, 8); return v; }
    case DType::kFloat16: { uint16_t v; std::memcpy(&v, data + 2 * i, 2); return HalfToFloat(v); }
    default: { uint16_t v; std::memcpy(&v, data + 2 * i, 2); return BF16ToFloat(v); }
  }
}

}  // namespace

Comparison CompareTensors(const HostTensor& want, const HostTensor& got, double atol, double rtol) {
  Comparison c;
  const std::string head = fmt::format("{}: {}", want.name, Describe(want));
  if (got.dtype != want.dtype || got.dims != want.dims) {
    c.line = fmt::format("{}: expected {}, found {}: MISMATCH", want.name, Describe(want), Describe(got));
    return c;
  }
  const int64_t n = want.num_elements();
  const size_t esize = DTypeSize(want.dtype);
  if (n < 0 || want.bytes.size() != static_cast<size_t>(n) * esize || got.bytes.size() != want.bytes.size()) {
    c.line = fmt::format("{}: the data is not {} elements of {} bytes: MISMATCH", head, n, esize);
    return c;
  }
  if (!IsFloat(want.dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(got.bytes.data() + i * esize, want.bytes.data() + i * esize, esize) != 0) {
        c.worst_index = i;
        c.worst_ratio = std::numeric_limits<double>::infinity();
        c.line = fmt::format("{}: element {} differs (integer and bool outputs must be equal): MISMATCH", head, i);
        return c;
      }
    }
    c.match = true;
    c.line = head + ": equal: ok";
    return c;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double g = FloatAt(want.dtype, got.bytes.data(), i), w = FloatAt(want.dtype, want.bytes.data(), i);
    double err = 0;
    if (std::isnan(g) || std::isnan(w)) err = std::isnan(g) && std::isnan(w) ? 0 : std::numeric_limits<double>::infinity();
    else if (std::isinf(g) || std::isinf(w)) err = g == w ? 0 : std::numeric_limits<double>::infinity();
    else err = std::fabs(g - w);
    const double tol = atol + rtol * (std::isfinite(w) ? std::fabs(w) : 0.0);
    const double ratio = err == 0 ? 0 : tol > 0 ? err / tol : std::numeric_limits<double>::infinity();
    if (c.worst_index < 0 || ratio > c.worst_ratio) c.worst_ratio = ratio, c.worst_index = i;
    if (err > c.max_abs_error) c.max_abs_error = err;
  }
  c.match = c.worst_ratio <= 1;
  if (n == 0) {
    c.line = head + ": empty: ok";
    return c;
  }
  c.line = fmt::format("{}: max|err| {:.3g}, worst err/tol {:.3g} at {} (got {:.9g}, want {:.9g}): {}", head,
                       c.max_abs_error, c.worst_ratio, c.worst_index,
                       FloatAt(want.dtype, got.bytes.data(), c.worst_index),
                       FloatAt(want.dtype, want.bytes.data(), c.worst_index), c.match ? "ok" : "MISMATCH");
  return c;
}

}  // namespace kiln::io
