// CUDA C++ emission: one kernel per fused program. The program's nodes become SSA
// statements (`const float v12 = ...;`), emitted in each scope for the nodes that scope
// needs (a column loop computes what its reductions or stores read). Leaves map to the
// scope's indices: kCoord to a coordinate computed from the linear, row or column index,
// kLinear to the linear index, kAcc to the block-reduced accumulator.
//
// Integer (kI64) nodes are typed by their value ranges (index_ranges.h): index arithmetic
// that depends only on coordinates, the linear index, constants, sizes and checked indices
// and provably fits in 32 bits is computed as `int`; everything else, and every value that
// depends on tensor data, as `long long` (wrapping helpers where it may overflow). Division
// and modulo of provably non-negative operands are plain unsigned `/` and `%` (with a zero
// check only when the divisor may be 0); a provably positive divisor needs no zero or -1
// check and at most one sign fix-up; the full helpers (kiln_floordiv, kiln_mod, ...) remain
// for the other cases. Integer constants are written as literals where they are used.
#include "compiler/codegen/cuda_source.h"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "compiler/codegen/host_shim.h"
#include "compiler/codegen/index_ranges.h"
#include "compiler/codegen/kernel_prelude.h"

namespace kiln::codegen {
namespace {

using fused::Node;
using fused::Op;
using fused::Program;
using fused::ReduceOp;
using fused::ScalarType;

constexpr int kMaxThreads = 256;
constexpr const char* kNamePlaceholder = "@KILN_NAME@";

const char* CType(ScalarType t) {
  switch (t) {
    case ScalarType::kF32: return "float";
    case ScalarType::kF64: return "double";
    default: return "long long";
  }
}

// The element type a tensor of `dtype` is stored as in device memory; nullptr if none.
const char* StorageType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kInt8: return "signed char";
    case DType::kUInt8: case DType::kBool: return "unsigned char";
    case DType::kInt16: return "short";
    case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16: return "unsigned short";
    case DType::kInt32: return "int";
    case DType::kUInt32: return "unsigned int";
    case DType::kInt64: return "long long";
    case DType::kUInt64: return "unsigned long long";
    default: return nullptr;
  }
}

// The 16-byte vector type of a 4-byte dtype, or nullptr.
const char* Vector4Type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float4";
    case DType::kInt32: return "int4";
    case DType::kUInt32: return "uint4";
    default: return nullptr;
  }
}

std::string FloatLiteral(double f, ScalarType t) {
  const bool f32 = t == ScalarType::kF32;
  if (std::isnan(f)) return f32 ? "__uint_as_float(0x7fc00000u)" : "(double)__uint_as_float(0x7fc00000u)";
  if (std::isinf(f)) {
    std::string inf = f32 ? "__uint_as_float(0x7f800000u)" : "(double)__uint_as_float(0x7f800000u)";
    return f < 0 ? "(-" + inf + ")" : inf;
  }
  char buf[64];
  if (f32) {
    std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(static_cast<float>(f)));
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", f);
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (f32) s += "f";
  return s;
}

