#include "compiler/passes/epilogue.h"

#include <cmath>

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>

#include "compiler/ops/registry.h"
#include "compiler/passes/constants.h"
#include "compiler/passes/uses.h"
#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/float_storage.h"

namespace kiln::passes {
namespace {

// The output dtypes an epilogue takes are cpu::IsFloatStorage's: float16 and bfloat16 as well
// (`--precision`), whose kernels apply it in float32 before the output's one rounding
// (cuBLASLt's and cuDNN's epilogues; the CPU backend's widened float32 kernel,
// runtime/kernels/widen.h).

bool SameShape(const ir::SymShape& a, const ir::SymShape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].Same(b[i])) return false;
  return true;
}

constexpr size_t kBiasInput = cpu::kEpilogueBiasInput;
constexpr size_t kResidualInput = cpu::kEpilogueResidualInput;

// Input i of `n`, or kNoValue when the node has fewer inputs.
ir::ValueId InputOr(const ir::Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : ir::kNoValue; }

bool IsAnchor(const ir::Node& n) { return n.op == "MatMul" || n.op == "Gemm" || n.op == "Conv"; }

// True when `n` already carries an epilogue (this pass ran before, or the node was built so).
bool HasEpilogue(const ir::Node& n) {
  if (n.attrs.Has(cpu::kEpilogueActivationAttr) || n.attrs.Has(cpu::kEpilogueResidualAttr) ||
      n.attrs.Has(cpu::kEpilogueOrderAttr))
    return true;
  if (n.inputs.size() > kResidualInput) return true;
  return n.op == "MatMul" && n.inputs.size() > kBiasInput;
}


// The bias values (one per output channel) of constant `c` added to an output of shape
// `out`, when c varies along `axis` only (or not at all); nullopt otherwise. `channels` is
// out[axis], which must be static.
std::optional<std::vector<double>> ChannelBias(const ir::Value& c, const ir::SymShape& out, int axis) {
  const auto channels = out[axis].value();
  if (!channels || !c.is_const() || c.rank() > static_cast<int>(out.size())) return std::nullopt;
  const std::vector<int64_t>& dims = c.data->dims;
  const int offset = static_cast<int>(out.size()) - static_cast<int>(dims.size());
  bool along_axis = false;
  for (int j = 0; j < static_cast<int>(dims.size()); ++j) {
    if (dims[j] == 1) continue;
    if (j + offset != axis || dims[j] != *channels) return std::nullopt;
    along_axis = true;
  }
  std::vector<double> v(static_cast<size_t>(*channels));
  for (int64_t k = 0; k < *channels; ++k) v[k] = c.data->FloatAt(along_axis ? k : 0);
  return v;
}


// One chain found after an anchor.
struct Chain {
  std::string_view anchor_op;      // "Conv", "MatMul" or "Gemm"
  std::vector<int> folded;         // node indices absorbed, in order
  ir::ValueId result = ir::kNoValue;
  // bias
  int bias_node = -1;
  ir::ValueId bias_const = ir::kNoValue;
  std::vector<double> bias;
  // activation
  cpu::EpilogueActivation act = cpu::EpilogueActivation::kNone;
  std::string act_desc;  // for the log: "Relu 'relu1'"
  // residual
  ir::ValueId residual = ir::kNoValue;
  bool residual_first = false;
};

class Folder {
 public:
  Folder(ir::Trace& t, EpilogueActivations activations)
      : claimed(t.body.nodes.size(), false),
        activations_(activations),
        t_(t),
        uses_(t),
        scopes_(ir::LoopScopes(t.body.nodes)) {}

  // Nodes already part of a chain: a node joins at most one (two anchors may both reach the
  // Add that sums them; the first takes it, the other then sees its output read by a node
  // that is taken and stops).
  std::vector<bool> claimed;

  // Whether `act` may fold into the chain's anchor (EpilogueActivations in epilogue.h).
  bool Takes(const Chain& chain, cpu::EpilogueActivation act) const {
    if (activations_ == EpilogueActivations::kAny) return true;
    // Relu(NaN) is NaN (docs/semantics.md). cuDNN's separate activation call, with
    // CUDNN_PROPAGATE_NAN, keeps it; cuBLASLt documents its RELU epilogue as max(x, 0) with no
    // NaN rule (the emulated device gives 0, as fmaxf would), so a MatMul's or Gemm's Relu
    // stays a generated kernel. Found by tests/differential (MatMul -> Relu of a NaN row).
    if (act == cpu::EpilogueActivation::kRelu) return chain.anchor_op == "Conv";
    return act == cpu::EpilogueActivation::kGeluTanh && chain.anchor_op != "Conv";
  }

