// The C API (include/kiln/kiln.h) over kiln::Model and kiln::ExecutionContext. Each entry point
// runs its body inside Guard, which turns a non-OK Status and any C++ exception into a code
// plus a message kept by the handle: nothing throws across the C boundary.
#include "kiln/kiln.h"

#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kiln/runtime.h"

using kiln::Status;
using kiln::StatusCode;

// The C enums mirror the C++ ones value for value.
static_assert(KILN_STATUS_OK == static_cast<int>(StatusCode::kOk) &&
              KILN_STATUS_INVALID_ARGUMENT == static_cast<int>(StatusCode::kInvalidArgument) &&
              KILN_STATUS_NOT_FOUND == static_cast<int>(StatusCode::kNotFound) &&
              KILN_STATUS_OUT_OF_RANGE == static_cast<int>(StatusCode::kOutOfRange) &&
              KILN_STATUS_RESOURCE_EXHAUSTED == static_cast<int>(StatusCode::kResourceExhausted) &&
              KILN_STATUS_FAILED_PRECONDITION == static_cast<int>(StatusCode::kFailedPrecondition) &&
              KILN_STATUS_DATA_LOSS == static_cast<int>(StatusCode::kDataLoss) &&
              KILN_STATUS_INCOMPATIBLE == static_cast<int>(StatusCode::kIncompatible) &&
              KILN_STATUS_UNIMPLEMENTED == static_cast<int>(StatusCode::kUnimplemented) &&
              KILN_STATUS_INTERNAL == static_cast<int>(StatusCode::kInternal) &&
              KILN_STATUS_DEVICE_ERROR == static_cast<int>(StatusCode::kDeviceError));
static_assert(KILN_DTYPE_UNDEFINED == static_cast<int>(kiln::DType::kUndefined) &&
              KILN_DTYPE_FLOAT32 == static_cast<int>(kiln::DType::kFloat32) &&
              KILN_DTYPE_UINT8 == static_cast<int>(kiln::DType::kUInt8) &&
              KILN_DTYPE_INT8 == static_cast<int>(kiln::DType::kInt8) &&
              KILN_DTYPE_UINT16 == static_cast<int>(kiln::DType::kUInt16) &&
              KILN_DTYPE_INT16 == static_cast<int>(kiln::DType::kInt16) &&
              KILN_DTYPE_INT32 == static_cast<int>(kiln::DType::kInt32) &&
              KILN_DTYPE_INT64 == static_cast<int>(kiln::DType::kInt64) &&
              KILN_DTYPE_BOOL == static_cast<int>(kiln::DType::kBool) &&
              KILN_DTYPE_FLOAT16 == static_cast<int>(kiln::DType::kFloat16) &&
              KILN_DTYPE_FLOAT64 == static_cast<int>(kiln::DType::kFloat64) &&
              KILN_DTYPE_UINT32 == static_cast<int>(kiln::DType::kUInt32) &&
              KILN_DTYPE_UINT64 == static_cast<int>(kiln::DType::kUInt64) &&
              KILN_DTYPE_BFLOAT16 == static_cast<int>(kiln::DType::kBFloat16));
static_assert(KILN_MEMORY_HOST == static_cast<int>(kiln::MemoryKind::kHost) &&
              KILN_MEMORY_DEVICE == static_cast<int>(kiln::MemoryKind::kDevice));
static_assert(KILN_DEVICE_CPU == static_cast<int>(kiln::Device::kCpu) &&
              KILN_DEVICE_CUDA == static_cast<int>(kiln::Device::kCuda) &&
              KILN_DEVICE_AUTO == static_cast<int>(kiln::Device::kAuto));
static_assert(KILN_MAX_RANK == kiln::kMaxRank);

