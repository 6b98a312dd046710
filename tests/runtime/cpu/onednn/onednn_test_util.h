// Test helper for oneDNN's ops (runtime/cpu/onednn/onednn.h): runs a planned op with a workspace of
// its workspace_bytes(), failing the test on an error.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "runtime/attrs.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/onednn/onednn.h"

namespace kiln::cpu::testing {

// `ws` is grown as the op needs and may be shared between calls.
inline void RunPlanned(OneDnnOp& op, const AttrMap& attrs, const std::vector<TensorRef>& in,
                       const std::vector<TensorRef>& out, AlignedBuffer& ws) {
  REQUIRE(ws.Reserve(op.workspace_bytes() + 1));
  const Status st = op.Run(KernelCall{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
}

}  // namespace kiln::cpu::testing
