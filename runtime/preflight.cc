// The preflight (kiln/check.h): Model::Load's checks less the weights' checksum, then what each
// device would run. The CPU half is here; the CUDA half is runtime/cuda/preflight.cc.
#include <algorithm>
#include <string>

#include "kiln/check.h"
#include "runtime/clock.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/cpu/onednn/onednn.h"
#include "runtime/model_impl.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/preflight.h"
#endif

// Not in a selective runtime (docs/edge.md), which is held to its size budget: CheckArtifact is
// absent there, and the full runtime's `kiln check` checks its artifacts for the same CPU.
#if !KILN_SELECTIVE
namespace kiln {
namespace {

bool Runs(const EntryInfo& e, std::string_view backend) { return e.backend.empty() || e.backend == backend; }

// The CPU backend: every entry Load accepted runs (a missing CPU kernel is Load's kUnimplemented);
// what remains to say is how each instruction runs.
void CheckCpu(const Model& model, DeviceCheck& out) {
  const Model::Impl& impl = model.impl();
  const std::string& target = model.native_code_target();
  std::vector<bool> native(impl.launch.size(), false);  // kernels the chosen target has code for
  for (const NativeCodeInfo& n : model.native_code())
    if (n.target == target)
      for (uint32_t k : n.kernels)
        if (k < native.size()) native[k] = true;
  out.description = std::string(cpu::CpuIsaName(cpu::ActiveCpuIsa())) + " CPU, " +
                    (target.empty() ? "generated kernels interpreted" : "native code " + target) +
                    (cpu::OneDnnBuilt() ? ", " + cpu::OneDnnVersion() : "");
  int interpreted = 0;
  for (size_t e = 0; e < impl.entries.size(); ++e) {
    const EntryInfo& info = impl.entries[e];
    if (!Runs(info, "cpu")) continue;
    const PreparedEntry& pe = impl.prepared[e];
    EntryCheck& ec = out.entries.emplace_back();
    ec.name = info.name;
    ec.backend = info.backend;
    ec.arena_bytes = info.arena_bytes;
    for (size_t i = 0; i < pe.instructions.size(); ++i) {
      const PreparedInstruction& pi = pe.instructions[i];
      InstructionCheck& c = ec.instructions.emplace_back();
      c.index = static_cast<int32_t>(i);
      c.name = info.instructions[i].name;
      c.op = info.instructions[i].op;
      if (pi.program != nullptr) {
        const size_t k = static_cast<size_t>(pi.program - impl.programs.data());
        c.path = native[k] ? "native code " + target : "interpreter";
        interpreted += !native[k];
      } else if (pi.control != Control::kNone) {
        c.path = "control";
      } else {
        c.path = pi.LibraryOn("cpu") == Library::kOneDnn && cpu::OneDnnBuilt() ? "oneDNN" : "CPU kernel";
      }
    }
  }
  if (interpreted > 0)
    out.notes.push_back(std::to_string(interpreted) + " generated-kernel instructions are interpreted (" +
                        (model.native_code_note().empty() ? "no native code for them" : model.native_code_note()) +
                        "): correct, slower than native code");
}

}  // namespace

Result<CheckReport> CheckArtifact(const std::string& path, const CheckOptions& options) {
  const int64_t start = NowNs();
  // Mapped, never read into a private copy: the signature and the weights' decryption are Load's,
  // and would read every page of the weights.
  LoadOptions load = options.load;
  load.trusted_public_keys.clear();
  load.weights_key = nullptr;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ArtifactBytes> bytes, MapArtifact(path, load));
  const uint64_t file_bytes = bytes->size();
  Result<std::shared_ptr<const Model::Impl>> impl = ParseArtifact(std::move(bytes), load, ParseFor::kPreflight);
  if (!impl.ok()) return impl.status().WithContext("'" + path + "'");
  const Model model(*impl);
  CheckReport r;
  r.format_version = model.format_version();
  r.producer = std::string(model.producer());
  r.provenance = model.provenance();
  r.file_bytes = file_bytes;
  r.weights_bytes = model.weights_bytes();
  if (options.device != Device::kCpu) {
    DeviceCheck& d = r.devices.emplace_back();
    d.device = "cuda:" + std::to_string(options.device_ordinal);
#if KILN_HAVE_CUDA
    cuda::CheckDevice(model, options.device_ordinal, d);
#else
    d.problems.push_back("this runtime was built without the CUDA backend");
#endif
    d.usable = d.problems.empty();
  }
  if (options.device != Device::kCuda) {
    DeviceCheck& d = r.devices.emplace_back();
    d.device = "cpu";
    CheckCpu(model, d);
    d.usable = d.problems.empty();
  }
  const auto chosen = std::find_if(r.devices.begin(), r.devices.end(), [](const DeviceCheck& d) { return d.usable; });
  r.usable = chosen != r.devices.end();
  if (r.usable) r.chosen_device = chosen->device;
  r.check_ns = NowNs() - start;
  return r;
}

}  // namespace kiln
#endif  // !KILN_SELECTIVE
