// Element-wise comparison of a reduced-precision result with its float32 reference, for the
// `kiln compile --validate` accuracy report (precision_report.h).
//
// Definitions, over the elements where both tensors are finite (the others are counted, not
// compared):
//  - max abs error: max_i |a_i - b_i|, with a the tested tensor and b the reference;
//  - max rel error: max_i |a_i - b_i| / max(|b_i|, floor), floor = 1e-3 * max_j |b_j| (the
//    reference's largest magnitude; FLT_MIN when the reference is all zeros). The floor keeps
//    elements near zero, whose relative error says nothing about the result, from dominating:
//    an element smaller than a thousandth of the tensor's largest counts relative to that;
//  - cosine similarity: sum a_i b_i / sqrt(sum a_i^2 * sum b_i^2), accumulated in double;
//    1 when both are all zeros, 0 when only one is.
// Every numeric dtype is read as double (float16 and bfloat16 exactly, runtime/half.h).
// Thread-compatible, no state.
#pragma once

#include <cstdint>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::validate {

struct ErrorMetrics {
  int64_t elements = 0;
  int64_t compared = 0;       // elements finite in both
  double max_abs = 0;
  double max_rel = 0;
  double cosine = 1;
  int64_t max_abs_index = -1;  // flat row-major index of the largest abs error (-1: none compared)
  int64_t nonfinite = 0;       // inf or NaN in the tested tensor where the reference is finite
  int64_t ref_nonfinite = 0;   // inf or NaN in the reference
};

// Compares host tensors of the same shape; dtypes may differ (float16 against float32).
// Errors: kInvalidArgument when the shapes differ or a dtype is not numeric, naming both.
Result<ErrorMetrics> CompareTensors(const TensorView& tested, const TensorView& reference);

// Elements of a host tensor that are inf or NaN; 0 for integer and bool dtypes.
int64_t CountNonFinite(const void* data, DType dtype, int64_t elements);

}  // namespace kiln::validate