std::string IntLiteral(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

// 32-bit values are `int` whatever their sign: signed overflow cannot happen (the ranges
// are exact), and the compiler, knowing it, folds constant offsets into addresses, which
// it could not do for wrapping unsigned arithmetic. Non-negative ones divide as unsigned.
const char* RepType(IntRep r) { return r == IntRep::kS64 ? "long long" : "int"; }
bool SameType(IntRep a, IntRep b) { return (a == IntRep::kS64) == (b == IntRep::kS64); }

// The unsigned type of r's width, for division of non-negative values.
const char* RepUnsigned(IntRep r) { return r == IntRep::kS64 ? "kiln_u64" : "unsigned"; }

// A literal of type r (v fits in it); negative ones in parentheses, so `-` + literal is no `--`.
std::string RepLiteral(int64_t v, IntRep r) {
  if (r == IntRep::kS64) return v < 0 ? "(" + IntLiteral(v) + ")" : IntLiteral(v);
  if (v == INT32_MIN) return "(-2147483647 - 1)";
  return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
}

// x, computed as type `from`, as type `to` (its value fits in `to`).
std::string Fit(const std::string& x, IntRep from, IntRep to) {
  return SameType(from, to) ? x : fmt::format("({})({})", RepType(to), x);
}

struct Needs {
  bool half = false, bf16 = false, cast = false;
};

// An unsigned index quantity: a constant or a named C expression of the kernel's index type.
struct Idx {
  bool is_const = true;
  uint64_t c = 0;
  std::string expr;
};

class Emitter {
 public:
  explicit Emitter(const Program& p) : p_(p) {}

  Result<EmittedKernel> Run();

 private:
  // How a scope maps the position-dependent leaves.
  struct Scope {
    std::vector<std::string> coord;  // per domain axis: IDX expression
    std::string linear;              // IDX expression
    // Vector lane: loads of these inputs at kLinear read x<k>[e].
    const std::vector<bool>* vector_inputs = nullptr;
  };

  std::string IdxType() const { return idx32_ ? "unsigned" : "kiln_u64"; }
  std::string Lit(uint64_t v) const { return std::to_string(v) + (idx32_ ? "u" : "ull"); }
  std::string Str(const Idx& x) const { return x.is_const ? Lit(x.c) : x.expr; }
  Idx Dim(int64_t d) const {
    if (d >= 0) return {true, static_cast<uint64_t>(d), ""};
    return {false, 0, "z" + std::to_string(-(d + 1))};
  }
  Idx Mul(const Idx& a, const Idx& b) const {
    if (a.is_const && b.is_const) return {true, a.c * b.c, ""};
    if (a.is_const && a.c == 1) return b;
    if (b.is_const && b.c == 1) return a;
    if ((a.is_const && a.c == 0) || (b.is_const && b.c == 0)) return {true, 0, ""};
    return {false, 0, "(" + Str(a) + " * " + Str(b) + ")"};
  }
  std::string Scaled(const std::string& x, const Idx& by) const {
    return by.is_const && by.c == 1 ? x : x + " * " + Str(by);
  }
  Idx Product(const std::vector<int>& axes) const {
    Idx r{true, 1, ""};
    for (int k : axes) r = Mul(r, Dim(p_.domain[k]));
    return r;
  }
  // Declares `name` = x unless x is a constant; returns its use.
  Idx Named(const std::string& name, const Idx& x, std::string* out, const std::string& indent) {
    if (x.is_const) return x;
    *out += fmt::format("{}const {} {} = {};\n", indent, IdxType(), name, x.expr);
    return {false, 0, name};
  }
  // Coordinates of `axes` (row-major) from index `var`: (var / stride) % dim.
  std::vector<std::string> Unravel(const std::string& var, const std::vector<int>& axes,
                                   const std::string& prefix, const std::vector<bool>& wanted,
                                   std::string* out, const std::string& indent);

  // Nodes reachable from `roots`, in SSA order. In a vector lane (`scope` has vector
  // inputs) a vectorised load needs no index, so its operand is not followed.
  std::vector<int32_t> Reachable(const std::vector<int32_t>& roots, const Scope* scope = nullptr) const;
  bool VectorLoad(const Node& n, const Scope* scope) const {
    return scope && scope->vector_inputs && n.op == Op::kLoad && (*scope->vector_inputs)[n.i] &&
           p_.nodes[n.a].op == Op::kLinear;
  }
  std::string NodeExpr(int32_t n, const Scope& s);
  std::string IntNodeExpr(int32_t n, const Scope& s);
  // Integer node o as type r, at least as wide as its own type (constants as literals).
  std::string Operand(int32_t o, IntRep r) const;
  // A node's value as its own type: its name, or the literal of an integer constant (those
  // are not declared).
  std::string Ref(int32_t o) const {
    if (o < 0) return "";
    const Node& n = p_.nodes[o];
    if (n.op == Op::kConst && n.type == ScalarType::kI64) return RepLiteral(n.i, ranges_.rep[o]);
    return "v" + std::to_string(o);
  }
  // Non-negative integer node o as the unsigned type of r's width.
  std::string UnsignedOperand(int32_t o, IntRep r) const;
  // The C type a node's value is declared with.
  const char* DeclType(int32_t n) const {
    return p_.nodes[n].type == ScalarType::kI64 ? RepType(ranges_.rep[n]) : CType(p_.nodes[n].type);
  }
  void EmitNodes(const std::vector<int32_t>& roots, const Scope& s, std::string* out, const std::string& indent);
  std::string LoadExpr(int input, const std::string& element);
  std::string StoreExpr(int output, const std::string& value);
  std::string CastExpr(const std::string& x, ScalarType from, DType to);
  std::vector<bool> CoordsUsed(const std::vector<int32_t>& nodes) const;
  bool UsesLinear(const std::vector<int32_t>& nodes) const;

  std::string Signature() const;
  std::string Preamble() const;
  // Per size argument: read by a dim (of the domain, an input or an output), which must
  // find it >= 0; the kernel returns early otherwise (Preamble).
  std::vector<bool> DimSizes() const;
  Status EmitElementwise(std::string* body);
  Status EmitRowReduction(std::string* body);

  const Program& p_;
  bool idx32_ = false;
  IndexRanges ranges_;
  Needs needs_;
  int vector_ = 1;
  int block_ = kMaxThreads;
};

std::vector<int32_t> Emitter::Reachable(const std::vector<int32_t>& roots, const Scope* scope) const {
  std::vector<bool> seen(p_.nodes.size(), false);
  std::vector<int32_t> stack;
  for (int32_t r : roots) {
    if (r >= 0 && !seen[r]) {
      seen[r] = true;
      stack.push_back(r);
    }
  }
  while (!stack.empty()) {
    const Node& n = p_.nodes[stack.back()];
    stack.pop_back();
    if (VectorLoad(n, scope)) continue;
    for (int32_t o : {n.a, n.b, n.c}) {
      if (o >= 0 && !seen[o]) {
        seen[o] = true;
        stack.push_back(o);
      }
    }
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i]) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

std::vector<bool> Emitter::CoordsUsed(const std::vector<int32_t>& nodes) const {
  std::vector<bool> used(p_.domain.size(), false);
  for (int32_t n : nodes) {
    if (p_.nodes[n].op == Op::kCoord) used[p_.nodes[n].i] = true;
  }
  return used;
}

bool Emitter::UsesLinear(const std::vector<int32_t>& nodes) const {
  return std::any_of(nodes.begin(), nodes.end(), [&](int32_t n) { return p_.nodes[n].op == Op::kLinear; });
}

std::vector<std::string> Emitter::Unravel(const std::string& var, const std::vector<int>& axes,
                                          const std::string& prefix, const std::vector<bool>& wanted,
                                          std::string* out, const std::string& indent) {
  std::vector<std::string> coords(p_.domain.size());
  for (size_t j = 0; j < axes.size(); ++j) {
    const int k = axes[j];
    if (!wanted[k]) continue;
    const Idx dim = Dim(p_.domain[k]);
    if (dim.is_const && dim.c == 1) {
      coords[k] = Lit(0);
      continue;
    }
    const Idx stride = Product(std::vector<int>(axes.begin() + static_cast<long>(j) + 1, axes.end()));
    std::string e = var;
    if (!(stride.is_const && stride.c == 1)) e = "(" + e + " / " + Str(stride) + ")";
    // The first axis needs no modulo: the index is below the product of all extents.
    if (j > 0) e = e + " % " + Str(dim);
    const std::string name = prefix + std::to_string(k);
    *out += fmt::format("{}const {} {} = {};\n", indent, IdxType(), name, e);
    coords[k] = name;
  }
  return coords;
}

std::string Emitter::LoadExpr(int input, const std::string& element) {
  const DType dt = p_.inputs[input].dtype;
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: return element;
    case DType::kFloat16: needs_.half = true; return "kiln_h2f(" + element + ")";
    case DType::kBFloat16: needs_.bf16 = true; return "kiln_bf2f(" + element + ")";
    case DType::kBool: return "(long long)(" + element + " != 0)";
    default: return "(long long)" + element;
  }
}

