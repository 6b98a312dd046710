#include "runtime/expr_eval.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace kiln {
namespace {

bool Operand(int64_t ref, int64_t node, const int64_t* values, int64_t* out) {
  if (ref < 0 || ref >= node) return false;
  *out = values[ref];
  return true;
}

// floor(a / b) for b != 0, excluding INT64_MIN / -1 (checked by the caller).
int64_t FloorDivide(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t CeilDivide(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  return q;
}

}  // namespace

bool EvalExprs(std::span<const Expr> exprs, std::span<const int64_t> symbols, int64_t* values,
               ExprFailure* why) {
  const int64_t n = static_cast<int64_t>(exprs.size());
  for (int64_t i = 0; i < n; ++i) {
    const Expr& e = exprs[i];
    auto fail = [&](ExprErrorKind kind, int64_t l, int64_t r) {
      why->kind = kind;
      why->node = static_cast<int32_t>(i);
      why->lhs = l;
      why->rhs = r;
      return false;
    };
    if (e.op == ExprOp::kConst) {
      values[i] = e.a;
      continue;
    }
    if (e.op == ExprOp::kVar) {
      if (e.a < 0 || e.a >= static_cast<int64_t>(symbols.size()))
        return fail(ExprErrorKind::kBadOperand, e.a, 0);
      values[i] = symbols[e.a];
      continue;
    }
    int64_t l, r, v = 0;
    if (!Operand(e.a, i, values, &l) || !Operand(e.b, i, values, &r))
      return fail(ExprErrorKind::kBadOperand, e.a, e.b);
    bool overflow = false;
    switch (e.op) {
      case ExprOp::kAdd: overflow = __builtin_add_overflow(l, r, &v); break;
      case ExprOp::kSub: overflow = __builtin_sub_overflow(l, r, &v); break;
      case ExprOp::kMul: overflow = __builtin_mul_overflow(l, r, &v); break;
      case ExprOp::kFloorDiv:
      case ExprOp::kCeilDiv:
      case ExprOp::kMod:
        if (r == 0) return fail(ExprErrorKind::kDivisionByZero, l, r);
        if (l == std::numeric_limits<int64_t>::min() && r == -1) {
          if (e.op != ExprOp::kMod) return fail(ExprErrorKind::kOverflow, l, r);
          v = 0;
          break;
        }
        if (e.op == ExprOp::kFloorDiv) v = FloorDivide(l, r);
        else if (e.op == ExprOp::kCeilDiv) v = CeilDivide(l, r);
        else v = l - FloorDivide(l, r) * r;
        break;
      case ExprOp::kMax: v = std::max(l, r); break;
      case ExprOp::kMin: v = std::min(l, r); break;
      case ExprOp::kEq: v = l == r; break;
      case ExprOp::kLt: v = l < r; break;
      case ExprOp::kFloorMulF32: {
        // b's low 32 bits are the float32 (the prologue binds them zero-extended); a product that
        // is not finite or passes int64 is an overflow.
        const double p = std::floor(static_cast<double>(l) * std::bit_cast<float>(static_cast<uint32_t>(r)));
        overflow = !(p >= -0x1p63 && p < 0x1p63);
        if (!overflow) v = static_cast<int64_t>(p);
        break;
      }
      default: return fail(ExprErrorKind::kBadOperand, l, r);
    }
    if (overflow) return fail(ExprErrorKind::kOverflow, l, r);
    values[i] = v;
  }
  return true;
}

namespace {

constexpr int kMaxPrintDepth = 32;
constexpr size_t kMaxPrintChars = 400;

const char* InfixToken(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd: return " + ";
    case ExprOp::kSub: return " - ";
    case ExprOp::kMul: return " * ";
    case ExprOp::kFloorDiv: return " // ";
    case ExprOp::kMod: return " % ";
    case ExprOp::kEq: return " == ";
    case ExprOp::kLt: return " < ";
    default: return nullptr;
  }
}

// Binding strength: higher binds tighter. Function-style and leaf nodes never need parens.
int Precedence(ExprOp op) {
  switch (op) {
    case ExprOp::kEq:
    case ExprOp::kLt: return 1;
    case ExprOp::kAdd:
    case ExprOp::kSub: return 2;
    case ExprOp::kMul:
    case ExprOp::kFloorDiv:
    case ExprOp::kMod: return 3;
    default: return 4;
  }
}

class Printer {
 public:
  Printer(std::span<const Expr> exprs, std::span<const std::string> symbols)
      : exprs_(exprs), symbols_(symbols) {}

