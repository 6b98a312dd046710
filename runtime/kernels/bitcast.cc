// BitCast: the bytes copied unchanged (Kiln's tensors are little-endian, as ONNX requires);
// the output dtype, of the same width, was checked by the compiler.
#include <cstring>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status BitCastKernel(const KernelCall& call) {
  constexpr std::string_view kName = "BitCast";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef& x = call.inputs[0];
  const TensorRef& y = call.outputs[0];
  if (DTypeSize(x.dtype) != DTypeSize(y.dtype) || x.num_elements != y.num_elements)
    return OpError(kName, "output " + DTypeStr(y.dtype) + " " + ShapeStr(y) + " is not as wide as input " +
                              DTypeStr(x.dtype) + " " + ShapeStr(x));
  if (x.data != y.data && x.num_elements > 0)
    std::memcpy(y.data, x.data, static_cast<size_t>(x.num_elements) * DTypeSize(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {{"BitCast", BitCastKernel, nullptr, true}};

}  // namespace

std::span<const KernelDef> BitCastKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
