// Symbolic integers: simplification, printing, evaluation with overflow and division checks.
#include "compiler/ir/sym.h"

#include <doctest/doctest.h>

namespace kiln::ir {

TEST_CASE("sym: constants fold and identities simplify") {
  Sym n = Sym::Var("N");
  CHECK((Sym(2) * Sym(3) + Sym(1)).value() == 7);
  CHECK((n * Sym(1)).Same(n));
  CHECK((n + Sym(0)).Same(n));
  CHECK((n * Sym(0)).value() == 0);
  CHECK((n - n).value() == 0);
  const Sym k = Sym::Var("K");
  CHECK((k + (n - k)).Same(n));  // a length padded back: count + (N - count)
  CHECK(((n - k) + k).Same(n));
  CHECK(((n + k) - k).Same(n));
  CHECK(((k + n) - k).Same(n));
  CHECK((k + (n - Sym(3))).ToString() == "(K+(N-3))");
  CHECK(FloorDiv(n, Sym(1)).Same(n));
  CHECK(Eq(n, n).value() == 1);
  CHECK(FloorDiv(Sym(-7), Sym(2)).value() == -4);
  CHECK(CeilDiv(Sym(7), Sym(2)).value() == 4);
  CHECK(Mod(Sym(-7), Sym(3)).value() == 2);
}

TEST_CASE("sym: ranges decide comparisons, max, min, floordiv and mod") {
  const Sym seq = Sym::Var("seq"), batch = Sym::Var("batch"), n = Sym::RuntimeVar("n"), k = Sym::ValueVar("k");
  CHECK(seq.lo() == 1);
  CHECK(seq.hi() == INT64_MAX);
  CHECK(n.lo() == 0);
  CHECK(k.lo() == INT64_MIN);
  CHECK((seq - Sym(1)).lo() == 0);
  CHECK((Sym(10) - seq).hi() == 9);
  CHECK(Mod(k, seq + Sym(2)).lo() == 0);
  CHECK(Mod(Sym(5), seq).hi() == 5);
  CHECK(CeilDiv(seq, batch).lo() == 1);
  // An exporter's where(seq == -1, 1, seq), as torch.onnx writes a shape for Expand: seq.
  const Sym is_minus_one = Eq(seq, Sym(-1));
  CHECK(is_minus_one.value() == 0);
  CHECK((is_minus_one + (Sym(1) - is_minus_one) * seq).Same(seq));
  CHECK(Lt(n, Sym(0)).value() == 0);
  CHECK(Lt(Sym(0), seq).value() == 1);
  CHECK_FALSE(Lt(Sym(0), n).is_const());
  CHECK_FALSE(Eq(k, Sym(-1)).is_const());  // a value symbol may be anything
  // Max and Min where one side provably dominates: a sum with a non-negative term, a product
  // with a factor >= 1, a Max that holds the other side.
  CHECK(Max(batch * seq, seq).Same(batch * seq));
  CHECK(Max(seq, seq * batch).Same(seq * batch));
  CHECK(Min(seq, seq + Sym(1)).Same(seq));
  CHECK(Max(Max(seq, batch), seq).Same(Max(seq, batch)));
  CHECK(Max(seq - Sym(1), seq).Same(seq));
  CHECK(Max(Sym(0), n).Same(n));
  CHECK_FALSE(Max(seq, batch).is_const());
  CHECK(Max(seq, batch).ToString() == "max(seq, batch)");
  CHECK_FALSE(Max(k * seq, seq).Same(k * seq));  // k may be 0 or negative
  CHECK(Max(k * seq, seq).ToString() == "max((k*seq), seq)");
  CHECK(FloorDiv(Mod(seq, Sym(4)), Sym(4)).value() == 0);
  CHECK(Mod(Mod(seq, Sym(4)), Sym(8)).Same(Mod(seq, Sym(4))));
}

TEST_CASE("sym: printing and evaluation") {
  Sym h = Sym::Var("H");
  Sym out = FloorDiv(h + Sym(1), Sym(2));
  CHECK(out.ToString() == "((H+1) floordiv 2)");
  CHECK(out.Vars() == std::vector<std::string>{"H"});
  CHECK(out.Eval({{"H", 7}}) == 4);
  CHECK_FALSE(out.Eval({}).has_value());  // unbound symbol
}

TEST_CASE("sym: FloorMulF32 folds constants, keeps a range from its operands' and evaluates as the runtime does") {
  const Sym h = Sym::Var("H"), s = Sym::ValueVar("scales_2");
  CHECK(FloorMulF32(Sym(5), Sym(0x3F19999A)).value() == 3);  // floor(5 * 0.6f): 0.6f is 0.60000002
  CHECK(FloorMulF32(h, Sym(kF32One)).Same(h));                // x * 1.0f
  CHECK_FALSE(FloorMulF32(Sym(5), Sym(0x7F800000)).is_const());  // * inf: left to the runtime, which fails
  const Sym out = FloorMulF32(h, s);
  CHECK(out.ToString() == "floor_mul_f32(H, scales_2)");
  CHECK(out.lo() == INT64_MIN);  // the value symbol may hold a negative float's bits
  CHECK(out.Eval({{"H", 7}, {"scales_2", 0x40200000}}) == 17);  // floor(7 * 2.5)
  CHECK_FALSE(out.Eval({{"H", 7}, {"scales_2", -1}}).has_value());
  const Sym positive = Max(Sym(1), Min(s, Sym(kF32MaxFinite)));  // bits in [1, largest finite]
  CHECK(FloorMulF32(h, positive).lo() == 0);
  CHECK(Substitute(out, {{"H", Sym(3)}, {"scales_2", Sym(0x40000000)}}).value() == 6);
}

TEST_CASE("sym: overflow and division by zero are not folded or evaluated") {
  Sym big(INT64_MAX);
  Sym sum = big + Sym(1);
  CHECK_FALSE(sum.is_const());            // stays symbolic, so the runtime reports it
  CHECK_FALSE(sum.Eval({}).has_value());
  Sym d = FloorDiv(Sym(5), Sym::Var("Z"));
  CHECK_FALSE(d.Eval({{"Z", 0}}).has_value());
}

TEST_CASE("sym: tree_size counts shared sub-expressions at every use and saturates") {
  Sym n = Sym::Var("N");
  CHECK(n.tree_size() == 1);
  CHECK(Sym(3).tree_size() == 1);
  CHECK((n + Sym(1)).tree_size() == 3);
  CHECK((n * Sym(1)).tree_size() == 1);  // simplified away
  Sym s = n;
  for (int i = 0; i < 10; ++i) s = s + s;  // shared, but printed 2^10 times
  CHECK(s.tree_size() == 2047);
  for (int i = 0; i < 60; ++i) s = s + s;
  CHECK(s.tree_size() == INT64_MAX);
}

}  // namespace kiln::ir
