// Fuzz target: bytes -> the `.npy` and `.pb` (ONNX TensorProto) readers of
// kiln/tensor_files.h, both on every input. A reader may fail with a Status; it may not
// crash, leak or allocate more than the bytes present justify, and a tensor it returns must
// hold exactly num_elements x element size bytes.
// Seeds: test_data_set_*/*.pb of the ONNX node tests and real models, and .npy files made
// from them (scripts/sanitize.sh).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kiln/tensor_files.h"

namespace {

void Check(const kiln::Result<kiln::io::HostTensor>& t) {
  if (!t.ok()) return;
  const int64_t n = t->num_elements();
  const uint64_t expected = static_cast<uint64_t>(n) * kiln::DTypeSize(t->dtype);
  if (n < 0 || t->bytes.size() != expected) {
    std::fprintf(stderr, "reader returned %s with %zu bytes, expected %llu\n", kiln::io::Describe(*t).c_str(),
                 t->bytes.size(), static_cast<unsigned long long>(expected));
    std::abort();
  }
  (void)t->view();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Check(kiln::io::ParseNpy(data, size, "fuzz.npy"));
  Check(kiln::io::ParseTensorProto(data, size, "fuzz.pb"));
  return 0;
}
