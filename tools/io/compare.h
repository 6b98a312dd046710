// tools/io/compare.h: an output against a reference output (`kiln run --expected`), the way
// numpy.allclose(got, want, rtol, atol, equal_nan=True) judges them
// (https://numpy.org/doc/stable/reference/generated/numpy.allclose.html):
// |got - want| <= atol + rtol * |want| per element, a NaN matching only a NaN and an infinity
// only the same infinity. Integer and bool tensors must be equal. dtype and dims must agree.
// Thread-compatible; keeps no state.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/tensor_files.h"

namespace kiln::io {

struct Comparison {
  bool match = false;
  double max_abs_error = 0;   // over the elements (float dtypes; 0 for integer ones)
  double worst_ratio = 0;     // the largest |got - want| / (atol + rtol |want|): <= 1 matches
  int64_t worst_index = -1;   // row-major index of that element, -1 when none
  // One line for people: "NAME: float32[1,2] max|err| 1.2e-06, worst err/tol 0.012 at 5
  // (got 0.25, want 0.25): ok", or what differs (dtype, dims, the first unequal integer).
  std::string line;
};

// `want` and `got` hold dense row-major data of their dtype; atol and rtol are >= 0.
Comparison CompareTensors(const HostTensor& want, const HostTensor& got, double atol, double rtol);

}  // namespace kiln::io
