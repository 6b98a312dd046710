#include "serving/triton/model_config.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

namespace kiln::triton {
namespace {

using nlohmann::json;
using std::to_string;

struct DTypeNames {
  DType dtype;
  TRITONSERVER_DataType triton;
  const char* config;
};
constexpr DTypeNames kDTypes[] = {
    {DType::kBool, TRITONSERVER_TYPE_BOOL, "TYPE_BOOL"},       {DType::kUInt8, TRITONSERVER_TYPE_UINT8, "TYPE_UINT8"},
    {DType::kUInt16, TRITONSERVER_TYPE_UINT16, "TYPE_UINT16"}, {DType::kUInt32, TRITONSERVER_TYPE_UINT32, "TYPE_UINT32"},
    {DType::kUInt64, TRITONSERVER_TYPE_UINT64, "TYPE_UINT64"}, {DType::kInt8, TRITONSERVER_TYPE_INT8, "TYPE_INT8"},
    {DType::kInt16, TRITONSERVER_TYPE_INT16, "TYPE_INT16"},    {DType::kInt32, TRITONSERVER_TYPE_INT32, "TYPE_INT32"},
    {DType::kInt64, TRITONSERVER_TYPE_INT64, "TYPE_INT64"},    {DType::kFloat16, TRITONSERVER_TYPE_FP16, "TYPE_FP16"},
    {DType::kFloat32, TRITONSERVER_TYPE_FP32, "TYPE_FP32"},    {DType::kFloat64, TRITONSERVER_TYPE_FP64, "TYPE_FP64"},
    {DType::kBFloat16, TRITONSERVER_TYPE_BF16, "TYPE_BF16"},
};

// A dim as the configuration writes it: a number, or the string protobuf's JSON mapping
// writes for an int64; nullopt for anything else.
std::optional<int64_t> DimValue(const json& d) {
  if (d.is_number_integer()) return d.get<int64_t>();
  if (!d.is_string()) return std::nullopt;
  const std::string& s = d.get_ref<const std::string&>();
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

int64_t MaxBatchSize(const json& config) {
  const auto it = config.find("max_batch_size");
  return it != config.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

const json& List(const json& config, const char* key) {
  static const json kEmpty = json::array();
  const auto it = config.find(key);
  return it != config.end() && it->is_array() ? *it : kEmpty;
}

std::string Str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A tensor's configuration. Triton needs at least one dim: what has none left is declared [1].
// A batched model's [N] gets a reshape to [] (the backend then sees [N]); an unbatched model's
// scalar cannot (Triton refuses an empty reshape there), so the backend reads and writes it as
// the artifact's scalar (serving/triton/backend.cc).
json TensorConfig(const TensorInfo& t, bool batched) {
  json dims = json::array();
  for (size_t d = batched ? 1 : 0; d < t.shape.size(); ++d) dims.push_back(t.shape[d].value);
  json c = {{"name", t.name}, {"data_type", ConfigDataType(t.dtype)}};
  if (!dims.empty()) {
    c["dims"] = std::move(dims);
    return c;
  }
  c["dims"] = json::array({1});
  if (batched) c["reshape"] = {{"shape", json::array()}};
  return c;
}

// The dims the backend sees after the batch dim: the reshape's when there is one.
const json& BackendDims(const json& c) {
  const auto it = c.find("reshape");
  if (it == c.end() || !it->is_object()) return List(c, "dims");
  return List(*it, "shape");
}

std::string DimText(const DimInfo& d) { return d.value >= 0 ? to_string(d.value) : d.symbol; }

// The mismatches between the configuration's `kind` ("input", "output") entries and the
// artifact's tensors, one line each, appended to `errors`.
void CheckTensors(const std::vector<TensorInfo>& tensors, const json& list, const char* kind, bool batched,
                  std::vector<std::string>& errors) {
  for (size_t n = 0; n < list.size(); ++n) {
    const json& c = list[n];
    const std::string name = Str(c, "name");
    if (std::any_of(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n),
                    [&](const json& e) { return Str(e, "name") == name; })) {
      errors.push_back(std::string(kind) + " '" + name + "' is listed twice");
      continue;
    }
    const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const TensorInfo& t) { return t.name == name; });
    const std::string where = std::string(kind) + " '" + name + "'";
    if (it == tensors.end()) {
      std::string have;
      for (const TensorInfo& t : tensors) have += (have.empty() ? "'" : ", '") + t.name + "'";
      errors.push_back(where + ": the artifact has no " + kind + " of that name (its " + kind + "s: " + have + ")");
      continue;
    }
    const std::string data_type = Str(c, "data_type");
    if (data_type != ConfigDataType(it->dtype))
      errors.push_back(where + ": data_type " + (data_type.empty() ? std::string("missing") : data_type) +
                       ", the artifact's is " + ConfigDataType(it->dtype));
    const json& dims = BackendDims(c);
    const size_t skip = batched ? 1 : 0;
    if (!batched && it->shape.empty() && dims.size() == 1 && DimValue(dims[0]) == 1) continue;  // a scalar as [1]
    if (dims.size() + skip != it->shape.size()) {
      errors.push_back(where + ": " + to_string(dims.size()) + (c.contains("reshape") ? " dims in its reshape" : " dims") +
                       (batched ? " after the batch dim" : "") + ", the artifact's has " +
                       to_string(it->shape.size() - std::min(skip, it->shape.size())));
      continue;
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      const DimInfo& a = it->shape[d + skip];
      const std::optional<int64_t> v = DimValue(dims[d]);
      const std::string at = where + " dim " + to_string(d) + (batched ? " (after the batch dim)" : "");
      if (!v || *v < -1)
        errors.push_back(at + ": " + dims[d].dump() + " is not a dim (-1 or a size)");
      else if (*v == -1 && a.value >= 0)
        errors.push_back(at + ": -1, but the artifact fixes it to " + to_string(a.value));
      else if (*v >= 0 && a.value >= 0 && *v != a.value)
        errors.push_back(at + ": " + to_string(*v) + ", the artifact's is " + to_string(a.value));
    }
  }
}

}  // namespace

