#include "runtime/expr_eval.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kiln {
namespace {

Expr C(int64_t v) { return {ExprOp::kConst, v, 0}; }
Expr V(int64_t s) { return {ExprOp::kVar, s, 0}; }
Expr B(ExprOp op, int64_t a, int64_t b) { return {op, a, b}; }

TEST_CASE("EvalExprs computes every op with floor/ceil semantics") {
  // 0 N, 1 M, 2 -7, 3 2, 4 3
  std::vector<Expr> x = {V(0), V(1), C(-7), C(2), C(3)};
  x.push_back(B(ExprOp::kAdd, 0, 1));       // 5: N + M
  x.push_back(B(ExprOp::kSub, 0, 1));       // 6: N - M
  x.push_back(B(ExprOp::kMul, 0, 1));       // 7
  x.push_back(B(ExprOp::kFloorDiv, 2, 3));  // 8: -7 // 2 = -4
  x.push_back(B(ExprOp::kCeilDiv, 2, 3));   // 9: ceil(-7 / 2) = -3
  x.push_back(B(ExprOp::kMod, 2, 4));       // 10: -7 mod 3 = 2
  x.push_back(B(ExprOp::kMax, 0, 1));       // 11
  x.push_back(B(ExprOp::kMin, 0, 1));       // 12
  x.push_back(B(ExprOp::kEq, 0, 0));        // 13
  x.push_back(B(ExprOp::kLt, 0, 1));        // 14
  x.push_back(B(ExprOp::kCeilDiv, 0, 3));   // 15: ceil(7 / 2) = 4
  std::vector<int64_t> syms = {7, 5}, v(x.size());
  ExprFailure why;
  REQUIRE(EvalExprs(x, syms, v.data(), &why));
  CHECK(v[5] == 12);
  CHECK(v[6] == 2);
  CHECK(v[7] == 35);
  CHECK(v[8] == -4);
  CHECK(v[9] == -3);
  CHECK(v[10] == 2);
  CHECK(v[11] == 7);
  CHECK(v[12] == 5);
  CHECK(v[13] == 1);
  CHECK(v[14] == 0);
  CHECK(v[15] == 4);
}

TEST_CASE("EvalExprs reports overflow and names the node") {
  std::vector<Expr> x = {V(0), C(int64_t{1} << 62), B(ExprOp::kMul, 0, 1)};
  std::vector<std::string> names = {"N"};
  std::vector<int64_t> syms = {4}, v(x.size());
  ExprFailure why;
  REQUIRE_FALSE(EvalExprs(x, syms, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kOverflow);
  CHECK(why.node == 2);
  CHECK(FormatExprFailure(x, names, why) ==
        "expr 2 (N * 4611686018427387904): int64 overflow computing 4 * 4611686018427387904");

  std::vector<Expr> add = {C(std::numeric_limits<int64_t>::max()), C(1), B(ExprOp::kAdd, 0, 1)};
  REQUIRE_FALSE(EvalExprs(add, {}, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kOverflow);

  std::vector<Expr> div = {C(std::numeric_limits<int64_t>::min()), C(-1), B(ExprOp::kFloorDiv, 0, 1)};
  REQUIRE_FALSE(EvalExprs(div, {}, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kOverflow);
}

TEST_CASE("EvalExprs reports division by zero and bad operands") {
  std::vector<Expr> x = {V(0), C(0), B(ExprOp::kMod, 0, 1)};
  std::vector<std::string> names = {"T"};
  std::vector<int64_t> syms = {9}, v(3);
  ExprFailure why;
  REQUIRE_FALSE(EvalExprs(x, syms, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kDivisionByZero);
  CHECK(FormatExprFailure(x, names, why) == "expr 2 (T % 0): division by zero (9 by 0)");

  std::vector<Expr> fwd = {B(ExprOp::kAdd, 0, 1), C(1)};
  REQUIRE_FALSE(EvalExprs(fwd, {}, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kBadOperand);
  std::vector<Expr> var = {V(3)};
  REQUIRE_FALSE(EvalExprs(var, syms, v.data(), &why));
  CHECK(why.kind == ExprErrorKind::kBadOperand);
}

TEST_CASE("EvalExprs: FloorMulF32 is floor(a * f) for the float32 whose bits b holds, and fails as it must") {
  // 0 H; 1 0.6f (0x3F19999A), 2 2.0f, 3 -1.5f (0xBFC00000), 4 +inf, 5 2^40 + 2.0f's bits (its low 32 bits
  // are the float), 6 1e30f, 7 NaN
  std::vector<Expr> x = {V(0),          C(0x3F19999A), C(0x40000000), C(0xBFC00000), C(0x7F800000),
                         C((int64_t{1} << 40) + 0x40000000), C(0x7149F2CA), C(0x7FC00000)};
  x.push_back(B(ExprOp::kFloorMulF32, 0, 1));  // 8: floor(5 * 0.6f) = floor(3.0000000447) = 3
  x.push_back(B(ExprOp::kFloorMulF32, 0, 2));  // 9: 10
  x.push_back(B(ExprOp::kFloorMulF32, 0, 3));  // 10: floor(-7.5) = -8
  x.push_back(B(ExprOp::kFloorMulF32, 0, 5));  // 11: 10
  std::vector<std::string> names = {"H"};
  std::vector<int64_t> syms = {5}, v(x.size());
  ExprFailure why;
  REQUIRE(EvalExprs(x, syms, v.data(), &why));
  CHECK(v[8] == 3);
  CHECK(v[9] == 10);
  CHECK(v[10] == -8);
  CHECK(v[11] == 10);
  CHECK(PrintExpr(x, 8, names) == "floor_mul_f32(H, 1058642330)");
  for (size_t bad : {4, 6, 7}) {
    std::vector<Expr> y = {V(0), x[bad], B(ExprOp::kFloorMulF32, 0, 1)};
    REQUIRE_FALSE(EvalExprs(y, syms, v.data(), &why));
    CHECK(why.kind == ExprErrorKind::kOverflow);
    CHECK(FormatExprFailure(y, names, why) == "expr 2 (floor_mul_f32(H, " + std::to_string(x[bad].a) +
                                                  ")): int64 overflow computing 5 floor_mul_f32 " +
                                                  std::to_string(x[bad].a));
  }
}

TEST_CASE("PrintExpr uses symbol names and minimal parentheses") {
  std::vector<Expr> x = {V(0), C(1), C(64), V(1)};
  x.push_back(B(ExprOp::kAdd, 0, 1));        // 4: N + 1
  x.push_back(B(ExprOp::kMul, 4, 2));        // 5: (N + 1) * 64
  x.push_back(B(ExprOp::kSub, 3, 4));        // 6: M - (N + 1)
  x.push_back(B(ExprOp::kMax, 5, 0));        // 7
  x.push_back(B(ExprOp::kCeilDiv, 0, 2));    // 8
  x.push_back(B(ExprOp::kEq, 0, 1));         // 9
  x.push_back(B(ExprOp::kMul, 0, 2));        // 10: N * 64
  x.push_back(B(ExprOp::kAdd, 10, 1));       // 11: N * 64 + 1
  x.push_back(B(ExprOp::kFloorDiv, 0, 10));  // 12: N // (N * 64)
  std::vector<std::string> names = {"N", "M"};
  CHECK(PrintExpr(x, 5, names) == "(N + 1) * 64");
  CHECK(PrintExpr(x, 6, names) == "M - (N + 1)");
  CHECK(PrintExpr(x, 7, names) == "max((N + 1) * 64, N)");
  CHECK(PrintExpr(x, 8, names) == "ceildiv(N, 64)");
  CHECK(PrintExpr(x, 9, names) == "N == 1");
  CHECK(PrintExpr(x, 11, names) == "N * 64 + 1");
  CHECK(PrintExpr(x, 12, names) == "N // (N * 64)");
}

TEST_CASE("PrintExpr stays bounded on deep shared tables") {
  std::vector<Expr> x = {V(0)};
  for (int i = 1; i < 2000; ++i) x.push_back(B(ExprOp::kAdd, i - 1, i - 1));  // 2^2000 leaves
  std::vector<std::string> names = {"N"};
  const std::string s = PrintExpr(x, 1999, names);
  CHECK(s.size() < 5000);
  CHECK(s.find('#') != std::string::npos);
}

}  // namespace
}  // namespace kiln
