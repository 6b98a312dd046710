// libtriton_kiln.so: Kiln as a Triton Inference Server backend (serving/triton/README.md).
// Triton loads it from <backend-directory>/kiln/ for a model whose configuration says
// `backend: "kiln"`, and calls the entry points below (Triton's tritonbackend.h; the subset
// used is serving/triton/triton_api.h):
//  - TRITONBACKEND_Initialize: checks the server's backend API version; reads the backend's
//    --backend-config=kiln,default-max-batch-size=N (4 when absent).
//  - TRITONBACKEND_ModelInitialize: loads <model>/<version>/model.kiln (or the configuration's
//    default_model_filename) once per model; auto-completes the configuration from the artifact
//    when Triton asks (--strict-model-config=false), then checks it (model_config.h). A corrupt
//    artifact or a configuration that does not fit fails this model's load with Kiln's message;
//    the server and its other models go on.
//  - TRITONBACKEND_ModelInstanceInitialize: one kiln::ExecutionContext per instance: KIND_CPU
//    instances on the CPU backend (`cpu_threads`), KIND_GPU ones on the CUDA backend on the
//    group's GPU (`cuda_graphs`); parameter `device` overrides the kind. On CUDA the inputs go
//    from Triton's host buffers to the device inside Run, and the outputs come back through
//    ExecutionContext::CopyOutputs on the default stream.
//  - TRITONBACKEND_ModelInstanceExecute: runs a batch of requests. With max_batch_size above 0
//    the requests (Triton's dynamic batcher forms the batch) are stacked along dim 0 into one
//    Run and the outputs split back; requests whose other dims differ, or a stacked batch that no
//    entry accepts, run one by one, so only a request that cannot run fails, with Kiln's reason.
//    Each request's statistics go to Triton: compute-input is the gathering (and checks),
//    compute-infer the Run, compute-output the copies into the responses.
// The Model is shared by the instances (it is thread-safe); each context is used by its
// instance's thread only, as Triton runs one Execute per instance at a time.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "runtime/shape_text.h"
#include "serving/triton/model_config.h"
#include "serving/triton/triton_api.h"

namespace {

using kiln::DType;
using kiln::Status;
using kiln::TensorView;
using nlohmann::json;
using std::to_string;

// The tritonbackend.h minor version these declarations follow (serving/triton/triton_api.h).
constexpr uint32_t kBackendApiMinor = 19;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

TRITONSERVER_Error* Error(TRITONSERVER_Error_Code code, const std::string& message) {
  return TRITONSERVER_ErrorNew(code, message.c_str());
}

// A Kiln status as Triton's error: the caller's mistakes are INVALID_ARG, limits UNAVAILABLE.
TRITONSERVER_Error* ErrorOf(const Status& s) {
  if (s.ok()) return nullptr;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  switch (s.code()) {
    case kiln::StatusCode::kInvalidArgument:
    case kiln::StatusCode::kOutOfRange:
    case kiln::StatusCode::kDataLoss: code = TRITONSERVER_ERROR_INVALID_ARG; break;
    case kiln::StatusCode::kNotFound: code = TRITONSERVER_ERROR_NOT_FOUND; break;
    case kiln::StatusCode::kResourceExhausted:
    case kiln::StatusCode::kFailedPrecondition: code = TRITONSERVER_ERROR_UNAVAILABLE; break;
    case kiln::StatusCode::kIncompatible:
    case kiln::StatusCode::kUnimplemented: code = TRITONSERVER_ERROR_UNSUPPORTED; break;
    default: break;
  }
  return Error(code, std::string(s.message()));
}

void Log(TRITONSERVER_LogLevel level, int line, const std::string& message) {
  if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, __FILE__, line, message.c_str())) TRITONSERVER_ErrorDelete(e);
}

#define KILN_TRITON_RETURN_IF_ERROR(expr)      \
  do {                                         \
    if (TRITONSERVER_Error* e_ = (expr)) return e_; \
  } while (0)