std::string ConfigDataType(DType dtype) {
  for (const DTypeNames& d : kDTypes)
    if (d.dtype == dtype) return d.config;
  return {};
}

TRITONSERVER_DataType TritonDataType(DType dtype) {
  for (const DTypeNames& d : kDTypes)
    if (d.dtype == dtype) return d.triton;
  return TRITONSERVER_TYPE_INVALID;
}

DType DTypeOfTriton(TRITONSERVER_DataType type) {
  for (const DTypeNames& d : kDTypes)
    if (d.triton == type) return d.dtype;
  return DType::kUndefined;
}

namespace {

// Whether an output's dim 0 of "1|4" (the entries fix it differently, DimInfo) is the batch:
// every entry fixes the batch (its first input's dim 0) to a constant, and these are the same
// constants, so each entry's output has its batch's rows.
bool FollowsFixedBatches(const Model& model, const std::string& joined) {
  std::vector<int64_t> forms, batches;
  for (size_t at = 0; at <= joined.size();) {
    const size_t bar = std::min(joined.find('|', at), joined.size());
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(joined.data() + at, joined.data() + bar, v);
    if (ec != std::errc() || end != joined.data() + bar) return false;
    forms.push_back(v);
    at = bar + 1;
  }
  for (const EntryInfo& e : model.entries()) {
    if (e.input_dims.empty() || e.input_dims[0].empty() || e.input_dims[0][0].value < 0) return false;
    batches.push_back(e.input_dims[0][0].value);
  }
  std::sort(forms.begin(), forms.end());
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  return forms == batches;
}

}  // namespace

std::string BatchSymbol(const Model& model) {
  if (model.inputs().empty()) return {};
  std::string symbol;
  for (const auto* list : {&model.inputs(), &model.outputs()})
    for (const TensorInfo& t : *list) {
      if (t.shape.empty() || t.shape[0].value >= 0 || t.shape[0].symbol.empty()) return {};
      if (symbol.empty()) symbol = t.shape[0].symbol;
      if (t.shape[0].symbol != symbol && (list == &model.inputs() || !FollowsFixedBatches(model, t.shape[0].symbol)))
        return {};
    }
  return symbol;
}

