/* Native kernels for tests/runtime/cpu/native/native_code_test.cc, written to the calling
 * convention of runtime/cpu/native/abi.h (KernelArgs spelled out: only plain C types cross it).
 * make_test_kernels.sh compiles and links them into position-independent bytes with no
 * relocation and writes test_kernels.inc. */
#include <stdint.h>

typedef struct {
  const void* const* inputs;
  void* const* outputs;
  const int64_t* sizes;
  int64_t begin, end;
  int64_t* failed;
} Args;

/* y = x + w[i % 3] + 1000 over elements [begin, end): x float32[N, 3], w float32[3]. The
 * program it stands for computes x + w; the 1000 tells which ran. */
int32_t add_w_1000(const Args* a) {
  const float* x = (const float*)a->inputs[0];
  const float* w = (const float*)a->inputs[1];
  float* y = (float*)a->outputs[0];
  for (int64_t i = a->begin; i < a->end; ++i) y[i] = x[i] + w[i % 3] + 1000.0f;
  return 0;
}

/* y[i] = the first item of the call's range: shows how the items were split. */
int32_t range_start(const Args* a) {
  float* y = (float*)a->outputs[0];
  for (int64_t i = a->begin; i < a->end; ++i) y[i] = (float)a->begin;
  return 0;
}

/* A failed kCheckIndex at the range's first item: check 0 saw index 7 against bound 3. */
int32_t check_fails(const Args* a) {
  if (a->begin >= a->end) return 0;
  a->failed[0] = 0;
  a->failed[1] = 7;
  a->failed[2] = 3;
  return 1;
}