// A Triton message's JSON, parsed; `what` names it in the error.
TRITONSERVER_Error* ParseMessage(TRITONSERVER_Message* message, const char* what, json* out) {
  const char* base = nullptr;
  size_t size = 0;
  KILN_TRITON_RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(message, &base, &size));
  *out = json::parse(base, base + size, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return Error(TRITONSERVER_ERROR_INTERNAL, std::string(what) + " is not valid JSON");
  return nullptr;
}

struct BackendState {
  int64_t default_max_batch_size = 4;
};

struct ModelState {
  std::string name;
  kiln::Model model;
  kiln::triton::ServingConfig config;
};

// One request's inputs, in the model's input order, as views of Triton's buffers (or of
// `joined` where Triton split an input into several buffers, or gave an unaligned one).
struct RequestInputs {
  std::vector<TensorView> views;
  std::vector<std::vector<uint8_t>> joined;
  int64_t batch = 1;  // dim 0 of its inputs when the model is batched; 1 otherwise
};

// An instance's buffers are kept from one Execute to the next, so that serving the same
// shapes again allocates nothing (a fresh multi-megabyte buffer per request costs its page
// faults).
struct InstanceState {
  InstanceState(std::string name_, const ModelState* model_, kiln::ExecutionContext context_)
      : name(std::move(name_)), model(model_), context(std::move(context_)) {}

  std::string name;
  const ModelState* model = nullptr;
  kiln::ExecutionContext context;
  std::vector<std::vector<uint8_t>> stacked;       // per model input: a stacked batch
  std::vector<std::vector<uint8_t>> host_outputs;  // CUDA backend: the outputs copied to the host
  std::vector<RequestInputs> requests;             // per request of the batch
  std::vector<TRITONBACKEND_Request*> ready;       // the requests whose inputs were read, and theirs
  std::vector<const RequestInputs*> ready_inputs;
  std::vector<int64_t> batches;
  std::vector<TensorView> stacked_views;
  std::vector<TensorView> outputs;     // the context's views of the last Run's outputs
  std::vector<TensorView> host_views;  // CUDA backend: host_outputs as views
};

