#include "compiler/passes/channels_last.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <cstring>
#include <string_view>

#include "compiler/ops/registry.h"
#include "runtime/op_table.h"

namespace kiln::passes {
namespace {

constexpr int kRank = 4;
// Dim i of a value's NHWC twin is dim kToLast[i] of the value; dim j of the value is dim
// kToFirst[j] of its twin (so an NCHW axis a is the twin's axis kToFirst[a]).
constexpr std::array<int64_t, kRank> kToLast = {0, 2, 3, 1};
constexpr std::array<int64_t, kRank> kToFirst = {0, 3, 1, 2};

// Elementwise ops (the op table's kind) that broadcast as ONNX does, every input along the
// same axes: the same op on NHWC operands computes the same elements in NHWC. Not those whose
// attributes or inputs name axes or shapes.
bool Broadcasting(std::string_view op) {
  static const std::set<std::string_view> kNot = {"BatchNormalization", "ConstantOfShape", "EyeLike", "Range",
                                                  "Trilu"};
  const OpInfo* info = FindOpInfo(op);
  return info != nullptr && info->fusion == FusionKind::kElementwise && !kNot.contains(op);
}

bool IsReduce(std::string_view op) {
  static const std::set<std::string_view> kReduce = {"ReduceL1",        "ReduceL2",  "ReduceLogSum",
                                                     "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                                                     "ReduceMin",       "ReduceProd", "ReduceSum",
                                                     "ReduceSumSquare"};
  return kReduce.contains(op);
}

bool FloatType(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

bool SameShape(const ir::SymShape& a, const ir::SymShape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].Same(b[i])) return false;
  return true;
}

ir::SymShape ToLast(const ir::SymShape& s) {
  ir::SymShape out;
  for (int64_t i : kToLast) out.push_back(s[static_cast<size_t>(i)]);
  return out;
}

// The axis `a` of a rank-4 value (negative counts from the end), or nullopt outside [-4, 4).
std::optional<int64_t> Axis(int64_t a) {
  if (a < -kRank || a >= kRank) return std::nullopt;
  return a < 0 ? a + kRank : a;
}

bool Convertible(const ir::Trace& t, const ir::Node& n) {
  if (n.op != "Conv" || !n.when.empty() || !n.blocks.empty() || n.inputs.size() < 2 || n.outputs.size() != 1 ||
      n.inputs[0] == ir::kNoValue || n.outputs[0] == ir::kNoValue)
    return false;
  const ir::Value& x = t.value(n.inputs[0]);
  return x.rank() == kRank && FloatType(x.dtype) && t.value(n.outputs[0]).rank() == kRank;
}

std::vector<int64_t> PermOf(const ir::Node& n) {
  std::vector<int64_t> perm = n.attrs.GetInts("perm");
  if (perm.empty())
    for (int64_t i = kRank - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

// Whether `n` is an op that follows NHWC inputs at no cost (the header's list).
bool Follower(const ir::Node& n) {
  return Broadcasting(n.op) || IsReduce(n.op) || n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool" ||
         n.op == "Concat" || n.op == "Split" || n.op == "Resize";
}

// Per value, whether a reader would take it in NHWC: a Conv (its X; its residual where its Y
// is wanted), a Transpose to channels-last, a Flatten or Reshape of [N, C, 1, 1], or a follower
// whose result is wanted. From the last node back, so a value's readers are decided before it.
// A Conv whose X is not NHWC and whose Y is not wanted stays NCHW, and one whose Y is not
// wanted gives it NCHW (Rewriter::RewriteConv): a detector's head, whose maps go on to a
// Reshape, stays NCHW as the model has it.
std::vector<bool> WantedNhwc(const ir::Trace& t, const std::vector<int32_t>& scopes) {
  std::vector<bool> wanted(t.values.size(), false);
  const std::vector<ir::Node>& nodes = t.body.nodes;
  const auto rank4 = [&](ir::ValueId id) { return id != ir::kNoValue && t.value(id).rank() == kRank; };
  for (size_t i = nodes.size(); i-- > 0;) {
    const ir::Node& n = nodes[i];
    if (!n.when.empty() || !n.blocks.empty() || scopes[i] >= 0 || n.inputs.empty() ||
        (!rank4(n.inputs[0]) && n.op != "Concat" && !Broadcasting(n.op)))
      continue;
    bool out_wanted = false;
    for (ir::ValueId y : n.outputs) out_wanted = out_wanted || (y != ir::kNoValue && wanted[y]);
    if (Convertible(t, n)) {
      wanted[n.inputs[0]] = true;
      if (n.inputs.size() > 3 && rank4(n.inputs[3]) && out_wanted) wanted[n.inputs[3]] = true;
    } else if (n.op == "Transpose") {
      if (PermOf(n) == std::vector<int64_t>(kToLast.begin(), kToLast.end())) wanted[n.inputs[0]] = true;
    } else if (n.op == "Flatten" || n.op == "Reshape") {
      const ir::Value& x = t.value(n.inputs[0]);
      if (x.shape[2].value() == 1 && x.shape[3].value() == 1) wanted[n.inputs[0]] = true;
    } else if (Follower(n) && out_wanted) {
      for (ir::ValueId id : n.inputs)
        if (rank4(id)) wanted[id] = true;
    }
  }
  return wanted;
}

class Rewriter {
 public:
  explicit Rewriter(ir::Trace& t)
      : t_(t), scopes_(ir::LoopScopes(t.body.nodes)), wanted_(WantedNhwc(t, scopes_)) {
    const size_t n = t.values.size();
    twin_.assign(n, ir::kNoValue);
    alias_.assign(n, ir::kNoValue);
    producer_gone_.assign(n, false);
  }

  Status Run() {
    std::vector<ir::Node> nodes = std::move(t_.body.nodes);
    t_.body.nodes.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      ir::Node n = std::move(nodes[i]);
      Alias(n);
      if (n.when.empty() && n.blocks.empty() && scopes_[i] < 0 && n.op != "kiln.LoopBegin" && n.op != "kiln.LoopEnd") {
        KILN_ASSIGN_OR_RETURN(const bool done, Rewrite(n));
        if (done) continue;
      }
      Emit(std::move(n));
    }
    for (ir::ValueId& id : t_.outputs)
      if (id != ir::kNoValue && alias_[id] != ir::kNoValue) id = alias_[id];
    return Materialize();
  }

  int convs = 0, followers = 0, transposes = 0;

 private:
  // ---- values -------------------------------------------------------------------------

  size_t Grow() {
    twin_.push_back(ir::kNoValue);
    alias_.push_back(ir::kNoValue);
    producer_gone_.push_back(false);
    wanted_.push_back(false);
    return t_.values.size();
  }

  ir::ValueId NewValue(const ir::Value& like, std::string name, ir::SymShape shape) {
    ir::Value v;
    v.name = std::move(name);
    v.dtype = like.dtype;
    v.shape = std::move(shape);
    Grow();
    return t_.AddValue(std::move(v));
  }

  ir::ValueId NewConst(const std::string& name, std::shared_ptr<const ir::ConstData> data) {
    ir::Value v;
    v.name = name;
    v.dtype = data->dtype;
    for (int64_t d : data->dims) v.shape.push_back(d);
    v.data = std::move(data);
    Grow();
    return t_.AddValue(std::move(v));
  }

  ir::ValueId IntsConst(const std::string& name, const std::vector<int64_t>& values) {
    auto d = std::make_shared<ir::ConstData>();
    d->dtype = DType::kInt64;
    d->dims = {static_cast<int64_t>(values.size())};
    d->bytes.resize(values.size() * sizeof(int64_t));
    std::memcpy(d->bytes.data(), values.data(), d->bytes.size());
    return NewConst(name, std::move(d));
  }

  // The elements of a constant 1-D integer value, or nullopt.
  std::optional<std::vector<int64_t>> Ints(ir::ValueId id) const {
    if (id == ir::kNoValue || !t_.value(id).is_const()) return std::nullopt;
    const ir::ConstData& d = *t_.value(id).data;
    if (d.dims.size() != 1 || (d.dtype != DType::kInt64 && d.dtype != DType::kInt32)) return std::nullopt;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < d.num_elements(); ++i) v.push_back(d.IntAt(i));
    return v;
  }

  // A constant of rank <= 4, broadcast-aligned to rank 4 (leading 1s) and transposed to NHWC.
  ir::ValueId TransposedConst(ir::ValueId id) {
    if (twin_[id] != ir::kNoValue) return twin_[id];
    const ir::ConstData& c = *t_.value(id).data;
    std::array<int64_t, kRank> dims{1, 1, 1, 1};
    const size_t off = kRank - c.dims.size();
    for (size_t i = 0; i < c.dims.size(); ++i) dims[off + i] = c.dims[i];
    auto d = std::make_shared<ir::ConstData>();
    d->dtype = c.dtype;
    for (int64_t i : kToLast) d->dims.push_back(dims[static_cast<size_t>(i)]);
    const size_t size = DTypeSize(c.dtype);
    d->bytes.resize(c.bytes.size());
    // Element (n, h, w, c) of the twin is element (n, c, h, w) of the constant.
    const int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
    size_t at = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t ch = 0; ch < C; ++ch, at += size)
            std::memcpy(d->bytes.data() + at, c.bytes.data() + static_cast<size_t>(((n * C + ch) * H + h) * W + w) * size,
                        size);
    const ir::ValueId out = NewConst(t_.value(id).name + "#nhwc", std::move(d));
    twin_[id] = out;
    return out;
  }

