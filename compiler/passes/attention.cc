#include "compiler/passes/attention.h"

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <algorithm>

#include <fmt/format.h>

#include "compiler/ops/registry.h"
#include "compiler/passes/canonicalize.h"
#include "compiler/passes/constants.h"
#include "compiler/passes/uses.h"

namespace kiln::passes {
namespace {

constexpr int kRank = 4;

bool FloatType(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

// What the chain matched for one Softmax.
struct Match {
  int qk = -1, softmax = -1, pv = -1;  // node indices
  std::vector<int> absorbed;           // nodes the Attention node replaces
  ir::ValueId q = ir::kNoValue, kt = ir::kNoValue, v = ir::kNoValue;
  // The additive masks (several only when all are constants, summed at compile time; a rank-5
  // one, from Swin's windows, has a leading 1) and Where's condition.
  std::vector<ir::ValueId> masks;
  ir::ValueId cond = ir::kNoValue;
  double scale = 1;
  // The KV cache: K = Concat(past_key, K_new) and V = Concat(past_value, V_new) on the sequence
  // axis, absorbed (`concat_k`, `concat_v`: their nodes; -1 when not). K and V then hold K_new
  // and V_new; the Concats' outputs become the node's present_key and present_value.
  int concat_k = -1, concat_v = -1;
  ir::ValueId past_k = ir::kNoValue, past_v = ir::kNoValue, present_k = ir::kNoValue, present_v = ir::kNoValue;
  // Whether Where(IsNaN(P), 0, P) follows the Softmax: a row whose every score is -inf then gives
  // zeros, as ONNX's Attention does; without it, Softmax's NaN (the node's masked_rows_nan).
  bool zeroed_nans = false;
  // K: `k` as it is, or Transpose(k_from, k_perm) when k_perm is set.
  ir::ValueId k = ir::kNoValue;
  std::vector<int64_t> k_perm;
  // The 3-D form, when Q, K and V are each a [b, S, H * D] tensor's heads split off by a
  // Reshape and Transpose(0, 2, 1, 3), and Y goes back to [b, S, H * Dv] the same way: those
  // tensors (kNoValue otherwise), the head counts, and Y's last Reshape (absorbed).
  ir::ValueId q3 = ir::kNoValue, k3 = ir::kNoValue, v3 = ir::kNoValue, y3 = ir::kNoValue;
  int64_t q_heads = 0, kv_heads = 0;
  // The packed form of the 3-D one: Q, K and V the three thirds of one [b, S, 3 * H * D] tensor
  // (q3 = k3 = v3), split off by Reshape to [b, S, 3, H, D], Transpose(2, 0, 3, 1, 4) and
  // Split, Slice or Gather on axis 0 (then Squeeze): the node's packed_qkv.
  bool packed = false;
};

class Matcher {
 public:
  // `written_cache` must outlive the Matcher.
  Matcher(const ir::Trace& t, const std::set<int>& written_cache)
      : t_(t), written_cache_(written_cache), uses_(t), producer_(t.values.size(), -1), scopes_(ir::LoopScopes(t.body.nodes)) {
    for (size_t i = 0; i < t.body.nodes.size(); ++i)
      for (ir::ValueId id : t.body.nodes[i].outputs)
        if (id != ir::kNoValue) producer_[id] = static_cast<int>(i);
  }

  // Matches the chain ending in Softmax node `s`; on failure, `why` says what did not match and
  // `near` whether a MatMul was next to the Softmax (so the compile log should say why).
  bool Run(int s, Match* m, std::string* why, bool* near) {
    const ir::Node& softmax = Node(s);
    *near = false;
    m->softmax = s;
    const ir::ValueId x = softmax.inputs[0];
    ir::ValueId p = softmax.outputs[0];
    *near = t_.value(x).rank() == kRank;  // [batch, heads, queries, keys]
    if (!Plain(softmax) || t_.value(x).rank() != kRank || !FloatType(t_.value(x).dtype))
      return Fail(why, "its input is not a rank-4 float tensor at the top level");
    const int64_t axis = softmax.attrs.GetInt("axis", -1);
    if (axis != -1 && axis != kRank - 1) return Fail(why, fmt::format("its axis is {}, not the last", axis));
    p = ZeroedNaNs(p, m);
    m->pv = Sole(p);
    if (m->pv < 0 || Node(m->pv).op != "MatMul" || Node(m->pv).inputs.size() != 2 || Node(m->pv).inputs[0] != p)
      return Fail(why, "its output is not read by one MatMul alone, as its left operand");
    m->v = Node(m->pv).inputs[1];
    // Back from the Softmax: the mask, the boolean mask, the scale, then the MatMul.
    ir::ValueId cur = x;
    int reader = s;
    bool scaled = false, where = false;
    while (true) {
      const int i = producer_[cur];
      if (i < 0) return Fail(why, "its input is not computed by a MatMul");
      const ir::Node& n = Node(i);
      if (Sole(cur) != reader || !Plain(n))
        return Fail(why, fmt::format("'{}' ({}) on its way from the MatMul is read by other ops too", n.name, n.op));
      m->absorbed.push_back(i);
      reader = i;
      if (n.op == "MatMul") {
        m->qk = i;
        break;
      }
      if (std::optional<double> c = ScaleOf(n, &cur)) {
        m->scale *= *c;
        scaled = true;
        continue;
      }
      if (n.op == "Where" && n.inputs.size() == 3 && !where && !scaled) {
        const std::optional<double> fill = Scalar(n.inputs[2]);
        if (!fill || !(*fill <= -1e4) || t_.value(n.inputs[0]).dtype != DType::kBool)
          return Fail(why, fmt::format("Where '{}' does not fill the masked scores with a constant <= -1e4", n.name));
        m->cond = n.inputs[0];
        cur = n.inputs[1];
        where = true;
        continue;
      }
      if (n.op == "Add" && n.inputs.size() == 2 && !where && !scaled) {
        // The chain's operand is the one of the Add's own shape that some op computes.
        const ir::ValueId a = n.inputs[0], b = n.inputs[1];
        const bool a_chain = Chainable(a, n), b_chain = Chainable(b, n);
        if (!a_chain && !b_chain) return Fail(why, fmt::format("Add '{}' adds no score matrix", n.name));
        cur = a_chain ? a : b;
        if (!AddMask(m, a_chain ? b : a))
          return Fail(why, fmt::format("Add '{}' adds a second mask, and they are not both constants", n.name));
        continue;
      }
      if (n.op == "Reshape" && !where && !scaled) {
        // Swin's shifted windows: Reshape(Add(Reshape(S, [1] + S's shape), M), S's shape), M a
        // constant [1, windows, 1, N, N] that broadcasts over the batch of windows.
        const std::optional<WindowMask> w = WindowMaskOf(n);
        if (!w) return Fail(why, fmt::format("the scores pass through Reshape '{}', which is not a scale or a mask", n.name));
        if (!AddMask(m, w->mask))
          return Fail(why, fmt::format("Reshape '{}' adds a second mask, and they are not both constants", n.name));
        m->absorbed.insert(m->absorbed.end(), {w->add, w->split});
        cur = w->scores;
        reader = w->split;
        continue;
      }
      if ((n.op == "Add" || n.op == "Where") && scaled)
        return Fail(why, fmt::format("{} '{}' masks the scores before they are scaled", n.op, n.name));
      return Fail(why, fmt::format("the scores pass through {} '{}', which is not a scale or a mask", n.op, n.name));
    }
    const ir::Node& qk = Node(m->qk);
    if (qk.inputs.size() != 2) return Fail(why, fmt::format("MatMul '{}' has an epilogue", qk.name));
    m->q = Unscaled(qk.inputs[0], m->qk, m);
    m->kt = Unscaled(qk.inputs[1], m->qk, m);
    // Shapes: Q [b, h, Sq, D], Kt [b, h, D, T], V [b, h, T, Dv].
    const ir::Value &q = t_.value(m->q), &kt = t_.value(m->kt), &v = t_.value(m->v);
    if (q.rank() != kRank || kt.rank() != kRank || v.rank() != kRank || q.dtype != kt.dtype || q.dtype != v.dtype)
      return Fail(why, "Q, K and V are not rank-4 tensors of one dtype");
    for (int d = 0; d < 2; ++d)
      if (!q.shape[d].Same(kt.shape[d]) || !q.shape[d].Same(v.shape[d]))
        return Fail(why, fmt::format("Q {}, K^T {} and V {} differ in dim {} (grouped or broadcast heads)",
                                     ShapeText(q), ShapeText(kt), ShapeText(v), d));
    if (!q.shape[3].Same(kt.shape[2]) || !kt.shape[3].Same(v.shape[2]))
      return Fail(why, fmt::format("Q {}, K^T {} and V {} do not chain", ShapeText(q), ShapeText(kt), ShapeText(v)));
    for (ir::ValueId id : m->masks) {
      const ir::Value& mask = t_.value(id);
      if (mask.dtype != q.dtype || mask.rank() > kRank + 1 || (mask.rank() > kRank && !mask.is_const()) ||
          mask.rank() < 1 || !mask.shape.back().Same(kt.shape[3]))
        return Fail(why, fmt::format("the mask {} {} is not of Q's dtype, or does not span the {} keys",
                                     DTypeName(mask.dtype), ShapeText(mask), kt.shape[3].ToString()));
    }
    if (m->cond != ir::kNoValue) {
      const ir::Value& c = t_.value(m->cond);
      if (c.rank() > kRank || c.rank() < 1 || !c.shape.back().Same(kt.shape[3]))
        return Fail(why, fmt::format("the boolean mask {} does not span the {} keys", ShapeText(c),
                                     kt.shape[3].ToString()));
    }
    UntransposeK(m);
    m->absorbed.push_back(s);
    m->absorbed.push_back(m->pv);
    if (!written_cache_.contains(s)) Cache(m);
    ThreeD(m);
    return true;
  }

 private:
  const ir::Node& Node(int i) const { return t_.body.nodes[static_cast<size_t>(i)]; }
  bool Plain(const ir::Node& n) const {
    return n.when.empty() && n.blocks.empty() && scopes_[&n - t_.body.nodes.data()] < 0 && !n.outputs.empty() &&
           n.outputs[0] != ir::kNoValue;
  }
  static bool Fail(std::string* why, std::string text) {
    *why = std::move(text);
    return false;
  }
  static std::string ShapeText(const ir::Value& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.shape.size(); ++i) s += (i ? ", " : "") + v.shape[i].ToString();
    return s + "]";
  }
  // The only reader of `id` (a top-level node) when it has exactly one use; -1 otherwise.
  int Sole(ir::ValueId id) const { return uses_.SoleReader(id); }
  // The value of a one-element float constant.
  std::optional<double> Scalar(ir::ValueId id) const {
    if (id == ir::kNoValue || !t_.value(id).is_const() || !FloatType(t_.value(id).dtype)) return std::nullopt;
    const ir::ConstData& d = *t_.value(id).data;
    if (d.num_elements() != 1) return std::nullopt;
    return d.FloatAt(0);
  }
  // For Mul(x, c), Mul(c, x) or Div(x, c) with c a finite nonzero one-element float constant:
  // the factor (1/c for Div), and *x set to x.
  std::optional<double> ScaleOf(const ir::Node& n, ir::ValueId* x) const {
    if ((n.op != "Mul" && n.op != "Div") || n.inputs.size() != 2) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      if (n.op == "Div" && side == 0) continue;  // Div's constant is the divisor
      const std::optional<double> c = Scalar(n.inputs[side]);
      if (!c || !std::isfinite(*c) || *c == 0) continue;
      const ir::ValueId other = n.inputs[1 - side];
      if (t_.value(other).is_const()) return std::nullopt;
      *x = other;
      return n.op == "Div" ? 1.0 / *c : *c;
    }
    return std::nullopt;
  }
  // Whether Add operand `id` is the score chain: not a constant, of the Add's output shape,
  // and computed by a MatMul, a scale or a Where.
  bool Chainable(ir::ValueId id, const ir::Node& add) const {
    const ir::Value& v = t_.value(id);
    const ir::Value& y = t_.value(add.outputs[0]);
    if (v.is_const() || producer_[id] < 0 || v.rank() != y.rank()) return false;
    for (int d = 0; d < v.rank(); ++d)
      if (!v.shape[d].Same(y.shape[d])) return false;
    const std::string& op = Node(producer_[id]).op;
    return op == "MatMul" || op == "Mul" || op == "Div" || op == "Where";
  }
  // Operand `id` of `reader` with its scalings by constants peeled off into m->scale (each
  // read by the next op alone).
  ir::ValueId Unscaled(ir::ValueId id, int reader, Match* m) const {
    while (producer_[id] >= 0 && Sole(id) == reader && Plain(Node(producer_[id]))) {
      ir::ValueId x = id;
      const std::optional<double> c = ScaleOf(Node(producer_[id]), &x);
      if (!c) break;
      m->scale *= *c;
      m->absorbed.push_back(producer_[id]);
      reader = producer_[id];
      id = x;
    }
    return id;
  }
  // Adds `mask` to m->masks: false when there would be two and not all are constants.
  bool AddMask(Match* m, ir::ValueId mask) const {
    m->masks.push_back(mask);
    if (m->masks.size() == 1) return true;
    for (ir::ValueId id : m->masks)
      if (!t_.value(id).is_const()) return false;
    return true;
  }
  struct WindowMask {
    int add = -1, split = -1;  // the Add and the first Reshape
    ir::ValueId scores = ir::kNoValue, mask = ir::kNoValue;
  };
  // For Reshape `merge` = Reshape(Add(Reshape(S, [1] + S's shape) = split, M), S's shape) with
  // M a float constant of rank 5 and leading dim 1, each read by the next alone: S and M.
  std::optional<WindowMask> WindowMaskOf(const ir::Node& merge) const {
    WindowMask w;
    const ir::ValueId x5 = merge.inputs[0];
    w.add = producer_[x5];
    if (w.add < 0 || Sole(x5) != &merge - t_.body.nodes.data() || !Plain(Node(w.add)) || Node(w.add).op != "Add" ||
        Node(w.add).inputs.size() != 2)
      return std::nullopt;
    const ir::Node& add = Node(w.add);
    for (int side = 0; side < 2; ++side) {
      const ir::ValueId c = add.inputs[side], s5 = add.inputs[1 - side];
      const ir::Value& cv = t_.value(c);
      if (!cv.is_const() || cv.rank() != kRank + 1 || cv.data->dims[0] != 1) continue;
      w.split = producer_[s5];
      if (w.split < 0 || Sole(s5) != w.add || !Plain(Node(w.split)) || Node(w.split).op != "Reshape") continue;
      const ir::ValueId s = Node(w.split).inputs[0];
      const ir::SymShape &s4 = t_.value(s).shape, &y4 = t_.value(merge.outputs[0]).shape, &y5 = t_.value(s5).shape;
      if (s4.size() != kRank || y5.size() != kRank + 1 || y5[0].value() != 1 || !SameShape(s, merge.outputs[0]) ||
          !SameShape(x5, s5))
        continue;
      bool same = true;
      for (int d = 0; d < kRank; ++d) same = same && y5[d + 1].Same(s4[d]) && y4[d].Same(s4[d]);
      if (!same) continue;
      w.scores = s;
      w.mask = c;
      return w;
    }
    return std::nullopt;
  }