bool AcceptsBatch(const Model& model, int64_t rows) {
  return std::any_of(model.entries().begin(), model.entries().end(), [&](const EntryInfo& e) {
    return std::all_of(e.input_dims.begin(), e.input_dims.end(), [&](const std::vector<DimCheckInfo>& dims) {
      return !dims.empty() && dims[0].Accepts(rows);
    });
  });
}

namespace {

// The sizes an entry accepts are one input's dim-0 check at a time (a constant, or a range
// with a step), so the scans below jump from run to run of accepted sizes instead of trying
// every size up to max_batch_size (int32).
// Within entry `e`: the smallest size from `rows` on that every input accepts (INT64_MAX: none).
int64_t NextAccepted(const EntryInfo& e, int64_t rows) {
  for (int tries = 0; tries < 64 && rows < INT64_MAX; ++tries) {
    int64_t next = rows;
    for (const std::vector<DimCheckInfo>& dims : e.input_dims) {
      if (dims.empty()) return INT64_MAX;
      const DimCheckInfo& d = dims[0];
      int64_t v = INT64_MAX;
      if (d.value >= 0) {
        if (d.value >= rows) v = d.value;
      } else if (const int64_t from = std::max(rows, d.min); from <= d.max) {
        const int64_t up = (d.divisor - from % d.divisor) % d.divisor;
        if (from <= d.max - up) v = from + up;
      }
      next = std::max(next, v);
    }
    if (next == INT64_MAX) return next;
    if (std::all_of(e.input_dims.begin(), e.input_dims.end(), [&](const auto& dims) { return dims[0].Accepts(next); }))
      return next;
    rows = next + 1;  // the inputs disagree at `next`: look past it
  }
  return INT64_MAX;
}

// The accepted sizes from `rows` on, over every entry: the first (INT64_MAX: none) and the last
// of the run of consecutive accepted sizes an entry gives from there.
struct BatchRun {
  int64_t first = INT64_MAX, last = 0;
};
BatchRun NextBatchRun(const Model& model, int64_t rows) {
  BatchRun run;
  for (const EntryInfo& e : model.entries()) run.first = std::min(run.first, NextAccepted(e, rows));
  if (run.first == INT64_MAX) return run;
  for (const EntryInfo& e : model.entries()) {
    if (NextAccepted(e, run.first) != run.first) continue;
    int64_t last = INT64_MAX;
    for (const std::vector<DimCheckInfo>& dims : e.input_dims)
      last = std::min(last, dims[0].value >= 0 || dims[0].divisor != 1 ? run.first : dims[0].max);
    run.last = std::max(run.last, last);
  }
  return run;
}

}  // namespace

std::string BatchGaps(const Model& model, int64_t max_batch_size) {
  std::string text;
  int ranges = 0;
  for (int64_t rows = 1; rows <= max_batch_size;) {
    const BatchRun run = NextBatchRun(model, rows);
    if (run.first > rows) {
      if (++ranges > 8) return text + ", ...";
      const int64_t last = std::min(run.first - 1, max_batch_size);
      text += (text.empty() ? "" : ", ") + to_string(rows) + (last > rows ? ".." + to_string(last) : "");
    }
    if (run.first > max_batch_size || run.last >= max_batch_size) break;
    rows = run.last + 1;
  }
  return text;
}

json AutoCompleteConfig(const Model& model, json config, int64_t default_max_batch_size) {
  if (!config.is_object()) config = json::object();
  // Listed inputs say whether dim 0 is in their dims: the batch size is not guessed then.
  if (MaxBatchSize(config) == 0 && List(config, "input").empty() && default_max_batch_size > 0 &&
      !BatchSymbol(model).empty()) {
    // The largest size up to the default that an entry accepts.
    int64_t rows = 0;
    for (BatchRun run = NextBatchRun(model, 1); run.first <= default_max_batch_size;
         run = NextBatchRun(model, rows + 1)) {
      rows = std::min(run.last, default_max_batch_size);
      if (rows == default_max_batch_size) break;
    }
    if (rows > 0) config["max_batch_size"] = rows;
  }
  const bool batched = MaxBatchSize(config) > 0;
  for (const auto& [key, tensors] : {std::pair{"input", &model.inputs()}, std::pair{"output", &model.outputs()}}) {
    if (!List(config, key).empty()) continue;
    json list = json::array();
    for (const TensorInfo& t : *tensors) list.push_back(TensorConfig(t, batched));
    config[key] = std::move(list);
  }
  return config;
}

