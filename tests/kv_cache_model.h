// A decoder layer's attention with a KV cache as exporters write it (Hugging Face Optimum's
// layout): present_key = Concat(past_key, k) and present_value = Concat(past_value, v) on the
// sequence axis, both model outputs, and scaled dot-product attention over them. For the
// attention pass's cache rule (compiler/passes/attention.h) and ExecutionContext::BindCache.
//   inputs  q, k, v [1, kKvHeads, seq, kKvHead], past_key, past_value [1, kKvHeads, past, kKvHead]
//   outputs y [1, kKvHeads, seq, kKvHead], present_key, present_value [1, kKvHeads, past + seq, kKvHead]
#pragma once

#include <cmath>
#include <string>

#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {

inline constexpr int64_t kKvHeads = 3, kKvHead = 4;

inline onnx::ModelProto KvCacheAttention() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  const std::string h = std::to_string(kKvHeads), d = std::to_string(kKvHead);
  for (const char* name : {"q", "k", "v"}) AddInput(g, name, {"1", h, "seq", d});
  for (const char* name : {"past_key", "past_value"}) AddInput(g, name, {"1", h, "past", d});
  AttrInt(AddNode(g, "Concat", {"past_key", "k"}, {"present_key"}, "cache_k"), "axis", 2);
  AttrInt(AddNode(g, "Concat", {"past_value", "v"}, {"present_value"}, "cache_v"), "axis", -2);
  AttrInts(AddNode(g, "Transpose", {"present_key"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
  AddFloatInit(g, "scale", {}, {1.0f / std::sqrt(static_cast<float>(kKvHead))});
  AddNode(g, "Mul", {"s", "scale"}, {"s1"}, "scaled");
  AttrInt(AddNode(g, "Softmax", {"s1"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "MatMul", {"p", "present_value"}, {"y"}, "pv");
  for (const char* name : {"y", "present_key", "present_value"}) AddOutput(g, name);
  return m;
}

}  // namespace kiln::testing