  // P, or Where(IsNaN(P), 0, P) when that follows (PyTorch's SDPA export: a row whose every
  // key is masked gives zeros, as Attention's does), its two nodes absorbed into `m`.
  ir::ValueId ZeroedNaNs(ir::ValueId p, Match* m) const {
    if (uses_.uses[p] != 2 || uses_.readers[p].size() != 2) return p;
    for (int side = 0; side < 2; ++side) {
      const int isnan = uses_.readers[p][side], where = uses_.readers[p][1 - side];
      const ir::Node &a = Node(isnan), &w = Node(where);
      if (a.op != "IsNaN" || w.op != "Where" || !Plain(a) || !Plain(w) || w.inputs.size() != 3 ||
          Sole(a.outputs[0]) != where || w.inputs[0] != a.outputs[0] || w.inputs[2] != p)
        continue;
      const std::optional<double> zero = Scalar(w.inputs[1]);
      if (!zero || *zero != 0) continue;
      m->absorbed.insert(m->absorbed.end(), {isnan, where});
      m->zeroed_nans = true;
      return w.outputs[0];
    }
    return p;
  }

  // The [b, S, H * D] tensor whose Reshape to [b, S, H, D] is `split` (kNoValue otherwise);
  // *heads set to H.
  ir::ValueId Merged(ir::ValueId split, int64_t* heads) const {
    const int i = producer_[split];
    if (i < 0 || !Plain(Node(i)) || Node(i).op != "Reshape") return ir::kNoValue;
    const ir::ValueId x = Node(i).inputs[0];
    const ir::Value &xv = t_.value(x), &sv = t_.value(split);
    if (xv.rank() != 3 || sv.rank() != kRank || !xv.shape[0].Same(sv.shape[0]) || !xv.shape[1].Same(sv.shape[1]))
      return ir::kNoValue;
    const auto h = sv.shape[2].value(), d = sv.shape[3].value(), hd = xv.shape[2].value();
    if (!h || !d || !hd || *h * *d != *hd) return ir::kNoValue;
    *heads = *h;
    return x;
  }
  // For `x` = Transpose(Reshape(x3, [b, S, H, D]), [0, 2, 1, 3]): x3 (kNoValue otherwise).
  ir::ValueId HeadsOf(ir::ValueId x, int64_t* heads) const {
    const int i = producer_[x];
    if (i < 0 || !Plain(Node(i)) || Node(i).op != "Transpose" ||
        Node(i).attrs.GetInts("perm") != std::vector<int64_t>{0, 2, 1, 3})
      return ir::kNoValue;
    return Merged(Node(i).inputs[0], heads);
  }
  // For `x` = Squeeze(Split(t)[part]), Squeeze(Slice(t, part, part + 1, axis 0)) or
  // Gather(t, part, axis 0), with t = Transpose(Reshape(x3, [b, S, 3, H, D]), [2, 0, 3, 1, 4]):
  // x3 [b, S, 3 * H * D] (kNoValue otherwise); *heads set to H.
  ir::ValueId PackedOf(ir::ValueId x, int64_t part, int64_t* heads) const {
    int i = producer_[x];
    if (i < 0 || !Plain(Node(i))) return ir::kNoValue;
    ir::ValueId t = ir::kNoValue;
    const ir::Value& xv = t_.value(x);
    if (Node(i).op == "Gather" && Node(i).inputs.size() == 2 && Node(i).attrs.GetInt("axis", 0) == 0) {
      const ir::Value& index = t_.value(Node(i).inputs[1]);
      if (!index.is_const() || index.rank() != 0 || (index.data->IntAt(0) != part && index.data->IntAt(0) != part - 3))
        return ir::kNoValue;
      t = Node(i).inputs[0];
    } else if (Node(i).op == "Squeeze") {
      const ir::ValueId one = Node(i).inputs[0];  // [1, b, H, S, D]: Squeeze removed dim 0
      const ir::Value& ov = t_.value(one);
      if (ov.rank() != kRank + 1 || ov.shape[0].value() != 1) return ir::kNoValue;
      for (int d = 0; d < kRank; ++d)
        if (!ov.shape[d + 1].Same(xv.shape[d])) return ir::kNoValue;
      i = producer_[one];
      if (i < 0 || !Plain(Node(i))) return ir::kNoValue;
      const ir::Node& n = Node(i);
      if (n.op == "Split" && n.attrs.GetInt("axis", 0) == 0 && n.outputs.size() == 3 &&
          n.outputs[static_cast<size_t>(part)] == one) {
        t = n.inputs[0];
      } else if (n.op == "Slice" && n.inputs.size() >= 3) {
        // starts [part] (or part - 3), axes absent or [0], steps absent or [1]
        const auto ints = [&](size_t k) -> std::optional<std::vector<int64_t>> {
          if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue) return std::nullopt;
          const ir::Value& c = t_.value(n.inputs[k]);
          if (!c.is_const() || c.rank() != 1 || c.data->num_elements() != 1) return std::vector<int64_t>{};
          return std::vector<int64_t>{c.data->IntAt(0)};
        };
        const auto start = ints(1), axes = ints(3), steps = ints(4);
        if (!start || start->size() != 1 || ((*start)[0] != part && (*start)[0] != part - 3) ||
            (axes && *axes != std::vector<int64_t>{0}) || (steps && *steps != std::vector<int64_t>{1}))
          return ir::kNoValue;
        t = n.inputs[0];
      } else {
        return ir::kNoValue;
      }
    } else {
      return ir::kNoValue;
    }
    const int tr = producer_[t];
    if (tr < 0 || !Plain(Node(tr)) || Node(tr).op != "Transpose" ||
        Node(tr).attrs.GetInts("perm") != std::vector<int64_t>{2, 0, 3, 1, 4})
      return ir::kNoValue;
    const int r = producer_[Node(tr).inputs[0]];
    if (r < 0 || !Plain(Node(r)) || Node(r).op != "Reshape") return ir::kNoValue;
    const ir::ValueId x3 = Node(r).inputs[0];
    const ir::Value &x3v = t_.value(x3), &x5 = t_.value(Node(r).outputs[0]);
    if (x3v.rank() != 3 || x5.rank() != kRank + 1 || x5.shape[2].value() != 3 || !x3v.shape[0].Same(x5.shape[0]) ||
        !x3v.shape[1].Same(x5.shape[1]))
      return ir::kNoValue;
    const auto h = x5.shape[3].value(), d = x5.shape[4].value(), width = x3v.shape[2].value();
    if (!h || !d || !width || 3 * *h * *d != *width) return ir::kNoValue;
    *heads = *h;
    return x3;
  }
  // Fills the 3-D form's fields of `m` where it applies (see Match).
  void ThreeD(Match* m) {
    int64_t hq = 0, hk = 0, hv = 0;
    ir::ValueId q3 = HeadsOf(m->q, &hq);
    ir::ValueId k3 = m->k_perm == std::vector<int64_t>{0, 2, 1, 3} ? Merged(m->k, &hk)
                     : m->k_perm.empty()                          ? HeadsOf(m->k, &hk)
                                                                   : ir::kNoValue;
    ir::ValueId v3 = HeadsOf(m->v, &hv);
    bool packed = false;
    if (q3 == ir::kNoValue || k3 == ir::kNoValue || v3 == ir::kNoValue || hk != hv) {
      q3 = PackedOf(m->q, 0, &hq);
      if (q3 == ir::kNoValue || !m->k_perm.empty() || PackedOf(m->k, 1, &hk) != q3 || PackedOf(m->v, 2, &hv) != q3)
        return;
      k3 = v3 = q3;
      packed = true;
    }
    // Y [b, H, Sq, Dv] -> (Reshapes to its own shape) -> Transpose(0, 2, 1, 3) -> Reshape to
    // [b, Sq, H * Dv], each read by the next alone.
    ir::ValueId y = Node(m->pv).outputs[0];
    std::vector<int> chain;
    int i = Sole(y);
    while (i >= 0 && Plain(Node(i)) && Node(i).op == "Reshape" && SameShape(Node(i).outputs[0], y)) {
      chain.push_back(i);
      y = Node(i).outputs[0];
      i = Sole(y);
    }
    if (i < 0 || !Plain(Node(i)) || Node(i).op != "Transpose" ||
        Node(i).attrs.GetInts("perm") != std::vector<int64_t>{0, 2, 1, 3})
      return;
    chain.push_back(i);
    const int r = Sole(Node(i).outputs[0]);
    if (r < 0 || !Plain(Node(r)) || Node(r).op != "Reshape") return;
    const ir::ValueId y3 = Node(r).outputs[0];  // [b, Sq, H * Dv]
    const ir::Value& yv = t_.value(y3);
    const ir::Value& y4 = t_.value(Node(m->pv).outputs[0]);
    const auto h = y4.shape[1].value(), dv = y4.shape[3].value(), hdv = yv.rank() == 3 ? yv.shape[2].value() : std::nullopt;
    if (yv.rank() != 3 || !h || !dv || !hdv || *h * *dv != *hdv || !yv.shape[0].Same(y4.shape[0]) ||
        !yv.shape[1].Same(y4.shape[2]) || *h != hq)
      return;
    chain.push_back(r);
    m->q3 = q3, m->k3 = k3, m->v3 = v3, m->y3 = y3, m->q_heads = hq, m->kv_heads = hk, m->packed = packed;
    m->absorbed.insert(m->absorbed.end(), chain.begin(), chain.end());
  }
  bool SameShape(ir::ValueId a, ir::ValueId b) const {
    const ir::SymShape &x = t_.value(a).shape, &y = t_.value(b).shape;
    if (x.size() != y.size()) return false;
    for (size_t d = 0; d < x.size(); ++d)
      if (!x[d].Same(y[d])) return false;
    return true;
  }

