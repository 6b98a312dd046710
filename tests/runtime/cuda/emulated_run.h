// A library op's run on --device cuda against the CPU backend, for the cuDNN executor tests
// (sdpa_test.cc, rnn_test.cc): the CUDA context runs twice (the second run reuses the first's
// plans; its call log and stats are the ones kept), the reference once.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/tensor_files.h"
#include "tests/cpu_reference.h"
#include "tests/emulated_cuda/control.h"

namespace kiln::testing {

struct EmulatedCudaRun {
  std::vector<io::HostTensor> got, want;
  std::string log;  // the emulated device's call log of the second run
  Stats stats;
  Library library = Library::kCpuKernel;  // the artifact's placement on cuda of the first `op` node
};

// `model` on --device cuda (with `options`' other fields) and `reference` on the CPU backend,
// both on `inputs`. Requires an emulated device (EmulatedCuda() not null).
inline EmulatedCudaRun RunTwiceOnCuda(const Model& model, const Model& reference,
                                      const std::vector<io::HostTensor>& inputs, std::string_view op,
                                      ContextOptions options = {}) {
  EmulatedCudaRun r;
  r.want = RunCpuReference(reference, inputs);
  options.device = Device::kCuda;
  auto ctx = ExecutionContext::Create(model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  const EmulatedCudaControl* emu = EmulatedCuda();
  for (int run = 0; run < 2; ++run) {
    r.got = Sentinel(r.want);
    std::vector<TensorView> out = Views(r.got);
    if (run == 1) emu->log_begin();
    Status st = ctx->Run(Views(inputs), out);
    if (st.ok()) st = ctx->Synchronize();
    if (run == 1) r.log = emu->log_take();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  r.stats = ctx->stats();
  for (const InstructionInfo& info : model.entries()[static_cast<size_t>(r.stats.last_entry)].instructions)
    if (info.op == op) r.library = info.library("cuda");
  return r;
}

}  // namespace kiln::testing