// Reads `request`'s inputs against the model's: each present once, with the model's dtype and
// as many bytes as its shape says, in CPU memory or, for a CUDA instance (`device`), in one
// GPU buffer.
Status ReadInputs(TRITONBACKEND_Request* request, const ModelState& m, bool device, RequestInputs* out) {
  const std::vector<kiln::TensorInfo>& model_inputs = m.model.inputs();
  out->views.assign(model_inputs.size(), TensorView{});
  out->joined.resize(model_inputs.size());
  for (std::vector<uint8_t>& j : out->joined) j.clear();  // keeps its capacity
  out->batch = 1;
  std::vector<bool> seen(model_inputs.size(), false);
  uint32_t count = 0;
  auto triton = [](TRITONSERVER_Error* e) {
    if (e == nullptr) return Status::Ok();
    Status s = kiln::InvalidArgument(TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
    return s;
  };
  KILN_RETURN_IF_ERROR(triton(TRITONBACKEND_RequestInputCount(request, &count)));
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    const char* name = nullptr;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t bytes = 0;
    KILN_RETURN_IF_ERROR(triton(TRITONBACKEND_RequestInputByIndex(request, i, &input)));
    KILN_RETURN_IF_ERROR(triton(TRITONBACKEND_InputProperties(input, &name, &datatype, &shape, &rank, &bytes, &buffers)));
    const auto it = std::find_if(model_inputs.begin(), model_inputs.end(),
                                 [&](const kiln::TensorInfo& t) { return t.name == name; });
    if (it == model_inputs.end()) return kiln::InvalidArgument("input '" + std::string(name) + "': the model has no such input");
    const size_t k = static_cast<size_t>(it - model_inputs.begin());
    if (seen[k]) return kiln::InvalidArgument("input '" + std::string(name) + "' is given twice");
    seen[k] = true;
    const DType dtype = kiln::triton::DTypeOfTriton(datatype);
    if (dtype != it->dtype)
      return kiln::InvalidArgument("input '" + it->name + "': data type " +
                                   (dtype != DType::kUndefined ? std::string(kiln::DTypeName(dtype))
                                                               : "of Triton type " + to_string(datatype)) +
                                   ", the model expects " + std::string(kiln::DTypeName(it->dtype)));
    if (rank > static_cast<uint32_t>(kiln::kMaxRank))
      return kiln::InvalidArgument("input '" + it->name + "': rank " + to_string(rank) + " above " + to_string(kiln::kMaxRank));
    TensorView& v = out->views[k];
    v = TensorView::Host(nullptr, dtype, shape, static_cast<int32_t>(rank));
    // A scalar input comes as [1] (its configuration's dims: Triton serves no scalars).
    if (it->shape.empty() && rank == 1 && shape[0] == 1) v.rank = 0;
    if (static_cast<uint64_t>(v.num_bytes()) != bytes) {
      return kiln::InvalidArgument("input '" + it->name + "': " + to_string(bytes) + " bytes, but shape " +
                                   kiln::ShapeText({shape, rank}) + " of " + std::string(kiln::DTypeName(dtype)) +
                                   " needs " +
                                   (v.num_bytes() == INT64_MAX ? std::string("more than int64 can count")
                                                               : to_string(v.num_bytes())));
    }
    if (m.config.max_batch_size > 0) out->batch = rank > 0 ? shape[0] : 0;
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* data = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      KILN_RETURN_IF_ERROR(triton(TRITONBACKEND_InputBuffer(input, b, &data, &size, &memory, &memory_id)));
      if (memory == TRITONSERVER_MEMORY_GPU && (!device || buffers > 1))
        return kiln::InvalidArgument("input '" + it->name + "' is in GPU memory" +
                                     (device ? std::string(", in more than one buffer") : ", and the instance runs on the CPU"));
      if (memory == TRITONSERVER_MEMORY_GPU) {  // the CUDA backend reads it where it is
        v.data = const_cast<void*>(data);
        v.memory = kiln::MemoryKind::kDevice;
        break;
      }
      // One buffer aligned to its element size is read where it is (Kiln only reads inputs);
      // several, or an unaligned one (an HTTP body's), are joined into an aligned copy.
      if (buffers == 1 && reinterpret_cast<uintptr_t>(data) % kiln::DTypeSize(dtype) == 0) {
        v.data = const_cast<void*>(data);
        break;
      }
      out->joined[k].insert(out->joined[k].end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
    }
    // An empty input still needs a non-null, aligned pointer (the prologue checks both).
    alignas(16) static const uint8_t kNoBytes[16] = {};
    if (v.data == nullptr) v.data = out->joined[k].empty() ? const_cast<uint8_t*>(kNoBytes) : out->joined[k].data();
  }
  for (size_t k = 0; k < model_inputs.size(); ++k)
    if (!seen[k]) return kiln::InvalidArgument("input '" + model_inputs[k].name + "' is missing");
  return Status::Ok();
}

// Whether the requests' inputs can be stacked along dim 0 on the host: in host memory, with the
// same rank and the same dims after the first, input by input.
bool Stackable(const std::vector<const RequestInputs*>& group) {
  for (size_t k = 0; k < group[0]->views.size(); ++k)
    for (const RequestInputs* r : group) {
      const TensorView &a = group[0]->views[k], &b = r->views[k];
      if (b.memory != kiln::MemoryKind::kHost || a.rank != b.rank || a.rank < 1 ||
          !std::equal(a.dims + 1, a.dims + a.rank, b.dims + 1))
        return false;
    }
  return true;
}