  // For `x` = Concat(past, now) on axis 2 of rank-4 tensors, read by nodes of `m` alone (and
  // perhaps a model output): the Concat's index, *past and *now set; -1 otherwise.
  int CacheConcat(ir::ValueId x, const Match& m, ir::ValueId* past, ir::ValueId* now) const {
    const int i = producer_[x];
    if (i < 0 || !Plain(Node(i)) || Node(i).op != "Concat" || Node(i).inputs.size() != 2) return -1;
    const ir::Node& n = Node(i);
    const int64_t axis = n.attrs.GetInt("axis", 0);
    if ((axis != 2 && axis != 2 - kRank) || t_.value(x).rank() != kRank) return -1;
    const auto outputs = std::count(t_.outputs.begin(), t_.outputs.end(), x);
    if (uses_.uses[x] != static_cast<int>(uses_.readers[x].size() + outputs)) return -1;  // read inside a Loop
    for (int r : uses_.readers[x])
      if (std::find(m.absorbed.begin(), m.absorbed.end(), r) == m.absorbed.end()) return -1;
    *past = n.inputs[0];
    *now = n.inputs[1];
    return i;
  }
  // Absorbs the KV cache's Concats into `m` where K and V both come from one (see Match).
  void Cache(Match* m) {
    if (!m->k_perm.empty()) return;
    ir::ValueId pk = ir::kNoValue, nk = ir::kNoValue, pv = ir::kNoValue, nv = ir::kNoValue;
    const int ck = CacheConcat(m->k, *m, &pk, &nk), cv = CacheConcat(m->v, *m, &pv, &nv);
    if (ck < 0 || cv < 0 || ck == cv) return;
    m->concat_k = ck, m->concat_v = cv;
    m->past_k = pk, m->past_v = pv, m->present_k = m->k, m->present_v = m->v;
    m->k = nk, m->v = nv;
    m->absorbed.insert(m->absorbed.end(), {ck, cv});
  }