namespace {

constexpr const char* kOomNote = "out of memory (while recording this call's error message)";

// One declared input or output, with the arrays kiln_tensor_info points into.
struct InfoArrays {
  std::vector<int64_t> dims;
  std::vector<const char*> symbols;
};

std::vector<InfoArrays> MakeInfoArrays(const std::vector<kiln::TensorInfo>& infos) {
  std::vector<InfoArrays> out(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    for (const kiln::DimInfo& d : infos[i].shape) {
      out[i].dims.push_back(d.value);
      out[i].symbols.push_back(d.symbol.empty() ? nullptr : d.symbol.c_str());
    }
  }
  return out;
}

// Each entry's instructions' member-op pointer arrays, which kiln_instruction_info points into.
std::vector<std::vector<std::vector<const char*>>> MakeMemberOps(const std::vector<kiln::EntryInfo>& entries) {
  std::vector<std::vector<std::vector<const char*>>> out(entries.size());
  for (size_t e = 0; e < entries.size(); ++e)
    for (const kiln::InstructionInfo& i : entries[e].instructions) {
      std::vector<const char*>& ops = out[e].emplace_back();
      for (const std::string& op : i.member_ops) ops.push_back(op.c_str());
    }
  return out;
}

// Each entry's instructions' placements, which kiln_instruction_info points into: the backend
// names are the model's strings, the library names LibraryName's literals.
std::vector<std::vector<std::vector<kiln_placement>>> MakePlacements(const std::vector<kiln::EntryInfo>& entries) {
  std::vector<std::vector<std::vector<kiln_placement>>> out(entries.size());
  for (size_t e = 0; e < entries.size(); ++e)
    for (const kiln::InstructionInfo& i : entries[e].instructions) {
      std::vector<kiln_placement>& ps = out[e].emplace_back();
      for (const kiln::InstructionPlacement& p : i.placements)
        ps.push_back({p.backend.c_str(), kiln::LibraryName(p.library).data()});
    }
  return out;
}

}  // namespace

struct kiln_model {
  std::optional<kiln::Model> model;  // empty when the load failed
  std::string load_error;            // the failed load's message
  std::vector<InfoArrays> inputs, outputs;
  std::vector<std::vector<std::vector<const char*>>> member_ops;  // [entry][instruction]
  std::vector<std::vector<std::vector<kiln_placement>>> placements;  // [entry][instruction]
  // Each thread's last error: the handle is shared between threads. Node-based, so a
  // thread's string stays put while other threads insert theirs.
  struct ThreadError {
    std::string text;
    bool oom = false;
  };
  mutable std::mutex mu;
  mutable std::unordered_map<std::thread::id, ThreadError> errors;

  void Record(const std::string& text) const noexcept {
    try {
      std::lock_guard<std::mutex> lock(mu);
      ThreadError& e = errors[std::this_thread::get_id()];
      e.oom = true;  // stays set if the assignment below runs out of memory
      e.text = text;
      e.oom = false;
    } catch (...) {  // no entry could be made: the thread keeps its older message, if any
    }
  }
  const char* LastError() const noexcept {
    try {
      std::lock_guard<std::mutex> lock(mu);
      auto it = errors.find(std::this_thread::get_id());
      if (it != errors.end()) return it->second.oom ? kOomNote : it->second.text.c_str();
    } catch (...) {
      return kOomNote;
    }
    return load_error.c_str();
  }
};

struct kiln_context {
  std::optional<kiln::ExecutionContext> context;  // empty when creation failed
  std::string create_error;
  size_t num_inputs = 0, num_outputs = 0;
  std::vector<kiln::TensorView> inputs, outputs;  // reused by every run: no allocation once sized
  // The last error. Mutable: the functions that read a context (const handle) record theirs too.
  mutable std::string error;
  mutable bool oom = false;

  void Record(const std::string& text) const noexcept {
    try {
      oom = true;
      error = text;
      oom = false;
    } catch (...) {
    }
  }
  const char* LastError() const noexcept { return oom ? kOomNote : error.c_str(); }
};