// Fills `response` with rows [row, row + rows) of `outputs` (dim 0; all of them when `rows` is
// negative): the outputs the request asks for, or all.
TRITONSERVER_Error* Respond(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, const ModelState& m,
                            const std::vector<TensorView>& outputs, int64_t row, int64_t rows) {
  uint32_t asked = 0;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_RequestOutputCount(request, &asked));
  const std::vector<kiln::TensorInfo>& infos = m.model.outputs();
  for (uint32_t i = 0; i < (asked == 0 ? infos.size() : asked); ++i) {
    size_t k = i;
    if (asked > 0) {
      const char* name = nullptr;
      KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_RequestOutputName(request, i, &name));
      const auto it = std::find_if(infos.begin(), infos.end(), [&](const kiln::TensorInfo& t) { return t.name == name; });
      if (it == infos.end())
        return Error(TRITONSERVER_ERROR_INVALID_ARG, "output '" + std::string(name) + "': the model has no such output");
      k = static_cast<size_t>(it - infos.begin());
    }
    const TensorView& y = outputs[k];
    int64_t dims[kiln::kMaxRank] = {1};  // a scalar goes out as [1], as configured
    std::copy(y.dims, y.dims + y.rank, dims);
    const uint32_t rank = std::max<uint32_t>(1, static_cast<uint32_t>(y.rank));
    uint64_t offset = 0, bytes = static_cast<uint64_t>(y.num_bytes());
    if (rows >= 0) {
      if (y.rank < 1 || y.dims[0] < row + rows)
        return Error(TRITONSERVER_ERROR_INTERNAL, "output '" + infos[k].name + "' has no rows " + to_string(row) + ".." +
                                                      to_string(row + rows) + " of the stacked batch");
      const uint64_t row_bytes = y.dims[0] == 0 ? 0 : bytes / static_cast<uint64_t>(y.dims[0]);
      dims[0] = rows;
      offset = row_bytes * static_cast<uint64_t>(row);
      bytes = row_bytes * static_cast<uint64_t>(rows);
    }
    TRITONBACKEND_Output* output = nullptr;
    KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, infos[k].name.c_str(),
                                                             kiln::triton::TritonDataType(y.dtype), dims, rank));
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id));
    if (memory == TRITONSERVER_MEMORY_GPU)
      return Error(TRITONSERVER_ERROR_UNSUPPORTED, "output '" + infos[k].name + "': Triton gave a GPU buffer");
    if (bytes > 0) std::memcpy(buffer, static_cast<const uint8_t*>(y.data) + offset, bytes);
  }
  return nullptr;
}

// Sends request `request`'s response (its error, when not null), reports its statistics and
// releases it. Failures of Triton's own calls here are logged: nothing else can hold them.
void Finish(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, TRITONBACKEND_Response* response,
            TRITONSERVER_Error* error, uint64_t exec_start, uint64_t compute_start, uint64_t compute_end) {
  const bool ok = error == nullptr;
  auto log = [](TRITONSERVER_Error* e) {
    if (e == nullptr) return;
    Log(TRITONSERVER_LOG_ERROR, __LINE__, std::string("kiln: ") + TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
  };
  // ResponseSend does not take `error` (Triton's own backends delete it after sending).
  if (response == nullptr && error != nullptr) log(TRITONBACKEND_ResponseNew(&response, request));
  if (response != nullptr) log(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error));
  if (error != nullptr) TRITONSERVER_ErrorDelete(error);
  const uint64_t now = NowNs();
  log(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, ok, exec_start, ok ? compute_start : now,
                                                  ok ? compute_end : now, now));
  log(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

// One Run of an instance's context, timed: Triton's compute-infer.
struct Ran {
  Status status;
  const std::vector<TensorView>* outputs = nullptr;  // the instance's, valid until its next Run
  uint64_t start = 0, end = 0;
};

// On the CUDA backend the outputs are then copied to host buffers of the instance
// (ExecutionContext::CopyOutputs, on the instance's own stream), which the responses copy
// from: Triton's compute-output.
Ran RunOnce(InstanceState& s, std::span<const TensorView> inputs) {
  Ran ran;
  s.outputs.clear();  // the context's own views, into memory it keeps (no allocation once seen)
  ran.outputs = &s.outputs;
  ran.start = NowNs();
  ran.status = s.context.Run(inputs, s.outputs);
  ran.end = NowNs();
  if (!ran.status.ok() || s.outputs.empty() || s.outputs[0].memory != kiln::MemoryKind::kDevice) return ran;
  s.host_outputs.resize(s.outputs.size());
  s.host_views.resize(s.outputs.size());
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    const TensorView& y = s.outputs[i];
    s.host_outputs[i].resize(static_cast<size_t>(y.num_bytes()));
    s.host_views[i] = TensorView::Host(s.host_outputs[i].data(), y.dtype, y.dims, y.rank);
  }
  ran.outputs = &s.host_views;
  ran.status = s.context.CopyOutputs(s.host_views);
  if (ran.status.ok()) ran.status = s.context.Synchronize();
  return ran;
}