  // Extends `chain` from `tip` with an activation; false when none follows.
  bool MatchActivation(ir::ValueId tip, Chain& chain) {
    const ir::Value& x = t_.value(tip);
    if (const int r = Reader(tip); r >= 0) {
      const ir::Node& n = t_.body.nodes[r];
      if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
      std::optional<cpu::EpilogueActivation> act;
      if (n.op == "Relu") act = cpu::EpilogueActivation::kRelu;
      if (n.op == "Sigmoid") act = cpu::EpilogueActivation::kSigmoid;
      if (n.op == "HardSwish") act = cpu::EpilogueActivation::kHardSwish;
      if (n.op == "Gelu") {
        const std::string_view approx = n.attrs.GetString("approximate", "none");
        if (approx == "none") act = cpu::EpilogueActivation::kGelu;
        if (approx == "tanh") act = cpu::EpilogueActivation::kGeluTanh;
      }
      if (!act || !Takes(chain, *act) || !Keeps(x, n.outputs[0])) return false;
      chain.act = *act;
      chain.act_desc = std::string(cpu::EpilogueActivationName(*act)) + " '" + n.name + "'";
      chain.folded.push_back(r);
      chain.result = n.outputs[0];
      return true;
    }
    if (uses_.uses[tip] != 2 || uses_.readers[tip].size() != 2) return false;
    if (MatchWrittenOutHardSwish(tip, chain)) return true;
    if (MatchWrittenOutGelu(tip, chain)) return true;
    // SiLU: x read by exactly Sigmoid(x) -> s and Mul(x, s) / Mul(s, x), s read only by the Mul.
    int sig = uses_.readers[tip][0], mul = uses_.readers[tip][1];
    if (claimed[sig] || claimed[mul]) return false;
    if (t_.body.nodes[sig].op != "Sigmoid") std::swap(sig, mul);
    const ir::Node& s = t_.body.nodes[sig];
    const ir::Node& m = t_.body.nodes[mul];
    if (sig == mul || s.op != "Sigmoid" || m.op != "Mul") return false;
    if (s.inputs.size() != 1 || s.outputs.size() != 1 || s.outputs[0] == ir::kNoValue) return false;
    const ir::ValueId sv = s.outputs[0];
    if (m.inputs.size() != 2 || m.outputs.size() != 1 || m.outputs[0] == ir::kNoValue) return false;
    const bool operands =
        (m.inputs[0] == tip && m.inputs[1] == sv) || (m.inputs[0] == sv && m.inputs[1] == tip);
    if (!operands || Reader(sv) != mul || !Keeps(x, sv) || !Keeps(x, m.outputs[0])) return false;
    if (!Takes(chain, cpu::EpilogueActivation::kSilu)) return false;
    chain.act = cpu::EpilogueActivation::kSilu;
    chain.act_desc = "SiLU (Sigmoid '" + s.name + "', Mul '" + m.name + "')";
    chain.folded.push_back(sig);
    chain.folded.push_back(mul);
    chain.result = m.outputs[0];
    return true;
  }

  // HardSwish written out as Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6) (PaddlePaddle's exports):
  // x read by exactly the Add and the Mul (either operand order in each), the Add's output
  // only by the Clip, the Clip's only by the Mul and the Mul's only by the Div; the constants
  // are scalars (one element) of exactly these values.
  bool MatchWrittenOutHardSwish(ir::ValueId tip, Chain& chain) {
    int add = uses_.readers[tip][0], mul = uses_.readers[tip][1];
    if (t_.body.nodes[add].op != "Add") std::swap(add, mul);
    if (add == mul || claimed[add] || claimed[mul]) return false;
    const ir::Node& a = t_.body.nodes[add];
    const ir::Node& m = t_.body.nodes[mul];
    if (!IsBinary(a, "Add") || !IsBinary(m, "Mul") || !IsScalar(Other(a, tip), 3)) return false;
    const int clip = Reader(a.outputs[0]);
    if (clip < 0) return false;
    const ir::Node& c = t_.body.nodes[clip];
    if (c.op != "Clip" || c.outputs.size() != 1 || c.outputs[0] == ir::kNoValue || !ClipsTo0And6(c)) return false;
    if (Other(m, tip) != c.outputs[0] || Reader(c.outputs[0]) != mul) return false;
    const int div = Reader(m.outputs[0]);
    if (div < 0) return false;
    const ir::Node& d = t_.body.nodes[div];
    if (!IsBinary(d, "Div") || d.inputs[0] != m.outputs[0] || !IsScalar(d.inputs[1], 6)) return false;
    const ir::Value& x = t_.value(tip);
    for (const ir::Node* n : {&a, &c, &m, &d})
      if (!Keeps(x, n->outputs[0])) return false;
    if (!Takes(chain, cpu::EpilogueActivation::kHardSwish)) return false;
    chain.act = cpu::EpilogueActivation::kHardSwish;
    chain.act_desc = "HardSwish (Add '" + a.name + "', Clip '" + c.name + "', Mul '" + m.name +
                     "', Div '" + d.name + "')";
    chain.folded.insert(chain.folded.end(), {add, clip, mul, div});
    chain.result = d.outputs[0];
    return true;
  }

