// CenterCropPad: each dim is cropped or zero-padded about its centre to the output's
// size (the odd element goes to the end, as ONNX's reference does). The output dims,
// computed by the compiler from the `shape` input and `axes`, say everything the copy
// needs, so the kernel reads neither.
#include <cstdint>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status CenterCropPad(const KernelCall& call) {
  constexpr std::string_view kName = "CenterCropPad";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (y.dtype != x.dtype || y.rank != x.rank || x.rank > kMaxRank)
    return OpError(kName, "output " + DTypeStr(y.dtype) + ShapeStr(y) + " does not match input " + DTypeStr(x.dtype) +
                              ShapeStr(x));
  // Output index o reads input index o + shift (crop: shift >= 0; pad: shift < 0).
  int64_t shift[kMaxRank], xstride[kMaxRank];
  ContiguousStrides(x.dims, x.rank, xstride);
  for (int d = 0; d < x.rank; ++d)
    shift[d] = x.dims[d] >= y.dims[d] ? (x.dims[d] - y.dims[d]) / 2 : -((y.dims[d] - x.dims[d]) / 2);
  const bool ok = VisitBySize(DTypeSize(x.dtype), [&](auto tag) {
    using U = decltype(tag);
    const U* px = x.as<const U>();
    U* py = y.as<U>();
    NdIndex it(y.dims, y.rank);
    for (int64_t i = 0; i < y.num_elements; ++i, it.Next(y.rank)) {
      int64_t src = 0;
      bool inside = true;
      for (int d = 0; d < y.rank && inside; ++d) {
        const int64_t s = it.idx[d] + shift[d];
        inside = s >= 0 && s < x.dims[d];
        src += s * xstride[d];
      }
      py[i] = inside ? px[src] : U(0);
    }
  });
  if (!ok) return OpError(kName, "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"CenterCropPad", CenterCropPad, nullptr, true},
};

}  // namespace

std::span<const KernelDef> CenterCropPadKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
