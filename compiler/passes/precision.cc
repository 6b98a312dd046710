#include "compiler/passes/precision.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "compiler/ops/registry.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/op_table.h"

namespace kiln::passes {
namespace {

std::string_view Suffix(DType t) {
  switch (t) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

bool IsLow(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

std::shared_ptr<const ir::ConstData> Convert(const ir::ConstData& in, DType to) {
  auto out = std::make_shared<ir::ConstData>();
  out->dtype = to;
  out->dims = in.dims;
  const int64_t n = in.num_elements();
  out->bytes.resize(static_cast<size_t>(n) * DTypeSize(to));
  cpu::TensorRef dst;
  dst.data = out->bytes.data();
  dst.dtype = to;
  for (int64_t i = 0; i < n; ++i) cpu::StoreFloat(dst, i, in.FloatAt(i));
  return out;
}

ir::Node MakeNode(std::string op, std::string name, ir::ValueId input, ir::ValueId output) {
  ir::Node n;
  n.op = std::move(op);
  n.name = std::move(name);
  n.inputs = {input};
  n.outputs = {output};
  return n;
}

// Errors when an element of float32 constant `v` that is finite and nonzero becomes 0 or
// infinite in `t`.
Status CheckSurvives(const ir::Value& v, DType t) {
  if (t == DType::kFloat32) return Status::Ok();
  const ir::ConstData& d = *v.data;
  for (int64_t i = 0; i < d.num_elements(); ++i) {
    const float f = static_cast<float>(d.FloatAt(i));
    if (f == 0 || !std::isfinite(f)) continue;
    const double r = cpu::RoundToStorage(t, f);
    if (r == 0 || !std::isfinite(r))
      return OutOfRange(fmt::format("constant '{}' holds {:g}, which {} rounds to {:g}", v.name, f, DTypeName(t), r));
  }
  return Status::Ok();
}

class Lowering {
 public:
  Lowering(const ir::Trace& in, const PrecisionOptions& options, std::vector<std::string>* log)
      : in_(in), out_(in), options_(options), low_(PrecisionDType(options.precision)), log_(log) {
    out_.stage = "precision";
    out_.provenance = fmt::format("Kiln precision pass: {}, float32 accumulation", PrecisionName(options.precision));
    out_.body.nodes.clear();
    for (const ir::Value& v : in.values) names_.insert(v.name);
  }

  Result<ir::Trace> Run() {
    for (const ir::Node& n : in_.body.nodes)
      if (!n.blocks.empty())
        return Internal(fmt::format("node '{}' ({}) has subgraphs; the canonical stage inlines every If", n.name, n.op));
    // Inputs declared float32 take io_dtype: a new value under the input's name, and the
    // float32 one is made from it by a Cast when a float32 reader needs it.
    for (ir::ValueId& id : out_.inputs) {
      if (in_.value(id).dtype != DType::kFloat32 || options_.io_dtype == DType::kFloat32) continue;
      ir::Value v = in_.value(id);
      v.dtype = options_.io_dtype;
      out_.value(id).name = Fresh(v.name + ".to_fp32");
      const ir::ValueId io = out_.AddValue(std::move(v));
      produced_[id] = io;
      id = io;
    }
    for (const ir::Node& n : in_.body.nodes) KILN_RETURN_IF_ERROR(Lower(n));
    for (ir::ValueId& id : out_.outputs) {
      const DType declared = in_.value(id).dtype;
      const DType want = declared == DType::kFloat32 ? options_.io_dtype : declared;
      const ir::ValueId v = Need(id, want);
      if (v == id) continue;
      // The output keeps its name on the value of the chosen dtype.
      ir::ValueId named = v;
      if (!IsNodeOutput(v) || std::count(out_.outputs.begin(), out_.outputs.end(), v) > 0) {
        named = out_.AddValue(out_.value(v));
        KILN_RETURN_IF_ERROR(Emit(MakeNode("Identity", Fresh(in_.value(id).name + ".identity"), v, named)));
      }
      const std::string name = in_.value(id).name;
      out_.value(id).name = Fresh(name + ".fp32");
      out_.value(named).name = name;
      id = named;
    }
    DropReplacedConstants();
    if (log_) {
      log_->push_back(fmt::format("{} of {} ops in {} ({} by the table, the others follow their inputs); {} "
                                  "that could follow stay float32; {} Casts inserted; {} constants converted ({} "
                                  "bytes fewer)",
                                  lowered_, in_.body.nodes.size(), PrecisionName(options_.precision), low_ops_,
                                  fp32_ops_, casts_, converted_, saved_bytes_));
    }
    return std::move(out_);
  }

 private:
  // A float32 constant that every reader now reads converted is no longer part of the trace
  // (nor of the printed stages, nor of the weights).
  void DropReplacedConstants() {
    std::set<ir::ValueId> read(out_.outputs.begin(), out_.outputs.end());
    for (const ir::Node& n : out_.body.nodes) read.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& [key, made] : cache_) {
      ir::Value& v = out_.value(key.first);
      if (!v.is_const()) continue;
      saved_bytes_ -= static_cast<int64_t>(out_.value(made).data->bytes.size());
      if (read.count(key.first)) continue;
      saved_bytes_ += static_cast<int64_t>(v.data->bytes.size());
      v.data.reset();
    }
  }

  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = fmt::format("{}_{}", base, i);
    names_.insert(name);
    return name;
  }

  bool IsNodeOutput(ir::ValueId v) const {
    for (const ir::Node& n : out_.body.nodes)
      for (ir::ValueId o : n.outputs)
        if (o == v) return true;
    return false;
  }

  // The value now holding `id`'s data as it was produced.
  ir::ValueId Produced(ir::ValueId id) const {
    auto it = produced_.find(id);
    return it == produced_.end() ? id : it->second;
  }
  DType Arrives(ir::ValueId id) const { return out_.value(Produced(id)).dtype; }

  Status Emit(ir::Node node) {
    KILN_RETURN_IF_ERROR(ir::InferNode(out_, node));
    out_.body.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  // `id`'s data in dtype `t`: the value itself, a converted constant, or the output of a
  // Cast inserted once, before the first reader.
  Result<ir::ValueId> NeedOr(ir::ValueId id, DType t) {
    const ir::ValueId p = Produced(id);
    if (out_.value(p).dtype == t) return p;
    if (t == in_.value(id).dtype) {
      // The declared type keeps the declared value id.
      if (!materialized_.insert(id).second) return id;
      journal_.push_back({id, DType::kUndefined});
      ++casts_;
      ir::Node cast = MakeNode("Cast", Fresh(in_.value(id).name + ".to_" + std::string(Suffix(t))), p, id);
      cast.attrs.SetInt("to", static_cast<int64_t>(t));
      KILN_RETURN_IF_ERROR(Emit(std::move(cast)));
      return id;
    }
    if (auto it = cache_.find({id, t}); it != cache_.end()) return it->second;
    ir::Value v = in_.value(id);
    v.dtype = t;
    v.sym.reset();
    ir::ValueId made;
    if (v.is_const()) {
      v.data = Convert(*in_.value(id).data, t);
      v.name = Fresh(v.name + "." + std::string(Suffix(t)));
      made = out_.AddValue(std::move(v));
      ++converted_;
    } else {
      v.data.reset();
      v.name = Fresh(in_.value(id).name + ".to_" + std::string(Suffix(t)));
      made = out_.AddValue(std::move(v));
      ++casts_;
      ir::Node cast = MakeNode("Cast", out_.value(made).name, p, made);
      cast.attrs.SetInt("to", static_cast<int64_t>(t));
      KILN_RETURN_IF_ERROR(Emit(std::move(cast)));
    }
    cache_[{id, t}] = made;
    journal_.push_back({id, t});
    return made;
  }
  ir::ValueId Need(ir::ValueId id, DType t) {
    auto r = NeedOr(id, t);
    if (!r.ok() && first_error_.ok()) first_error_ = r.status();
    return r.ok() ? *r : id;
  }

  bool IsDeclaredInput(const OpInfo* p, size_t i) const {
    return p && i < 32 && (p->precision.declared_inputs >> i & 1u);
  }

  // A float32 input the class may convert.
  bool Convertible(const ir::Node& n, const OpInfo* p, size_t i) const {
    return n.inputs[i] != ir::kNoValue && in_.value(n.inputs[i]).dtype == DType::kFloat32 && !IsDeclaredInput(p, i);
  }

  Status Lower(const ir::Node& n) {
    // The policy is the op table's precision column (runtime/op_table.h): kLow, half storage
    // with float32 accumulation inside the kernel; kFollow, the type the inputs arrive in;
    // kFloat32, float32 in and out. Kiln's internal ops have no row: float32.
    const OpInfo* p = FindOpInfo(n.op);
    const bool keep = std::find_if(options_.keep_fp32.begin(), options_.keep_fp32.end(), [&](const std::string& k) {
                        return k == n.name || k == n.op;
                      }) != options_.keep_fp32.end();
    PrecisionClass cls = keep || !p ? PrecisionClass::kFloat32 : p->precision.cls;
    if (keep && p && p->precision.cls != PrecisionClass::kFloat32 && log_)
      log_->push_back(fmt::format("node '{}' ({}) kept in float32 (--keep-fp32)", n.name, n.op));
    if (cls == PrecisionClass::kFollow) {
      // Low when a non-constant float input arrives low, or when every float input is a
      // constant; float32 when the non-constant ones come from float32 ops. Constants do not
      // vote: Exp(x) * 0.1 stays float32 after the float32 Exp.
      bool any = false, consts_only = true, low = false;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!Convertible(n, p, i)) continue;
        any = true;
        if (in_.value(n.inputs[i]).is_const()) continue;
        consts_only = false;
        low = low || IsLow(Arrives(n.inputs[i]));
      }
      cls = any && (low || consts_only) ? PrecisionClass::kLow : PrecisionClass::kFloat32;
      // A Cast to float32 goes low only from a half type: an integer's float32 value (a
      // position, an index) is exact where float16 (past 2048) and bfloat16 (past 256) round it.
      const ir::Value* from = n.inputs.empty() || n.inputs[0] == ir::kNoValue ? nullptr : &in_.value(n.inputs[0]);
      if ((n.op == "Cast" || n.op == "CastLike") && from && from->dtype != DType::kFloat32)
        cls = IsLow(from->dtype) ? PrecisionClass::kLow : PrecisionClass::kFloat32;
    }
    if (cls == PrecisionClass::kLow) {
      Status st = LowerTo(n, p, low_);
      if (st.ok()) {
        ++lowered_;
        if (p && p->precision.cls == PrecisionClass::kLow) ++low_ops_;
        return Status::Ok();
      }
      if (!first_error_.ok()) return first_error_;
      if (log_)
        log_->push_back(fmt::format("node '{}' ({}) kept in float32: {}", n.name, n.op, st.message()));
    }
    if (p && p->precision.cls != PrecisionClass::kFloat32) ++fp32_ops_;
    ir::Node node = n;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] != ir::kNoValue) node.inputs[i] = Need(node.inputs[i], in_.value(node.inputs[i]).dtype);
    KILN_RETURN_IF_ERROR(first_error_);
    // Outputs keep their declared values (and dtypes); the node's own meta already ran.
    out_.body.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  // Runs `n` with its float32 inputs in `t`. Its meta function decides the output dtypes;
  // an output that stays float32 keeps its value. When the meta function rejects the types,
  // fails having emitted nothing.
  Status LowerTo(const ir::Node& n, const OpInfo* p, DType t) {
    journal_.clear();
    const size_t emitted = out_.body.nodes.size();
    const int casts = casts_, converted = converted_;
    Status st = TryLowerTo(n, p, t);
    if (!st.ok() && first_error_.ok()) {
      // Undo the Casts and constants made for this node: the float32 form reads other values.
      out_.body.nodes.resize(emitted);
      for (const auto& key : journal_) {
        if (key.second == DType::kUndefined) materialized_.erase(key.first);
        else cache_.erase(key);
      }
      casts_ = casts, converted_ = converted;
    }
    return st;
  }

