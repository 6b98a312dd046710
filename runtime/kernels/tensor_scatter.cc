// TensorScatter: out = past_cache with `update` written along `axis` at each batch row's
// write index (write_indices, zeros when absent); mode "circular" wraps the index modulo
// the cache length, "linear" requires it to stay inside the cache.
#include <cstring>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status TensorScatterKernel(const KernelCall& call) {
  constexpr std::string_view kName = "TensorScatter";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef& past = call.inputs[0];
  const TensorRef& update = call.inputs[1];
  const TensorRef* writes = call.inputs.size() > 2 && call.inputs[2].present() ? &call.inputs[2] : nullptr;
  const TensorRef& out = call.outputs[0];
  int axis = 0;
  if (!NormalizeAxis(call.attrs.GetInt("axis", -2), past.rank, &axis) || axis == 0 || update.rank != past.rank ||
      out.num_elements != past.num_elements || update.dtype != past.dtype || out.dtype != past.dtype)
    return OpError(kName, "past_cache " + DTypeStr(past.dtype) + " " + ShapeStr(past) + ", update " +
                              DTypeStr(update.dtype) + " " + ShapeStr(update) + " and axis " +
                              std::to_string(call.attrs.GetInt("axis", -2)) + " do not fit");
  const bool circular = call.attrs.GetString("mode", "linear") == "circular";
  const int64_t batch = past.dims[0], max_len = past.dims[axis], len = update.dims[axis];
  if (writes && (writes->dtype != DType::kInt64 || writes->num_elements != batch))
    return OpError(kName, "write_indices must be int64 [" + std::to_string(batch) + "], found " +
                              DTypeStr(writes->dtype) + " " + ShapeStr(*writes));
  const size_t row = static_cast<size_t>(Product(past.dims, axis + 1, past.rank)) * DTypeSize(past.dtype);
  const int64_t outer = Product(past.dims, 0, axis), per_batch = Product(past.dims, 1, axis);
  auto* dst = static_cast<uint8_t*>(out.data);
  const auto* src = static_cast<const uint8_t*>(update.data);
  if (out.data != past.data && past.num_elements > 0)
    std::memcpy(out.data, past.data, static_cast<size_t>(past.num_elements) * DTypeSize(past.dtype));
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t b = o / per_batch;
    const int64_t start = writes ? writes->as<const int64_t>()[b] : 0;
    if (!circular && (start < 0 || start > max_len - len))
      return OpError(kName, "linear mode: batch " + std::to_string(b) + " writes " + std::to_string(len) +
                                " rows at index " + std::to_string(start) + ", outside the cache of " +
                                std::to_string(max_len));
    for (int64_t s = 0; s < len; ++s) {
      int64_t at = start + s;
      if (circular) at = ((at % max_len) + max_len) % max_len;
      std::memcpy(dst + (o * max_len + at) * row, src + (o * len + s) * row, row);
    }
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {{"TensorScatter", TensorScatterKernel, nullptr, true}};

}  // namespace

std::span<const KernelDef> TensorScatterKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