  // Sets m->k (or m->k_perm) from m->kt: see the header.
  void UntransposeK(Match* m) {
    const ir::ValueId kt = m->kt;
    const int i = producer_[kt];
    const bool sole = Sole(kt) >= 0;
    if (i >= 0 && Plain(Node(i)) && Node(i).op == "Transpose") {
      std::vector<int64_t> perm = Node(i).attrs.GetInts("perm");
      if (perm.empty()) perm = {3, 2, 1, 0};
      std::swap(perm[2], perm[3]);
      m->k = Node(i).inputs[0];
      if (perm != std::vector<int64_t>{0, 1, 2, 3}) m->k_perm = perm;
      if (sole) m->absorbed.push_back(i);
      return;
    }
    // dynamo: Kt = Reshape(Transpose(Reshape(K, [b*h, T, D]), [0, 2, 1]), [b, h, D, T]).
    if (i >= 0 && Plain(Node(i)) && Node(i).op == "Reshape" && sole) {
      const int tr = producer_[Node(i).inputs[0]];
      if (tr >= 0 && Plain(Node(tr)) && Node(tr).op == "Transpose" && Sole(Node(i).inputs[0]) == i &&
          Node(tr).attrs.GetInts("perm") == std::vector<int64_t>{0, 2, 1}) {
        const int r1 = producer_[Node(tr).inputs[0]];
        if (r1 >= 0 && Plain(Node(r1)) && Node(r1).op == "Reshape" && Sole(Node(tr).inputs[0]) == tr) {
          const ir::ValueId k = Node(r1).inputs[0];
          const ir::Value &kv = t_.value(k), &ktv = t_.value(kt);
          if (kv.rank() == kRank && kv.shape[0].Same(ktv.shape[0]) && kv.shape[1].Same(ktv.shape[1]) &&
              kv.shape[2].Same(ktv.shape[3]) && kv.shape[3].Same(ktv.shape[2])) {
            m->k = k;
            m->absorbed.insert(m->absorbed.end(), {i, tr, r1});
            return;
          }
        }
      }
    }
    m->k = kt;
    m->k_perm = {0, 1, 3, 2};
  }

