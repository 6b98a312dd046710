// inputs.h: the input tensors of one request, checked against the model's declared inputs.
//
//   RequestInputs in(model.inputs());
//   KILN_ASSIGN_OR_RETURN(HostTensor* t, in.Add("input", kiln::DType::kFloat32, {1, 576}, 576));
//   std::memcpy(t->data(), samples, t->bytes());
//   KILN_ASSIGN_OR_RETURN(std::vector<kiln::TensorView> views, in.Views());
//
// Both body formats (json_body.h, npy_body.h) fill one of these, so the checks and their messages
// are the same whichever format a client sends. Shapes themselves (rank, dims, symbols) are left
// to the runtime's prologue, which knows what each entry accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime.h"

// A dense row-major tensor in memory it owns. The buffer comes from new[] (16-byte aligned, enough
// for every dtype) and is never null, even for zero elements, since prologues refuse null data.
class HostTensor {
 public:
  HostTensor(kiln::DType dtype, std::vector<int64_t> shape, size_t bytes);

  kiln::DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  std::byte* data() { return data_.get(); }
  size_t bytes() const { return bytes_; }
  kiln::TensorView View() const;

 private:
  kiln::DType dtype_;
  std::vector<int64_t> shape_;
  size_t bytes_;
  std::unique_ptr<std::byte[]> data_;
};

// Not thread-safe; one per request.
class RequestInputs {
 public:
  // `inputs` (Model::inputs()) must outlive this object.
  explicit RequestInputs(const std::vector<kiln::TensorInfo>& inputs);

  // Allocates the tensor for model input `name` and returns it for the caller to fill with
  // shape's product * DTypeSize(dtype) bytes. `elements` is how many elements the body carries:
  // it must equal the shape's product, checked before anything is allocated, so the allocation
  // is bounded by the body's size. Errors (kInvalidArgument, message naming the input): a name
  // the model does not have, a name given twice, a dtype other than the model's, more than
  // kiln::kMaxRank dims, a negative dim, a product that is not `elements` (or overflows).
  kiln::Result<HostTensor*> Add(std::string_view name, kiln::DType dtype, std::vector<int64_t> shape,
                                int64_t elements);

  // Views of the tensors in model input order, valid while this object lives. kInvalidArgument
  // naming the first model input that was not given.
  kiln::Result<std::vector<kiln::TensorView>> Views() const;

 private:
  const std::vector<kiln::TensorInfo>& infos_;
  std::vector<std::optional<HostTensor>> tensors_;  // model input order
};

// Parses an ONNX-style dtype name as kiln::DTypeName prints it ("float32", "int64", "bool").
std::optional<kiln::DType> ParseDType(std::string_view name);

// "[1, 576]": a shape as messages print it.
std::string ShapeString(const std::vector<int64_t>& shape);
