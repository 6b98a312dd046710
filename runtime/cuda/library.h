// Library: what the CUDA backend asks of a CUDA library it sends ops to (cuBLASLt: blas.h,
// cuDNN: dnn.h). The backend decides once per entry and binding whether the library the
// artifact names for an instruction takes it (Accepts), plans the largest Workspace, and
// enqueues each call with Run (cuda/placement.cc); an op the library does not take runs on the
// CPU backend, with the reason in Stats::last_fallbacks.
//
// Thread-compatible: one library object per execution context, used by one thread at a time.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "runtime/attrs.h"
#include "runtime/cuda/op_call.h"

namespace kiln::cuda {

class Library {
 public:
  virtual ~Library() = default;
  virtual std::string_view name() const = 0;  // "cuBLASLt", "cuDNN"
  // OK when this library, on this device, runs `op` with these attributes, dtypes and shapes;
  // otherwise kUnimplemented with the reason, or kInvalidArgument for a malformed op. Reads
  // shapes and dtypes only, never the data.
  virtual Status Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs) const = 0;
  // Device workspace bytes to plan for the op (an upper bound; 0 when it needs none).
  virtual size_t Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                           std::span<const DeviceTensor> outputs) const = 0;
  // Enqueues the op on call.stream; `node` names it in errors. kUnimplemented when the library
  // finds no way to run it after all (the caller may then run it elsewhere); kDeviceError for
  // a failed library call.
  virtual Status Run(std::string_view op, const OpCall& call, std::string_view node) = 0;
  // Makes what Run makes at its first call with these shapes and buffers (descriptors, the
  // algorithm), enqueuing nothing and reading no data, so that that Run asks the library for no
  // plan (ExecutionContext::Warm). The default makes nothing. Errors as Run's.
  virtual Status Plan(std::string_view op, const OpCall& call, std::string_view node) {
    static_cast<void>(op), static_cast<void>(call), static_cast<void>(node);
    return Status::Ok();
  }
};

}  // namespace kiln::cuda
