// npy_body.h: tensors as raw bytes, one .npy file each, read and written by Kiln's tensor files
// library (kiln/tensor_files.h, Kiln::tensor_files: numpy's format, versions 1.0 to 3.0).
//
// A request is a multipart/form-data body with one part per model input, the part's name being
// the input's name and its content a .npy file:
//   curl -F input=@x.npy -F state=@state.npy -F sr=@sr.npy http://127.0.0.1:8080/v1/infer
// The response is multipart/form-data too, one part per output, named after it, each a .npy file
// (Content-Type: application/x-npy). Accepted .npy files: little-endian or byte-sized dtypes,
// C order, data exactly the shape's product elements. bfloat16 has no .npy dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inputs.h"
#include "kiln/runtime.h"

// Adds input `name` from the bytes of a .npy file. kInvalidArgument naming the input and what is
// wrong, as kiln::io::ParseNpy finds it: "input 'x': .npy: not a .npy file (missing the \x93NUMPY
// magic)", "input 'x': .npy: big-endian data (descr '>f4') is not supported; ...", "input 'x':
// .npy: truncated: shape [4] of float32 needs 16 data bytes but the file has 13", or one of
// RequestInputs::Add's.
kiln::Status ParseNpyInput(std::string_view name, std::string_view npy, RequestInputs& inputs);

struct MultipartBody {
  std::string content_type;  // "multipart/form-data; boundary=..."
  std::string body;
};

// The response body for the outputs of one Run (in Model::outputs() order, `infos`): one .npy
// part per output. Errors: kiln::io::SerializeNpy's (kUnimplemented for bfloat16), naming the
// output.
kiln::Result<MultipartBody> NpyMultipartOutputs(const std::vector<kiln::TensorInfo>& infos,
                                                const std::vector<kiln::TensorView>& outputs);
