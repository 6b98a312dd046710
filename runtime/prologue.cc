#include "runtime/prologue.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/half.h"
#include "runtime/shape_text.h"

namespace kiln {
namespace {

bool Fail(PrologueFailure* why, PrologueCheck check, int32_t input, int32_t dim, int64_t got) {
  why->check = check;
  why->input = input;
  why->dim = dim;
  why->got = got;
  return false;
}

// Checks dim or element `d` of input `i`, whose value is `v`, against `c`.
bool Check(const PrologueDim& c, int64_t v, int32_t i, int32_t d, bool value, PrologueScratch& s,
           PrologueFailure* why) {
  if (c.symbol < 0) {
    if (v == c.value) return true;
    why->value = value;
    return Fail(why, PrologueCheck::kDim, i, d, v);
  }
  if (s.bound_by[c.symbol] >= 0) {
    if (v == s.symbol_values[c.symbol]) return true;
    why->bound_input = s.bound_by[c.symbol];
    why->bound = s.symbol_values[c.symbol];
    why->value = value;
    return Fail(why, PrologueCheck::kSymbolMismatch, i, d, v);
  }
  if (v < c.min || v > c.max || v % c.divisor != 0) {
    why->value = value;
    return Fail(why, v < c.min || v > c.max ? PrologueCheck::kSymbolRange : PrologueCheck::kSymbolDivisor, i, d, v);
  }
  s.symbol_values[c.symbol] = v;
  s.bound_by[c.symbol] = i;
  return true;
}

// Element `e` as its value check reads it: an integer, a bool as 0 or 1, or a floating-point
// element's bits, zero-extended (float64: its bit pattern), compared bit for bit.
int64_t ValueAt(DType dtype, const void* data, int32_t e) {
  switch (dtype) {
    case DType::kInt64:
    case DType::kFloat64: return static_cast<const int64_t*>(data)[e];
    case DType::kInt32: return static_cast<const int32_t*>(data)[e];
    case DType::kFloat32: return static_cast<const uint32_t*>(data)[e];
    case DType::kFloat16:
    case DType::kBFloat16: return static_cast<const uint16_t*>(data)[e];
    default: return int64_t{static_cast<const uint8_t*>(data)[e] != 0};  // bool
  }
}

bool CheckDims(const PrologueInput& in, const TensorView& view, int32_t i,
               PrologueScratch& s, PrologueFailure* why) {
  const int32_t rank = static_cast<int32_t>(in.dims.size());
  for (int32_t d = 0; d < rank; ++d)
    if (!Check(in.dims[d], view.dims[d], i, d, false, s, why)) return false;
  if (in.values.empty()) return true;
  // The element count matches: the dims are constants the loop above checked (runtime/verify.cc).
  if (view.memory != MemoryKind::kHost)
    return Fail(why, PrologueCheck::kValueMemory, i, -1, static_cast<int64_t>(view.memory));
  const int32_t n = static_cast<int32_t>(in.values.size());
  for (int32_t e = 0; e < n; ++e)
    if (!Check(in.values[e], ValueAt(in.dtype, view.data, e), i, e, true, s, why)) return false;
  return true;
}

}  // namespace

bool RunPrologue(const Prologue& p, std::span<const Expr> exprs,
                 std::span<const TensorView> inputs, MemoryKind memory, PrologueScratch& s,
                 PrologueFailure* why) {
  const size_t n = p.inputs.size();
  if (inputs.size() != n)
    return Fail(why, PrologueCheck::kInputCount, -1, -1, static_cast<int64_t>(inputs.size()));
  for (size_t k = 0; k < s.bound_by.size(); ++k) s.bound_by[k] = -1;
  why->value = false;
  for (size_t k = 0; k < n; ++k) {
    const PrologueInput& in = p.inputs[k];
    const TensorView& v = inputs[k];
    const int32_t i = static_cast<int32_t>(k);
    if (v.data == nullptr) return Fail(why, PrologueCheck::kNullData, i, -1, 0);
    const bool kind_ok = memory == kAnyMemory ? (v.memory == MemoryKind::kHost || v.memory == MemoryKind::kDevice)
                                              : v.memory == memory;
    if (!kind_ok) return Fail(why, PrologueCheck::kMemoryKind, i, -1, static_cast<int64_t>(v.memory));
    if (v.dtype != in.dtype)
      return Fail(why, PrologueCheck::kDType, i, -1, static_cast<int64_t>(v.dtype));
    const size_t elem = DTypeSize(in.dtype);
    const auto addr = reinterpret_cast<uintptr_t>(v.data);
    if (elem > 1 && addr % elem != 0)
      return Fail(why, PrologueCheck::kMisaligned, i, -1, static_cast<int64_t>(addr));
    if (v.rank != static_cast<int32_t>(in.dims.size()))
      return Fail(why, PrologueCheck::kRank, i, -1, v.rank);
    if (!CheckDims(in, v, i, s, why)) return false;
  }
  if (p.guard_exprs == 0) return true;
  if (!EvalExprs(exprs.first(static_cast<size_t>(p.guard_exprs)), s.symbol_values,
                 s.expr_values.data(), &why->expr)) {
    why->guard = 0;
    return Fail(why, PrologueCheck::kGuardError, -1, -1, 0);
  }
  for (size_t g = 0; g < p.guards.size(); ++g) {
    if (s.expr_values[p.guards[g].expr] == 0) {
      why->guard = static_cast<int32_t>(g);
      return Fail(why, PrologueCheck::kGuard, -1, -1, 0);
    }
  }
  return true;
}

namespace {

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string GuardText(const Prologue& p, std::span<const Expr> exprs, const PrologueGuard& g) {
  // The compiler writes "(condition) from <where it comes from>"; keep that as it is.
  std::string t = g.text.empty() ? PrintExpr(exprs, g.expr, p.symbols) : g.text;
  if (!t.empty() && t.front() == '(') return t;
  return "(" + t + ")";
}

// "input 'x' dim 2", or "input 'sr' element 0": where input `in` binds `symbol`.
std::string BinderText(const PrologueInput& in, int32_t symbol) {
  for (size_t d = 0; d < in.dims.size(); ++d)
    if (in.dims[d].symbol == symbol) return "input " + Quote(in.name) + " dim " + std::to_string(d);
  for (size_t e = 0; e < in.values.size(); ++e)
    if (in.values[e].symbol == symbol) return "input " + Quote(in.name) + " element " + std::to_string(e);
  return "input " + Quote(in.name);
}

std::string ElementText(DType dtype, int64_t v);

// " for H = 2 (input 'x' dim 2), W = 1 (input 'x' dim 3)": the symbols expression `expr` reads
// (operands precede their node), as the failed call bound them (a float32 element's as its value,
// though the symbol holds its bits).
std::string BindingText(const Prologue& p, std::span<const Expr> exprs, int32_t expr, const PrologueScratch& s) {
  const std::vector<bool> used = ExprsRead(exprs, expr);
  std::vector<bool> reads(p.symbols.size(), false);
  for (size_t i = 0; i < used.size(); ++i)
    if (used[i] && exprs[i].op == ExprOp::kVar && exprs[i].a >= 0 && static_cast<size_t>(exprs[i].a) < reads.size())
      reads[exprs[i].a] = true;
  std::string t;
  for (size_t k = 0; k < reads.size(); ++k) {
    if (!reads[k] || k >= s.bound_by.size() || s.bound_by[k] < 0) continue;
    const PrologueInput& in = p.inputs[s.bound_by[k]];
    DType as = DType::kInt64;  // the input's dtype for a symbol one of its elements binds
    for (const PrologueDim& c : in.values) as = c.symbol == static_cast<int32_t>(k) ? in.dtype : as;
    t += (t.empty() ? " for " : ", ") + p.symbols[k] + " = " + ElementText(as, s.symbol_values[k]) + " (" +
         BinderText(in, static_cast<int32_t>(k)) + ")";
  }
  return t;
}

// "1..64", or ">= 1" without an upper bound: the profile syntax of `kiln compile --profile`.
// A value check's number as text: an integer, or the floating-point value whose bits it holds
// (ValueAt), shortest round-trip form ("2.5", "0.1").
std::string ElementText(DType dtype, int64_t v) {
  double d = 0;
  switch (dtype) {
    case DType::kFloat64: d = std::bit_cast<double>(v); break;
    case DType::kFloat32: d = std::bit_cast<float>(static_cast<uint32_t>(v)); break;
    case DType::kFloat16: d = HalfToFloat(static_cast<uint16_t>(v)); break;
    case DType::kBFloat16: d = BF16ToFloat(static_cast<uint16_t>(v)); break;
    default: return std::to_string(v);
  }
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {  // the fewest digits that read back the same
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    if (std::strtod(buf, nullptr) == d || d != d) break;
  }
  return buf;
}

std::string RangeText(const PrologueDim& c) {
  if (c.max == INT64_MAX) return c.min == INT64_MIN ? "any int64" : ">= " + std::to_string(c.min);
  if (c.min == INT64_MIN) return "<= " + std::to_string(c.max);
  return std::to_string(c.min) + ".." + std::to_string(c.max);
}

// The name an input has in the printed prologue: its own when it reads as an identifier.
std::string LocalName(const std::string& name, size_t index) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.');
  return ok ? name : "in" + std::to_string(index);
}

}  // namespace

