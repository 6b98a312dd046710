#include "runtime/device_resident.h"

#include <string>

namespace kiln {

Status CheckResidentPlan(const ExecutionContext::Impl& c, std::string_view backend) {
  if (c.backend->device() == Device::kCpu)
    return FailedPrecondition("require_device_resident: the context would run on the CPU backend" +
                              (c.device_note.empty() ? std::string() : " (" + c.device_note + ")"));
  for (size_t e = 0; e < c.mi->prepared.size(); ++e) {
    if (!c.runs_entry[e]) continue;
    const PreparedEntry& pe = c.mi->prepared[e];
    for (const PreparedInstruction& pi : pe.instructions)
      if (pi.program == nullptr && pi.control == Control::kNone && pi.LibraryOn(backend) == Library::kCpuKernel)
        return FailedPrecondition("require_device_resident: " + pe.label + ": " + pi.label +
                                  " runs on the host in a CPU region: the artifact places it on Kiln's CPU kernel, "
                                  "since no " + std::string(backend) + " library or generated kernel runs it");
  }
  return Status::Ok();
}

Status CheckResidentTensors(const ExecutionContext::Impl& c, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].memory != MemoryKind::kDevice && inputs[i].num_bytes() > 0)
      return InvalidArgument("require_device_resident: input " + std::to_string(i) + " '" + c.mi->inputs[i].name +
                             "' is in host memory: pass device memory");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].memory != MemoryKind::kDevice && outputs[i].num_bytes() > 0)
      return InvalidArgument("require_device_resident: output " + std::to_string(i) + " '" + c.mi->outputs[i].name +
                             "' is in host memory: pass device memory, or no outputs for views of the device's");
  return Status::Ok();
}

}  // namespace kiln