std::string Emitter::StoreExpr(int output, const std::string& value) {
  const DType dt = p_.outputs[output].tensor.dtype;
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: case DType::kInt64: return value;
    case DType::kFloat16: needs_.half = true; return "kiln_f2h(" + value + ")";
    case DType::kBFloat16: needs_.bf16 = true; return "kiln_f2bf(" + value + ")";
    case DType::kBool: return "(unsigned char)(" + value + " != 0)";
    default: return fmt::format("({}){}", StorageType(dt), value);  // wraps modulo 2^bits
  }
}

std::string Emitter::CastExpr(const std::string& x, ScalarType from, DType to) {
  const bool from_float = from != ScalarType::kI64;
  switch (to) {
    case DType::kFloat32: return from == ScalarType::kF32 ? x : "(float)" + x;
    case DType::kFloat64: return from == ScalarType::kF64 ? x : "(double)" + x;
    case DType::kFloat16: needs_.half = true; return "kiln_round_f16((float)" + x + ")";
    case DType::kBFloat16: needs_.bf16 = true; return "kiln_round_bf16((float)" + x + ")";
    case DType::kBool: return "(long long)(" + x + " != 0)";
    default: break;
  }
  if (!from_float) {  // integer -> integer wraps modulo 2^bits, like a C cast
    if (to == DType::kInt64 || to == DType::kUInt64) return x;
    return fmt::format("(long long)({}){}", StorageType(to), x);
  }
  needs_.cast = true;
  if (to == DType::kUInt64) return "kiln_f2u64((double)" + x + ")";
  if (to == DType::kInt64) return "kiln_f2i(" + x + ")";
  int64_t lo = 0, hi = 0;
  switch (to) {
    case DType::kInt8: lo = -128; hi = 127; break;
    case DType::kUInt8: lo = 0; hi = 255; break;
    case DType::kInt16: lo = -32768; hi = 32767; break;
    case DType::kUInt16: lo = 0; hi = 65535; break;
    case DType::kInt32: lo = -2147483648LL; hi = 2147483647LL; break;
    case DType::kUInt32: lo = 0; hi = 4294967295LL; break;
    default: break;
  }
  return fmt::format("kiln_clamp(kiln_f2i({}), {}, {})", x, IntLiteral(lo), IntLiteral(hi));
}

// A float (kF32/kF64) node. Integer operands of any representation convert implicitly.
std::string Emitter::NodeExpr(int32_t id, const Scope& s) {
  const Node& n = p_.nodes[id];
  if (n.type == ScalarType::kI64) return IntNodeExpr(id, s);
  const ScalarType t = n.type;
  const bool f32 = t == ScalarType::kF32;
  const std::string x = Ref(n.a), y = Ref(n.b), z = Ref(n.c);
  // A C math function: the float or double version by the node's type.
  auto math = [&](const char* name) { return fmt::format("{}{}({})", name, f32 ? "f" : "", x); };
  auto one = [&]() { return std::string(f32 ? "1.0f" : "1.0"); };
  switch (n.op) {
    case Op::kConst: return FloatLiteral(n.f, t);
    case Op::kAcc: return "acc" + std::to_string(n.i);
    case Op::kLoad: {
      const int in = static_cast<int>(n.i);
      if (VectorLoad(n, &s)) {
        return LoadExpr(in, "x" + std::to_string(in) + "[e]");
      }
      return LoadExpr(in, fmt::format("in{}[{}]", in, x));
    }
    case Op::kCast: return CastExpr(x, p_.nodes[n.a].type, static_cast<DType>(n.i));
    case Op::kNeg: return "-" + x;
    case Op::kAbs: return math("fabs");
    case Op::kSign: return "kiln_sign(" + x + ")";
    case Op::kFloor: return math("floor");
    case Op::kCeil: return math("ceil");
    case Op::kRound: return math("rint");  // rint rounds halves to even in the default mode
    case Op::kSqrt: return math("sqrt");
    case Op::kExp: return math("exp");
    case Op::kLog: return math("log");
    case Op::kErf: return math("erf");
    case Op::kTanh: return math("tanh");
    case Op::kSigmoid: return fmt::format("{0} / ({0} + {1}{2}(-{3}))", one(), "exp", f32 ? "f" : "", x);
    case Op::kSin: return math("sin");
    case Op::kCos: return math("cos");
    case Op::kTan: return math("tan");
    case Op::kAsin: return math("asin");
    case Op::kAcos: return math("acos");
    case Op::kAtan: return math("atan");
    case Op::kSinh: return math("sinh");
    case Op::kCosh: return math("cosh");
    case Op::kReciprocal: return one() + " / " + x;
    case Op::kAdd: return x + " + " + y;
    case Op::kSub: return x + " - " + y;
    case Op::kMul: return x + " * " + y;
    case Op::kDiv: return x + " / " + y;
    case Op::kFloorDiv: return fmt::format("floor{}({} / {})", f32 ? "f" : "", x, y);
    case Op::kMod: return fmt::format("kiln_mod({}, {})", x, y);
    case Op::kFmod: return fmt::format("fmod{}({}, {})", f32 ? "f" : "", x, y);
    case Op::kPow: return fmt::format("pow{}({}, {})", f32 ? "f" : "", x, y);
    case Op::kMin: return fmt::format("kiln_min({}, {})", x, y);
    case Op::kMax: return fmt::format("kiln_max({}, {})", x, y);
    case Op::kSelect: return fmt::format("{} != 0 ? {} : {}", x, y, z);
    default: break;
  }
  return "0";  // unreachable for validated programs
}

