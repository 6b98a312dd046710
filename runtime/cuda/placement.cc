#include "runtime/cuda/placement.h"

#include <algorithm>
#include <string_view>

#include "runtime/cuda/dynamic_symbols.h"

namespace kiln::cuda {

std::unique_ptr<LibraryPlacement> LibraryPlacement::Create(const DeviceInfo& dev, size_t num_entries) {
  auto p = std::unique_ptr<LibraryPlacement>(new LibraryPlacement());
  if (auto drv = LoadDriver(); drv.ok()) p->drv_ = *drv;
  auto note = [&](const char* what, const Status& why) {
    p->note_ += std::string(p->note_.empty() ? "" : "; ") + what + " unavailable, its ops run on the CPU: " +
                std::string(why.message());
  };
  if (auto blas = LoadBlas(); !blas.ok()) {
    note("cuBLASLt", blas.status());
  } else if (auto lib = BlasLibrary::Create(**blas); !lib.ok()) {
    note("cuBLASLt", lib.status());
  } else {
    p->blas_ = std::move(*lib);
  }
  DnnOptions dnn_options;  // bfloat16 convolutions need compute capability 8.0
  dnn_options.compute_capability = dev.cc_major * 10 + dev.cc_minor;
  if (auto dnn = LoadDnn(); !dnn.ok()) {
    note("cuDNN", dnn.status());
  } else if (auto lib = DnnLibrary::Create(**dnn, dnn_options); !lib.ok()) {
    note("cuDNN", lib.status());
  } else {
    p->dnn_ = std::move(*lib);
    SdpaOptions sdpa_options;  // fused attention needs compute capability 8.0
    sdpa_options.compute_capability = dnn_options.compute_capability;
    if (auto sdpa = SdpaLibrary::Create(**dnn, sdpa_options); !sdpa.ok())
      note("cuDNN SDPA", sdpa.status());
    else
      p->sdpa_ = std::move(*sdpa);
    if (p->drv_ == nullptr) {
      note("cuDNN RNN", FailedPrecondition("no CUDA driver"));
    } else if (auto rnn = RnnLibrary::Create(**dnn, *p->drv_); !rnn.ok()) {
      note("cuDNN RNN", rnn.status());
    } else {
      p->rnn_ = std::move(*rnn);
    }
  }
  p->entries_.resize(num_entries);
  return p;
}

cuda::Library* LibraryPlacement::Of(kiln::Library library, std::string_view op) const {
  if (library == kiln::Library::kCublasLt) return blas_.get();
  if (library == kiln::Library::kCudnn && op == "Attention") return sdpa_.get();
  if (library == kiln::Library::kCudnn && (op == "LSTM" || op == "GRU" || op == "RNN")) return rnn_.get();
  if (library == kiln::Library::kCudnn) return dnn_.get();
  return nullptr;
}

void LibraryPlacement::Operands(const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s,
                                const DeviceModel& dm, const DeviceMemory& memory) {
  const int32_t* ops = pe.operands.data() + pi.operands_begin;
  dts_.assign(static_cast<size_t>(pi.num_inputs + pi.num_outputs), DeviceTensor{});
  for (int32_t i = 0; i < pi.num_inputs + pi.num_outputs; ++i) {
    if (ops[i] < 0) continue;
    const cpu::TensorRef& r = s.refs[ops[i]];
    const bool weight = pe.tensors[static_cast<size_t>(ops[i])].storage == StorageKind::kWeight;
    dts_[i] = {memory.Address(dm, pe, s, ops[i]), r.dtype, r.rank, r.dims, r.num_elements, weight,
               weight ? r.data : nullptr};
  }
}

const LibraryPlacement::Decisions& LibraryPlacement::Decide(int32_t e, const PreparedEntry& pe, const EntryState& s,
                                                            const DeviceModel& dm, const DeviceMemory& memory) {
  Entry& d = entries_[static_cast<size_t>(e)];
  if (d.valid && d.binding == s.binding) return d;
  d.valid = true;
  d.binding = s.binding;
  const size_t n = pe.instructions.size();
  d.library.assign(n, kiln::Library::kCpuKernel);
  d.why.assign(n, std::string());
  d.host.assign(n, 1);
  d.workspace = 0;
  for (size_t i = 0; i < n; ++i) {
    const PreparedInstruction& pi = pe.instructions[i];
    if (pi.program != nullptr || pi.control != Control::kNone) {  // a generated kernel, or the executor's
      d.library[i] = pi.program != nullptr ? kiln::Library::kGenerated : kiln::Library::kControl;
      d.host[i] = pi.program == nullptr;
      continue;
    }
    const kiln::Library named = pi.LibraryOn("cuda");
    if (named != kiln::Library::kCublasLt && named != kiln::Library::kCudnn) continue;  // a CPU kernel, on the host
    const cuda::Library* lib = Of(named, pi.kernel->op);
    if (lib == nullptr) {
      d.why[i] = std::string(LibraryTitle(named)) + " is unavailable";
      continue;
    }
    Operands(pe, pi, s, dm, memory);
    const std::span<const DeviceTensor> ins(dts_.data(), static_cast<size_t>(pi.num_inputs));
    const std::span<const DeviceTensor> outs(dts_.data() + pi.num_inputs, static_cast<size_t>(pi.num_outputs));
    const Status accepted = lib->Accepts(pi.kernel->op, pi.attrs, ins, outs);
    if (!accepted.ok()) {
      d.why[i] = std::string(LibraryTitle(named)) + " refused it: " + std::string(accepted.message());
      continue;
    }
    d.library[i] = named;
    d.host[i] = 0;
    d.workspace = std::max({d.workspace, lib->Workspace(pi.kernel->op, pi.attrs, ins, outs), size_t{256}});
  }
  return d;
}

void LibraryPlacement::Entry::Refused(size_t k, const Status& st, const char* when) {
  why[k] = std::string(LibraryTitle(library[k])) + " refused it when it " + when + ": " + std::string(st.message());
  library[k] = kiln::Library::kCpuKernel;
  host[k] = 1;
}

Status LibraryPlacement::Plan(int32_t e, const PreparedEntry& pe, const EntryState& s, const DeviceModel& dm,
                              const DeviceMemory& memory) {
  Entry& d = entries_[static_cast<size_t>(e)];
  for (size_t k = 0; k < pe.instructions.size(); ++k) {
    if (d.library[k] != kiln::Library::kCublasLt && d.library[k] != kiln::Library::kCudnn) continue;
    const PreparedInstruction& pi = pe.instructions[k];
    Operands(pe, pi, s, dm, memory);
    const OpCall call{pi.attrs,
                      {dts_.data(), static_cast<size_t>(pi.num_inputs)},
                      {dts_.data() + pi.num_inputs, static_cast<size_t>(pi.num_outputs)},
                      nullptr,
                      memory.library_ws.ptr,
                      static_cast<size_t>(memory.library_ws.bytes)};
    const Status st = Of(d.library[k], pi.kernel->op)->Plan(pi.kernel->op, call, pi.label);
    if (st.code() == StatusCode::kUnimplemented) d.Refused(k, st, "was planned");
    else KILN_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

Status LibraryPlacement::Run(int32_t e, const PreparedEntry& pe, size_t k, const EntryState& s, const DeviceModel& dm,
                             DeviceMemory& memory, CUstream stream, bool capturing, bool* ran) {
  *ran = false;
  Entry& d = entries_[static_cast<size_t>(e)];
  const kiln::Library lib = d.library[k];
  const PreparedInstruction& pi = pe.instructions[k];
  Operands(pe, pi, s, dm, memory);
  const std::span<const DeviceTensor> ins(dts_.data(), static_cast<size_t>(pi.num_inputs));
  const std::span<const DeviceTensor> outs(dts_.data() + pi.num_inputs, static_cast<size_t>(pi.num_outputs));
  cuda::Library* library = Of(lib, pi.kernel->op);
  const std::string_view op = pi.kernel->op;
  KILN_RETURN_IF_ERROR(memory.library_ws.Reserve(std::max<size_t>(library->Workspace(op, pi.attrs, ins, outs), 256),
                                                 "cuBLASLt/cuDNN workspace"));
  const OpCall call{pi.attrs, ins, outs, stream, memory.library_ws.ptr, static_cast<size_t>(memory.library_ws.bytes)};
  Status st = library->Run(op, call, pi.label);
  if (st.code() == StatusCode::kUnimplemented) {  // no algorithm for it at run time: the host runs it
    d.Refused(k, st, "ran");
    return Status::Ok();
  }
  // A library call on a context that an earlier kernel's fault poisoned fails with the library's
  // own status (CUDNN_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_EXECUTION_FAILED), which does not say
  // what happened; the driver's sticky error, which a wait on the stream returns, does.
  if (st.code() == StatusCode::kDeviceError && !capturing && drv_ != nullptr) {
    const CUresult r = drv_->StreamSynchronize(stream);
    if (r != CUDA_SUCCESS)
      return Status(st.code(), std::string(st.message()) + "; " +
                                   std::string(Check(*drv_, r, "the stream's earlier work failed").message()));
  }
  KILN_RETURN_IF_ERROR(st);
  *ran = true;
  return Status::Ok();
}

}  // namespace kiln::cuda