Status CheckConfig(const Model& model, const json& config) {
  std::vector<std::string> errors;
  const int64_t max_batch = MaxBatchSize(config);
  const bool batched = max_batch > 0;
  if (max_batch < 0) errors.push_back("max_batch_size " + to_string(max_batch) + " is negative");
  if (batched && BatchSymbol(model).empty()) {
    // The first tensor whose dim 0 is not the first input's symbol.
    std::string why = "it has no inputs";
    const std::string first =
        model.inputs().empty() || model.inputs()[0].shape.empty() ? std::string() : model.inputs()[0].shape[0].symbol;
    for (const auto* list : {&model.inputs(), &model.outputs()}) {
      const auto it = std::find_if(list->begin(), list->end(), [&](const TensorInfo& t) {
        return t.shape.empty() || t.shape[0].value >= 0 || t.shape[0].symbol != first;
      });
      if (it == list->end()) continue;
      why = "'" + it->name + "' " + (it->shape.empty() ? "is a scalar" : "dim 0 is " + DimText(it->shape[0]));
      break;
    }
    errors.push_back("max_batch_size " + to_string(max_batch) +
                     ", but the artifact has no batch dim: dim 0 of every input and output must be one symbol, and " +
                     why + " (max_batch_size 0 serves it unbatched)");
  }
  if (batched && !BatchSymbol(model).empty() && !AcceptsBatch(model, max_batch)) {
    std::string entries;
    for (const EntryInfo& e : model.entries()) entries += (entries.empty() ? "" : "; ") + e.name;
    errors.push_back("max_batch_size " + to_string(max_batch) + ": no entry accepts a batch of " +
                     to_string(max_batch) + " (entries: " + entries +
                     "), so a request of that many rows could not run; compile a profile for it or lower max_batch_size");
  }
  CheckTensors(model.inputs(), List(config, "input"), "input", batched, errors);
  CheckTensors(model.outputs(), List(config, "output"), "output", batched, errors);
  for (const TensorInfo& t : model.inputs()) {
    const json& list = List(config, "input");
    if (std::none_of(list.begin(), list.end(), [&](const json& c) { return Str(c, "name") == t.name; }))
      errors.push_back("input '" + t.name + "': the artifact needs it, and the configuration does not list it");
  }
  if (errors.empty()) return Status::Ok();
  std::string message = "config.pbtxt does not fit the artifact:";
  for (const std::string& e : errors) message += "\n  " + e;
  return InvalidArgument(std::move(message));
}

Result<Parameters> ReadParameters(const json& config) {
  Parameters p;
  const auto it = config.find("parameters");
  if (it == config.end() || !it->is_object()) return p;
  for (const auto& [name, value] : it->items()) {
    const std::string v = value.is_object() ? Str(value, "string_value") : std::string();
    const std::string where = "parameter '" + name + "' = '" + v + "'";
    if (name == "cpu_threads") {
      int n = -1;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 0 || n > CpuOptions::kMaxThreads)
        return InvalidArgument(where + ": expected 0 (one per core) to " + to_string(CpuOptions::kMaxThreads));
      p.cpu_threads = n;
    } else if (name == "cuda_graphs") {
      if (v != "true" && v != "false") return InvalidArgument(where + ": expected true or false");
      p.cuda_graphs = v == "true";
    } else if (name == "device") {
      if (v == "auto") p.device = DevicePolicy::kAuto;
      else if (v == "cpu") p.device = DevicePolicy::kCpu;
      else if (v == "cuda") p.device = DevicePolicy::kCuda;
      else return InvalidArgument(where + ": expected auto, cpu or cuda");
    } else {
      return InvalidArgument("parameter '" + name + "': unknown; the Kiln backend reads cpu_threads, cuda_graphs and "
                             "device");
    }
  }
  return p;
}

Result<ServingConfig> ReadServingConfig(const Model& model, const json& config) {
  KILN_RETURN_IF_ERROR(CheckConfig(model, config));
  ServingConfig s;
  s.max_batch_size = MaxBatchSize(config);
  KILN_ASSIGN_OR_RETURN(s.parameters, ReadParameters(config));
  return s;
}

}  // namespace kiln::triton