std::string Emitter::Operand(int32_t o, IntRep r) const {
  const Node& n = p_.nodes[o];
  if (n.op == Op::kConst) return RepLiteral(n.i, r);
  const std::string name = "v" + std::to_string(o);
  return SameType(ranges_.rep[o], r) ? name : fmt::format("({}){}", RepType(r), name);
}

std::string Emitter::UnsignedOperand(int32_t o, IntRep r) const {
  const Node& n = p_.nodes[o];
  if (n.op == Op::kConst) return std::to_string(n.i) + (r == IntRep::kS64 ? "ull" : "u");
  const std::string name = "v" + std::to_string(o);
  return fmt::format("({}){}", RepUnsigned(r), name);
}

// An integer node, computed in the widest representation of it and its integer operands
// (`wide`) and converted to its own. Every conversion keeps the value: a node's range holds
// its value, and its representation holds its range.
std::string Emitter::IntNodeExpr(int32_t id, const Scope& s) {
  const Node& n = p_.nodes[id];
  const IntRep rep = ranges_.rep[id];
  const char* type = RepType(rep);
  auto is_int = [&](int32_t o) { return o >= 0 && p_.nodes[o].type == ScalarType::kI64; };
  IntRep wide = rep;
  for (int32_t o : {n.a, n.b, n.c}) {
    if (is_int(o)) wide = std::max(wide, ranges_.rep[o]);
  }
  const std::string x = Ref(n.a), y = Ref(n.b), z = Ref(n.c);
  const IntRange xr = n.a >= 0 ? ranges_.range[n.a] : IntRange{};
  const IntRange yr = n.b >= 0 ? ranges_.range[n.b] : IntRange{};
  // A 0/1 result of a condition.
  auto flag = [&](const std::string& cond) { return fmt::format("({})({})", type, cond); };
  // A binary op in `r`: operands converted to it, the result to the node's type.
  auto infix = [&](const char* op, IntRep r) {
    return Fit(fmt::format("{} {} {}", Operand(n.a, r), op, Operand(n.b, r)), r, rep);
  };
  auto helper64 = [&](const char* name) {
    return Fit(fmt::format("{}({}, {})", name, Operand(n.a, IntRep::kS64), Operand(n.b, IntRep::kS64)),
               IntRep::kS64, rep);
  };
  auto leaf_index = [&](const std::string& idx) {
    // Coordinates and the linear index are of the kernel's index type.
    return fmt::format("({}){}", type, idx);
  };
  switch (n.op) {
    case Op::kConst: return RepLiteral(n.i, rep);
    case Op::kCoord: return leaf_index(s.coord[n.i]);
    case Op::kLinear: return leaf_index(s.linear);
    case Op::kSize: return Fit("s" + std::to_string(n.i), IntRep::kS64, rep);
    case Op::kAcc: return "acc" + std::to_string(n.i);
    case Op::kLoad: {
      const int in = static_cast<int>(n.i);
      if (VectorLoad(n, &s)) return LoadExpr(in, "x" + std::to_string(in) + "[e]");
      return LoadExpr(in, fmt::format("in{}[{}]", in, x));
    }
    case Op::kCast: {
      const DType to = static_cast<DType>(n.i);
      const ScalarType from = p_.nodes[n.a].type;
      if (to == DType::kBool) return flag(x + " != 0");
      if (from == ScalarType::kI64) {
        // An integer cast that cannot wrap is the value itself (the range is then x's).
        if (ranges_.range[id] == xr) return Operand(n.a, rep);
        return Fit(CastExpr(Operand(n.a, IntRep::kS64), from, to), IntRep::kS64, rep);
      }
      return Fit(CastExpr(x, from, to), IntRep::kS64, rep);
    }
    case Op::kNeg: {
      if (!ranges_.exact[id]) return "kiln_neg(" + Operand(n.a, IntRep::kS64) + ")";
      const IntRep r = std::max(wide, IntRep::kS32);
      return Fit("-" + Operand(n.a, r), r, rep);
    }
    case Op::kAbs: {
      if (xr.lo >= 0) return Operand(n.a, rep);
      if (!ranges_.exact[id]) return "kiln_abs(" + Operand(n.a, IntRep::kS64) + ")";
      const IntRep r = std::max(wide, IntRep::kS32);
      return Fit(fmt::format("({0} < 0 ? -{0} : {0})", Operand(n.a, r)), r, rep);
    }
    case Op::kSign:
      if (xr.lo >= 0) return flag(x + " > 0");
      return flag(fmt::format("({0} > 0) - ({0} < 0)", x));
    case Op::kNot: return flag(x + " == 0");
    case Op::kIsNaN: return flag(x + " != " + x);
    case Op::kEq: case Op::kLt: case Op::kLe: {
      const char* op = n.op == Op::kEq ? "==" : (n.op == Op::kLt ? "<" : "<=");
      if (!is_int(n.a)) return flag(fmt::format("{} {} {}", x, op, y));
      const IntRep r = std::max(ranges_.rep[n.a], ranges_.rep[n.b]);
      return flag(fmt::format("{} {} {}", Operand(n.a, r), op, Operand(n.b, r)));
    }
    case Op::kAnd: return flag(fmt::format("{} != 0 && {} != 0", x, y));
    case Op::kOr: return flag(fmt::format("{} != 0 || {} != 0", x, y));
    case Op::kXor: return flag(fmt::format("({} != 0) != ({} != 0)", x, y));
    case Op::kAdd: return ranges_.exact[id] ? infix("+", wide) : helper64("kiln_add");
    case Op::kSub: return ranges_.exact[id] ? infix("-", wide) : helper64("kiln_sub");
    case Op::kMul: return ranges_.exact[id] ? infix("*", wide) : helper64("kiln_mul");
    case Op::kDiv: case Op::kFloorDiv: case Op::kMod: case Op::kFmod: {
      const bool div = n.op == Op::kDiv || n.op == Op::kFloorDiv;
      const char* op = div ? "/" : "%";
      if (yr.lo == 0 && yr.hi == 0) return RepLiteral(0, rep);  // x / 0 = x % 0 = 0
      if (xr.lo >= 0 && yr.lo >= 1 && xr.hi < yr.lo) {  // 0 <= x < y: x / y = 0, x % y = x
        return div ? RepLiteral(0, rep) : Operand(n.a, rep);
      }
      if (xr.lo >= 0 && yr.lo >= 0) {
        // Non-negative: floor and truncation agree, and so do both modulos. Unsigned
        // division is the cheapest (no sign fix-up; a shift or a multiply for constants).
        std::string e = fmt::format("{} {} {}", UnsignedOperand(n.a, wide), op, UnsignedOperand(n.b, wide));
        if (yr.lo == 0) e = fmt::format("({} == 0 ? 0 : {})", y, e);  // x / 0 = x % 0 = 0
        return fmt::format("({})({})", type, e);
      }
      const bool no_wrap = yr.lo >= 1 || yr.hi <= -2;  // divisor never 0 or -1
      if (no_wrap && (n.op == Op::kDiv || n.op == Op::kFmod)) return infix(op, wide);  // C truncates
      if (yr.lo >= 1) {
        // A positive divisor: floor division and Python modulo from C's, one fix-up each.
        const std::string a = Operand(n.a, wide), b = Operand(n.b, wide);
        if (n.op == Op::kFloorDiv) return Fit(fmt::format("{0} / {1} - ({0} % {1} < 0)", a, b), wide, rep);
        return Fit(fmt::format("{0} % {1} + ({0} % {1} < 0 ? {1} : 0)", a, b), wide, rep);
      }
      const char* name = n.op == Op::kDiv ? "kiln_div"
                         : n.op == Op::kFloorDiv ? "kiln_floordiv"
                         : n.op == Op::kMod ? "kiln_mod" : "kiln_fmod";
      return helper64(name);
    }
    case Op::kMin: case Op::kMax: {
      // One operand never above the other: the result is that operand.
      const bool x_low = xr.hi <= yr.lo, y_low = yr.hi <= xr.lo;
      if (x_low || y_low) return Operand((x_low == (n.op == Op::kMin)) ? n.a : n.b, rep);
      const IntRep r = wide;
      return Fit(fmt::format("{}({}, {})", n.op == Op::kMin ? "kiln_min" : "kiln_max", Operand(n.a, r),
                             Operand(n.b, r)), r, rep);
    }
    case Op::kSelect: return fmt::format("{} != 0 ? {} : {}", x, Operand(n.b, rep), Operand(n.c, rep));
    case Op::kCheckIndex:
      return Fit(fmt::format("kiln_check({}, {}, {}u, err)", Operand(n.a, IntRep::kS64), Operand(n.b, IntRep::kS64),
                             n.i), IntRep::kS64, rep);
    default: break;
  }
  return "0";  // unreachable for validated programs
}