  // Gelu written out with Erf (PyTorch's exports before opset 20): x read by exactly a
  // Div(x, sqrt(2)) or Mul(x, 1/sqrt(2)) and a Mul, then Erf, Add(., 1), and either
  //   Mul(x, that) then Mul(., 0.5)       (torch.nn.GELU), or
  //   Mul(x, 0.5) and Mul(that, x * 0.5)  (x * 0.5 * (1 + erf(x / sqrt(2))), as transformers write it), or
  //   Mul(that, 0.5) then Mul(x, .)       (x * (0.5 * (1 + erf(x / sqrt(2)))): torch.onnx.export(dynamo=True));
  // either operand order in each binary op, each intermediate read only by the next op, the
  // constants one-element float32 values of exactly these (sqrt(2) as float32 rounds it).
  bool MatchWrittenOutGelu(ir::ValueId tip, Chain& chain) {
    const auto is_scale = [&](const ir::Node& n) {
      return (IsBinary(n, "Div") && n.inputs[0] == tip && IsScalar(n.inputs[1], static_cast<float>(M_SQRT2))) ||
             (IsBinary(n, "Mul") && IsScalar(Other(n, tip), static_cast<float>(M_SQRT1_2)));
    };
    int scale = uses_.readers[tip][0], outer = uses_.readers[tip][1];
    if (!is_scale(t_.body.nodes[scale])) std::swap(scale, outer);
    if (scale == outer || claimed[scale] || claimed[outer] || !is_scale(t_.body.nodes[scale])) return false;
    const ir::Node& s = t_.body.nodes[scale];
    const int erf = Reader(s.outputs[0]);
    if (erf < 0) return false;
    const ir::Node& e = t_.body.nodes[erf];
    if (e.op != "Erf" || e.inputs.size() != 1 || e.outputs.size() != 1 || e.outputs[0] == ir::kNoValue) return false;
    const int add = Reader(e.outputs[0]);
    if (add < 0) return false;
    const ir::Node& a = t_.body.nodes[add];
    if (!IsBinary(a, "Add") || !IsScalar(Other(a, e.outputs[0]), 1)) return false;
    const ir::Node& o = t_.body.nodes[outer];
    if (!IsBinary(o, "Mul")) return false;
    int last = -1;
    std::vector<int> folded;
    if (Other(o, tip) == a.outputs[0] && Reader(a.outputs[0]) == outer) {  // Mul(x, 1 + erf) * 0.5
      last = Reader(o.outputs[0]);
      if (last < 0 || !IsBinary(t_.body.nodes[last], "Mul") ||
          !IsScalar(Other(t_.body.nodes[last], o.outputs[0]), 0.5))
        return false;
      folded = {scale, erf, add, outer, last};
    } else if (IsScalar(Other(o, tip), 0.5)) {  // (x * 0.5) * (1 + erf)
      last = Reader(o.outputs[0]);
      if (last < 0 || last != Reader(a.outputs[0]) || !IsBinary(t_.body.nodes[last], "Mul") ||
          Other(t_.body.nodes[last], o.outputs[0]) != a.outputs[0])
        return false;
      folded = {scale, outer, erf, add, last};
    } else if (const int half = Reader(a.outputs[0]);
               half >= 0 && IsBinary(t_.body.nodes[half], "Mul") &&
               IsScalar(Other(t_.body.nodes[half], a.outputs[0]), 0.5) &&
               Other(o, tip) == t_.body.nodes[half].outputs[0] && Reader(t_.body.nodes[half].outputs[0]) == outer) {
      last = outer;  // x * (0.5 * (1 + erf))
      folded = {scale, erf, add, half, outer};
    } else {
      return false;
    }
    const ir::Value& x = t_.value(tip);
    for (int n : folded)
      if (!Keeps(x, t_.body.nodes[n].outputs[0])) return false;
    if (!Takes(chain, cpu::EpilogueActivation::kGelu)) return false;
    chain.act = cpu::EpilogueActivation::kGelu;
    chain.act_desc = "Gelu (Erf '" + e.name + "' and " + std::to_string(folded.size() - 1) + " more ops)";
    chain.folded.insert(chain.folded.end(), folded.begin(), folded.end());
    chain.result = t_.body.nodes[last].outputs[0];
    return true;
  }