// Answers `requests` from one Run: rows of a stacked batch (`stacked`: request r has
// batches[r] rows, in order), or one request with all of the outputs.
void Answer(TRITONBACKEND_ModelInstance* instance, const InstanceState& s,
            std::span<TRITONBACKEND_Request* const> requests, std::span<const int64_t> batches, const Ran& ran,
            bool stacked, uint64_t exec_start) {
  int64_t row = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    TRITONSERVER_Error* error = ErrorOf(ran.status);
    TRITONBACKEND_Response* response = nullptr;
    if (error == nullptr) error = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (error == nullptr)
      error = Respond(requests[r], response, *s.model, *ran.outputs, stacked ? row : 0, stacked ? batches[r] : -1);
    Finish(instance, requests[r], response, error, exec_start, ran.start, ran.end);
    row += batches[r];
  }
  if (!ran.status.ok()) return;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(
          instance, static_cast<uint64_t>(row), exec_start, ran.start, ran.end, NowNs()))
    TRITONSERVER_ErrorDelete(e);
}

// Runs requests [begin, end) of the instance's ready ones stacked along dim 0 as one Run and
// answers them; false when the Run failed, having answered none.
bool RunStacked(TRITONBACKEND_ModelInstance* instance, InstanceState& s, size_t begin, size_t end, uint64_t exec_start) {
  const std::vector<const RequestInputs*>& group = s.ready_inputs;
  s.stacked_views.resize(s.model->model.inputs().size());
  int64_t total = 0;
  for (size_t r = begin; r < end; ++r) total += s.batches[r];
  for (size_t k = 0; k < s.stacked_views.size(); ++k) {
    TensorView v = group[begin]->views[k];
    v.dims[0] = total;
    std::vector<uint8_t>& buffer = s.stacked[k];
    buffer.resize(static_cast<size_t>(v.num_bytes()));
    size_t at = 0;
    for (size_t r = begin; r < end; ++r) {
      const size_t bytes = static_cast<size_t>(group[r]->views[k].num_bytes());
      if (bytes > 0) std::memcpy(buffer.data() + at, group[r]->views[k].data, bytes);
      at += bytes;
    }
    v.data = buffer.data();
    s.stacked_views[k] = v;
  }
  const Ran ran = RunOnce(s, s.stacked_views);
  if (!ran.status.ok()) return false;
  Answer(instance, s, std::span(s.ready).subspan(begin, end - begin), std::span(s.batches).subspan(begin, end - begin),
         ran, /*stacked=*/true, exec_start);
  return true;
}

// Deletes the state the backend set on a Triton object (backend, model or instance).
template <typename State, typename Handle>
TRITONSERVER_Error* DeleteState(TRITONSERVER_Error* (*get)(Handle*, void**), Handle* handle) {
  void* state = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(get(handle, &state));
  delete static_cast<State*>(state);
  return nullptr;
}

}  // namespace

