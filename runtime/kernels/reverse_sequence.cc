// ReverseSequence: for each batch index b, the first sequence_lens[b] steps along time_axis are
// reversed and the rest copied. batch_axis and time_axis are dims 0 and 1 in some order; the
// dims after them form one contiguous row that moves as a whole, so any dtype is a byte copy.
#include <cstdint>
#include <cstring>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status ReverseSequence(const KernelCall& call) {
  constexpr std::string_view kName = "ReverseSequence";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &lens = call.inputs[1], &y = call.outputs[0];
  const int64_t batch_axis = call.attrs.GetInt("batch_axis", 1);
  const int64_t time_axis = call.attrs.GetInt("time_axis", 0);
  if (x.rank < 2 || (batch_axis != 0 && batch_axis != 1) || time_axis != 1 - batch_axis)
    return OpError(kName, "batch_axis " + std::to_string(batch_axis) + " and time_axis " + std::to_string(time_axis) +
                              " must be 0 and 1 in some order for input " + ShapeStr(x));
  if (y.dtype != x.dtype || y.num_elements != x.num_elements)
    return OpError(kName, "output " + DTypeStr(y.dtype) + ShapeStr(y) + " does not match input " + DTypeStr(x.dtype) +
                              ShapeStr(x));
  const int64_t batch = x.dims[batch_axis], time = x.dims[time_axis];
  if (lens.dtype != DType::kInt64 || lens.num_elements != batch)
    return OpError(kName, "sequence_lens must be int64 [" + std::to_string(batch) + "], got " +
                              DTypeStr(lens.dtype) + ShapeStr(lens));
  // Bytes of one (batch, time) row, and the element strides of the two leading dims.
  const size_t row = static_cast<size_t>(x.num_elements / (batch * time > 0 ? batch * time : 1)) * DTypeSize(x.dtype);
  const int64_t batch_stride = batch_axis == 0 ? time : 1, time_stride = time_axis == 0 ? batch : 1;
  const auto* px = static_cast<const uint8_t*>(x.data);
  auto* py = static_cast<uint8_t*>(y.data);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = lens.as<const int64_t>()[b];
    if (n < 0 || n > time)
      return OpError(kName, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(n) + " is outside [0, " +
                                std::to_string(time) + "]");
    for (int64_t t = 0; t < time; ++t) {
      const int64_t src = t < n ? n - 1 - t : t;
      std::memcpy(py + (b * batch_stride + t * time_stride) * row, px + (b * batch_stride + src * time_stride) * row,
                  row);
    }
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"ReverseSequence", ReverseSequence, nullptr, true},
};

}  // namespace

std::span<const KernelDef> ReverseSequenceKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
