// The CUDA backend's claims (runtime/claims.h): a fused region runs as a generated kernel (a
// cubin or PTX, runtime/cuda/launch.h); MatMul and Gemm on cuBLASLt, Conv, ConvTranspose and
// pooling on cuDNN (runtime/cuda/placement.h decides per binding whether the library is there and
// takes the form); every other op on its CPU kernel on the host, as a CPU fallback region, with
// the reason: the op table's (no generated kernel takes it), a data-dependent output size, or an
// instance the fusion stage left alone. Needs no CUDA header: built in every runtime, so that a
// compiler without the CUDA toolkit still records the CUDA placement.
#pragma once

#include <string_view>

#include "runtime/claims.h"

namespace kiln::cuda {

Claim ClaimOp(std::string_view op, bool fused);

}  // namespace kiln::cuda