void Emitter::EmitNodes(const std::vector<int32_t>& roots, const Scope& s, std::string* out,
                        const std::string& indent) {
  for (int32_t n : Reachable(roots, &s)) {
    if (p_.nodes[n].op == Op::kConst && p_.nodes[n].type == ScalarType::kI64) continue;  // inlined (Ref)
    *out += fmt::format("{}const {} v{} = {};\n", indent, DeclType(n), n, NodeExpr(n, s));
  }
}

std::string Emitter::Signature() const {
  std::string s = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(", block_, kNamePlaceholder);
  std::vector<std::string> params;
  for (size_t k = 0; k < p_.inputs.size(); ++k) {
    params.push_back(fmt::format("const {}* __restrict__ in{}", StorageType(p_.inputs[k].dtype), k));
  }
  for (size_t k = 0; k < p_.outputs.size(); ++k) {
    params.push_back(fmt::format("{}* __restrict__ out{}", StorageType(p_.outputs[k].tensor.dtype), k));
  }
  for (int k = 0; k < p_.num_sizes; ++k) params.push_back("long long s" + std::to_string(k));
  params.push_back("unsigned int* __restrict__ err");
  for (size_t i = 0; i < params.size(); ++i) s += (i ? ",\n    " : "\n    ") + params[i];
  return s + ") {\n";
}

std::vector<bool> Emitter::DimSizes() const {
  std::vector<bool> used(static_cast<size_t>(p_.num_sizes), false);
  auto mark = [&](const std::vector<int64_t>& dims) {
    for (int64_t d : dims) {
      if (d < 0) used[-(d + 1)] = true;
    }
  };
  mark(p_.domain);
  for (const fused::TensorSpec& t : p_.inputs) mark(t.dims);
  for (const fused::Output& o : p_.outputs) mark(o.tensor.dims);
  return used;
}

// The size arguments that dims read, as the index type. Such a size is >= 0 for a correct
// launch; a negative one makes the kernel do nothing rather than walk memory. Sizes that
// no dim reads are values of the program (a Pad amount, say) and may be negative.
std::string Emitter::Preamble() const {
  std::string s;
  const std::vector<bool> dim_sizes = DimSizes();
  std::string cond;
  for (int k = 0; k < p_.num_sizes; ++k) {
    if (dim_sizes[k]) cond += (cond.empty() ? "s" : " || s") + std::to_string(k) + " < 0";
  }
  if (cond.empty()) return s;
  s += "  if (" + cond + ") return;\n";
  // Index-typed copies of the sizes that extents of the domain read (Dim).
  std::vector<bool> domain_sizes(static_cast<size_t>(p_.num_sizes), false);
  for (int64_t d : p_.domain) {
    if (d < 0) domain_sizes[-(d + 1)] = true;
  }
  for (int k = 0; k < p_.num_sizes; ++k) {
    if (domain_sizes[k]) s += fmt::format("  const {} z{} = ({})s{};\n", IdxType(), k, IdxType(), k);
  }
  return s;
}

Status Emitter::EmitElementwise(std::string* body) {
  const int rank = static_cast<int>(p_.domain.size());
  std::vector<int> axes(rank);
  for (int k = 0; k < rank; ++k) axes[k] = k;
  std::vector<int32_t> roots;
  for (const fused::Output& o : p_.outputs) roots.push_back(o.value);
  const std::vector<int32_t> nodes = Reachable(roots);
  const std::vector<bool> coords_used = CoordsUsed(nodes);

  // Vectorisable: every output has a 4-byte dtype, and some load of a 4-byte input is at
  // exactly kLinear.
  std::vector<bool> vector_inputs(p_.inputs.size(), false);
  bool any_vector_input = false;
  for (int32_t n : nodes) {
    const Node& node = p_.nodes[n];
    if (node.op == Op::kLoad && p_.nodes[node.a].op == Op::kLinear && Vector4Type(p_.inputs[node.i].dtype)) {
      vector_inputs[node.i] = true;
      any_vector_input = true;
    }
  }
  bool vectorise = any_vector_input && !p_.outputs.empty();
  for (const fused::Output& o : p_.outputs) vectorise = vectorise && Vector4Type(o.tensor.dtype);
  // A constant element count that is not a multiple of 4 would never take the path.
  const Idx count = Product(axes);
  if (count.is_const && count.c % 4 != 0) vectorise = false;
  vector_ = vectorise ? 4 : 1;

  std::string& s = *body;
  s += Signature();
  s += Preamble();
  const Idx n = Named("n", count, &s, "  ");
  s += "  const kiln_u64 start = (kiln_u64)blockIdx.x * blockDim.x + threadIdx.x;\n";
  s += "  const kiln_u64 step = (kiln_u64)blockDim.x * gridDim.x;\n";

  // The per-element statements, for element index `i` (declared by the caller).
  auto element = [&](const Scope& scope, const std::string& indent, bool vector_lane) {
    std::string e;
    std::vector<std::string> coords = Unravel("i", axes, "c", coords_used, &e, indent);
    Scope sc = scope;
    sc.coord = coords;
    sc.linear = "i";
    EmitNodes(roots, sc, &e, indent);
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      const std::string value = Ref(p_.outputs[k].value);
      if (vector_lane) {
        e += fmt::format("{}y{}[e] = {};\n", indent, k, StoreExpr(static_cast<int>(k), value));
      } else {
        e += fmt::format("{}out{}[i] = {};\n", indent, k, StoreExpr(static_cast<int>(k), value));
      }
    }
    return e;
  };

  if (vectorise) {
    // Taken when the whole kernel qualifies, so every thread takes the same path.
    std::string ptrs;
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      if (vector_inputs[k]) ptrs += (ptrs.empty() ? "" : " | ") + fmt::format("(kiln_u64)in{}", k);
    }
    for (size_t k = 0; k < p_.outputs.size(); ++k) ptrs += fmt::format(" | (kiln_u64)out{}", k);
    s += fmt::format("  if ({} % 4 == 0 && (({}) & 15u) == 0) {{\n", Str(n), ptrs);
    s += fmt::format("    for (kiln_u64 q = start; q < {} / 4; q += step) {{\n", Str(n));
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      if (!vector_inputs[k]) continue;
      const DType dt = p_.inputs[k].dtype;
      s += fmt::format("      const {0} w{1} = reinterpret_cast<const {0}*>(in{1})[q];\n", Vector4Type(dt), k);
      s += fmt::format("      const {0} x{1}[4] = {{w{1}.x, w{1}.y, w{1}.z, w{1}.w}};\n", StorageType(dt), k);
    }
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      s += fmt::format("      {} y{}[4];\n", StorageType(p_.outputs[k].tensor.dtype), k);
    }
    s += "#pragma unroll\n";
    s += "      for (int e = 0; e < 4; ++e) {\n";
    s += fmt::format("        const {} i = ({})(q * 4 + e);\n", IdxType(), IdxType());
    Scope lane;
    lane.vector_inputs = &vector_inputs;
    s += element(lane, "        ", true);
    s += "      }\n";
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      const DType dt = p_.outputs[k].tensor.dtype;
      const std::string make = std::string("make_") + Vector4Type(dt);
      s += fmt::format("      reinterpret_cast<{0}*>(out{1})[q] = {2}(y{1}[0], y{1}[1], y{1}[2], y{1}[3]);\n",
                       Vector4Type(dt), k, make);
    }
    s += "    }\n    return;\n  }\n";
  }
  s += fmt::format("  for (kiln_u64 t = start; t < {}; t += step) {{\n", Str(n));
  s += fmt::format("    const {} i = ({})t;\n", IdxType(), IdxType());
  s += element(Scope{}, "    ", false);
  s += "  }\n}\n";
  return Status::Ok();
}

