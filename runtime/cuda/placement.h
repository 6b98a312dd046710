// Where each instruction of a CUDA context's entries runs, decided once per entry and binding of
// its symbols and kept, so that a steady-state Run asks no library and builds no string:
//  - a generated kernel on the device, from the artifact's cubin or PTX;
//  - an instruction the artifact labels @cublaslt or @cudnn on that library (an Attention on
//    cuDNN's fused attention, sdpa.h; LSTM, GRU and RNN on cuDNN's RNN API, rnn.h), when the library is present and accepts the op's form
//    (Library::Accepts), with the largest workspace planned;
//  - everything else on the host: the executor runs it on the context's CPU backend, in a CPU
//    fallback segment (runtime/executor/run_entry.h). A library instruction that runs on the
//    host is reported with the reason (Stats::last_fallbacks): the library is missing, refused
//    the form, or refused it when it ran (no algorithm at run time: the decision for the binding
//    changes then).
// cuBLASLt and cuDNN are optional: without one, its ops run on the host (note() says why).
//
// Thread-compatible: owned by one context's backend.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "runtime/cuda/blas.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/device_model.h"
#include "runtime/cuda/dnn.h"
#include "runtime/cuda/rnn.h"
#include "runtime/cuda/sdpa.h"
#include "runtime/entry_state.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

class LibraryPlacement {
 public:
  // Opens cuBLASLt and cuDNN for device `dev` (its context current).
  static std::unique_ptr<LibraryPlacement> Create(const DeviceInfo& dev, size_t num_entries);
  // "" when cuBLASLt and cuDNN are both in use; else which is missing and why, for the context's
  // device_note().
  const std::string& note() const { return note_; }
  // Device bytes the libraries hold for the context's instructions (cuDNN RNN's weight spaces).
  uint64_t held_bytes() const { return rnn_ ? rnn_->held_bytes() : 0; }

  // The decisions of entry `e` at its binding `s` (made now unless they are current).
  struct Decisions {
    std::vector<uint8_t> host;        // per instruction: 1 when it runs on the host
    std::vector<kiln::Library> library;  // per instruction: what runs it (kCpuKernel on the host)
    std::vector<std::string> why;     // per instruction: why a library instruction runs on the host
    size_t workspace = 0;             // library workspace the instructions need (0: none)
  };
  const Decisions& Decide(int32_t e, const PreparedEntry& pe, const EntryState& s, const DeviceModel& dm,
                          const DeviceMemory& memory);

  // Enqueues instruction `k` of entry `e` on its library, with memory.library_ws as workspace
  // (grown to what the call needs). *ran false when the library refused it when it ran
  // (kUnimplemented: no algorithm): the decision changes to the host for this binding. A
  // library error on a context that an earlier kernel's fault poisoned gets the driver's sticky
  // error added, unless `capturing` (a wait would end the capture).
  Status Run(int32_t e, const PreparedEntry& pe, size_t k, const EntryState& s, const DeviceModel& dm,
             DeviceMemory& memory, CUstream stream, bool capturing, bool* ran);
  // Makes each library instruction's plan for entry `e` at its binding `s` as its Run would
  // (Library::Plan), with `memory`'s addresses (reserved, the inputs' staging included), enqueuing
  // nothing (ExecutionContext::Warm); an instruction its library finds no plan for goes to the
  // host, as in Run. Errors: a library's.
  Status Plan(int32_t e, const PreparedEntry& pe, const EntryState& s, const DeviceModel& dm, const DeviceMemory& memory);

 private:
  struct Entry : Decisions {
    bool valid = false;
    std::vector<int64_t> binding;
    // Instruction k's library refused it (kUnimplemented `st`) when it `when` ("ran", "was
    // planned"): the host runs it from now on, with the reason.
    void Refused(size_t k, const Status& st, const char* when);
  };
  // The library object of kCublasLt or kCudnn for `op` (cuDNN's Attention: the SDPA object;
  // LSTM, GRU and RNN: the RNN object);
  // null when that library is missing here.
  cuda::Library* Of(kiln::Library library, std::string_view op) const;
  // The operands of instruction `pi` as device tensors, in dts_.
  void Operands(const PreparedEntry& pe, const PreparedInstruction& pi, const EntryState& s, const DeviceModel& dm,
                const DeviceMemory& memory);

  const Driver* drv_ = nullptr;
  std::unique_ptr<BlasLibrary> blas_;  // null when missing
  std::unique_ptr<DnnLibrary> dnn_;
  std::unique_ptr<SdpaLibrary> sdpa_;  // cuDNN's backend API: null when cuDNN is missing
  std::unique_ptr<RnnLibrary> rnn_;    // cuDNN's RNN API: null when cuDNN is missing
  std::string note_;
  std::vector<Entry> entries_;
  std::vector<DeviceTensor> dts_;  // operands of the current call
};

}  // namespace kiln::cuda
