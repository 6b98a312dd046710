// ConstData element access, Trace::Print (Thunder-style text) and the queries passes share
// (LoopScopes, RuntimeDimsSetBy).
#include "compiler/ir/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "runtime/half.h"

namespace kiln::ir {
namespace {

template <typename T>
T Load(const std::vector<uint8_t>& bytes, int64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

int64_t SaturatingCast(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// "float32[N, 3]"; "?" for a value whose dtype is not known yet (before inference).
std::string TypeText(const Value& v) {
  if (v.dtype == DType::kUndefined) return v.shape.empty() ? "?" : "?" + ShapeToString(v.shape);
  return std::string(DTypeName(v.dtype)) + ShapeToString(v.shape);
}

std::string FloatText(float f) {
  std::ostringstream os;
  os.precision(9);
  os << f;
  return os.str();
}

// " @generated" when every backend runs the node alike, else " @cuda:cudnn @cpu:onednn"; "" before
// the executors stage.
std::string PlacementText(const std::vector<Placement>& placements) {
  if (placements.empty()) return "";
  const bool alike = std::all_of(placements.begin(), placements.end(),
                                 [&](const Placement& p) { return p.library == placements[0].library; });
  if (alike) return " @" + std::string(LibraryName(placements[0].library));
  std::string text;
  for (const Placement& p : placements) text += " @" + p.backend + ":" + std::string(LibraryName(p.library));
  return text;
}

std::string AttrText(const Attr& a) {
  switch (a.kind) {
    case Attr::Kind::kInt: return std::to_string(a.i);
    case Attr::Kind::kFloat: return FloatText(a.f);
    case Attr::Kind::kString: return "'" + a.s + "'";
    case Attr::Kind::kInts: {
      std::string s = "[";
      for (size_t i = 0; i < a.ints.size(); ++i) s += (i ? ", " : "") + std::to_string(a.ints[i]);
      return s + "]";
    }
    case Attr::Kind::kFloats: {
      std::string s = "[";
      for (size_t i = 0; i < a.floats.size(); ++i) s += (i ? ", " : "") + FloatText(a.floats[i]);
      return s + "]";
    }
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(const Trace& t) : t_(t) {}

  std::string Name(ValueId id) const {
    if (id == kNoValue) return "_";
    if (id < 0 || static_cast<size_t>(id) >= t_.values.size()) return "<bad value " + std::to_string(id) + ">";
    const std::string& n = t_.values[id].name;
    return n.empty() ? "v" + std::to_string(id) : n;
  }
  std::string Type(ValueId id) const {
    if (id < 0 || static_cast<size_t>(id) >= t_.values.size()) return "?";
    return TypeText(t_.values[id]);
  }

  void Block(const ir::Block& b, int depth, bool is_body) {
    const std::string ind(static_cast<size_t>(depth) * 2, ' ');
    for (const Node& n : b.nodes) {
      std::string line = ind;
      // A run-time If's branch: "[if c] " or "[if not c] ", outer conditions first.
      for (const Predicate& p : n.when) line += std::string(p.value ? "[if " : "[if not ") + Name(p.cond) + "] ";
      if (n.outputs.empty()) {
        line += "_";
      } else {
        for (size_t i = 0; i < n.outputs.size(); ++i) line += (i ? ", " : "") + Name(n.outputs[i]);
      }
      line += " = " + n.op + "(";
      bool first = true;
      for (ValueId in : n.inputs) {
        line += (first ? "" : ", ") + Name(in);
        first = false;
      }
      for (const auto& [k, a] : n.attrs.items()) {
        line += (first ? "" : ", ") + k + "=" + AttrText(a);
        first = false;
      }
      line += ")";
      std::string types;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        if (n.outputs[i] == kNoValue) continue;
        types += (types.empty() ? "" : ", ") + Type(n.outputs[i]);
      }
      if (!types.empty()) line += " # " + types;
      line += PlacementText(n.placements);
      if (n.fused) {
        std::string members;
        for (const std::string& m : n.fused->members) members += (members.empty() ? "" : ", ") + m;
        line += " <- " + members;
      }
      out_ << line << "\n";
      for (const auto& [bname, blk] : n.blocks) {
        std::string params;
        for (size_t i = 0; blk && i < blk->inputs.size(); ++i) params += (i ? ", " : "") + Name(blk->inputs[i]);
        out_ << ind << "  " << bname << (params.empty() ? "" : "(" + params + ")") << ":\n";
        if (blk) Block(*blk, depth + 2, false);
      }
    }
    if (!is_body) {
      std::string line = ind + "return";
      for (size_t i = 0; i < b.outputs.size(); ++i) line += (i ? ", " : " ") + Name(b.outputs[i]);
      out_ << line << "\n";
    }
  }

  std::string Run() {
    out_ << "# stage: " << t_.stage << "\n";
    out_ << "# provenance: " << t_.provenance << "\n";
    for (const std::string& note : t_.notes) out_ << "# " << note << "\n";
    std::string ins;
    for (ValueId id : t_.inputs) ins += (ins.empty() ? "" : ", ") + Name(id) + ": " + Type(id);
    out_ << "# inputs: " << ins << "\n";
    for (size_t i = 0; i < t_.values.size(); ++i)
      if (t_.values[i].is_const())
        out_ << "# const " << Name(static_cast<ValueId>(i)) << ": " << TypeText(t_.values[i]) << "\n";
    std::vector<Sym> derived;  // what the shapes, known elements and guards read, in the order they are computed
    for (const Value& v : t_.values) {
      for (const Sym& d : v.shape) DerivedSymbols(d, derived);
      if (v.sym)
        for (const Sym& e : *v.sym) DerivedSymbols(e, derived);
    }
    for (const Guard& g : t_.guards) DerivedSymbols(g.condition, derived);
    for (const Sym& d : derived) out_ << "# derived: " << d.name() << " = " << d.definition().ToString() << "\n";
    for (const Guard& g : t_.guards) out_ << "# guard: " << g.condition.ToString() << " from " << g.origin << "\n";
    for (const RuntimeDim& d : t_.runtime_dims) {
      out_ << "# run-time dim: " << d.symbol << " <= " << d.bound.ToString() << ", set by " << d.origin;
      if (d.initial_room > 0)
        out_ << "; " << d.bound.ToString() << " is room the runtime sets: " << d.initial_room
             << " rows, doubled when a call needs more";
      out_ << "\n";
    }
    Block(t_.body, 0, true);
    std::string ret = "return";
    for (size_t i = 0; i < t_.outputs.size(); ++i) ret += (i ? ", " : " ") + Name(t_.outputs[i]);
    out_ << ret << "\n";
    return out_.str();
  }

 private:
  const Trace& t_;
  std::ostringstream out_;
};

}  // namespace

int64_t ConstData::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

int64_t ConstData::IntAt(int64_t i) const {
  const size_t es = DTypeSize(dtype);
  if (i < 0 || es == 0 || static_cast<size_t>(i) >= bytes.size() / es) return 0;
  switch (dtype) {
    case DType::kInt64: return Load<int64_t>(bytes, i);
    case DType::kInt32: return Load<int32_t>(bytes, i);
    case DType::kInt16: return Load<int16_t>(bytes, i);
    case DType::kInt8: return Load<int8_t>(bytes, i);
    case DType::kUInt8: return Load<uint8_t>(bytes, i);
    case DType::kUInt16: return Load<uint16_t>(bytes, i);
    case DType::kUInt32: return Load<uint32_t>(bytes, i);
    case DType::kUInt64: {
      const uint64_t v = Load<uint64_t>(bytes, i);
      return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
    }
    case DType::kBool: return Load<uint8_t>(bytes, i) != 0;
    default: return SaturatingCast(FloatAt(i));
  }
}

double ConstData::FloatAt(int64_t i) const {
  const size_t es = DTypeSize(dtype);
  if (i < 0 || es == 0 || static_cast<size_t>(i) >= bytes.size() / es) return 0.0;
  switch (dtype) {
    case DType::kFloat32: return Load<float>(bytes, i);
    case DType::kFloat64: return Load<double>(bytes, i);
    case DType::kFloat16: return HalfToFloat(Load<uint16_t>(bytes, i));
    case DType::kBFloat16: return BF16ToFloat(Load<uint16_t>(bytes, i));
    case DType::kUInt64: return static_cast<double>(Load<uint64_t>(bytes, i));
    default: return static_cast<double>(IntAt(i));
  }
}

std::string Trace::Print() const { return Printer(*this).Run(); }

std::vector<int32_t> LoopScopes(const std::vector<Node>& nodes) {
  std::vector<int32_t> scope(nodes.size(), -1), open;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op == "kiln.LoopEnd" && !open.empty()) open.pop_back();
    scope[i] = open.empty() ? -1 : open.back();
    if (nodes[i].op == "kiln.LoopBegin") open.push_back(static_cast<int32_t>(i));
  }
  return scope;
}

std::vector<std::string> RuntimeDimsSetBy(const Trace& trace, const Node& node) {
  std::set<std::string> in;
  for (ValueId id : node.inputs)
    if (id != kNoValue)
      for (const Sym& d : trace.value(id).shape)
        for (std::string& v : d.Vars()) in.insert(std::move(v));
  std::vector<std::string> made;
  for (ValueId id : node.outputs)
    if (id != kNoValue)
      for (const Sym& d : trace.value(id).shape)
        for (std::string& v : d.Vars())
          if (!in.count(v) && std::find(made.begin(), made.end(), v) == made.end() &&
              std::any_of(trace.runtime_dims.begin(), trace.runtime_dims.end(),
                          [&](const RuntimeDim& r) { return r.symbol == v; }))
            made.push_back(std::move(v));
  return made;
}

}  // namespace kiln::ir