  // The NHWC twin of the rank-4 value `id`: its twin, a transposed constant, or a Transpose
  // made here (before the node that reads it).
  ir::ValueId TwinOf(ir::ValueId id) {
    if (twin_[id] != ir::kNoValue) return twin_[id];
    if (t_.value(id).is_const()) return TransposedConst(id);
    const std::string name = t_.value(id).name;
    const ir::ValueId out = NewValue(t_.value(id), name + "#nhwc", ToLast(t_.value(id).shape));
    ir::Node tr;
    tr.op = "Transpose";
    tr.name = name + "#to_nhwc";
    tr.inputs = {id};
    tr.outputs = {out};
    tr.attrs.SetInts("perm", {kToLast.begin(), kToLast.end()});
    ++transposes;
    Emit(std::move(tr));
    twin_[id] = out;
    return out;
  }

  // Records `twin` as the NHWC form of `id`, whose producer is gone from the trace.
  void SetTwin(ir::ValueId id, ir::ValueId twin) {
    twin_[id] = twin;
    producer_gone_[id] = true;
  }

  ir::ValueId MakeTwinOutput(ir::ValueId id) {
    const ir::Value& v = t_.value(id);
    return NewValue(v, v.name + "#nhwc", ToLast(v.shape));
  }

  // ---- nodes ------------------------------------------------------------------------