  const ir::Trace& t_;
  const std::set<int>& written_cache_;  // Softmaxes whose KV cache Concats stay written out
  Uses uses_;
  std::vector<int> producer_;
  std::vector<int32_t> scopes_;
};

struct Found {
  std::vector<Match> matches;
  std::vector<std::string> unmatched;  // "Softmax 'name': why"
};

// `written_cache`: the Softmaxes whose KV cache Concats are not absorbed.
Found FindAll(const ir::Trace& t, const std::set<int>& written_cache = {}) {
  Found found;
  Matcher matcher(t, written_cache);
  std::set<int> taken;
  for (size_t s = 0; s < t.body.nodes.size(); ++s) {
    const ir::Node& n = t.body.nodes[s];
    if (n.op != "Softmax" || n.inputs.empty() || n.outputs.empty() || n.outputs[0] == ir::kNoValue) continue;
    Match m;
    std::string why;
    bool near = false;
    if (!matcher.Run(static_cast<int>(s), &m, &why, &near)) {
      if (near) found.unmatched.push_back(fmt::format("Softmax '{}': {}", n.name, why));
      continue;
    }
    bool overlaps = false;
    for (int i : m.absorbed) overlaps = overlaps || taken.contains(i);
    if (overlaps) continue;
    taken.insert(m.absorbed.begin(), m.absorbed.end());
    found.matches.push_back(std::move(m));
  }
  return found;
}


