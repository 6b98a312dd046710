// A toy backend, to prove that adding a backend is its folder and one registration
// (docs/adding_a_backend.md): a "device" whose memory is a byte array of its own, where it runs
// the generated kernels (their portable programs) and nothing else. Every other instruction its
// claims leave to the CPU kernel, so the executor runs it on the context's CPU backend as a CPU
// fallback region, with the copies between the toy's memory and the host that a GPU would need;
// the executor also reads a run-time If's conditions and runs a run-time Loop's control through the
// toy's transfers. It counts those transfers (ToyCounters), so that a test can check them.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/backend.h"

namespace kiln::toy {

inline constexpr Device kToyDevice = static_cast<Device>(7);

// Every transfer and segment the toy backends did, since the last Reset.
struct ToyCounters {
  int64_t to_host = 0, from_host = 0, copies = 0, segments = 0;
};
ToyCounters& Counters();

// The registration ("toy", kToyDevice): RegisterBackend(ToyRegistration()).
BackendRegistration ToyRegistration();

}  // namespace kiln::toy