namespace {

// Runs `body` (returning Status); a failure or an exception becomes a code, and a message
// "fn: ..." kept by `handle` (none when it is null).
template <typename Handle, typename Body>
kiln_status Guard(Handle* handle, const char* fn, Body&& body) noexcept {
  StatusCode code = StatusCode::kInternal;
  const char* what = "unknown C++ exception";
  try {
    Status st = body();
    if (st.ok()) return KILN_STATUS_OK;
    code = st.code();
    if (handle) handle->Record(std::string(fn) + ": " + st.message());
    return static_cast<kiln_status>(code);
  } catch (const std::bad_alloc&) {
    code = StatusCode::kResourceExhausted;
    what = "out of memory";
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  if (handle) {
    try {
      handle->Record(std::string(fn) + ": " + what);
    } catch (...) {
    }
  }
  return static_cast<kiln_status>(code);
}

Status NullArgument(const char* name) { return kiln::InvalidArgument(std::string(name) + " is NULL"); }

Status Loaded(const kiln_model& m) {
  if (m.model) return Status::Ok();
  return kiln::FailedPrecondition("this model handle holds no model: its load failed (" + m.load_error + ")");
}

Status Created(const kiln_context& c) {
  if (c.context) return Status::Ok();
  return kiln::FailedPrecondition("this context handle holds no context: its creation failed (" + c.create_error +
                                  ")");
}

// A caller's kiln_tensor as a TensorView, after the checks the C layer owes a C caller: the
// fields a TensorView cannot carry (a rank beyond KILN_MAX_RANK would read past dims) or a
// prologue does not check (negative dims, values outside the enums).
Status ToView(const kiln_tensor& t, const char* array, size_t i, kiln::TensorView& out) {
  auto where = [&](const char* field) { return std::string(array) + "[" + std::to_string(i) + "]." + field + " is "; };
  if (t.rank < 0 || t.rank > KILN_MAX_RANK)
    return kiln::InvalidArgument(where("rank") + std::to_string(t.rank) + ", expected 0 to KILN_MAX_RANK (" +
                                 std::to_string(KILN_MAX_RANK) + ")");
  for (int32_t d = 0; d < t.rank; ++d)
    if (t.dims[d] < 0)
      return kiln::InvalidArgument(where(("dims[" + std::to_string(d) + "]").c_str()) + std::to_string(t.dims[d]) +
                                   ", expected a size >= 0");
  if (!kiln::IsValidDType(t.dtype))
    return kiln::InvalidArgument(where("dtype") + std::to_string(t.dtype) + ", not a kiln_dtype element type");
  if (t.memory != KILN_MEMORY_HOST && t.memory != KILN_MEMORY_DEVICE)
    return kiln::InvalidArgument(where("memory") + std::to_string(t.memory) +
                                 ", expected KILN_MEMORY_HOST (0) or KILN_MEMORY_DEVICE (1)");
  out = kiln::TensorView::Host(t.data, static_cast<kiln::DType>(t.dtype), t.dims, t.rank);
  out.memory = static_cast<kiln::MemoryKind>(t.memory);
  return Status::Ok();
}

Status ToViews(const kiln_tensor* tensors, size_t n, const char* array, std::vector<kiln::TensorView>& out) {
  if (tensors == nullptr && n > 0)
    return kiln::InvalidArgument(std::string(array) + " is NULL with a count of " + std::to_string(n));
  out.resize(n);
  for (size_t i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(ToView(tensors[i], array, i, out[i]));
  return Status::Ok();
}

// The inputs of a run or warm-up, checked and converted into c.inputs.
Status PrepareInputs(kiln_context& c, const kiln_tensor* inputs, size_t num_inputs) {
  KILN_RETURN_IF_ERROR(Created(c));
  // Checked here, before `inputs` is read, so a wrong count never sizes the conversion.
  if (num_inputs != c.num_inputs)
    return kiln::InvalidArgument("num_inputs is " + std::to_string(num_inputs) + ", the model has " +
                                 std::to_string(c.num_inputs) + " inputs");
  return ToViews(inputs, num_inputs, "inputs", c.inputs);
}

// The checks both run functions make before kiln::ExecutionContext::Run.
Status PrepareRun(kiln_context& c, const kiln_tensor* inputs, size_t num_inputs, const kiln_tensor* outputs,
                  size_t num_outputs) {
  KILN_RETURN_IF_ERROR(PrepareInputs(c, inputs, num_inputs));
  if (outputs == nullptr && num_outputs > 0)
    return kiln::InvalidArgument("outputs is NULL with a count of " + std::to_string(num_outputs));
  if (num_outputs != c.num_outputs)
    return kiln::InvalidArgument("num_outputs is " + std::to_string(num_outputs) + ", the model has " +
                                 std::to_string(c.num_outputs) + " outputs");
  return Status::Ok();
}

kiln_tensor ToC(const kiln::TensorView& v) {
  kiln_tensor t{};
  t.data = v.data;
  t.dtype = static_cast<int32_t>(v.dtype);
  t.rank = v.rank;
  for (int32_t d = 0; d < v.rank && d < KILN_MAX_RANK; ++d) t.dims[d] = v.dims[d];
  t.memory = static_cast<int32_t>(v.memory);
  return t;
}

// Fills *out (default-constructed) from `o` (NULL: the defaults).
Status ToLoadOptions(const kiln_load_options* o, kiln::LoadOptions& out) {
  if (o) {
    out.max_artifact_bytes = o->max_artifact_bytes;
    out.max_context_bytes = o->max_context_bytes;
    for (size_t i = 0; i < o->num_trusted_public_keys; ++i) {
      if (o->trusted_public_keys == nullptr || o->trusted_public_keys[i] == nullptr)
        return kiln::InvalidArgument("kiln_load_options: trusted_public_keys or one of its entries is NULL");
      out.trusted_public_keys.emplace_back(o->trusted_public_keys[i]);
    }
    if (kiln_weights_key_fn fn = o->weights_key)
      out.weights_key = [fn, user = o->weights_key_user_data](std::string_view id, std::span<uint8_t, 32> key) {
        const kiln_status st = fn(user, std::string(id).c_str(), key.data());
        if (st == KILN_STATUS_OK) return Status::Ok();
        return Status(st > KILN_STATUS_OK && st <= KILN_STATUS_DEVICE_ERROR ? static_cast<StatusCode>(st)
                                                                             : StatusCode::kInternal,
                      std::string("the weights_key callback returned ") + kiln_status_name(st));
      };
  }
  return Status::Ok();
}

// A failed create's message, kept for the FAILED_PRECONDITION of later calls on the handle.
template <typename Handle>
void KeepCreationError(const Handle* handle, std::string& kept) noexcept {
  if (handle == nullptr) return;
  try {
    kept = handle->LastError();
  } catch (...) {
  }
}

// Makes *out a new model handle and loads into it with `load` (returning Result<Model>).
template <typename Load>
kiln_status LoadModel(const char* fn, kiln_model** out, Load&& load) noexcept {
  if (out == nullptr) return KILN_STATUS_INVALID_ARGUMENT;
  *out = new (std::nothrow) kiln_model;
  if (*out == nullptr) return KILN_STATUS_RESOURCE_EXHAUSTED;
  kiln_model* m = *out;
  const kiln_status st = Guard(m, fn, [&]() -> Status {
    kiln::Result<kiln::Model> r = load();
    if (!r.ok()) return r.status();
    m->inputs = MakeInfoArrays(r->inputs());
    m->outputs = MakeInfoArrays(r->outputs());
    m->member_ops = MakeMemberOps(r->entries());
    m->placements = MakePlacements(r->entries());
    m->model = std::move(*r);
    return Status::Ok();
  });
  if (st != KILN_STATUS_OK) KeepCreationError(m, m->load_error);
  return st;
}

kiln_status TensorInfoAt(const kiln_model* model, size_t index, kiln_tensor_info* out, bool input) {
  const char* fn = input ? "kiln_model_input" : "kiln_model_output";
  return Guard(model, fn, [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    const std::vector<kiln::TensorInfo>& infos = input ? model->model->inputs() : model->model->outputs();
    const std::vector<InfoArrays>& arrays = input ? model->inputs : model->outputs;
    if (index >= infos.size())
      return kiln::OutOfRange("index " + std::to_string(index) + " is out of range: the model has " +
                              std::to_string(infos.size()) + (input ? " inputs" : " outputs"));
    out->name = infos[index].name.c_str();
    out->dtype = static_cast<int32_t>(infos[index].dtype);
    out->rank = static_cast<int32_t>(arrays[index].dims.size());
    out->dims = arrays[index].dims.data();
    out->dim_symbols = arrays[index].symbols.data();
    return Status::Ok();
  });
}

kiln_status Count(const kiln_model* model, size_t* out, bool input) {
  return Guard(model, input ? "kiln_model_num_inputs" : "kiln_model_num_outputs", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    *out = input ? model->model->inputs().size() : model->model->outputs().size();
    return Status::Ok();
  });
}

}  // namespace

extern "C" {

kiln_status kiln_version(kiln_version_info* out) {
  if (out == nullptr) return KILN_STATUS_INVALID_ARGUMENT;
  *out = kiln_version_info{KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH, kiln::kMinFormatVersion,
                           kiln::kFormatVersion};
  return KILN_STATUS_OK;
}

const char* kiln_status_name(kiln_status status) {
  // StatusCodeName's views are of string literals, so data() is NUL-terminated static storage.
  return kiln::StatusCodeName(static_cast<StatusCode>(status)).data();
}

kiln_status kiln_load_options_init(kiln_load_options* options) {
  if (options == nullptr) return KILN_STATUS_INVALID_ARGUMENT;
  const kiln::LoadOptions d;
  *options = kiln_load_options{d.max_artifact_bytes, d.max_context_bytes, nullptr, 0, nullptr, nullptr};
  return KILN_STATUS_OK;
}

kiln_status kiln_context_options_init(kiln_context_options* options) {
  if (options == nullptr) return KILN_STATUS_INVALID_ARGUMENT;
  const kiln::ContextOptions d;
  *options = kiln_context_options{static_cast<int32_t>(d.device), d.cuda.device_ordinal, d.cuda.graphs, d.profile,
                                  d.cpu.threads, d.max_loop_iterations, d.cuda.require_device_resident, d.warm_runs};
  return KILN_STATUS_OK;
}

kiln_status kiln_model_load_file(const char* path, const kiln_load_options* options, kiln_model** out) {
  return LoadModel("kiln_model_load_file", out, [&]() -> kiln::Result<kiln::Model> {
    if (path == nullptr) return NullArgument("path");
    kiln::LoadOptions o;
    KILN_RETURN_IF_ERROR(ToLoadOptions(options, o));
    return kiln::Model::Load(std::string(path), o);
  });
}

kiln_status kiln_model_load_bytes(const void* bytes, size_t size, const kiln_load_options* options,
                                  kiln_model** out) {
  return LoadModel("kiln_model_load_bytes", out, [&]() -> kiln::Result<kiln::Model> {
    if (bytes == nullptr && size > 0)
      return kiln::InvalidArgument("bytes is NULL with a size of " + std::to_string(size));
    const uint8_t* p = static_cast<const uint8_t*>(bytes);
    kiln::LoadOptions o;
    KILN_RETURN_IF_ERROR(ToLoadOptions(options, o));
    return kiln::Model::Load(std::span<const uint8_t>(p, p ? size : 0), o);
  });
}

void kiln_model_destroy(kiln_model* model) { delete model; }

const char* kiln_model_last_error(const kiln_model* model) {
  return model ? model->LastError() : "model handle is NULL";
}

kiln_status kiln_model_num_inputs(const kiln_model* model, size_t* out) { return Count(model, out, true); }
kiln_status kiln_model_num_outputs(const kiln_model* model, size_t* out) { return Count(model, out, false); }

kiln_status kiln_model_input(const kiln_model* model, size_t index, kiln_tensor_info* out) {
  return TensorInfoAt(model, index, out, true);
}
kiln_status kiln_model_output(const kiln_model* model, size_t index, kiln_tensor_info* out) {
  return TensorInfoAt(model, index, out, false);
}

kiln_status kiln_model_num_entries(const kiln_model* model, size_t* out) {
  return Guard(model, "kiln_model_num_entries", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    *out = model->model->entries().size();
    return Status::Ok();
  });
}

namespace {

kiln::Result<const kiln::EntryInfo*> EntryAt(const kiln_model& model, size_t entry) {
  const std::vector<kiln::EntryInfo>& entries = model.model->entries();
  if (entry >= entries.size())
    return kiln::OutOfRange("entry " + std::to_string(entry) + " is out of range: the model has " +
                            std::to_string(entries.size()) + " entries");
  return &entries[entry];
}

}  // namespace

kiln_status kiln_model_num_instructions(const kiln_model* model, size_t entry, size_t* out) {
  return Guard(model, "kiln_model_num_instructions", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    KILN_ASSIGN_OR_RETURN(const kiln::EntryInfo* e, EntryAt(*model, entry));
    *out = e->instructions.size();
    return Status::Ok();
  });
}

