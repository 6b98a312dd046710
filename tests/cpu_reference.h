// The CPU backend as the reference a device run is compared with (the "[gpu]" and "[emulated]"
// cases, tests/e2e/'s precision checks): its outputs on host inputs, and host buffers, shaped
// like them and filled with a sentinel, for the device run to write its outputs into, and the
// comparison of float32 outputs within a tolerance.
//
//   const std::vector<io::HostTensor> want = testing::RunCpuReference(model, inputs);
//   std::vector<io::HostTensor> got = testing::Sentinel(want);
//   std::vector<TensorView> out = testing::Views(got);
//   REQUIRE(cuda_ctx.Run(testing::Views(inputs), out).ok());
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/tensor_files.h"

namespace kiln::testing {

// Views of host tensors, for Run's inputs or its caller-owned outputs.
inline std::vector<TensorView> Views(const std::vector<io::HostTensor>& ts) {
  std::vector<TensorView> v;
  for (const io::HostTensor& t : ts) v.push_back(t.view());
  return v;
}

// The CPU backend's outputs of `model` on `inputs`, named as the model names them. The context
// runs once: no warm-up runs (ContextOptions::warm_runs).
inline std::vector<io::HostTensor> RunCpuReference(const Model& model, const std::vector<io::HostTensor>& inputs) {
  ContextOptions options;
  options.device = Device::kCpu;
  options.warm_runs = 0;
  auto ctx = ExecutionContext::Create(model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  std::vector<TensorView> out;
  const Status st = ctx->Run(Views(inputs), out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<io::HostTensor> result;
  for (size_t o = 0; o < out.size(); ++o) result.push_back(io::HostTensor::FromView(model.outputs()[o].name, out[o]));
  return result;
}

// Host tensors shaped like `like`, every byte 0xA5 (a float32 NaN pattern no run produces), so
// that a device run which writes nothing fails its comparison.
inline std::vector<io::HostTensor> Sentinel(const std::vector<io::HostTensor>& like) {
  std::vector<io::HostTensor> ts = like;
  for (io::HostTensor& t : ts) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xA5});
  return ts;
}

// Every element of float32 `got` (a device run's outputs) within atol + rtol * |want| of `want`
// (the CPU backend's); `what` names the run in the failure.
inline void CheckClose(const std::vector<io::HostTensor>& got, const std::vector<io::HostTensor>& want, double atol, double rtol,
                const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    INFO(what << ", output " << o << " '" << want[o].name << "'");
    REQUIRE(got[o].dtype == DType::kFloat32);
    REQUIRE(got[o].dims == want[o].dims);
    REQUIRE(got[o].bytes.size() == want[o].bytes.size());
    const float* g = reinterpret_cast<const float*>(got[o].bytes.data());
    const float* w = reinterpret_cast<const float*>(want[o].bytes.data());
    const size_t n = want[o].bytes.size() / sizeof(float);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; ++i) {
      if (std::fabs(static_cast<double>(g[i]) - w[i]) <= atol + rtol * std::fabs(static_cast<double>(w[i]))) continue;
      if (bad++ == 0) first = i;
    }
    CHECK_MESSAGE(bad == 0, bad << " of " << n << " elements differ; the first, [" << first
                                << "]: " << (first < n ? g[first] : 0.0f) << " on CUDA, "
                                << (first < n ? w[first] : 0.0f) << " on the CPU");
  }
}

}  // namespace kiln::testing
