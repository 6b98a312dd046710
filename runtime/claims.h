// Claims: which library runs an op on one backend, and why, in one place per backend (ggml's
// supports_op, ORT's GetCapability, Thunder's can_execute): runtime/cpu/claims.cc and
// runtime/cuda/claims.cc. The compiler's `executors` stage asks every registered backend
// (runtime/backend.h, BackendRegistration::claim) and records each answer in the artifact
// (InstructionInfo::placements); the runtime runs what is recorded, and asks the same claims at
// load for an artifact that records none. A claim is by op alone: a library that refuses a form
// (a dtype, a shape) says so when the backend plans the instruction, and the CPU kernel runs it
// (Stats::last_fallbacks).
#pragma once

#include <optional>
#include <string_view>

#include "kiln/library.h"

namespace kiln {

struct Claim {
  Library library = Library::kCpuKernel;
  // Why: what the library call does, or why neither a library nor a generated kernel takes the
  // op. A string with static storage.
  std::string_view reason;
};

// A backend's claims: what runs an instruction of op `op` there (`fused`: a kiln.Fused region).
using ClaimFn = Claim (*)(std::string_view op, bool fused);

// The library LibraryName names; nullopt for another name.
inline std::optional<Library> ParseLibrary(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(Library::kControl); ++k)
    if (LibraryName(static_cast<Library>(k)) == name) return static_cast<Library>(k);
  return std::nullopt;
}

}  // namespace kiln