kiln_status kiln_model_instruction(const kiln_model* model, size_t entry, size_t index, kiln_instruction_info* out) {
  return Guard(model, "kiln_model_instruction", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    KILN_ASSIGN_OR_RETURN(const kiln::EntryInfo* e, EntryAt(*model, entry));
    if (index >= e->instructions.size())
      return kiln::OutOfRange("instruction " + std::to_string(index) + " is out of range: entry " +
                              std::to_string(entry) + " has " + std::to_string(e->instructions.size()) +
                              " instructions");
    const kiln::InstructionInfo& i = e->instructions[index];
    const std::vector<const char*>& ops = model->member_ops[entry][index];
    const std::vector<kiln_placement>& placements = model->placements[entry][index];
    *out = {i.name.c_str(), i.op.c_str(), placements.size(), placements.data(), i.kernel.c_str(), ops.size(), ops.data()};
    return Status::Ok();
  });
}

kiln_status kiln_model_format_version(const kiln_model* model, uint32_t* out) {
  return Guard(model, "kiln_model_format_version", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    *out = model->model->format_version();
    return Status::Ok();
  });
}

kiln_status kiln_model_precision(const kiln_model* model, const char** out) {
  return Guard(model, "kiln_model_precision", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    *out = model->model->precision().data();  // a std::string the Model owns
    return Status::Ok();
  });
}

