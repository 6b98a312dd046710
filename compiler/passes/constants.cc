#include "compiler/passes/constants.h"

#include <cstring>
#include <memory>

#include "runtime/kernels/float_storage.h"

namespace kiln::passes {
namespace {

// A constant value `name` of `dtype` and `dims` whose `count` elements `store(bytes, i)` writes.
template <typename Store>
ir::ValueId AddConstant(ir::Trace& t, std::string name, DType dtype, const std::vector<int64_t>& dims, size_t count,
                        Store store) {
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = dtype;
  data->dims = dims;
  data->bytes.resize(count * DTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) store(data->bytes.data(), i);
  ir::Value value;
  value.name = std::move(name);
  value.dtype = dtype;
  for (int64_t d : dims) value.shape.push_back(d);
  value.data = std::move(data);
  return t.AddValue(std::move(value));
}

}  // namespace

ir::ValueId AddFloatConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                             const std::vector<double>& v) {
  return AddConstant(t, std::move(name), dtype, dims, v.size(), [&](uint8_t* bytes, size_t i) {
    cpu::TensorRef out;
    out.data = bytes;
    out.dtype = dtype;
    cpu::StoreFloat(out, static_cast<int64_t>(i), v[i]);
  });
}

ir::ValueId AddIntConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                           const std::vector<int64_t>& v) {
  // The low bytes of each int64, as static_cast keeps them (two's complement, little endian);
  // a bool is 1 for any nonzero value.
  const size_t size = DTypeSize(dtype);
  return AddConstant(t, std::move(name), dtype, dims, v.size(), [&](uint8_t* bytes, size_t i) {
    const int64_t x = dtype == DType::kBool ? (v[i] != 0) : v[i];
    std::memcpy(bytes + i * size, &x, size);
  });
}

}  // namespace kiln::passes
