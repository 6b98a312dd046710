// tools/io/tensor_io.h: host tensors in files, for the tools (kiln run, kiln-run) and the tests.
//
//   KILN_ASSIGN_OR_RETURN(auto inputs, kiln::io::ReadInputDir("test_data_set_0", {"x", "state"}));
//   std::vector<kiln::TensorView> views;
//   for (auto& t : inputs) views.push_back(t.view());
//
// Formats: a serialized ONNX TensorProto (`.pb`, the ONNX backend-test layout; raw_data or
// the typed fields, no external data) and NumPy `.npy` (v1/v2/v3, little-endian, C order).
// Readers never trust a size in the file: every length is checked against the bytes present
// before anything is allocated, and a malformed file is an error naming the file and the
// problem (kDataLoss for truncated or inconsistent data, kUnimplemented for valid files using
// a feature Kiln does not read, kNotFound for a missing file). A file larger than the limits
// below is kResourceExhausted naming the file, its size and the limit, before any allocation.
// Writers go through ReplaceFile (tools/io/replace_file.h) (a temporary made with mkstemp, then a rename): a
// planted link is not followed and an existing non-regular file (a FIFO, a device) is refused
// with kFailedPrecondition instead of blocking or being replaced.
// All functions are thread-compatible; they keep no state between calls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::io {

// A dense row-major tensor that owns its bytes (little-endian elements).
struct HostTensor {
  std::string name;
  kiln::DType dtype = kiln::DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // num_elements() * DTypeSize(dtype) bytes

  // A view of the bytes, valid while this tensor is alive and `bytes` is not resized. The
  // pointer is never null, also for an empty tensor. Memory from std::vector is aligned to
  // at least 16 bytes.
  kiln::TensorView view() const;
  // Product of dims (1 for a scalar); saturates at INT64_MAX, -1 when a dim is negative.
  int64_t num_elements() const;

  // Copies a host view's bytes (data, dtype and dims) into a new tensor.
  static HostTensor FromView(std::string name, const kiln::TensorView& v);
};

// "float32[1,3,224,224]" style description for messages.
std::string Describe(const HostTensor& t);

// The largest files the readers take: protobuf parses at most 2 GiB - 1 bytes; a .npy file may
// hold up to 16 GiB (header and data; the bytes are held twice while reading).
inline constexpr uint64_t kMaxTensorProtoFileBytes = (uint64_t{1} << 31) - 1;
inline constexpr uint64_t kMaxNpyFileBytes = uint64_t{1} << 34;

// ONNX TensorProto (serialized), e.g. test_data_set_0/input_0.pb.
Result<HostTensor> ReadTensorProtoFile(const std::string& path);
// Same from bytes in memory; `origin` names the bytes in error messages.
Result<HostTensor> ParseTensorProto(const void* data, size_t size, std::string_view origin);
// Writes name, data_type, dims and raw_data.
Status WriteTensorProtoFile(const std::string& path, const HostTensor& t);

// NumPy .npy. The tensor's name is the file name without directory and extension.
Result<HostTensor> ReadNpyFile(const std::string& path);
Result<HostTensor> ParseNpy(const void* data, size_t size, std::string_view origin);
// Writes v1 (v2 when the header needs it). bfloat16 has no NumPy dtype: kUnimplemented.
Status WriteNpyFile(const std::string& path, const HostTensor& t);

// The file name an input named `name` has in an input dir: '/' and ':' become '_'.
std::string NpyFileNameForInput(std::string_view name);

// Loads a model's inputs from `dir`, in the order of `input_names`:
//  - `input_N.pb` for N = 0..count-1 when `dir/input_0.pb` exists (ONNX test layout); a
//    tensor whose stored name is not empty must carry the model's input name;
//  - otherwise `NAME.npy` per input (see NpyFileNameForInput).
// Each tensor's name is set to the model's input name.
Result<std::vector<HostTensor>> ReadInputDir(const std::string& dir,
                                             const std::vector<std::string>& input_names);

// The same for reference outputs (`kiln run --expected`): `output_N.pb` for N = 0..count-1 when
// `dir/output_0.pb` exists, else `NAME.npy` per output.
Result<std::vector<HostTensor>> ReadOutputDir(const std::string& dir,
                                              const std::vector<std::string>& output_names);

// Writes `output_N.pb` for each tensor into `dir`, creating the folder when missing.
Status WriteOutputDir(const std::string& dir, const std::vector<HostTensor>& outputs);

}  // namespace kiln::io
