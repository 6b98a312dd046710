// A Triton model configuration (the JSON form of config.pbtxt that Triton hands a backend,
// https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md)
// read against a Kiln artifact: auto-completed from it, checked against it, and its Kiln
// parameters parsed. Pure functions of the artifact and the JSON, used by the backend
// (serving/triton/backend.cc) and the unit tests; no Triton API function is called here (only
// its data type enum is named).
//
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "serving/triton/triton_api.h"

namespace kiln::triton {

// Triton's names of a Kiln dtype: in a configuration ("TYPE_FP32"; "" for none), and in its
// C API (TRITONSERVER_TYPE_FP32; TRITONSERVER_TYPE_INVALID for none); and the Kiln dtype of a
// Triton data type (DType::kUndefined for none, such as BYTES).
std::string ConfigDataType(DType dtype);
TRITONSERVER_DataType TritonDataType(DType dtype);
DType DTypeOfTriton(TRITONSERVER_DataType type);

// The batch symbol of `model`: the symbol that is dim 0 of every input and output (its
// DimInfo::symbol, "N"), so that Triton may stack requests along dim 0; "" when there is none
// (an input of rank 0, a constant or different first dim, or no inputs). Where profiles fix
// the batch in every entry (`x:N=1`, `x:N=4`), an output's dim 0 reads "1|4": it is the batch
// when those are the entries' batches.
std::string BatchSymbol(const Model& model);

// Whether some entry of `model` accepts a batch of `rows`: its prologue passes `rows` as dim 0
// of every input (EntryInfo::input_dims; the entries' guards are not read). With compile
// profiles such as `x:N=1`, `x:N=4`, `x:N=8..64:8` only those sizes run.
bool AcceptsBatch(const Model& model, int64_t rows);

// The batch sizes from 1 to `max_batch_size` that no entry accepts, as text ("2..3, 5..7"; ""
// when every size runs; at most 8 ranges, then "..."): Triton's dynamic batcher may form such a
// batch, which the backend then splits into sizes that run, but a request of that many rows
// fails.
std::string BatchGaps(const Model& model, int64_t max_batch_size);

// The configuration with what it leaves out filled in from the artifact, as Triton's
// --strict-model-config=false asks (TRITONBACKEND_ModelAutoCompleteConfig):
//  - max_batch_size: when it is 0, the configuration lists no inputs and the model has a batch
//    symbol, `default_max_batch_size` (the backend's --backend-config=kiln,default-max-batch-size=N,
//    4 by default as for Triton's other backends; 0 keeps batching off), or the largest size
//    below it that an entry accepts (AcceptsBatch; none: 0). Triton's JSON cannot
//    tell an explicit 0 from none: listing the inputs with their dim 0 keeps it 0;
//  - input / output: when the list is empty, every input / output of the artifact, with its
//    name, data_type and dims (-1 where symbolic; the batch dim left out when max_batch_size
//    is above 0). Triton needs at least one dim, so what has none left is declared [1]: with a
//    reshape to [] in a batched model (rows of an [N] tensor), and as such in an unbatched one,
//    whose scalar the backend reads and writes (Triton refuses an empty reshape there).
// Everything else is kept as given. The result still has to pass CheckConfig.
nlohmann::json AutoCompleteConfig(const Model& model, nlohmann::json config, int64_t default_max_batch_size);

// Checks a configuration against the artifact. kInvalidArgument listing every mismatch, one per
// line, each naming the tensor and the field: an input or output the artifact lacks, a
// data_type, a rank, a dim (a constant where the artifact has another constant, or -1 where
// the artifact fixes the dim), an artifact input that the configuration leaves out, and a
// max_batch_size above 0 for a model without a batch symbol or that no entry accepts as a
// batch (AcceptsBatch: a request of that many rows could never run), and a tensor listed twice. A
// tensor with a reshape is compared by the reshape's shape, which is what the backend sees;
// in an unbatched model dims [1] fit a scalar. Dims are read as numbers or as the strings
// protobuf's JSON mapping writes for int64.
Status CheckConfig(const Model& model, const nlohmann::json& config);

// Where an instance runs (parameter `device`): `auto` follows the instance group's kind
// (KIND_CPU: the CPU backend; KIND_GPU: the CUDA backend on the group's GPU), `cpu` and `cuda`
// force one.
enum class DevicePolicy { kAuto, kCpu, kCuda };

// The Kiln parameters of a configuration (its `parameters` map, each a {"string_value": ...}):
//   cpu_threads  CpuOptions::threads, 0 (one per core) to 256; default 1, so that
//                instances (Triton's unit of parallelism) do not share cores
//   cuda_graphs  "true" / "false": CudaOptions::graphs; default false
//   device       "auto" (default), "cpu" or "cuda": DevicePolicy
// kInvalidArgument naming the parameter for an unknown name or a value out of range.
struct Parameters {
  int cpu_threads = 1;
  bool cuda_graphs = false;
  DevicePolicy device = DevicePolicy::kAuto;
};
Result<Parameters> ReadParameters(const nlohmann::json& config);

// The model as the backend serves it: the checked configuration's max_batch_size, and its
// parameters.
struct ServingConfig {
  int64_t max_batch_size = 0;  // 0: requests are not batched; their shapes are the model's
  Parameters parameters;
};
// CheckConfig, then ReadParameters.
Result<ServingConfig> ReadServingConfig(const Model& model, const nlohmann::json& config);

}  // namespace kiln::triton