  // Extends `chain` from `tip` with a residual add; false when none follows.
  bool MatchResidual(ir::ValueId tip, Chain& chain) {
    const int r = Reader(tip);
    if (r < 0) return false;
    const ir::Node& n = t_.body.nodes[r];
    // A two-input Sum is an Add (older ResNet exports write the shortcut that way).
    const bool add = n.op == "Add" || (n.op == "Sum" && n.inputs.size() == 2);
    if (!add || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue)
      return false;
    const ir::ValueId other = n.inputs[0] == tip ? n.inputs[1] : n.inputs[0];
    if (other == tip || other == ir::kNoValue) return false;
    const ir::Value& x = t_.value(tip);
    const ir::Value& o = t_.value(other);
    if (o.is_const() || o.sym || o.dtype != x.dtype || !SameShape(o.shape, x.shape)) return false;
    if (!Keeps(x, n.outputs[0])) return false;
    chain.residual = other;
    chain.folded.push_back(r);
    chain.result = n.outputs[0];
    return true;
  }

  // Extends `chain` from the anchor's output with a bias add; false when none follows or it
  // cannot be folded into this anchor.
  bool MatchBias(const ir::Node& anchor, ir::ValueId tip, Chain& chain) {
    const int r = Reader(tip);
    if (r < 0) return false;
    const ir::Node& n = t_.body.nodes[r];
    if (n.op != "Add" || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue)
      return false;
    const ir::ValueId c = n.inputs[0] == tip ? n.inputs[1] : n.inputs[0];
    if (c == tip || c == ir::kNoValue) return false;
    const ir::Value& x = t_.value(tip);
    const ir::Value& cv = t_.value(c);
    if (!cv.is_const() || cv.dtype != x.dtype || !Keeps(x, n.outputs[0])) return false;
    const int axis = anchor.op == "Conv" ? 1 : x.rank() - 1;
    if (axis < 0 || axis >= x.rank()) return false;
    // A MatMul bias runs along B's columns; with a 1-D B the last output dim is A's rows.
    if (anchor.op == "MatMul" && t_.value(anchor.inputs[1]).rank() < 2) return false;
    auto bias = ChannelBias(cv, x.shape, axis);
    if (!bias) return false;
    // An existing Conv bias or Gemm C must be a constant to be merged with this one.
    const ir::ValueId own = InputOr(anchor, kBiasInput);
    if (own != ir::kNoValue && !t_.value(own).is_const()) return false;
    chain.bias_node = r;
    chain.bias_const = c;
    chain.bias = std::move(*bias);
    chain.folded.push_back(r);
    chain.result = n.outputs[0];
    return true;
  }

  // The chain after `anchor`, or nullopt when nothing folds.
  std::optional<Chain> Match(const ir::Node& anchor) {
    if (anchor.outputs.size() != 1 || anchor.outputs[0] == ir::kNoValue || anchor.inputs.size() < 2)
      return std::nullopt;
    const ir::ValueId out = anchor.outputs[0];
    if (!cpu::IsFloatStorage(t_.value(out).dtype) || HasEpilogue(anchor)) return std::nullopt;
    Chain chain;
    chain.anchor_op = anchor.op;
    chain.result = out;
    MatchBias(anchor, out, chain);
    // cuBLASLt applies no activation together with a C matrix (the residual): for the GPU
    // libraries a MatMul/Gemm epilogue has one or the other.
    const bool both = activations_ == EpilogueActivations::kAny || anchor.op == "Conv";
    if (MatchActivation(chain.result, chain)) {
      if (both) MatchResidual(chain.result, chain);
    } else if (MatchResidual(chain.result, chain)) {
      chain.residual_first = both && MatchActivation(chain.result, chain);
    }
    if (chain.folded.empty()) return std::nullopt;
    // A chain runs as one node: only under one condition (a run-time If's branch), and in one
    // run-time Loop's body.
    const int a = static_cast<int>(&anchor - t_.body.nodes.data());
    for (int f : chain.folded)
      if (t_.body.nodes[f].when != anchor.when || scopes_[f] != scopes_[a]) return std::nullopt;
    return chain;
  }