  void Alias(ir::Node& n) {
    for (ir::ValueId& id : n.inputs)
      if (id != ir::kNoValue && alias_[id] != ir::kNoValue) id = alias_[id];
    for (auto& [name, block] : n.blocks) {
      auto copy = std::make_shared<ir::Block>(*block);
      AliasBlock(*copy);
      block = std::move(copy);
    }
  }
  void AliasBlock(ir::Block& b) {
    for (ir::Node& n : b.nodes) Alias(n);
    for (ir::ValueId& id : b.outputs)
      if (id != ir::kNoValue && alias_[id] != ir::kNoValue) id = alias_[id];
  }

  void Emit(ir::Node n) { t_.body.nodes.push_back(std::move(n)); }

  // Runs the meta function of `n` (a registered op, its outputs' shapes set to what the
  // rewrite expects) and checks that it infers those shapes.
  Status Check(ir::Node& n) {
    std::vector<ir::SymShape> expect;
    for (ir::ValueId id : n.outputs) expect.push_back(id == ir::kNoValue ? ir::SymShape{} : t_.value(id).shape);
    const size_t guards = t_.guards.size();
    KILN_RETURN_IF_ERROR(ir::InferNode(t_, n));
    t_.guards.resize(guards);  // the NCHW op's guards hold them already
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k] != ir::kNoValue && !SameShape(t_.value(n.outputs[k]).shape, expect[k]))
        return Internal("channels-last: node '" + n.name + "' (" + n.op + ") output " + std::to_string(k) +
                        " has another shape in NHWC than the rewrite expects");
    return Status::Ok();
  }

  bool HasTwin(ir::ValueId id) const { return id != ir::kNoValue && twin_[id] != ir::kNoValue && !t_.value(id).is_const(); }

  // Rewrites `n` into NHWC where it is one of the ops the header lists and it reads an NHWC
  // value (a Conv: always). True when `n` is handled (emitted in its NHWC form).
  Result<bool> Rewrite(ir::Node& n) {
    if (Convertible(t_, n)) return RewriteConv(n);
    if (Broadcasting(n.op)) return RewriteElementwise(n);
    if (n.op == "Concat") return RewriteConcat(n);
    if (n.inputs.empty() || n.inputs[0] == ir::kNoValue || t_.value(n.inputs[0]).rank() != kRank) return false;
    if (!HasTwin(n.inputs[0])) {
      if (n.op == "Transpose" && n.outputs.size() == 1 && n.outputs[0] != ir::kNoValue &&
          PermOf(n) == std::vector<int64_t>(kToFirst.begin(), kToFirst.end()) && !t_.value(n.inputs[0]).is_const()) {
        // The NCHW form of a value that is NHWC (ConvNeXt's permute back): that value is its twin.
        SetTwin(n.outputs[0], n.inputs[0]);
        return true;
      }
      return false;
    }
    if (IsReduce(n.op) || n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") return RewriteReduce(n);
    if (n.op == "Split") return RewriteSplit(n);
    if (n.op == "Transpose") return RewriteTranspose(n);
    if (n.op == "Flatten" || n.op == "Reshape") return RewriteReshape(n);
    if (n.op == "Resize") return RewriteResize(n);
    return false;
  }

  // A Conv in NHWC where its X is or its Y is wanted so (WantedNhwc); at the boundary between the
  // layouts, the side that meets NCHW stays NCHW (x_layout, y_layout: runtime/kernels/nhwc_conv.h)
  // and oneDNN reorders it inside the op.
  Result<bool> RewriteConv(ir::Node& n) {
    const bool x_nhwc = HasTwin(n.inputs[0]);
    const ir::ValueId y = n.outputs[0];
    const bool y_nhwc = wanted_[y];
    if (!x_nhwc && !y_nhwc) return false;
    ir::Node c = n;
    c.op = "kiln.NhwcConv";
    if (x_nhwc) {
      c.inputs[0] = TwinOf(n.inputs[0]);
    } else {
      c.attrs.SetString("x_layout", "NCHW");
    }
    if (!y_nhwc) {
      c.attrs.SetString("y_layout", "NCHW");
      Emit(std::move(c));
      ++convs;
      return true;
    }
    if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) c.inputs[3] = TwinOf(n.inputs[3]);
    c.outputs[0] = MakeTwinOutput(y);
    Emit(std::move(c));
    SetTwin(y, t_.body.nodes.back().outputs[0]);
    ++convs;
    return true;
  }

  // Emits `f`, a follower whose outputs are still the NCHW values: each present output becomes
  // a new NHWC value, the twin of the one it replaces.
  Result<bool> EmitFollower(ir::Node f) {
    const std::vector<ir::ValueId> nchw = f.outputs;
    for (ir::ValueId& y : f.outputs)
      if (y != ir::kNoValue) y = MakeTwinOutput(y);
    KILN_RETURN_IF_ERROR(Check(f));
    const std::vector<ir::ValueId> nhwc = f.outputs;
    Emit(std::move(f));
    for (size_t k = 0; k < nchw.size(); ++k)
      if (nchw[k] != ir::kNoValue) SetTwin(nchw[k], nhwc[k]);
    ++followers;
    return true;
  }

  // Whether every dim of `v` is 1: one value, which broadcasts the same in either layout.
  static bool Ones(const ir::Value& v) {
    for (const ir::Sym& d : v.shape)
      if (d.value() != 1) return false;
    return true;
  }

  Result<bool> RewriteElementwise(ir::Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue || t_.value(n.outputs[0]).rank() != kRank) return false;
    bool any = false;
    for (ir::ValueId id : n.inputs) {
      if (id == ir::kNoValue) continue;
      const ir::Value& v = t_.value(id);
      any = any || HasTwin(id);
      // Inputs that follow: NHWC values, other rank-4 values (transposed here), constants
      // (transposed at compile time) and single values.
      if (v.rank() > kRank || (!HasTwin(id) && !v.is_const() && v.rank() != kRank && !Ones(v))) return false;
    }
    if (!any) return false;
    ir::Node e = n;
    for (ir::ValueId& id : e.inputs)
      if (id != ir::kNoValue && !Ones(t_.value(id))) id = TwinOf(id);
    return EmitFollower(std::move(e));
  }

  Result<bool> RewriteReduce(ir::Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue || t_.value(n.inputs[0]).rank() != kRank) return false;
    const bool global = n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
    std::vector<int64_t> axes;
    int64_t keepdims = 1;
    if (global) {
      axes = {2, 3};
    } else {
      keepdims = n.attrs.GetInt("keepdims", 1);
      if (n.attrs.Has("axes")) {
        axes = n.attrs.GetInts("axes");
      } else if (n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue) {
        std::optional<std::vector<int64_t>> a = Ints(n.inputs[1]);
        if (!a) return false;
        axes = *a;
      }
      if (axes.empty()) {
        if (n.attrs.GetInt("noop_with_empty_axes", 0) != 0) return false;
        axes = {0, 1, 2, 3};
      }
    }
    std::array<bool, kRank> reduced{};
    for (int64_t a : axes) {
      std::optional<int64_t> axis = Axis(a);
      if (!axis) return false;
      reduced[static_cast<size_t>(*axis)] = true;
    }
    std::vector<int64_t> twin_axes;
    for (int i = 0; i < kRank; ++i)
      if (reduced[static_cast<size_t>(kToLast[static_cast<size_t>(i)])]) twin_axes.push_back(i);
    // keepdims=0: the NHWC result is the NCHW one when the kept axes keep their order.
    bool plain = false;
    if (keepdims == 0) {
      std::vector<int64_t> kept;
      for (int64_t i : kToLast)
        if (!reduced[static_cast<size_t>(i)]) kept.push_back(i);
      if (!std::is_sorted(kept.begin(), kept.end())) return false;
      plain = true;
    }
    ir::Node r = n;
    if (global) {
      r.op = n.op == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax";
      r.attrs = AttrMap();
      r.attrs.SetInt("keepdims", 1);
    }
    r.inputs = {TwinOf(n.inputs[0])};
    if (n.attrs.Has("axes")) {
      r.attrs.SetInts("axes", twin_axes);
    } else {
      r.inputs.push_back(IntsConst(n.name + "#nhwc_axes", twin_axes));
    }
    if (!plain) return EmitFollower(std::move(r));
    KILN_RETURN_IF_ERROR(Check(r));
    Emit(std::move(r));
    ++followers;
    return true;
  }

  Result<bool> RewriteConcat(ir::Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
    std::optional<int64_t> axis = Axis(n.attrs.GetInt("axis", 0));
    if (!axis) return false;
    bool any = false;
    for (ir::ValueId id : n.inputs) {
      if (id == ir::kNoValue || t_.value(id).rank() != kRank) return false;
      any = any || HasTwin(id);
    }
    if (!any) return false;
    ir::Node c = n;
    for (ir::ValueId& id : c.inputs) id = TwinOf(id);
    c.attrs.SetInt("axis", kToFirst[static_cast<size_t>(*axis)]);
    return EmitFollower(std::move(c));
  }

  Result<bool> RewriteSplit(ir::Node& n) {
    std::optional<int64_t> axis = Axis(n.attrs.GetInt("axis", 0));
    if (!axis || t_.value(n.inputs[0]).rank() != kRank) return false;
    ir::Node s = n;
    s.inputs[0] = TwinOf(n.inputs[0]);
    s.attrs.SetInt("axis", kToFirst[static_cast<size_t>(*axis)]);
    return EmitFollower(std::move(s));
  }

  Result<bool> RewriteTranspose(ir::Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
    const std::vector<int64_t> perm = PermOf(n);
    if (perm.size() != kRank) return false;
    // Y[j] = X[perm[j]] = twin[kToFirst[perm[j]]].
    std::vector<int64_t> composed;
    for (int64_t p : perm) {
      if (p < 0 || p >= kRank) return false;
      composed.push_back(kToFirst[static_cast<size_t>(p)]);
    }
    const ir::ValueId twin = TwinOf(n.inputs[0]);
    const ir::ValueId y = n.outputs[0];
    bool identity = true;
    for (int i = 0; i < kRank; ++i) identity = identity && composed[static_cast<size_t>(i)] == i;
    if (identity && std::find(t_.outputs.begin(), t_.outputs.end(), y) == t_.outputs.end()) {
      alias_[y] = twin;  // ConvNeXt's permute to channels-last: the NHWC value itself
      ++followers;
      return true;
    }
    ir::Node tr = n;
    tr.inputs[0] = twin;
    tr.attrs.SetInts("perm", composed);
    KILN_RETURN_IF_ERROR(Check(tr));
    Emit(std::move(tr));
    ++followers;
    return true;
  }

  // Flatten or Reshape of an [N, C, 1, 1] (or [N, 1, H, W]) value: its NHWC twin holds the same
  // elements in the same order.
  Result<bool> RewriteReshape(ir::Node& n) {
    const ir::Value& x = t_.value(n.inputs[0]);
    const bool spatial_ones = x.shape[2].value() == 1 && x.shape[3].value() == 1;
    if (!(spatial_ones || x.shape[1].value() == 1) || n.outputs.size() != 1) return false;
    if (n.op == "Flatten") {
      const int64_t axis = n.attrs.GetInt("axis", 1);
      if (axis != 0 && axis != 1 && axis != -4 && axis != -3) return false;
    } else {
      std::optional<std::vector<int64_t>> shape = Ints(n.inputs.size() > 1 ? n.inputs[1] : ir::kNoValue);
      if (!shape) return false;
      // A 0 copies the input's dim, which differs between the layouts.
      if (n.attrs.GetInt("allowzero", 0) == 0 && std::find(shape->begin(), shape->end(), 0) != shape->end())
        return false;
    }
    ir::Node r = n;
    r.inputs[0] = TwinOf(n.inputs[0]);
    KILN_RETURN_IF_ERROR(Check(r));
    Emit(std::move(r));
    ++followers;
    return true;
  }

  Result<bool> RewriteResize(ir::Node& n) {
    if (n.attrs.Has("axes") || n.outputs.size() != 1 || t_.value(n.inputs[0]).rank() != kRank) return false;
    const auto input = [&](size_t k) { return k < n.inputs.size() ? n.inputs[k] : ir::kNoValue; };
    if (const ir::ValueId roi = input(1); roi != ir::kNoValue &&
                                          (!t_.value(roi).is_const() || t_.value(roi).data->num_elements() != 0))
      return false;
    ir::Node r = n;
    r.inputs[0] = TwinOf(n.inputs[0]);
    for (size_t k : {size_t{2}, size_t{3}}) {
      const ir::ValueId id = input(k);
      if (id == ir::kNoValue || (t_.value(id).is_const() && t_.value(id).data->num_elements() == 0)) continue;
      if (!t_.value(id).is_const() || t_.value(id).data->num_elements() != kRank || t_.value(id).rank() != 1)
        return false;
      const ir::ConstData& c = *t_.value(id).data;
      auto d = std::make_shared<ir::ConstData>(c);
      const size_t size = DTypeSize(c.dtype);
      for (int i = 0; i < kRank; ++i)
        std::memcpy(d->bytes.data() + i * size, c.bytes.data() + kToLast[static_cast<size_t>(i)] * size, size);
      r.inputs[k] = NewConst(t_.value(id).name + "#nhwc", std::move(d));
    }
    return EmitFollower(std::move(r));
  }

  // ---- the NCHW values still read ------------------------------------------------------

  void MarkReads(const ir::Block& b, std::vector<bool>& read) const {
    for (const ir::Node& n : b.nodes) {
      for (ir::ValueId id : n.inputs)
        if (id != ir::kNoValue) read[id] = true;
      for (const ir::Predicate& p : n.when) read[p.cond] = true;
      for (const auto& [name, block] : n.blocks) MarkReads(*block, read);
    }
    for (ir::ValueId id : b.outputs)
      if (id != ir::kNoValue) read[id] = true;
  }

  // A Transpose back to NCHW, right after the node that makes the twin (or first, for a
  // twin that is a model input's), for each value whose producer went and that is still read.
  Status Materialize() {
    std::vector<bool> read(t_.values.size(), false);
    MarkReads(t_.body, read);
    for (ir::ValueId id : t_.outputs)
      if (id != ir::kNoValue) read[id] = true;
    std::vector<ir::ValueId> needed;
    for (size_t id = 0; id < producer_gone_.size(); ++id)
      if (producer_gone_[id] && read[id]) needed.push_back(static_cast<ir::ValueId>(id));
    if (needed.empty()) return Status::Ok();
    std::vector<int> made_at(t_.values.size(), -1);  // the node that outputs each value
    for (size_t i = 0; i < t_.body.nodes.size(); ++i)
      for (ir::ValueId id : t_.body.nodes[i].outputs)
        if (id != ir::kNoValue) made_at[id] = static_cast<int>(i);
    std::vector<std::vector<ir::Node>> after(t_.body.nodes.size() + 1);  // [0]: before every node
    for (ir::ValueId id : needed) {
      const ir::ValueId twin = twin_[id];
      ir::Node tr;
      tr.op = "Transpose";
      tr.name = t_.value(id).name + "#to_nchw";
      tr.inputs = {twin};
      tr.outputs = {id};
      tr.attrs.SetInts("perm", {kToFirst.begin(), kToFirst.end()});
      KILN_RETURN_IF_ERROR(Check(tr));
      ++transposes;
      after[static_cast<size_t>(made_at[twin] + 1)].push_back(std::move(tr));
    }
    std::vector<ir::Node> nodes;
    for (ir::Node& tr : after[0]) nodes.push_back(std::move(tr));
    for (size_t i = 0; i < t_.body.nodes.size(); ++i) {
      nodes.push_back(std::move(t_.body.nodes[i]));
      for (ir::Node& tr : after[i + 1]) nodes.push_back(std::move(tr));
    }
    t_.body.nodes = std::move(nodes);
    return Status::Ok();
  }

  ir::Trace& t_;
  std::vector<int32_t> scopes_;
  std::vector<bool> wanted_;  // per value: WantedNhwc
  std::vector<ir::ValueId> twin_;    // per value: its NHWC twin, or kNoValue
  std::vector<ir::ValueId> alias_;   // per value: the value its readers read instead
  std::vector<bool> producer_gone_;  // per value: its producer was rewritten (Materialize)
};

}  // namespace

bool ChannelsLastChanges(const ir::Trace& trace) {
  const std::vector<int32_t> scopes = ir::LoopScopes(trace.body.nodes);
  const std::vector<bool> wanted = WantedNhwc(trace, scopes);
  for (size_t i = 0; i < trace.body.nodes.size(); ++i) {
    const ir::Node& n = trace.body.nodes[i];
    if (scopes[i] < 0 && Convertible(trace, n) && wanted[n.outputs[0]]) return true;
  }
  return false;
}

Result<ir::Trace> ToChannelsLast(const ir::Trace& trace, std::vector<std::string>* log) {
  ir::Trace t = trace;
  if (!ChannelsLastChanges(t)) return t;
  Rewriter r(t);
  KILN_RETURN_IF_ERROR(r.Run());
  const auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  if (log)
    log->push_back("channels-last: " + count(r.convs, "Conv", "Convs") + " in NHWC (kiln.NhwcConv), " +
                   count(r.followers, "op follows", "ops follow") + " their NHWC values, " +
                   count(r.transposes, "Transpose", "Transposes") + " between the layouts");
  return t;
}

}  // namespace kiln::passes