kiln_status kiln_model_producer(const kiln_model* model, const char** out) {
  return Guard(model, "kiln_model_producer", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    *out = model->model->producer().data();  // a std::string the Model owns
    return Status::Ok();
  });
}

kiln_status kiln_context_create(const kiln_model* model, const kiln_context_options* options, kiln_context** out) {
  if (out == nullptr) return KILN_STATUS_INVALID_ARGUMENT;
  *out = new (std::nothrow) kiln_context;
  if (*out == nullptr) return KILN_STATUS_RESOURCE_EXHAUSTED;
  kiln_context* c = *out;
  const kiln_status st = Guard(c, "kiln_context_create", [&]() -> Status {
    if (model == nullptr) return NullArgument("model");
    KILN_RETURN_IF_ERROR(Loaded(*model));
    kiln::ContextOptions o;
    if (options) {
      o.device = static_cast<kiln::Device>(options->device);
      o.cuda.device_ordinal = options->device_ordinal;
      o.cuda.graphs = options->cuda_graphs != 0;
      o.profile = options->profile != 0;
      o.cpu.threads = options->cpu_threads;
      o.max_loop_iterations = options->max_loop_iterations;
      o.cuda.require_device_resident = options->require_device_resident != 0;
      o.warm_runs = options->warm_runs;
    }
    kiln::Result<kiln::ExecutionContext> r = kiln::ExecutionContext::Create(*model->model, o);
    if (!r.ok()) return r.status();
    c->num_inputs = model->model->inputs().size();
    c->num_outputs = model->model->outputs().size();
    c->inputs.reserve(c->num_inputs);
    c->outputs.reserve(c->num_outputs);
    c->context.emplace(std::move(*r));
    return Status::Ok();
  });
  if (st != KILN_STATUS_OK) KeepCreationError(c, c->create_error);
  return st;
}

