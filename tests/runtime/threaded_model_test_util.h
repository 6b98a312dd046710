// A small ONNX model whose instructions are large enough for the CPU backend to split them
// over threads (CpuOptions::threads), for the thread and allocation tests:
//
//   x: float32[1, 16, 64, 64]
//   d = Conv(x, Wd, group 16, pads 1)       depthwise 3x3: channels over the threads
//   s = Softmax(d, axis -1)                 a fused program with reductions: blocks of rows
//   c = Conv(s, Wc, pads 1)                 3x3 by im2col + OpenBLAS
//   y = Relu(c + x)                         fused
//   z = GlobalAveragePool(y)
//   outputs y, z
#pragma once

#include <random>
#include <vector>

#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {

inline constexpr int64_t kThreadedModelChannels = 16, kThreadedModelSide = 64;

inline std::vector<float> SeededFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline onnx::ModelProto ThreadedModel() {
  constexpr int64_t c = kThreadedModelChannels;
  const std::string side = std::to_string(kThreadedModelSide);
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {"1", std::to_string(c), side, side});
  AddFloatInit(g, "wd", {c, 1, 3, 3}, SeededFloats(c * 9, 1));
  AddFloatInit(g, "wc", {c, c, 3, 3}, SeededFloats(c * c * 9, 2, 0.3f));
  auto* dw = AddNode(g, "Conv", {"x", "wd"}, {"d"}, "depthwise");
  AttrInt(dw, "group", c);
  AttrInts(dw, "pads", {1, 1, 1, 1});
  AttrInt(AddNode(g, "Softmax", {"d"}, {"s"}, "softmax"), "axis", -1);
  AttrInts(AddNode(g, "Conv", {"s", "wc"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Add", {"c", "x"}, {"a"}, "residual");
  AddNode(g, "Relu", {"a"}, {"y"}, "relu");
  AddNode(g, "GlobalAveragePool", {"y"}, {"z"}, "pool");
  AddOutput(g, "y");
  AddOutput(g, "z");
  return m;
}

}  // namespace kiln::testing