// One float constant: the sum of the constants `ids` (ranks up to 5, dims past the last 4 all
// 1), broadcast together right-aligned, in float64, rounded once to their dtype.
ir::ValueId SumConstants(ir::Trace& t, std::string name, const std::vector<ir::ValueId>& ids) {
  std::array<int64_t, kRank> dims{1, 1, 1, 1};
  std::vector<std::array<int64_t, kRank>> each;
  for (ir::ValueId id : ids) {
    const std::vector<int64_t>& d = t.value(id).data->dims;
    std::array<int64_t, kRank> a{1, 1, 1, 1};
    for (size_t k = 0; k < d.size() && k < kRank; ++k) a[kRank - 1 - k] = d[d.size() - 1 - k];
    for (int k = 0; k < kRank; ++k) dims[k] = std::max(dims[k], a[k]);
    each.push_back(a);
  }
  const int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
  std::vector<double> sums(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const int64_t idx[kRank] = {e / (dims[1] * dims[2] * dims[3]), e / (dims[2] * dims[3]) % dims[1],
                                e / dims[3] % dims[2], e % dims[3]};
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::array<int64_t, kRank>& a = each[k];
      int64_t at = 0;
      for (int d = 0; d < kRank; ++d) at = at * a[d] + (a[d] == 1 ? 0 : idx[d]);
      sums[e] += t.value(ids[k]).data->FloatAt(at);
    }
  }
  return AddFloatConstant(t, std::move(name), t.value(ids[0]).dtype, {dims.begin(), dims.end()}, sums);
}

