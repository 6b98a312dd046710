// Launches of generated kernels (kiln.Fused instructions) with the driver API: the grid from the
// kernel's launch rule (runtime/model_impl.h, PreparedKernel) and the instruction's size
// arguments, the parameters in the order compiler/codegen/cuda_source.h gives them (inputs,
// outputs, sizes, the error words). A kernel whose program has index checks writes the first
// failed one to the error words, which Synchronize reads (ReportIndexError).
//
// Thread-compatible: owned by one context's backend.
#pragma once

#include <cuda.h>

#include <vector>

#include "kiln/status.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/device_model.h"
#include "runtime/entry_state.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

class Launcher {
 public:
  // Enqueues instruction `pi` of entry `pe` at binding `s` on `stream`; an empty launch enqueues
  // nothing. Errors: kDeviceError naming the instruction.
  Status Launch(const DeviceModel& dm, const DeviceMemory& memory, const DeviceInfo& dev, const PreparedEntry& pe,
                const PreparedInstruction& pi, const EntryState& s, CUstream stream);
  // The error words' report (a generated kernel's failed index check) as kInvalidArgument naming
  // the check ("Gather 'g' input 'idx': index 7 is out of range") when one program with checks
  // ran since the last report, else listing the candidates. Forgets the programs launched.
  Status ReportIndexError(const uint32_t words[4]);
  // Forgets the programs launched since the last report (the error words were clear).
  void ClearChecked() { checked_.clear(); }

 private:
  std::vector<const fused::Program*> checked_;  // programs with index checks launched since the last report
  std::vector<CUdeviceptr> ptr_args_;           // kernel argument storage
  std::vector<long long> size_args_;
  std::vector<void*> params_;
};

}  // namespace kiln::cuda
