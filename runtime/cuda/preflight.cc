#include "runtime/cuda/preflight.h"

#include <cuda.h>

#include <set>
#include <string>

#include "runtime/cuda/device_model.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/dynamic_symbols.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {
namespace {

// What NVRTC takes per generated kernel at one arch on a server CPU (this repository's compiles:
// about 20 ms a kernel); the driver's PTX JIT does the same work.
constexpr int64_t kPtxJitMsPerKernel = 20;

// "13.1.0" from a library's major * 10000 + minor * 100 + patch.
std::string LibraryVersion(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string Compiled(const Model& model, const std::string& name) {
  for (const auto& [library, version] : model.provenance().libraries)
    if (library == name) return version;
  return "";
}

// The library check of `name` (`major` required), from its loader's result. Without it the
// backend runs the library's instructions on the host (runtime/cuda/placement.h): a note.
template <typename Table>
LibraryCheck CheckLibrary(const Model& model, const char* name, int major, const Result<const Table*>& table,
                          DeviceCheck& out) {
  LibraryCheck c{name, std::to_string(major) + ".x", Compiled(model, name), "", table.ok()};
  if (table.ok())
    c.found = LibraryVersion((*table)->version);
  else
    out.notes.push_back("its " + std::string(name) + " instructions run on the host in CPU regions: " +
                        std::string(table.status().message()));
  return c;
}

}  // namespace

void CheckDevice(const Model& model, int ordinal, DeviceCheck& out) {
  out.min_driver_version = CUDA_VERSION / 1000 * 1000;
  Result<const Driver*> drv = LoadDriver();
  if (!drv.ok()) {
    out.problems.push_back(std::string(drv.status().message()));
    return;
  }
  Result<DeviceInfo> dev = QueryDevice(**drv, ordinal);
  if (!dev.ok()) {
    out.problems.push_back(std::string(dev.status().message()));
    return;
  }
  const int driver = (*drv)->version;
  out.description = dev->name + " (" + dev->arch() + "), driver " + std::to_string(driver);
  const Model::Impl& impl = model.impl();
  std::set<size_t> jit;  // kernels the driver would compile from PTX
  bool blas = false, dnn = false;
  int cpu_instructions = 0;
  uint64_t largest_arena = 0;
  for (size_t e = 0; e < impl.entries.size(); ++e) {
    const EntryInfo& info = impl.entries[e];
    if (!info.backend.empty() && info.backend != "cuda") continue;
    const PreparedEntry& pe = impl.prepared[e];
    EntryCheck& ec = out.entries.emplace_back();
    ec.name = info.name;
    ec.backend = info.backend;
    ec.arena_bytes = info.arena_bytes;
    if (info.arena_bytes.find_first_not_of("0123456789") == std::string::npos && !info.arena_bytes.empty())
      largest_arena = std::max<uint64_t>(largest_arena, std::stoull(info.arena_bytes));
    for (size_t i = 0; i < pe.instructions.size(); ++i) {
      const InstructionInfo& ii = info.instructions[i];
      InstructionCheck& c = ec.instructions.emplace_back();
      c.index = static_cast<int32_t>(i);
      c.name = ii.name;
      c.op = ii.op;
      const PreparedInstruction& pi = pe.instructions[i];
      // As runtime/cuda/placement.h decides: a generated kernel on the device, control on the
      // host, a library instruction on its library, anything else in a CPU region.
      const Library library = pi.program != nullptr           ? Library::kGenerated
                              : pi.control != Control::kNone ? Library::kControl
                                                             : pi.LibraryOn("cuda");
      switch (library) {
        case Library::kGenerated: {
          const size_t k = static_cast<size_t>(pi.program - impl.programs.data());
          const PreparedImage* image = PickImage(impl.launch[k], *dev);
          if (image == nullptr) {
            c.path = "none";
            out.problems.push_back("entry '" + info.name + "' instruction " + std::to_string(i) + " '" + ii.name +
                                   "': generated kernel " + ii.kernel + " has no cubin for " + dev->arch() +
                                   " and no PTX of an arch at or below it");
          } else if (image->ptx) {
            c.path = "PTX JIT from " + image->arch;
            jit.insert(k);
          } else {
            c.path = "cubin " + image->arch;
          }
          break;
        }
        case Library::kCublasLt:
          blas = true;
          c.path = LoadBlas().ok() ? "cuBLASLt" : "CPU region";
          break;
        case Library::kCudnn:
          dnn = true;
          c.path = LoadDnn().ok() ? "cuDNN" : "CPU region";
          break;
        case Library::kControl: c.path = "control"; break;
        default: c.path = "CPU region"; break;
      }
      if (c.path == "CPU region") ++cpu_instructions;
    }
  }
  if (blas) out.libraries.push_back(CheckLibrary(model, "cuBLASLt", CUBLAS_VER_MAJOR, LoadBlas(), out));
  if (dnn) out.libraries.push_back(CheckLibrary(model, "cuDNN", CUDNN_MAJOR, LoadDnn(), out));
  out.ptx_jit_kernels = static_cast<int32_t>(jit.size());
  out.ptx_jit_estimate_ms = kPtxJitMsPerKernel * out.ptx_jit_kernels;
  if (!jit.empty())
    out.notes.push_back(std::to_string(jit.size()) + " generated kernels have no cubin for " + dev->arch() +
                        ": the driver compiles their PTX at the first context, about " +
                        std::to_string(out.ptx_jit_estimate_ms) + " ms (compile with --arch " + dev->arch() +
                        " to avoid it)");
  if (cpu_instructions > 0)
    out.notes.push_back(std::to_string(cpu_instructions) +
                        " instructions run on the host in CPU regions, their tensors copied between host and device");
  if (impl.weights_size + largest_arena > dev->total_bytes)
    out.problems.push_back("the weights and the largest fixed arena need " +
                           std::to_string(impl.weights_size + largest_arena) + " bytes, more than the device has");
}

}  // namespace kiln::cuda
