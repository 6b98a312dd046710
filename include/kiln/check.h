// kiln/check.h: preflight. What loading and running an artifact on this machine would do, and
// whether it can, read from the artifact's 64-byte header and FlatBuffer alone: no page of the
// weights is read (their checksum is Model::Load's to check), no device memory is allocated, no
// module is loaded. `kiln check` prints it (docs/cli.md); a deployment pipeline gates on
// `kiln check --json`'s "usable". Part of the full runtime; a selective one (docs/edge.md) has no
// preflight.
//
//   kiln::Result<kiln::CheckReport> r = kiln::CheckArtifact("model.kiln", {});
//   if (r.ok() && !r->usable) for (const auto& d : r->devices) for (auto& p : d.problems) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime.h"

namespace kiln {

struct CheckOptions {
  // kCpu: this CPU; kCuda: the GPU at device_ordinal; kAuto: both, as ExecutionContext::Create
  // would choose (CUDA when usable, else the CPU).
  Device device = Device::kAuto;
  int device_ordinal = 0;
  // As Model::Load would apply them: the size limits, and native_code (false: the report says
  // the interpreter runs every generated kernel on the CPU). trusted_public_keys and weights_key
  // are not used: the signature covers the weights, and checking it, like decrypting them, reads
  // every page of them, which is Model::Load's work.
  LoadOptions load = {};
};

// How one instruction would run on a device.
struct InstructionCheck {
  int32_t index = 0;     // in its entry (EntryInfo::instructions)
  std::string name;      // the ONNX node it came from (a generated kernel: its region's last node)
  std::string op;        // ONNX op type, or "kiln.Fused" / another "kiln.*" op
  // On the CPU backend: "native code x86-64-v4" (a generated kernel this CPU runs natively),
  // "interpreter" (its portable program), "CPU kernel", "oneDNN", "control".
  // On the CUDA backend: "cubin sm_90", "PTX JIT from compute_90" (the driver compiles it at the
  // first context on the device), "cuBLASLt", "cuDNN", "CPU region" (on the host, its tensors
  // copied from and back to the device), "control", or "none" (a generated kernel with no image
  // the device runs: a problem).
  std::string path;
};

struct EntryCheck {
  std::string name;
  std::string backend;      // EntryInfo::backend: "cuda", "cpu", or "" for every backend
  std::string arena_bytes;  // per context: a number, or an expression over the input dims
  std::vector<InstructionCheck> instructions;
};

// A library a device's plan calls, as found on this machine against what Kiln needs.
struct LibraryCheck {
  std::string name;      // "cuBLASLt", "cuDNN"
  std::string required;  // "13.x": the major version this runtime was built against
  std::string compiled;  // the version the artifact's compiler was built against (its provenance); "" unknown
  std::string found;     // "13.1.0"; "" when not found
  bool ok = false;
};

struct DeviceCheck {
  std::string device;       // "cpu", "cuda:0"
  std::string description;  // "AVX-512 CPU, native code x86-64-v4", "NVIDIA H200 (sm_90), driver 13000"
  bool usable = false;      // every entry this device runs can run: problems is empty
  std::vector<std::string> problems;  // why not, one sentence each
  std::vector<std::string> notes;     // what works but costs: PTX JIT, CPU regions, interpreted kernels
  std::vector<LibraryCheck> libraries;  // CUDA: cuBLASLt and cuDNN where the plan calls them
  // CUDA: the oldest driver this runtime accepts, as cuDriverGetVersion writes it (13000 for 13.0);
  // the found one is in `description`. 0 on the CPU.
  int min_driver_version = 0;
  // CUDA: kernels the driver would JIT-compile from PTX, and an estimate of that time at the first
  // context (ms; about 20 ms per kernel, what NVRTC takes for Kiln's generated kernels on a server
  // CPU). 0 when every kernel has a cubin for the device.
  int32_t ptx_jit_kernels = 0;
  int64_t ptx_jit_estimate_ms = 0;
  std::vector<EntryCheck> entries;  // the entries this device would run
};

struct CheckReport {
  uint32_t format_version = 0;
  std::string producer;       // "kiln 0.1.0"
  ProvenanceInfo provenance;  // Model::provenance
  uint64_t file_bytes = 0;
  uint64_t weights_bytes = 0;
  // Always false: the preflight reads no weight page, so damaged weights are Model::Load's error.
  bool weights_verified = false;
  std::vector<DeviceCheck> devices;  // CheckOptions::device's: kAuto lists "cuda:N" then "cpu"
  // The device a context with CheckOptions::device would run on: the first usable one of
  // `devices`; "" when none is (then `usable` is false).
  std::string chosen_device;
  bool usable = false;
  int64_t check_ns = 0;  // time CheckArtifact took
};

// Checks the artifact at `path` for options.device, reading its header and FlatBuffer and
// verifying them as Model::Load does (checksum of the FlatBuffer, FlatBuffers Verifier, Kiln's
// semantic checks, fixed memory plans), but not the weights, nor a signature. A device that
// cannot run the artifact is not an error: its DeviceCheck says why (no driver or device, no cubin
// or PTX for the arch, not enough device memory); a library missing or of another major version is
// a note, since the backend then runs its instructions on the host. Errors are Model::Load's for a bad file:
// kNotFound, kDataLoss (corrupt: naming the section and offset), kIncompatible (format version),
// kResourceExhausted (over options.load's limits). Thread-safe; allocates only the report.
KILN_API Result<CheckReport> CheckArtifact(const std::string& path, const CheckOptions& options);

}  // namespace kiln