std::string PrologueShapeText(const Prologue& p, const PrologueInput& in) {
  return ShapeText(in.dims.size(), [&](size_t d) {
    const PrologueDim& c = in.dims[d];
    return c.symbol < 0 ? std::to_string(c.value) : p.symbols[c.symbol];
  });
}

std::string FormatPrologueFailure(const Prologue& p, std::span<const Expr> exprs,
                                  const PrologueFailure& why, MemoryKind memory,
                                  const PrologueScratch* scratch) {
  auto mem_name = [](int64_t m) {
    return m == static_cast<int64_t>(MemoryKind::kHost) ? std::string("host")
           : m == static_cast<int64_t>(MemoryKind::kDevice)
               ? std::string("device")
               : "unknown(" + std::to_string(m) + ")";
  };
  if (why.check == PrologueCheck::kInputCount)
    return "expected " + std::to_string(p.inputs.size()) + " inputs, got " +
           std::to_string(why.got);
  if (why.check == PrologueCheck::kGuard) {
    const PrologueGuard& guard = p.guards[why.guard];
    return "guard " + GuardText(p, exprs, guard) + " does not hold" +
           (scratch ? BindingText(p, exprs, guard.expr, *scratch) : "");
  }
  if (why.check == PrologueCheck::kGuardError) {
    // The guard prefix is evaluated as a whole: name the first guard that reads the failing
    // expression, and the values it was computed from (an overflowing size from an input's values).
    size_t g = 0;
    auto reads_failing = [&](int32_t root) {
      const std::vector<bool> used = ExprsRead(exprs, root);
      return why.expr.node >= 0 && static_cast<size_t>(why.expr.node) < used.size() && used[why.expr.node];
    };
    while (g < p.guards.size() && !reads_failing(p.guards[g].expr)) ++g;
    std::string what;
    if (g < p.guards.size()) {
      what = "guard " + GuardText(p, exprs, p.guards[g]);
    } else {
      size_t b = 0;
      while (b + 1 < p.bounds.size() && !reads_failing(p.bounds[b].expr)) ++b;
      what = b < p.bounds.size() ? "the bound " + PrintExpr(exprs, p.bounds[b].expr, p.symbols) + " of run-time dim " +
                                       p.symbols[static_cast<size_t>(p.bounds[b].symbol)]
                                 : "an expression";
    }
    return what + " could not be evaluated" +
           (scratch ? BindingText(p, exprs, why.expr.node, *scratch) : "") + ": " +
           FormatExprFailure(exprs, p.symbols, why.expr);
  }
  const PrologueInput& in = p.inputs[why.input];
  const std::string head = "input " + Quote(in.name);
  const std::string got = why.value ? ElementText(in.dtype, why.got) : std::to_string(why.got);
  // The dim's or element's check.
  const std::vector<PrologueDim>& checks = why.value ? in.values : in.dims;
  const PrologueDim* check = why.dim >= 0 && static_cast<size_t>(why.dim) < checks.size() ? &checks[why.dim] : nullptr;
  std::string dim_head;
  if (check) {
    dim_head = head + (why.value ? " element " : " dim ") + std::to_string(why.dim);
    if (check->symbol >= 0) dim_head += " (" + p.symbols[check->symbol] + ")";
    dim_head += " = " + got;
  }
  switch (why.check) {
    case PrologueCheck::kNullData: return head + " data pointer is null";
    case PrologueCheck::kMemoryKind:
      return head + " is in " + mem_name(why.got) + " memory, expected " +
             mem_name(static_cast<int64_t>(memory)) + " memory";
    case PrologueCheck::kDType:
      return head + " dtype " + std::string(DTypeName(static_cast<DType>(why.got))) +
             ", expected " + std::string(DTypeName(in.dtype));
    case PrologueCheck::kMisaligned: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%" PRIx64, static_cast<uint64_t>(why.got));
      return head + " data pointer " + buf + " is not aligned to " +
             std::to_string(DTypeSize(in.dtype)) + " bytes (" +
             std::string(DTypeName(in.dtype)) + ")";
    }
    case PrologueCheck::kRank:
      return head + " rank " + got + ", expected " + std::to_string(in.dims.size()) + " (" +
             PrologueShapeText(p, in) + ")";
    case PrologueCheck::kValueMemory:
      return head + " is in " + mem_name(why.got) +
             " memory; the prologue reads its values (shapes or an If condition depend on them), so it must "
             "be in host memory, as TensorRT requires of shape tensors";
    default: break;
  }
  if (!check) return head + ": unknown check";
  switch (why.check) {
    case PrologueCheck::kDim:
      return dim_head + ", expected " + (why.value ? ElementText(in.dtype, check->value) : std::to_string(check->value));
    case PrologueCheck::kSymbolMismatch:
    {
      // "input 'x'" for a dim's symbol, "input 'sr' element 0" for an element's.
      const PrologueInput& binder = p.inputs[why.bound_input];
      const bool by_dim = std::any_of(binder.dims.begin(), binder.dims.end(),
                                      [&](const PrologueDim& c) { return c.symbol == check->symbol; });
      return dim_head + ", but " + (by_dim ? "input " + Quote(binder.name) : BinderText(binder, check->symbol)) +
             " bound " + p.symbols[check->symbol] + " = " + std::to_string(why.bound);
    }
    case PrologueCheck::kSymbolRange:
      // A dim's symbol may be 0 unless the profile's range excludes it.
      if (!why.value && why.got == 0 && check->min >= 1)
        return dim_head + ", expected " + RangeText(*check) + " (the profile excludes an empty tensor; a range from 0 " +
               "admits it: kiln compile --profile '" + in.name + ":" + p.symbols[check->symbol] + "=0..')";
      return dim_head + ", expected " + RangeText(*check);
    case PrologueCheck::kSymbolDivisor:
      return dim_head + ", expected a multiple of " + std::to_string(check->divisor);
    default: break;
  }
  return head + ": unknown check";
}