Status Emitter::EmitRowReduction(std::string* body) {
  const int rank = static_cast<int>(p_.domain.size());
  std::vector<int> kept, reduced;
  for (int k = 0; k < rank; ++k) ((p_.reduce_axes >> k) & 1u ? reduced : kept).push_back(k);
  const Idx cols_const = Product(reduced);
  if (cols_const.is_const) {
    block_ = 32;
    while (block_ < kMaxThreads && static_cast<uint64_t>(block_) < cols_const.c) block_ *= 2;
  }

  // Reductions in passes: a pass folds consecutive reductions that do not read each other,
  // so they share one sweep over the row's columns.
  std::vector<std::vector<int>> passes;
  {
    std::vector<int> current;
    for (size_t r = 0; r < p_.reductions.size(); ++r) {
      bool depends = false;
      for (int32_t n : Reachable({p_.reductions[r].value})) {
        const Node& node = p_.nodes[n];
        if (node.op == Op::kAcc && std::find(current.begin(), current.end(), node.i) != current.end()) depends = true;
      }
      if (depends) {
        passes.push_back(current);
        current.clear();
      }
      current.push_back(static_cast<int>(r));
    }
    if (!current.empty()) passes.push_back(current);
  }
  std::vector<int32_t> full_roots, row_roots, all_roots;
  std::vector<int> full_outputs, row_outputs;
  for (size_t k = 0; k < p_.outputs.size(); ++k) {
    (p_.outputs[k].per_row ? row_roots : full_roots).push_back(p_.outputs[k].value);
    (p_.outputs[k].per_row ? row_outputs : full_outputs).push_back(static_cast<int>(k));
  }
  std::vector<int32_t> column_roots = full_roots;
  for (const fused::Reduction& r : p_.reductions) column_roots.push_back(r.value);
  all_roots = column_roots;
  all_roots.insert(all_roots.end(), row_roots.begin(), row_roots.end());
  const std::vector<int32_t> all_nodes = Reachable(all_roots);
  std::vector<bool> coords_used = CoordsUsed(all_nodes);

  // The linear index is row * cols + col when the reduced axes are the trailing ones,
  // col * rows + row when they are the leading ones, and a sum over coordinates otherwise.
  const bool need_linear = !full_outputs.empty() || UsesLinear(all_nodes);
  const bool trailing = reduced.front() == static_cast<int>(kept.size());
  const bool leading = reduced.back() == static_cast<int>(reduced.size()) - 1;
  const bool general = need_linear && !trailing && !leading;
  if (general) coords_used.assign(rank, true);

  std::string& s = *body;
  s += Signature();
  s += Preamble();
  const Idx rows = Named("rows", Product(kept), &s, "  ");
  const Idx cols = Named("cols", Product(reduced), &s, "  ");
  std::set<ScalarType> red_types;
  for (const fused::Reduction& r : p_.reductions) red_types.insert(p_.nodes[r.value].type);
  for (ScalarType t : red_types) s += fmt::format("  __shared__ {} sm_{}[32];\n", CType(t), CType(t)[0]);
  s += fmt::format("  for ({0} row = blockIdx.x; row < {1}; row += gridDim.x) {{\n", IdxType(), Str(rows));
  std::vector<std::string> kept_coords = Unravel("row", kept, "r", coords_used, &s, "    ");

  // Per-axis strides of the full domain, for the general linear index.
  std::vector<Idx> fstride(rank);
  if (general) {
    for (int k = 0; k < rank; ++k) {
      std::vector<int> after;
      for (int j = k + 1; j < rank; ++j) after.push_back(j);
      fstride[k] = Named("fs" + std::to_string(k), Product(after), &s, "    ");
    }
  }
  std::string row_base;
  if (need_linear) {
    if (trailing) {
      row_base = Str(Named("base", Mul({false, 0, "row"}, cols), &s, "    "));
    } else if (leading) {
      row_base = "row";
    } else {
      std::string e;
      for (int k : kept) e += (e.empty() ? "" : " + ") + Scaled(kept_coords[k], fstride[k]);
      s += fmt::format("    const {} base = {};\n", IdxType(), e.empty() ? Lit(0) : e);
      row_base = "base";
    }
  }
  // A sweep over the row's columns: coordinates, linear index, then `inner`.
  auto column_scope = [&](const std::string& indent) {
    std::string c;
    std::vector<std::string> coords = Unravel("col", reduced, "c", coords_used, &c, indent);
    Scope sc;
    sc.coord = coords;
    for (int k : kept) sc.coord[k] = kept_coords[k];
    if (need_linear) {
      std::string lin;
      if (trailing) {
        lin = row_base + " + col";
      } else if (leading) {
        lin = "col * " + Str(rows) + " + row";
      } else {
        lin = row_base;
        for (int k : reduced) lin += " + " + Scaled(coords[k], fstride[k]);
      }
      c += fmt::format("{}const {} lin = {};\n", indent, IdxType(), lin);
      sc.linear = "lin";
    }
    return std::make_pair(c, sc);
  };

  auto identity = [&](ReduceOp op, ScalarType t) -> std::string {
    switch (op) {
      case ReduceOp::kSum: return t == ScalarType::kI64 ? "0LL" : FloatLiteral(0.0, t);
      case ReduceOp::kProd: return t == ScalarType::kI64 ? "1LL" : FloatLiteral(1.0, t);
      case ReduceOp::kMax: return t == ScalarType::kI64 ? IntLiteral(INT64_MIN) : FloatLiteral(-INFINITY, t);
      case ReduceOp::kMin: return t == ScalarType::kI64 ? IntLiteral(INT64_MAX) : FloatLiteral(INFINITY, t);
    }
    return "0";
  };
  auto op_name = [](ReduceOp op) -> std::string {
    switch (op) {
      case ReduceOp::kSum: return "sum";
      case ReduceOp::kProd: return "prod";
      case ReduceOp::kMax: return "max";
      case ReduceOp::kMin: return "min";
    }
    return "sum";
  };

  for (const std::vector<int>& pass : passes) {
    std::vector<int32_t> roots;
    for (int r : pass) {
      const fused::Reduction& red = p_.reductions[r];
      const ScalarType t = p_.nodes[red.value].type;
      s += fmt::format("    {} acc{} = {};\n", CType(t), r, identity(red.op, t));
      roots.push_back(red.value);
    }
    s += fmt::format("    for ({0} col = threadIdx.x; col < {1}; col += blockDim.x) {{\n", IdxType(), Str(cols));
    auto [c, sc] = column_scope("      ");
    s += c;
    EmitNodes(roots, sc, &s, "      ");
    for (int r : pass) {
      const fused::Reduction& red = p_.reductions[r];
      // An integer value of a narrower type joins the 64-bit accumulator as long long.
      const bool int_value = p_.nodes[red.value].type == ScalarType::kI64;
      s += fmt::format("      acc{0} = kiln_op_{1}()(acc{0}, {2});\n", r, op_name(red.op),
                       int_value ? Operand(red.value, IntRep::kS64) : Ref(red.value));
    }
    s += "    }\n";
    for (int r : pass) {
      const fused::Reduction& red = p_.reductions[r];
      const ScalarType t = p_.nodes[red.value].type;
      s += fmt::format("    acc{0} = kiln_block_reduce(acc{0}, {1}, sm_{2}, kiln_op_{3}());\n", r,
                       identity(red.op, t), CType(t)[0], op_name(red.op));
    }
  }
  if (!full_outputs.empty()) {
    s += fmt::format("    for ({0} col = threadIdx.x; col < {1}; col += blockDim.x) {{\n", IdxType(), Str(cols));
    auto [c, sc] = column_scope("      ");
    s += c;
    EmitNodes(full_roots, sc, &s, "      ");
    for (int k : full_outputs) {
      s += fmt::format("      out{}[lin] = {};\n", k, StoreExpr(k, Ref(p_.outputs[k].value)));
    }
    s += "    }\n";
  }
  if (!row_outputs.empty()) {
    // Per-row outputs: one value per row, evaluated with every reduced coordinate 0.
    s += "    if (threadIdx.x == 0) {\n";
    Scope sc;
    sc.coord.assign(rank, Lit(0));
    for (int k : kept) sc.coord[k] = kept_coords[k];
    if (need_linear) sc.linear = row_base;
    EmitNodes(row_roots, sc, &s, "      ");
    for (int k : row_outputs) {
      s += fmt::format("      out{}[row] = {};\n", k, StoreExpr(k, Ref(p_.outputs[k].value)));
    }
    s += "    }\n";
  }
  s += "  }\n}\n";
  return Status::Ok();
}

