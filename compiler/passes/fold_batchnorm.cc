#include "compiler/passes/fold_batchnorm.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace kiln::passes {
namespace {

bool IsFloatConst(const ir::Trace& t, ir::ValueId id) {
  return id != ir::kNoValue && t.value(id).is_const() && t.value(id).data->dtype == DType::kFloat32;
}

const float* Floats(const ir::Trace& t, ir::ValueId id) {
  return reinterpret_cast<const float*>(t.value(id).data->bytes.data());
}

ir::ValueId AddFloatConst(ir::Trace& t, std::string name, std::vector<int64_t> dims, const std::vector<float>& v) {
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = DType::kFloat32;
  data->dims = dims;
  data->bytes.resize(v.size() * sizeof(float));
  std::memcpy(data->bytes.data(), v.data(), data->bytes.size());
  ir::Value value;
  value.name = std::move(name);
  value.dtype = DType::kFloat32;
  for (int64_t d : dims) value.shape.push_back(d);
  value.data = std::move(data);
  return t.AddValue(std::move(value));
}

// Folds `bn` into `conv` if every condition holds.
bool TryFold(ir::Trace& t, ir::Node& conv, const ir::Node& bn) {
  if (bn.inputs.size() != 5 || conv.inputs.size() < 2) return false;
  for (int i = 1; i < 5; ++i)
    if (!IsFloatConst(t, bn.inputs[i])) return false;
  const ir::ValueId w_id = conv.inputs[1];
  const ir::ValueId b_id = conv.inputs.size() > 2 ? conv.inputs[2] : ir::kNoValue;
  if (!IsFloatConst(t, w_id) || (b_id != ir::kNoValue && !IsFloatConst(t, b_id))) return false;
  const ir::ConstData& w = *t.value(w_id).data;
  if (w.dims.empty()) return false;
  const int64_t m = w.dims[0];
  for (int i = 1; i < 5; ++i)
    if (t.value(bn.inputs[i]).data->num_elements() != m) return false;
  if (b_id != ir::kNoValue && t.value(b_id).data->num_elements() != m) return false;

  const float eps = bn.attrs.GetFloat("epsilon", 1e-5f);
  const float *scale = Floats(t, bn.inputs[1]), *shift = Floats(t, bn.inputs[2]);
  const float *mean = Floats(t, bn.inputs[3]), *var = Floats(t, bn.inputs[4]);
  const float* bias = b_id != ir::kNoValue ? Floats(t, b_id) : nullptr;
  const int64_t per_channel = w.num_elements() / m;
  std::vector<float> new_w(static_cast<size_t>(w.num_elements())), new_b(static_cast<size_t>(m));
  const float* old_w = reinterpret_cast<const float*>(w.bytes.data());
  for (int64_t c = 0; c < m; ++c) {
    const double s = static_cast<double>(scale[c]) / std::sqrt(static_cast<double>(var[c]) + eps);
    for (int64_t k = 0; k < per_channel; ++k)
      new_w[c * per_channel + k] = static_cast<float>(old_w[c * per_channel + k] * s);
    new_b[c] = static_cast<float>(((bias ? bias[c] : 0.0) - mean[c]) * s + shift[c]);
  }
  const std::string w_name = t.value(w_id).name + "#bn";
  const ir::ValueId nw = AddFloatConst(t, w_name, w.dims, new_w);
  const ir::ValueId nb = AddFloatConst(t, t.value(bn.outputs[0]).name + "#bias", {m}, new_b);
  conv.inputs.resize(3);
  conv.inputs[1] = nw;
  conv.inputs[2] = nb;
  conv.outputs[0] = bn.outputs[0];
  return true;
}

}  // namespace

int FoldBatchNormIntoConv(ir::Trace& t) {
  std::vector<int> uses(t.values.size(), 0);
  std::vector<int> producer(t.values.size(), -1);
  for (size_t i = 0; i < t.body.nodes.size(); ++i) {
    for (ir::ValueId id : t.body.nodes[i].inputs)
      if (id != ir::kNoValue) ++uses[id];
    for (ir::ValueId id : t.body.nodes[i].outputs)
      if (id != ir::kNoValue) producer[id] = static_cast<int>(i);
  }
  for (ir::ValueId id : t.outputs) ++uses[id];

  std::vector<bool> removed(t.body.nodes.size(), false);
  const std::vector<int32_t> scopes = ir::LoopScopes(t.body.nodes);
  int folded = 0;
  for (size_t i = 0; i < t.body.nodes.size(); ++i) {
    const ir::Node& bn = t.body.nodes[i];
    if (bn.op != "BatchNormalization" || bn.inputs.empty() || bn.inputs[0] == ir::kNoValue) continue;
    const ir::ValueId x = bn.inputs[0];
    const int p = producer[x];
    if (p < 0 || uses[x] != 1 || t.body.nodes[p].op != "Conv" || t.body.nodes[p].outputs.size() != 1 ||
        t.body.nodes[p].when != bn.when || scopes[static_cast<size_t>(p)] != scopes[i])
      continue;
    if (TryFold(t, t.body.nodes[p], bn)) {
      removed[i] = true;
      ++folded;
    }
  }
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < t.body.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(t.body.nodes[i]));
  t.body.nodes = std::move(kept);
  return folded;
}

}  // namespace kiln::passes