  // Rewrites `node` (a copy of the anchor) into its annotated form for `chain`.
  void Annotate(ir::Node& node, const Chain& chain) {
    const DType dtype = t_.value(node.outputs[0]).dtype;
    if (chain.bias_node >= 0) {
      const int64_t n = static_cast<int64_t>(chain.bias.size());
      const ir::ValueId old = InputOr(node, kBiasInput);
      ir::ValueId bias = ir::kNoValue;
      if (old == ir::kNoValue) {
        const ir::Value& c = t_.value(chain.bias_const);
        // The constant itself when it already is the [N] vector; a reshaped copy otherwise.
        if (c.data->dims == std::vector<int64_t>{n}) {
          bias = chain.bias_const;
        } else {
          bias = AddFloatConstant(t_, c.name + "#bias", dtype, {n}, chain.bias);
        }
      } else if (node.op == "Conv") {
        const ir::ConstData& b = *t_.value(old).data;
        // Sums made here are rounded to the dtype, as the kernels would round them.
        std::vector<double> sum(chain.bias.size());
        for (int64_t k = 0; k < n; ++k) sum[k] = cpu::RoundToStorage(dtype, b.FloatAt(k) + chain.bias[k]);
        bias = AddFloatConstant(t_, node.name + "#bias", dtype, {n}, sum);
      } else {
        // Gemm: beta * C (broadcast to [M or 1, N]) + bias, with beta then 1.
        const ir::ConstData& cd = *t_.value(old).data;
        const double beta = node.attrs.GetFloat("beta", 1.0f);
        const int64_t rows = cd.dims.size() == 2 ? cd.dims[0] : 1;
        const int64_t cols = cd.dims.empty() ? 1 : cd.dims.back();
        std::vector<double> merged(static_cast<size_t>(rows * n));
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const double cval = cd.FloatAt(i * cols + (cols == 1 ? 0 : j));
            merged[i * n + j] = cpu::RoundToStorage(dtype, cpu::RoundToStorage(dtype, beta * cval) + chain.bias[j]);
          }
        std::vector<int64_t> dims = rows == 1 && cd.dims.size() < 2 ? std::vector<int64_t>{n}
                                                                     : std::vector<int64_t>{rows, n};
        bias = AddFloatConstant(t_, node.name + "#bias", dtype, dims, merged);
      }
      if (node.inputs.size() <= kBiasInput) node.inputs.resize(kBiasInput + 1, ir::kNoValue);
      node.inputs[kBiasInput] = bias;
      if (node.op == "Gemm") node.attrs.SetFloat("beta", 1.0f);
    }
    if (chain.act != cpu::EpilogueActivation::kNone)
      node.attrs.SetString(std::string(cpu::kEpilogueActivationAttr),
                           std::string(cpu::EpilogueActivationName(chain.act)));
    if (chain.residual != ir::kNoValue) {
      node.inputs.resize(kResidualInput + 1, ir::kNoValue);
      node.inputs[kResidualInput] = chain.residual;
      node.attrs.SetInt(std::string(cpu::kEpilogueResidualAttr), 1);
    }
    node.attrs.SetString(std::string(cpu::kEpilogueOrderAttr),
                         std::string(chain.residual_first ? cpu::kEpilogueOrderResidualFirst
                                                          : cpu::kEpilogueOrderActFirst));
    node.outputs[0] = chain.result;
  }

  std::string Describe(const ir::Node& anchor, const Chain& chain) const {
    std::vector<std::string> parts;
    if (chain.bias_node >= 0) parts.push_back("bias '" + t_.value(chain.bias_const).name + "'");
    std::string residual;
    if (chain.residual != ir::kNoValue) residual = "residual '" + t_.value(chain.residual).name + "'";
    if (chain.residual_first && !residual.empty()) parts.push_back(residual);
    if (!chain.act_desc.empty()) parts.push_back(chain.act_desc);
    if (!chain.residual_first && !residual.empty()) parts.push_back(residual);
    std::string line = anchor.name + " (" + anchor.op + "): folded ";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
    return line + " into the epilogue";
  }

 private:
  // The only reader of `id`, unless it is taken by another chain; -1 otherwise.
  int Reader(ir::ValueId id) const {
    const int r = uses_.SoleReader(id);
    return r >= 0 && !claimed[r] ? r : -1;
  }

  // True when `n` is `op` with two inputs and one output, all present.
  static bool IsBinary(const ir::Node& n, std::string_view op) {
    return n.op == op && n.inputs.size() == 2 && n.inputs[0] != ir::kNoValue && n.inputs[1] != ir::kNoValue &&
           n.outputs.size() == 1 && n.outputs[0] != ir::kNoValue;
  }

  // The operand of binary `n` that is not `id` (kNoValue when both are).
  static ir::ValueId Other(const ir::Node& n, ir::ValueId id) {
    if (n.inputs[0] == id) return n.inputs[1] == id ? ir::kNoValue : n.inputs[1];
    return n.inputs[1] == id ? n.inputs[0] : ir::kNoValue;
  }

  // True when `id` is a constant of one element equal to `v`.
  bool IsScalar(ir::ValueId id, double v) const {
    if (id == ir::kNoValue || !t_.value(id).is_const()) return false;
    const ir::ConstData& d = *t_.value(id).data;
    return d.num_elements() == 1 && d.FloatAt(0) == v;
  }

  // True when Clip `c` bounds its input to [0, 6]: constant min and max inputs (opset 11 on)
  // or min and max attributes (before), both present.
  bool ClipsTo0And6(const ir::Node& c) const {
    if (c.inputs.size() == 3) return IsScalar(c.inputs[1], 0) && IsScalar(c.inputs[2], 6);
    return c.inputs.size() == 1 && c.attrs.Has("min") && c.attrs.Has("max") &&
           c.attrs.GetFloat("min", 1) == 0 && c.attrs.GetFloat("max", 0) == 6;
  }

  // True when value `out` keeps the dtype and shape of `x` (an elementwise step).
  bool Keeps(const ir::Value& x, ir::ValueId out) const {
    const ir::Value& o = t_.value(out);
    return o.dtype == x.dtype && SameShape(o.shape, x.shape);
  }

  EpilogueActivations activations_;
  ir::Trace& t_;
  Uses uses_;
  std::vector<int32_t> scopes_;  // per node: its run-time Loop (ir::LoopScopes)
};

}  // namespace