void kiln_context_destroy(kiln_context* context) { delete context; }

const char* kiln_context_last_error(const kiln_context* context) {
  return context ? context->LastError() : "context handle is NULL";
}

kiln_status kiln_context_run(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs,
                             kiln_tensor* outputs, size_t num_outputs, void* stream) {
  return Guard(context, "kiln_context_run", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(PrepareRun(*context, inputs, num_inputs, outputs, num_outputs));
    context->outputs.clear();  // empty: Run fills it with views of the context's memory
    KILN_RETURN_IF_ERROR(context->context->Run(context->inputs, context->outputs, stream));
    if (context->outputs.size() != num_outputs)
      return kiln::Internal("Run gave " + std::to_string(context->outputs.size()) + " outputs, expected " +
                            std::to_string(num_outputs));
    for (size_t i = 0; i < num_outputs; ++i) outputs[i] = ToC(context->outputs[i]);
    return Status::Ok();
  });
}

kiln_status kiln_context_warm(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs) {
  return Guard(context, "kiln_context_warm", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(PrepareInputs(*context, inputs, num_inputs));
    return context->context->Warm(context->inputs);
  });
}

kiln_status kiln_context_run_into(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs,
                                  const kiln_tensor* outputs, size_t num_outputs, void* stream) {
  return Guard(context, "kiln_context_run_into", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(PrepareRun(*context, inputs, num_inputs, outputs, num_outputs));
    KILN_RETURN_IF_ERROR(ToViews(outputs, num_outputs, "outputs", context->outputs));
    return context->context->Run(context->inputs, context->outputs, stream);
  });
}

