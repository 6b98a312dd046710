// The CPU backend as the reference a device run is compared with (the "[gpu]" and "[emulated]"
// cases, tests/e2e/'s precision checks): its outputs on host inputs, and host buffers, shaped
// like them and filled with a sentinel, for the device run to write its outputs into.
//
//   const std::vector<io::HostTensor> want = testing::RunCpuReference(model, inputs);
//   std::vector<io::HostTensor> got = testing::Sentinel(want);
//   std::vector<TensorView> out = testing::Views(got);
//   REQUIRE(cuda_ctx.Run(testing::Views(inputs), out).ok());
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
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

// The CPU backend's outputs of `model` on `inputs`, named as the model names them.
inline std::vector<io::HostTensor> RunCpuReference(const Model& model, const std::vector<io::HostTensor>& inputs) {
  auto ctx = ExecutionContext::Create(model, {Device::kCpu});
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

}  // namespace kiln::testing