Result<ir::Trace> FoldEpilogues(const ir::Trace& canonical, std::vector<std::string>* log,
                                EpilogueActivations activations) {
  ir::Trace t = canonical;
  t.stage = "epilogue";
  Folder folder(t, activations);
  const size_t count = t.body.nodes.size();
  // Each anchor's annotated node replaces the chain's last node (where every input of the
  // chain, the residual included, is already computed); the other nodes of the chain go.
  std::vector<std::optional<ir::Node>> placed(count);
  int folded = 0;
  for (size_t i = 0; i < count; ++i) {
    const ir::Node& anchor = t.body.nodes[i];
    if (!IsAnchor(anchor)) continue;
    std::optional<Chain> chain = folder.Match(anchor);
    if (!chain) continue;
    ir::Node node = anchor;
    folder.Annotate(node, *chain);
    KILN_RETURN_IF_ERROR(ir::InferNode(t, node));
    if (log) log->push_back(folder.Describe(anchor, *chain));
    int last = chain->folded.front();
    for (int j : chain->folded) {
      folder.claimed[j] = true;
      last = std::max(last, j);
    }
    folder.claimed[i] = true;
    placed[last] = std::move(node);
    ++folded;
  }
  std::vector<ir::Node> nodes;
  nodes.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (placed[i]) {
      nodes.push_back(std::move(*placed[i]));
    } else if (!folder.claimed[i]) {
      nodes.push_back(std::move(t.body.nodes[i]));
    }
  }
  t.body.nodes = std::move(nodes);
  t.provenance = "epilogues (bias, activation, residual) folded into " + std::to_string(folded) +
                 " MatMul/Gemm/Conv nodes";
  return t;
}

}  // namespace kiln::passes
