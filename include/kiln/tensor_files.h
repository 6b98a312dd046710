// kiln/tensor_files.h: host tensors in files and in memory, as `kiln run` reads and writes them.
// Library Kiln::tensor_files (libkiln_tensor_files.a, find_package(Kiln COMPONENTS
// tensor_files)); it links Kiln::runtime and nothing else: no protobuf, no NumPy.
//
//   KILN_ASSIGN_OR_RETURN(auto inputs, kiln::io::ReadInputDir("test_data_set_0", {"x", "state"}));
//   std::vector<kiln::TensorView> views;
//   for (auto& t : inputs) views.push_back(t.view());
//
// Formats:
//  - ONNX TensorProto, serialized (`.pb`, the layout of ONNX's backend test data; raw_data or
//    the typed fields; no external data), read and written from the protobuf wire format
//    (https://protobuf.dev/programming-guides/encoding/) without protobuf's library;
//  - NumPy `.npy` (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//    versions 1.0 to 3.0, little-endian or byte-sized dtypes, C order.
// Readers never trust a size in the data: every length is checked against the bytes present
// before anything is allocated, and malformed data is an error naming its origin (the file, or
// the `origin` given) and the problem: kDataLoss for truncated or inconsistent data,
// kUnimplemented for valid data using a feature Kiln does not read (a big-endian or structured
// dtype, Fortran order, external data), kNotFound for a missing file. A file larger than the
// limits below is kResourceExhausted naming the file, its size and the limit, before any
// allocation. Files are written to a temporary made with mkstemp and then renamed over the
// path: a planted link is not followed, and an existing non-regular file (a FIFO, a device) is
// refused with kFailedPrecondition instead of blocking or being replaced.
// Thread safety: every function may be called from any thread; none keeps state between calls.
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
// The bytes of a .npy file holding `t`: version 1.0 (2.0 when the header needs it), its data at
// a multiple of 64 bytes. bfloat16 has no NumPy dtype: kUnimplemented; bytes that do not match
// dims and dtype: kInvalidArgument.
Result<std::string> SerializeNpy(const HostTensor& t);
// Writes SerializeNpy's bytes to `path`.
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
