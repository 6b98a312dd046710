// json_body.h: tensors as JSON (Content-Type: application/json).
//
//   request:  {"inputs":  {"input": {"dtype": "float32", "shape": [1, 576], "data": [0.1, ...]},
//                          "sr":    {"dtype": "int64",   "shape": [],       "data": [16000]}}}
//   response: {"outputs": {"output": {"dtype": "float32", "shape": [1, 1], "data": [0.012]}, ...}}
//
// `data` is flat, in row-major order (numpy: x.ravel().tolist()), shape's product elements long.
// Floating-point elements are JSON numbers, or the strings "nan", "inf", "-inf" (JSON has no
// literal for them); integers must be JSON integers within the dtype's range; bool elements are
// true/false. float16 and bfloat16 tensors are not carried in JSON (send .npy parts, npy_body.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "inputs.h"
#include "kiln/runtime.h"

// Fills `inputs` from a request body. kInvalidArgument with a message that says where: "invalid
// JSON at byte 7: ..." (the parser's own message, with line and column), "inputs.input.data[3]:
// expected a number, found string", or one of RequestInputs::Add's. Never throws.
kiln::Status ParseJsonInputs(std::string_view body, RequestInputs& inputs);

// The response body for the outputs of one Run (in Model::outputs() order, `infos`).
// kUnimplemented naming the output if one is float16 or bfloat16. Never throws.
kiln::Result<std::string> JsonOutputs(const std::vector<kiln::TensorInfo>& infos,
                                      const std::vector<kiln::TensorView>& outputs);
