// npy_body.h: tensors as raw bytes, one .npy file (numpy's format, versions 1.0 to 3.0) each.
//
// A request is a multipart/form-data body with one part per model input, the part's name being
// the input's name and its content a .npy file:
//   curl -F input=@x.npy -F state=@state.npy -F sr=@sr.npy http://127.0.0.1:8080/v1/infer
// The response is multipart/form-data too, one part per output, named after it, each a .npy file
// (Content-Type: application/x-npy). Accepted .npy files: little-endian or byte-sized dtypes
// ('<f4', '<f8', '<f2', '|i1', '|u1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8', '|b1'),
// fortran_order False, data exactly shape's product elements. bfloat16 has no .npy dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inputs.h"
#include "kiln/runtime.h"

// Adds input `name` from the bytes of a .npy file. kInvalidArgument naming the input and what is
// wrong: "input 'x': .npy header: expected ',' or '}' at byte 31", "input 'x': .npy dtype '>f4'
// is big-endian; send little-endian data", "input 'x': .npy has 7 data bytes, not a multiple of
// 4 (float32)", a bool byte other than 0 or 1, or one of RequestInputs::Add's.
kiln::Status ParseNpyInput(std::string_view name, std::string_view npy, RequestInputs& inputs);

// A .npy file (version 1.0) holding `t`. kUnimplemented for bfloat16.
kiln::Result<std::string> WriteNpy(const kiln::TensorView& t);

struct MultipartBody {
  std::string content_type;  // "multipart/form-data; boundary=..."
  std::string body;
};

// The response body for the outputs of one Run (in Model::outputs() order, `infos`): one .npy
// part per output. Errors: WriteNpy's, naming the output.
kiln::Result<MultipartBody> NpyMultipartOutputs(const std::vector<kiln::TensorInfo>& infos,
                                                const std::vector<kiln::TensorView>& outputs);