  Status TryLowerTo(const ir::Node& n, const OpInfo* p, DType t) {
    // A follower's constant operand must survive the conversion: an epsilon float16 rounds to
    // 0 turns sqrt(var + eps) into 0 on a constant row. (A GEMM or conv weight that loses a
    // few tiny elements is lowered all the same.)
    for (size_t i = 0; p && p->precision.cls == PrecisionClass::kFollow && i < n.inputs.size(); ++i)
      if (Convertible(n, p, i) && in_.value(n.inputs[i]).is_const())
        KILN_RETURN_IF_ERROR(CheckSurvives(in_.value(n.inputs[i]), t));
    ir::Node node = n;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::ValueId id = node.inputs[i];
      if (id == ir::kNoValue) continue;
      node.inputs[i] = Need(id, Convertible(n, p, i) ? t : in_.value(id).dtype);
    }
    KILN_RETURN_IF_ERROR(first_error_);
    if (n.op == "Cast" && node.attrs.GetInt("to", 0) == static_cast<int64_t>(DType::kFloat32))
      node.attrs.SetInt("to", static_cast<int64_t>(t));
    std::vector<ir::ValueId> provisional;
    for (ir::ValueId& o : node.outputs) {
      if (o == ir::kNoValue) continue;
      ir::Value v = in_.value(o);
      v.name += ".lowering";
      o = out_.AddValue(std::move(v));
      provisional.push_back(o);
    }
    Status st = ir::InferNode(out_, node);
    for (size_t k = 0; st.ok() && k < node.outputs.size(); ++k) {
      const ir::ValueId o = n.outputs[k];
      if (o == ir::kNoValue) continue;
      ir::Value& v = out_.value(node.outputs[k]);
      const ir::Value& declared = in_.value(o);
      if (v.dtype == declared.dtype) {
        node.outputs[k] = o;
        continue;
      }
      if (declared.dtype != DType::kFloat32 || !IsLow(v.dtype))
        st = Internal(fmt::format("output '{}' became {} (declared {})", declared.name, DTypeName(v.dtype),
                                  DTypeName(declared.dtype)));
      // Same shape as declared (the meta function may have named fresh symbols).
      v.shape = declared.shape;
      v.sym.reset();
      v.name = Fresh(declared.name + "." + std::string(Suffix(v.dtype)));
      produced_[o] = node.outputs[k];
    }
    if (!st.ok()) {
      for (ir::ValueId o : n.outputs) produced_.erase(o);
      return st;
    }
    out_.body.nodes.push_back(std::move(node));
    return Status::Ok();
  }

  const ir::Trace& in_;
  ir::Trace out_;
  const PrecisionOptions& options_;
  const DType low_;
  std::vector<std::string>* log_;
  std::set<std::string> names_;
  std::unordered_map<ir::ValueId, ir::ValueId> produced_;
  std::map<std::pair<ir::ValueId, DType>, ir::ValueId> cache_;
  std::set<ir::ValueId> materialized_;
  // What the current LowerTo added to cache_ (dtype) and materialized_ (kUndefined).
  std::vector<std::pair<ir::ValueId, DType>> journal_;
  Status first_error_;
  int lowered_ = 0, low_ops_ = 0, fp32_ops_ = 0, casts_ = 0, converted_ = 0;
  int64_t saved_bytes_ = 0;  // weight bytes the stage removed, less those it added
};

}  // namespace

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    default: return "fp32";
  }
}

DType PrecisionDType(Precision p) {
  switch (p) {
    case Precision::kFp16: return DType::kFloat16;
    case Precision::kBf16: return DType::kBFloat16;
    default: return DType::kFloat32;
  }
}

Result<ir::Trace> LowerPrecision(const ir::Trace& canonical, const PrecisionOptions& options,
                                 std::vector<std::string>* log) {
  if (options.precision == Precision::kFp32 && options.io_dtype == DType::kFloat32 && options.keep_fp32.empty())
    return canonical;
  return Lowering(canonical, options, log).Run();
}

}  // namespace kiln::passes