  // `min_prec`: parenthesize when this node binds looser. `right`: the right operand of a
  // non-associative operator also needs parens at equal precedence.
  void Print(int64_t index, int depth, int min_prec, bool right) {
    if (index < 0 || index >= static_cast<int64_t>(exprs_.size())) {
      out_ += "#" + std::to_string(index) + "?";
      return;
    }
    if (depth > kMaxPrintDepth || out_.size() > kMaxPrintChars) {
      out_ += "#" + std::to_string(index);
      return;
    }
    const Expr& e = exprs_[index];
    auto child = [&](int64_t ref, int prec, bool r) {
      if (ref < 0 || ref >= index) out_ += "#" + std::to_string(ref) + "?";
      else Print(ref, depth + 1, prec, r);
    };
    switch (e.op) {
      case ExprOp::kConst: out_ += std::to_string(e.a); return;
      case ExprOp::kVar:
        if (e.a >= 0 && e.a < static_cast<int64_t>(symbols_.size())) out_ += symbols_[e.a];
        else out_ += "sym" + std::to_string(e.a) + "?";
        return;
      case ExprOp::kMax:
      case ExprOp::kMin:
      case ExprOp::kCeilDiv:
      case ExprOp::kFloorMulF32:
        out_ += e.op == ExprOp::kMax       ? "max("
                : e.op == ExprOp::kMin     ? "min("
                : e.op == ExprOp::kCeilDiv ? "ceildiv("
                                           : "floor_mul_f32(";
        child(e.a, 0, false);
        out_ += ", ";
        child(e.b, 0, false);
        out_ += ")";
        return;
      default: break;
    }
    const char* token = InfixToken(e.op);
    if (token == nullptr) {
      out_ += "op" + std::to_string(static_cast<int>(e.op)) + "?";
      return;
    }
    const int prec = Precedence(e.op);
    const bool parens = prec < min_prec || (right && prec == min_prec);
    if (parens) out_ += "(";
    child(e.a, prec, false);
    out_ += token;
    child(e.b, prec, e.op != ExprOp::kAdd && e.op != ExprOp::kMul);
    if (parens) out_ += ")";
  }

  std::string Take() { return std::move(out_); }

 private:
  std::span<const Expr> exprs_;
  std::span<const std::string> symbols_;
  std::string out_;
};

}  // namespace

std::string PrintExpr(std::span<const Expr> exprs, int32_t index,
                      std::span<const std::string> symbols) {
  Printer p(exprs, symbols);
  p.Print(index, 0, 0, false);
  return p.Take();
}

std::vector<bool> ExprsRead(std::span<const Expr> exprs, int32_t root) {
  if (root < 0 || static_cast<size_t>(root) >= exprs.size()) return {};
  std::vector<bool> used(static_cast<size_t>(root) + 1, false);
  used[root] = true;
  for (int32_t i = root; i >= 0; --i) {
    const Expr& e = exprs[i];
    if (used[i] && e.op != ExprOp::kVar && e.op != ExprOp::kConst)
      for (int64_t operand : {e.a, e.b})
        if (operand >= 0 && operand < i) used[operand] = true;
  }
  return used;
}

std::string FormatExprFailure(std::span<const Expr> exprs, std::span<const std::string> symbols,
                              const ExprFailure& why) {
  std::string msg = "expr " + std::to_string(why.node) + " (" +
                    PrintExpr(exprs, why.node, symbols) + "): ";
  const std::string l = std::to_string(why.lhs), r = std::to_string(why.rhs);
  switch (why.kind) {
    case ExprErrorKind::kOverflow: {
      const Expr& e = exprs[why.node];
      const char* token = InfixToken(e.op);
      const char* name = e.op == ExprOp::kCeilDiv ? " ceildiv " : token ? token : " floor_mul_f32 ";
      return msg + "int64 overflow computing " + l + name + r;
    }
    case ExprErrorKind::kDivisionByZero: return msg + "division by zero (" + l + " by 0)";
    case ExprErrorKind::kBadOperand: return msg + "operand out of range";
    case ExprErrorKind::kNone: break;
  }
  return msg + "no error";
}

}  // namespace kiln