std::string PrologueText(const Prologue& p, std::span<const Expr> exprs) {
  std::string args, binds;
  for (size_t i = 0; i < p.inputs.size(); ++i) args += (i ? ", " : "") + LocalName(p.inputs[i].name, i);
  for (const std::string& sym : p.symbols) binds += (binds.empty() ? "" : ", ") + sym;
  std::string out = "prologue(" + args + ") -> (" + binds + ")\n";
  out += "  check len(inputs) == " + std::to_string(p.inputs.size()) + "\n";
  std::vector<bool> bound(p.symbols.size(), false);
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const PrologueInput& in = p.inputs[i];
    const std::string x = LocalName(in.name, i);
    out += "  " + x + " = inputs[" + std::to_string(i) + "]  # " + Quote(in.name) + ": " +
           std::string(DTypeName(in.dtype)) + PrologueShapeText(p, in) + "\n";
    out += "  check " + x + ".data != null\n";
    out += "  check " + x + ".memory == host  # CUDA backend: host or device\n";
    out += "  check " + x + ".dtype == " + std::string(DTypeName(in.dtype)) + "\n";
    if (DTypeSize(in.dtype) > 1) out += "  check " + x + ".data % " + std::to_string(DTypeSize(in.dtype)) + " == 0\n";
    out += "  check " + x + ".rank == " + std::to_string(in.dims.size()) + "\n";
    // A dim ("x.shape[1]") or an element ("sr.values[0]") and its check.
    auto check = [&](const PrologueDim& c, const std::string& what, bool element) {
      if (c.symbol < 0) {
        out += "  check " + what + " == " + (element ? ElementText(in.dtype, c.value) : std::to_string(c.value)) + "\n";
        return;
      }
      const std::string& sym = p.symbols[c.symbol];
      if (bound[c.symbol]) {
        out += "  check " + what + " == " + sym + "\n";
        return;
      }
      bound[c.symbol] = true;
      out += "  " + sym + " = " + what + "\n";
      if (c.min != INT64_MIN || c.max != INT64_MAX)
        out += "  check " + sym + (c.max == INT64_MAX || c.min == INT64_MIN ? " " : " in ") + RangeText(c) + "\n";
      if (c.divisor != 1) out += "  check " + sym + " % " + std::to_string(c.divisor) + " == 0\n";
    };
    for (size_t d = 0; d < in.dims.size(); ++d) check(in.dims[d], x + ".shape[" + std::to_string(d) + "]", false);
    if (!in.values.empty()) out += "  check " + x + ".memory == host  # its values are read\n";
    for (size_t e = 0; e < in.values.size(); ++e) check(in.values[e], x + ".values[" + std::to_string(e) + "]", true);
  }
  for (const PrologueGuard& g : p.guards) {
    std::string text = GuardText(p, exprs, g);
    const size_t from = text.find(") from ");  // the compiler's "(condition) from <origin>"
    if (from != std::string::npos) text.replace(from, 7, ")  # from ");
    out += "  check " + text + "\n";
  }
  return out + "  return (" + binds + ")\n";
}

}  // namespace kiln