extern "C" {

#define KILN_TRITON_EXPORT __attribute__((visibility("default")))

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  uint32_t major = 0, minor = 0;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < kBackendApiMinor) {
    const std::string message = "kiln: this server's backend API is " + to_string(major) + "." + to_string(minor) +
                                "; the Kiln backend needs " + to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                                to_string(kBackendApiMinor) + " or a later minor version (tritonserver 2.51 or later)";
    Log(TRITONSERVER_LOG_ERROR, __LINE__, message);
    return Error(TRITONSERVER_ERROR_UNSUPPORTED, message);
  }
  auto state = std::make_unique<BackendState>();
  TRITONSERVER_Message* message = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_BackendConfig(backend, &message));
  json config;
  KILN_TRITON_RETURN_IF_ERROR(ParseMessage(message, "the backend configuration", &config));
  if (const auto cmdline = config.find("cmdline"); cmdline != config.end() && cmdline->is_object())
    if (const auto it = cmdline->find("default-max-batch-size"); it != cmdline->end()) {
      const std::string v = it->is_string() ? it->get<std::string>() : it->dump();
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > INT32_MAX || errno == ERANGE)
        return Error(TRITONSERVER_ERROR_INVALID_ARG, "kiln: --backend-config=kiln,default-max-batch-size=" + v +
                                                         ": expected a count from 0 to 2147483647 (max_batch_size is int32)");
      state->default_max_batch_size = n;
    }
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_BackendSetState(backend, state.release()));
  Log(TRITONSERVER_LOG_INFO, __LINE__,
      "kiln: backend ready, backend API " + to_string(major) + "." + to_string(minor));
  return nullptr;
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return DeleteState<BackendState>(TRITONBACKEND_BackendState, backend);
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  uint64_t version = 0;
  TRITONBACKEND_ArtifactType artifact = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  const char* location = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &version));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  TRITONBACKEND_Backend* backend = nullptr;
  void* backend_state = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelBackend(model, &backend));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_BackendState(backend, &backend_state));

  TRITONSERVER_Message* message = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
  json config;
  TRITONSERVER_Error* parsed = ParseMessage(message, "the model configuration", &config);
  TRITONSERVER_MessageDelete(message);
  if (parsed != nullptr) return parsed;

  std::string file = "model.kiln";
  if (const auto it = config.find("default_model_filename"); it != config.end() && it->is_string() && !it->get<std::string>().empty())
    file = it->get<std::string>();
  if (file.find('/') != std::string::npos || file == "." || file == "..")
    return Error(TRITONSERVER_ERROR_INVALID_ARG, "kiln: model '" + std::string(name) + "': default_model_filename '" +
                                                     file + "' must name a file in the version folder, without '/'");
  const std::string path = std::string(location) + "/" + to_string(version) + "/" + file;
  auto loaded = kiln::Model::Load(path);
  if (!loaded.ok())
    return Error(TRITONSERVER_ERROR_INVALID_ARG, "kiln: model '" + std::string(name) + "': cannot load " + path + ": " +
                                                     loaded.status().ToString());

  bool auto_complete = false;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete));
  if (auto_complete) {
    const json completed = kiln::triton::AutoCompleteConfig(
        *loaded, config, static_cast<BackendState*>(backend_state)->default_max_batch_size);
    if (completed != config) {
      const std::string text = completed.dump();
      TRITONSERVER_Message* out = nullptr;
      KILN_TRITON_RETURN_IF_ERROR(TRITONSERVER_MessageNewFromSerializedJson(&out, text.data(), text.size()));
      TRITONSERVER_Error* set = TRITONBACKEND_ModelSetConfig(model, 1, out);
      TRITONSERVER_MessageDelete(out);
      if (set != nullptr) return set;
      KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
      parsed = ParseMessage(message, "the model configuration", &config);
      TRITONSERVER_MessageDelete(message);
      if (parsed != nullptr) return parsed;
    }
  }
  auto serving = kiln::triton::ReadServingConfig(*loaded, config);
  if (!serving.ok())
    return Error(TRITONSERVER_ERROR_INVALID_ARG, "kiln: model '" + std::string(name) + "': " +
                                                     std::string(serving.status().message()));
  auto state = std::make_unique<ModelState>(ModelState{name, std::move(*loaded), *serving});
  Log(TRITONSERVER_LOG_INFO, __LINE__,
      "kiln: model '" + state->name + "' loaded from " + path + " (max_batch_size " +
          to_string(state->config.max_batch_size) + ")");
  if (const std::string gaps = kiln::triton::BatchGaps(state->model, state->config.max_batch_size); !gaps.empty())
    Log(TRITONSERVER_LOG_WARN, __LINE__,
        "kiln: model '" + state->name + "': no entry accepts a batch of " + gaps +
            " rows; such a dynamic batch runs split into sizes that an entry accepts, and a request of that many "
            "rows fails");
  return TRITONBACKEND_ModelSetState(model, state.release());
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return DeleteState<ModelState>(TRITONBACKEND_ModelState, model);
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name = nullptr;
  TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_CPU;
  int32_t device_id = 0;
  TRITONBACKEND_Model* model = nullptr;
  void* model_state = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceName(instance, &name));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &model_state));
  const ModelState& m = *static_cast<ModelState*>(model_state);
  const kiln::triton::Parameters& p = m.config.parameters;
  // KIND_GPU instances run on the CUDA backend on the group's GPU, KIND_CPU ones on the CPU
  // backend, unless parameter `device` says which.
  const bool cuda = p.device == kiln::triton::DevicePolicy::kCuda ||
                    (p.device == kiln::triton::DevicePolicy::kAuto && kind == TRITONSERVER_INSTANCEGROUPKIND_GPU);
  kiln::ContextOptions options;
  options.device = cuda ? kiln::Device::kCuda : kiln::Device::kCpu;
  options.cuda.device_ordinal = cuda && kind == TRITONSERVER_INSTANCEGROUPKIND_GPU ? device_id : 0;
  options.cuda.graphs = p.cuda_graphs;
  options.cuda.own_stream = cuda;  // each instance its own stream, as Triton's GPU instances have
  options.cpu.threads = p.cpu_threads;
  auto context = kiln::ExecutionContext::Create(m.model, options);
  if (!context.ok())
    return Error(TRITONSERVER_ERROR_UNAVAILABLE, "kiln: instance '" + std::string(name) + "': " +
                                                     context.status().ToString());
  auto state = std::make_unique<InstanceState>(name, &m, std::move(*context));
  state->stacked.resize(m.model.inputs().size());
  Log(TRITONSERVER_LOG_INFO, __LINE__,
      "kiln: instance '" + state->name + "' of model '" + m.name + "': " + state->context.device_note());
  return TRITONBACKEND_ModelInstanceSetState(instance, state.release());
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  return DeleteState<InstanceState>(TRITONBACKEND_ModelInstanceState, instance);
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                                         TRITONBACKEND_Request** requests,
                                                                         const uint32_t request_count) {
  const uint64_t exec_start = NowNs();
  void* state = nullptr;
  KILN_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  InstanceState& s = *static_cast<InstanceState*>(state);
  const ModelState& m = *s.model;
  // From here on every request is answered and released, whatever fails.
  if (s.requests.size() < request_count) s.requests.resize(request_count);
  s.ready.clear();
  s.ready_inputs.clear();
  s.batches.clear();
  for (uint32_t r = 0; r < request_count; ++r) {
    const Status read = ReadInputs(requests[r], m, s.context.device() == kiln::Device::kCuda, &s.requests[r]);
    if (!read.ok()) {
      Finish(instance, requests[r], nullptr, ErrorOf(read), exec_start, 0, 0);
      continue;
    }
    s.ready.push_back(requests[r]);
    s.ready_inputs.push_back(&s.requests[r]);
    s.batches.push_back(s.requests[r].batch);
  }
  const size_t n = s.ready.size();
  const bool stack = m.config.max_batch_size > 0 && n > 1 && Stackable(s.ready_inputs);
  for (size_t i = 0; i < n;) {
    // Stacked, the longest run of requests from i whose rows make a batch that an entry
    // accepts (with profiles such as N=1 and N=4, a batch of 6 runs as 4 + 1 + 1).
    size_t end = i + 1;
    if (stack) {
      int64_t rows = 0;
      for (size_t j = i; j < n; ++j) {
        rows += s.batches[j];
        if (j > i && kiln::triton::AcceptsBatch(m.model, rows)) end = j + 1;
      }
    }
    if (end > i + 1 && RunStacked(instance, s, i, end, exec_start)) {
      i = end;
      continue;
    }
    // Alone: a request that cannot run fails with its own reason (a batch no entry accepts,
    // data out of range), and the others run.
    for (; i < end; ++i)
      Answer(instance, s, std::span(s.ready).subspan(i, 1), std::span(s.batches).subspan(i, 1),
             RunOnce(s, s.ready_inputs[i]->views), /*stacked=*/false, exec_start);
  }
  return nullptr;
}

}  // extern "C"
