#include "compiler/passes/constants.h"

#include <cstring>
#include <memory>

#include "runtime/kernels/float_storage.h"

namespace kiln::passes {

ir::ValueId AddFloatConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                             const std::vector<double>& v) {
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = dtype;
  data->dims = dims;
  data->bytes.resize(v.size() * DTypeSize(dtype));
  cpu::TensorRef out;
  out.data = data->bytes.data();
  out.dtype = dtype;
  for (size_t i = 0; i < v.size(); ++i) cpu::StoreFloat(out, static_cast<int64_t>(i), v[i]);
  ir::Value value;
  value.name = std::move(name);
  value.dtype = dtype;
  for (int64_t d : dims) value.shape.push_back(d);
  value.data = std::move(data);
  return t.AddValue(std::move(value));
}

ir::ValueId AddIntConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                           const std::vector<int64_t>& v) {
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = dtype;
  data->dims = dims;
  data->bytes.resize(v.size() * DTypeSize(dtype));
  // The low bytes of each int64, as static_cast keeps them (two's complement, little endian);
  // a bool is 1 for any nonzero value.
  const size_t size = DTypeSize(dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t x = dtype == DType::kBool ? (v[i] != 0) : v[i];
    std::memcpy(data->bytes.data() + i * size, &x, size);
  }
  ir::Value value;
  value.name = std::move(name);
  value.dtype = dtype;
  for (int64_t d : dims) value.shape.push_back(d);
  value.data = std::move(data);
  return t.AddValue(std::move(value));
}

}  // namespace kiln::passes