Result<EmittedKernel> Emitter::Run() {
  KILN_RETURN_IF_ERROR_CTX(fused::Validate(p_), "EmitCuda");
  if (p_.domain.size() > 32) return InvalidArgument("EmitCuda: domain rank above 32");
  for (const fused::TensorSpec& t : p_.inputs) {
    if (!StorageType(t.dtype)) return Unimplemented(fmt::format("EmitCuda: input dtype {}", DTypeName(t.dtype)));
  }
  for (const fused::Output& o : p_.outputs) {
    if (!StorageType(o.tensor.dtype)) {
      return Unimplemented(fmt::format("EmitCuda: output dtype {}", DTypeName(o.tensor.dtype)));
    }
  }

  // 32-bit index arithmetic when every extent is constant and every element count fits.
  auto fits32 = [](const std::vector<int64_t>& dims) {
    uint64_t count = 1;
    for (int64_t d : dims) {
      if (d < 0) return false;
      if (d != 0 && count > (uint64_t{1} << 31) / static_cast<uint64_t>(d)) return false;
      count *= static_cast<uint64_t>(d);
    }
    return count < (uint64_t{1} << 31);
  };
  idx32_ = fits32(p_.domain);
  for (const fused::TensorSpec& t : p_.inputs) idx32_ = idx32_ && fits32(t.dims);
  for (const fused::Output& o : p_.outputs) idx32_ = idx32_ && fits32(o.tensor.dims);

  const bool row = p_.reduce_axes != 0;
  // Nodes are evaluated only for non-empty domains, and a row reduction's per-row outputs
  // with its reduced axes possibly empty.
  uint32_t nonempty_axes = 0;
  for (size_t k = 0; k < p_.domain.size(); ++k) {
    if (!row || !((p_.reduce_axes >> k) & 1u)) nonempty_axes |= 1u << k;
  }
  ranges_ = AnalyseRanges(p_, nonempty_axes, DimSizes());
  std::string body;
  KILN_RETURN_IF_ERROR(row ? EmitRowReduction(&body) : EmitElementwise(&body));

  EmittedKernel k;
  char hex[17];
  const std::string identity = body + '\0' + fused::Print(p_);
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, static_cast<uint64_t>(XXH64(identity.data(), identity.size(), 0)));
  k.name = std::string("kiln_") + hex;
  body.replace(body.find(kNamePlaceholder), std::strlen(kNamePlaceholder), k.name);
  k.source = "// Generated by kiln from a fused program.\n";
  k.source += kPreludeCore;
  if (needs_.half) k.source += kPreludeHalf;
  if (needs_.bf16) k.source += kPreludeBF16;
  if (needs_.cast) k.source += kPreludeCast;
  if (row) k.source += kPreludeReduce;
  k.source += body;
  k.kind = row ? LaunchKind::kRowReduction : LaunchKind::kElementwise;
  k.block = block_;
  k.vector = vector_;
  k.index_bits = idx32_ ? 32 : 64;
  k.num_inputs = static_cast<int>(p_.inputs.size());
  k.num_outputs = static_cast<int>(p_.outputs.size());
  k.num_sizes = p_.num_sizes;
  for (const fused::TensorSpec& t : p_.inputs) k.pointer_types.push_back(StorageType(t.dtype));
  for (const fused::Output& o : p_.outputs) k.pointer_types.push_back(StorageType(o.tensor.dtype));
  return k;
}

}  // namespace

Result<EmittedKernel> EmitCuda(const fused::Program& program) { return Emitter(program).Run(); }

std::string HostSource(const EmittedKernel& kernel) { return std::string(kHostShim) + kernel.source; }

std::string HostLauncher(const EmittedKernel& k) {
  std::string s = fmt::format(
      "extern \"C\" void {}_host(void* const* inputs, void* const* outputs, const long long* sizes,\n"
      "                         unsigned* err, unsigned grid, unsigned block) {{\n"
      "  kiln_host_launch(grid, block, [&] {{\n"
      "    {}(",
      k.name, k.name);
  std::vector<std::string> args;
  for (int i = 0; i < k.num_inputs; ++i) {
    args.push_back(fmt::format("(const {}*)inputs[{}]", k.pointer_types[i], i));
  }
  for (int i = 0; i < k.num_outputs; ++i) {
    args.push_back(fmt::format("({}*)outputs[{}]", k.pointer_types[k.num_inputs + i], i));
  }
  for (int i = 0; i < k.num_sizes; ++i) args.push_back(fmt::format("sizes[{}]", i));
  args.push_back("err");
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  s += ");\n  });\n}\n";
  return s;
}

}  // namespace kiln::codegen
