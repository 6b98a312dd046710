#include "json_body.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

kiln::Status Bad(const std::string& where, const std::string& what) { return kiln::InvalidArgument(where + ": " + what); }

// Reads one element of a float dtype: a number in T's range, or "nan", "inf", "-inf".
template <typename T>
kiln::Status ReadFloat(const json& v, const std::string& where, T* out) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return *out = std::numeric_limits<T>::quiet_NaN(), kiln::Status();
    if (s == "inf") return *out = std::numeric_limits<T>::infinity(), kiln::Status();
    if (s == "-inf") return *out = -std::numeric_limits<T>::infinity(), kiln::Status();
    return Bad(where, "expected a number, \"nan\", \"inf\" or \"-inf\", found the string \"" + s + "\"");
  }
  if (!v.is_number()) return Bad(where, std::string("expected a number, found ") + v.type_name());
  const double d = v.get<double>();
  // A finite double beyond T's range has no T value (the conversion is undefined).
  if (std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max())) {
    return Bad(where, v.dump() + " is outside the dtype's range");
  }
  *out = static_cast<T>(d);
  return kiln::Status();
}

template <typename T>
kiln::Status ReadInt(const json& v, const std::string& where, T* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return Bad(where, v.dump() + " is outside the dtype's range");
    *out = static_cast<T>(u);
    return kiln::Status();
  }
  if (v.is_number_integer()) {  // negative: nlohmann keeps non-negative integers unsigned
    const int64_t i = v.get<int64_t>();
    if (!std::numeric_limits<T>::is_signed || i < static_cast<int64_t>(std::numeric_limits<T>::min())) {
      return Bad(where, v.dump() + " is outside the dtype's range");
    }
    *out = static_cast<T>(i);
    return kiln::Status();
  }
  return Bad(where, std::string("expected an integer, found ") + (v.is_number_float() ? "the number " + v.dump() : v.type_name()));
}

kiln::Status ReadBool(const json& v, const std::string& where, uint8_t* out) {
  if (!v.is_boolean()) return Bad(where, std::string("expected true or false, found ") + v.type_name());
  *out = v.get<bool>() ? 1 : 0;
  return kiln::Status();
}

template <typename T, typename Read>
kiln::Status ReadAll(const json& data, const std::string& where, std::byte* dst, Read read) {
  for (size_t i = 0; i < data.size(); ++i) {
    T value{};
    KILN_RETURN_IF_ERROR(read(data[i], where + ".data[" + std::to_string(i) + "]", &value));
    std::memcpy(dst + i * sizeof(T), &value, sizeof(T));
  }
  return kiln::Status();
}

kiln::Status ReadElements(const json& data, const std::string& where, HostTensor& t) {
  std::byte* d = t.data();
  switch (t.dtype()) {
    case kiln::DType::kFloat32: return ReadAll<float>(data, where, d, ReadFloat<float>);
    case kiln::DType::kFloat64: return ReadAll<double>(data, where, d, ReadFloat<double>);
    case kiln::DType::kInt8: return ReadAll<int8_t>(data, where, d, ReadInt<int8_t>);
    case kiln::DType::kUInt8: return ReadAll<uint8_t>(data, where, d, ReadInt<uint8_t>);
    case kiln::DType::kInt16: return ReadAll<int16_t>(data, where, d, ReadInt<int16_t>);
    case kiln::DType::kUInt16: return ReadAll<uint16_t>(data, where, d, ReadInt<uint16_t>);
    case kiln::DType::kInt32: return ReadAll<int32_t>(data, where, d, ReadInt<int32_t>);
    case kiln::DType::kUInt32: return ReadAll<uint32_t>(data, where, d, ReadInt<uint32_t>);
    case kiln::DType::kInt64: return ReadAll<int64_t>(data, where, d, ReadInt<int64_t>);
    case kiln::DType::kUInt64: return ReadAll<uint64_t>(data, where, d, ReadInt<uint64_t>);
    case kiln::DType::kBool: return ReadAll<uint8_t>(data, where, d, ReadBool);
    default:
      return Bad(where, "dtype " + std::string(kiln::DTypeName(t.dtype())) +
                            " is not carried in JSON bodies; send the tensor as a .npy part of a multipart/form-data body");
  }
}

