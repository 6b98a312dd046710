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

TEST_CASE("sym: printing and evaluation") {
  Sym h = Sym::Var("H");
  Sym out = FloorDiv(h + Sym(1), Sym(2));
  CHECK(out.ToString() == "((H+1) floordiv 2)");
  CHECK(out.Vars() == std::vector<std::string>{"H"});
  CHECK(out.Eval({{"H", 7}}) == 4);
  CHECK_FALSE(out.Eval({}).has_value());  // unbound symbol
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