ir::ValueId NewValue(ir::Trace& t, const std::string& name) {
  ir::Value v;
  v.name = name;
  return t.AddValue(std::move(v));
}

}  // namespace

bool AttentionChanges(const ir::Trace& trace) { return !FindAll(trace).matches.empty(); }

namespace {

// `trace` with each of `matches` one Attention node; (*written)[k] is the index in the result of
// the Attention node of matches[k].
Result<ir::Trace> Rewrite(const ir::Trace& trace, const std::vector<Match>& matches, std::vector<size_t>* written) {
  written->assign(matches.size(), 0);
  ir::Trace t = trace;
  std::vector<int> at_pv(t.body.nodes.size(), -1);
  std::vector<bool> drop(t.body.nodes.size(), false);
  for (size_t k = 0; k < matches.size(); ++k) {
    at_pv[matches[k].pv] = static_cast<int>(k);
    for (int i : matches[k].absorbed) drop[i] = true;
  }
  std::vector<ir::Node> old = std::move(t.body.nodes);
  t.body.nodes.clear();
  for (size_t i = 0; i < old.size(); ++i) {
    if (at_pv[i] < 0) {
      if (!drop[i]) t.body.nodes.push_back(std::move(old[i]));
      continue;
    }
    const Match& m = matches[at_pv[i]];
    const ir::Node& qk = old[m.qk];
    const bool three_d = m.y3 != ir::kNoValue;
    const ir::ValueId y = three_d ? m.y3 : old[m.pv].outputs[0];
    const DType dtype = t.value(m.q).dtype;
    const size_t guards = t.guards.size();
    ir::ValueId k = three_d ? m.k3 : m.k;
    if (!three_d && !m.k_perm.empty()) {
      ir::Node tr;
      tr.op = "Transpose";
      tr.name = qk.name + "/k";
      tr.inputs = {m.k};
      tr.outputs = {NewValue(t, t.value(m.kt).name + "#k")};
      tr.attrs.SetInts("perm", m.k_perm);
      KILN_RETURN_IF_ERROR(ir::InferNode(t, tr));
      k = tr.outputs[0];
      t.body.nodes.push_back(std::move(tr));
    }
    ir::ValueId mask = ir::kNoValue;
    if (m.masks.size() == 1 && t.value(m.masks[0]).rank() <= kRank) {
      mask = m.masks[0];
    } else if (!m.masks.empty()) {
      mask = SumConstants(t, qk.name + "/mask_sum", m.masks);
    }
    if (m.cond != ir::kNoValue && mask != ir::kNoValue) {
      ir::Node where;
      where.op = "Where";
      where.name = qk.name + "/mask";
      where.inputs = {m.cond, mask,
                      AddFloatConstant(t, qk.name + "/-inf", dtype, {}, {-std::numeric_limits<double>::infinity()})};
      where.outputs = {NewValue(t, qk.name + "/mask")};
      KILN_RETURN_IF_ERROR(ir::InferNode(t, where));
      mask = where.outputs[0];
      t.body.nodes.push_back(std::move(where));
    } else if (m.cond != ir::kNoValue) {
      mask = m.cond;
    }
    ir::Node a;
    a.op = "Attention";
    a.name = qk.name;
    a.inputs = {three_d ? m.q3 : m.q, k, three_d ? m.v3 : m.v};
    if (mask != ir::kNoValue || m.concat_k >= 0) a.inputs.push_back(mask);
    a.outputs = {y};
    if (m.concat_k >= 0) {
      a.inputs.insert(a.inputs.end(), {m.past_k, m.past_v});
      a.outputs.insert(a.outputs.end(), {m.present_k, m.present_v});
    }
    a.attrs.SetFloat("scale", static_cast<float>(m.scale));
    if (!m.zeroed_nans) a.attrs.SetInt("masked_rows_nan", 1);  // Softmax's value for a row of -inf
    if (three_d) {
      a.attrs.SetInt("q_num_heads", m.q_heads);
      a.attrs.SetInt("kv_num_heads", m.kv_heads);
      if (m.packed) a.attrs.SetInt("packed_qkv", 1);
    }
    std::vector<ir::SymShape> expect;
    for (ir::ValueId id : a.outputs) expect.push_back(t.value(id).shape);
    KILN_RETURN_IF_ERROR(ir::InferNode(t, a));
    t.guards.resize(guards);  // the written-out ops' guards hold them already
    for (size_t o = 0; o < a.outputs.size(); ++o) {
      const ir::SymShape& got = t.value(a.outputs[o]).shape;
      bool same = got.size() == expect[o].size();
      for (size_t d = 0; same && d < got.size(); ++d) same = got[d].Same(expect[o][d]);
      if (!same)
        return Internal(fmt::format("attention: node '{}' infers another shape for output {} than the {} it replaces",
                                    a.name, o, o == 0 ? "MatMul" : "Concat"));
    }
    (*written)[static_cast<size_t>(at_pv[i])] = t.body.nodes.size();
    t.body.nodes.push_back(std::move(a));
  }
  return t;
}

}  // namespace