kiln::Status ParseInput(const std::string& name, const json& spec, RequestInputs& inputs) {
  const std::string where = "inputs." + name;
  if (!spec.is_object()) return Bad(where, std::string("expected an object, found ") + spec.type_name());
  for (const auto& [key, value] : spec.items()) {
    if (key != "dtype" && key != "shape" && key != "data") {
      return Bad(where, "unknown key '" + key + "'; expected 'dtype', 'shape' and 'data'");
    }
  }
  for (const char* key : {"dtype", "shape", "data"}) {
    if (!spec.contains(key)) return Bad(where, std::string("missing '") + key + "'");
  }
  const json& dtype = spec["dtype"];
  if (!dtype.is_string()) return Bad(where + ".dtype", std::string("expected a string, found ") + dtype.type_name());
  std::optional<kiln::DType> dt = ParseDType(dtype.get_ref<const std::string&>());
  if (!dt) return Bad(where + ".dtype", "unknown dtype " + dtype.dump());
  const json& shape_json = spec["shape"];
  if (!shape_json.is_array()) return Bad(where + ".shape", std::string("expected an array, found ") + shape_json.type_name());
  std::vector<int64_t> shape;
  for (const json& d : shape_json) {
    if (!d.is_number_integer()) return Bad(where + ".shape", "expected integers, found " + d.dump());
    if (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Bad(where + ".shape", d.dump() + " is beyond int64");
    }
    shape.push_back(d.get<int64_t>());
  }
  const json& data = spec["data"];
  if (!data.is_array()) return Bad(where + ".data", std::string("expected an array, found ") + data.type_name());
  KILN_ASSIGN_OR_RETURN(HostTensor * t, inputs.Add(name, *dt, std::move(shape), static_cast<int64_t>(data.size())));
  return ReadElements(data, where, *t);
}

template <typename T>
json FloatArray(const std::byte* p, int64_t n) {
  json a = json::array();
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if (std::isnan(v)) a.push_back("nan");
    else if (std::isinf(v)) a.push_back(v > 0 ? "inf" : "-inf");
    else a.push_back(v);
  }
  return a;
}

// kAsBool: one byte per element, written as true/false.
template <typename T, bool kAsBool = false>
json IntArray(const std::byte* p, int64_t n) {
  json a = json::array();
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    if constexpr (kAsBool) a.push_back(v != 0);
    else a.push_back(v);
  }
  return a;
}

kiln::Result<json> DataArray(const kiln::TensorView& t) {
  const auto* p = static_cast<const std::byte*>(t.data);
  const int64_t n = t.num_elements();
  switch (t.dtype) {
    case kiln::DType::kFloat32: return FloatArray<float>(p, n);
    case kiln::DType::kFloat64: return FloatArray<double>(p, n);
    case kiln::DType::kInt8: return IntArray<int8_t>(p, n);
    case kiln::DType::kUInt8: return IntArray<uint8_t>(p, n);
    case kiln::DType::kInt16: return IntArray<int16_t>(p, n);
    case kiln::DType::kUInt16: return IntArray<uint16_t>(p, n);
    case kiln::DType::kInt32: return IntArray<int32_t>(p, n);
    case kiln::DType::kUInt32: return IntArray<uint32_t>(p, n);
    case kiln::DType::kInt64: return IntArray<int64_t>(p, n);
    case kiln::DType::kUInt64: return IntArray<uint64_t>(p, n);
    case kiln::DType::kBool: return IntArray<uint8_t, true>(p, n);
    default:
      return kiln::Unimplemented("dtype " + std::string(kiln::DTypeName(t.dtype)) + " is not carried in JSON bodies");
  }
}

}  // namespace

kiln::Status ParseJsonInputs(std::string_view body, RequestInputs& inputs) {
  try {
    json doc;
    try {
      doc = json::parse(body);
    } catch (const json::parse_error& e) {
      return kiln::InvalidArgument("invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    } catch (const json::exception& e) {  // a number beyond double's range names its token
      return kiln::InvalidArgument(std::string("invalid JSON: ") + e.what());
    }
    if (!doc.is_object()) return Bad("body", std::string("expected a JSON object, found ") + doc.type_name());
    for (const auto& [key, value] : doc.items()) {
      if (key != "inputs") return Bad("body", "unknown key '" + key + "'; expected 'inputs'");
    }
    if (!doc.contains("inputs")) return Bad("body", "missing 'inputs'");
    const json& in = doc["inputs"];
    if (!in.is_object()) return Bad("inputs", std::string("expected an object, found ") + in.type_name());
    for (const auto& [name, spec] : in.items()) KILN_RETURN_IF_ERROR(ParseInput(name, spec, inputs));
    return kiln::Status();
  } catch (const std::exception& e) {  // a nlohmann call this code did not guard: still an answer
    return kiln::InvalidArgument(std::string("JSON body: ") + e.what());
  }
}

kiln::Result<std::string> JsonOutputs(const std::vector<kiln::TensorInfo>& infos,
                                      const std::vector<kiln::TensorView>& outputs) {
  try {
    json out = json::object();
    for (size_t i = 0; i < outputs.size() && i < infos.size(); ++i) {
      const kiln::TensorView& t = outputs[i];
      kiln::Result<json> data = DataArray(t);
      if (!data.ok()) return data.status().WithContext("output '" + infos[i].name + "'");
      out[infos[i].name] = {{"dtype", std::string(kiln::DTypeName(t.dtype))},
                            {"shape", std::vector<int64_t>(t.dims, t.dims + t.rank)},
                            {"data", std::move(*data)}};
    }
    return json{{"outputs", std::move(out)}}.dump();
  } catch (const std::exception& e) {
    return kiln::Internal(std::string("encoding the outputs as JSON: ") + e.what());
  }
}