kiln_status kiln_context_copy_outputs(kiln_context* context, const kiln_tensor* outputs, size_t num_outputs,
                                      void* stream) {
  return Guard(context, "kiln_context_copy_outputs", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(Created(*context));
    KILN_RETURN_IF_ERROR(ToViews(outputs, num_outputs, "outputs", context->outputs));
    return context->context->CopyOutputs(context->outputs, stream);
  });
}

kiln_status kiln_context_bind_cache(kiln_context* context, const kiln_cache_binding* caches, size_t count) {
  return Guard(context, "kiln_context_bind_cache", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    if (caches == nullptr && count > 0) return NullArgument("caches");
    KILN_RETURN_IF_ERROR(Created(*context));
    std::vector<kiln::ExecutionContext::CacheBinding> bindings;
    for (size_t i = 0; i < count; ++i)
      bindings.push_back({caches[i].past_input, caches[i].present_output, caches[i].capacity});
    return context->context->BindCache(bindings);
  });
}

kiln_status kiln_context_synchronize(kiln_context* context, void* stream) {
  return Guard(context, "kiln_context_synchronize", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(Created(*context));
    return context->context->Synchronize(stream);
  });
}

kiln_status kiln_context_stats(const kiln_context* context, kiln_stats* out) {
  return Guard(context, "kiln_context_stats", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    if (out == nullptr) return NullArgument("out");
    KILN_RETURN_IF_ERROR(Created(*context));
    const kiln::Stats& s = context->context->stats();
    *out = kiln_stats{s.calls,
                      s.cache_hits,
                      s.cache_misses,
                      s.last_entry,
                      s.last_host_time(),
                      s.last_cache_lookup_time(),
                      s.last_prologue_time(),
                      s.last_computation_time(),
                      s.total_computation_ns,
                      s.last_gpu_ns,
                      s.graph_hits,
                      s.graph_misses,
                      s.last_host_to_device_bytes,
                      s.last_device_to_host_bytes,
                      s.last_control_transfers,
                      s.last_cpu_region_ns};
    return Status::Ok();
  });
}

kiln_status kiln_context_device(const kiln_context* context, int32_t* device, const char** note) {
  return Guard(context, "kiln_context_device", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(Created(*context));
    if (device) *device = static_cast<int32_t>(context->context->device());
    if (note) *note = context->context->device_note().c_str();
    return Status::Ok();
  });
}

kiln_status kiln_context_memory(const kiln_context* context, uint64_t* host_bytes, uint64_t* device_bytes) {
  return Guard(context, "kiln_context_memory", [&]() -> Status {
    if (context == nullptr) return NullArgument("context");
    KILN_RETURN_IF_ERROR(Created(*context));
    const kiln::ExecutionContext::MemoryUsage m = context->context->memory_usage();
    if (host_bytes) *host_bytes = m.host_bytes;
    if (device_bytes) *device_bytes = m.device_bytes;
    return Status::Ok();
  });
}

}  // extern "C"