Result<ir::Trace> FuseAttention(const ir::Trace& trace, std::vector<std::string>* log, const AttentionFilter& keep) {
  Found found = FindAll(trace);
  std::vector<std::string> lines;
  for (const std::string& line : found.unmatched) lines.push_back("attention not fused: " + line);
  if (keep) {  // the model's own Attention nodes: whether the backend runs them
    for (const ir::Node& n : trace.body.nodes)
      if (n.op == "Attention")
        if (const std::string why = keep(trace, n); !why.empty())
          lines.push_back(fmt::format("Attention '{}' runs on its CPU kernel: {}", n.name, why));
  }
  if (found.matches.empty()) {
    if (log) log->insert(log->end(), lines.begin(), lines.end());
    return trace;
  }
  std::vector<size_t> written;
  KILN_ASSIGN_OR_RETURN(ir::Trace t, Rewrite(trace, found.matches, &written));
  if (keep) {
    // A match whose node `keep` refuses with its KV cache absorbed is matched again with the
    // cache's Concats written out; one it refuses then stays written out.
    std::set<int> written_cache;
    for (size_t k = 0; k < found.matches.size(); ++k)
      if (found.matches[k].concat_k >= 0 && !keep(t, t.body.nodes[written[k]]).empty())
        written_cache.insert(found.matches[k].softmax);
    if (!written_cache.empty()) {
      found = FindAll(trace, written_cache);
      KILN_ASSIGN_OR_RETURN(t, Rewrite(trace, found.matches, &written));
    }
    std::vector<Match> kept;
    for (size_t k = 0; k < found.matches.size(); ++k) {
      const std::string why = keep(t, t.body.nodes[written[k]]);
      if (why.empty()) kept.push_back(found.matches[k]);
      else lines.push_back(fmt::format("attention kept written out: Softmax '{}': {}",
                                       trace.body.nodes[found.matches[k].softmax].name, why));
    }
    if (kept.size() < found.matches.size()) {
      found.matches = std::move(kept);
      KILN_ASSIGN_OR_RETURN(t, Rewrite(trace, found.matches, &written));
    }
  }
  if (log) {
    if (!found.matches.empty())
      log->push_back(fmt::format("attention: {} scaled dot-product attentions -> Attention", found.matches.size()));
    const auto cached =
        std::count_if(found.matches.begin(), found.matches.end(), [](const Match& m) { return m.concat_k >= 0; });
    if (cached > 0)
      log->push_back(fmt::format("attention: {} with their KV cache's Concats (present = Concat(past, new)) -> "
                                 "Attention's past_key, past_value, present_key and present_value",
                                 cached));
    log->insert(log->end(), lines.begin(), lines.end());
  }
  if (found.matches.empty()) return trace;
  EliminateDeadCode(t);  // the Reshapes and Transposes that only fed the chains
  return t;
}

}  // namespace kiln::passes
