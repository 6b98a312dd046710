#include "inputs.h"

#include <algorithm>
#include <string>

HostTensor::HostTensor(kiln::DType dtype, std::vector<int64_t> shape, size_t bytes)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(bytes), data_(new std::byte[std::max<size_t>(bytes, 1)]) {}

kiln::TensorView HostTensor::View() const {
  return kiln::TensorView::Host(data_.get(), dtype_, shape_.data(), static_cast<int32_t>(shape_.size()));
}

RequestInputs::RequestInputs(const std::vector<kiln::TensorInfo>& inputs)
    : infos_(inputs), tensors_(inputs.size()) {}

kiln::Result<HostTensor*> RequestInputs::Add(std::string_view name, kiln::DType dtype, std::vector<int64_t> shape,
                                             int64_t elements) {
  auto it = std::find_if(infos_.begin(), infos_.end(), [&](const kiln::TensorInfo& t) { return t.name == name; });
  const std::string quoted = "input '" + std::string(name) + "'";
  if (it == infos_.end()) {
    std::string known;
    for (const kiln::TensorInfo& t : infos_) known += (known.empty() ? "'" : ", '") + t.name + "'";
    return kiln::InvalidArgument("unknown " + quoted + ": the model's inputs are " + known);
  }
  const size_t index = static_cast<size_t>(it - infos_.begin());
  if (tensors_[index]) return kiln::InvalidArgument(quoted + " is given twice");
  if (dtype != it->dtype) {
    return kiln::InvalidArgument(quoted + ": dtype " + std::string(kiln::DTypeName(dtype)) + ", the model expects " +
                                 std::string(kiln::DTypeName(it->dtype)));
  }
  if (shape.size() > static_cast<size_t>(kiln::kMaxRank)) {
    return kiln::InvalidArgument(quoted + ": shape " + ShapeString(shape) + " has " + std::to_string(shape.size()) +
                                 " dims, at most " + std::to_string(kiln::kMaxRank) + " are supported");
  }
  for (int64_t d : shape) {
    if (d < 0) return kiln::InvalidArgument(quoted + ": shape " + ShapeString(shape) + " has a negative dim");
  }
  // -1: overflowed, so it cannot equal `elements`. A zero dim makes any product 0.
  int64_t product = std::count(shape.begin(), shape.end(), 0) ? 0 : 1;
  for (int64_t d : shape) {
    if (product > 0 && __builtin_mul_overflow(product, d, &product)) product = -1;
  }
  if (product != elements) {
    return kiln::InvalidArgument(quoted + ": shape " + ShapeString(shape) + " has " +
                                 (product < 0 ? std::string("more than 2^63") : std::to_string(product)) +
                                 " elements, the data has " + std::to_string(elements));
  }
  const size_t bytes = static_cast<size_t>(elements) * kiln::DTypeSize(dtype);
  return &tensors_[index].emplace(dtype, std::move(shape), bytes);
}

kiln::Result<std::vector<kiln::TensorView>> RequestInputs::Views() const {
  std::vector<kiln::TensorView> views;
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!tensors_[i]) return kiln::InvalidArgument("missing input '" + infos_[i].name + "'");
    views.push_back(tensors_[i]->View());
  }
  return views;
}

std::optional<kiln::DType> ParseDType(std::string_view name) {
  for (int32_t v = 1; v <= 24; ++v) {  // DTypeName's range
    if (kiln::IsValidDType(v) && kiln::DTypeName(static_cast<kiln::DType>(v)) == name) return static_cast<kiln::DType>(v);
  }
  return std::nullopt;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
