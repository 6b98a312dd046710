// Symbolic integer expressions of an entry (schema/kiln.fbs ExprNode), evaluated once the
// prologue has bound the entry's symbols. The table is copied out of the FlatBuffer at load
// into plain Expr nodes; load verification guarantees node i refers only to nodes j < i and
// Var operands index the symbol list, so evaluation is a single forward pass.
//
//   ExprFailure why;
//   if (!EvalExprs(exprs, symbol_values, values, &why)) return ExprError(exprs, symbols, why);
//
// EvalExprs never allocates and never throws; only the error and printing paths build strings.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln {

// Same numbering as kiln::fb::ExprOp.
enum class ExprOp : uint8_t {
  kConst = 0,
  kVar = 1,
  kAdd = 2,
  kSub = 3,
  kMul = 4,
  kFloorDiv = 5,
  kCeilDiv = 6,
  kMod = 7,
  kMax = 8,
  kMin = 9,
  kEq = 10,
  kLt = 11,
  kFloorMulF32 = 12,  // floor(a * f), f the float32 whose bits b's low 32 bits hold
};
inline constexpr int kNumExprOps = 13;

struct Expr {
  ExprOp op = ExprOp::kConst;
  int64_t a = 0;
  int64_t b = 0;
};

enum class ExprErrorKind : uint8_t { kNone, kOverflow, kDivisionByZero, kBadOperand };

// The first node that failed, and its operand values.
struct ExprFailure {
  ExprErrorKind kind = ExprErrorKind::kNone;
  int32_t node = -1;
  int64_t lhs = 0;
  int64_t rhs = 0;
};

// Evaluates every node of `exprs` into values[0..exprs.size()), reading Var nodes from
// `symbols` (symbols.size() bounds the Var index). False on overflow, division by zero or
// an operand out of range, with `why` naming the node. FloorDiv/Mod round toward negative
// infinity (Python semantics); CeilDiv toward positive infinity. FloorMulF32 reads b's low 32 bits
// as the float32, computes in double, and fails as an overflow when the product is not finite or
// does not fit int64.
bool EvalExprs(std::span<const Expr> exprs, std::span<const int64_t> symbols, int64_t* values,
               ExprFailure* why);

// "expr 12 (N * 4096): overflow computing 9223372036854775807 * 4096".
std::string FormatExprFailure(std::span<const Expr> exprs, std::span<const std::string> symbols,
                              const ExprFailure& why);

// The expressions `root` reads, itself included, as flags over exprs[0..root]: operands come
// before their users, so one walk down from `root` finds them. Empty for an invalid root.
std::vector<bool> ExprsRead(std::span<const Expr> exprs, int32_t root);

// Node `index` as readable text with symbol names, e.g. "(N + 1) * 64" or "max(N, 4)".
// Subtrees beyond a depth or length limit print as "#j" (node j) so that a hostile or
// deeply shared table cannot blow up the output.
std::string PrintExpr(std::span<const Expr> exprs, int32_t index,
                      std::span<const std::string> symbols);

}  // namespace kiln
