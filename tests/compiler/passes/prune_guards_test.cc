#include "compiler/passes/prune_guards.h"

#include <doctest/doctest.h>

namespace kiln::passes {
namespace {

using compiler::DimRange;
using ir::Sym;

const Sym H = Sym::Var("H"), W = Sym::Var("W");

// Runs PruneGuards on one guard: "dropped", "kept", or the error message.
std::string Prune(const Sym& condition, const std::map<std::string, DimRange>& ranges) {
  ir::Trace t;
  t.guards = {{condition, "node 'n' (Op)"}};
  std::vector<std::string> log;
  Status st = PruneGuards(t, ranges, &log);
  if (!st.ok()) return std::string(st.message());
  CHECK(log.size() == 1 - t.guards.size());
  return t.guards.empty() ? "dropped" : "kept";
}

}  // namespace

TEST_CASE("guards the symbol ranges imply are dropped, by intervals or by enumeration") {
  // Conv and pool extents: monotone, decided by intervals even without an upper bound.
  CHECK(Prune(ir::Lt(0, ir::FloorDiv(H + 1, 2)), {}) == "dropped");                      // H >= 1
  CHECK(Prune(ir::Lt(0, ir::CeilDiv(H - 2, 3)), {{"H", {3, 100, 1}}}) == "dropped");
  CHECK(Prune(ir::Lt(0, ir::CeilDiv(H - 2, 3)), {}) == "kept");                          // H = 1, 2 fail
  CHECK(Prune(ir::Lt(0, ir::Min(H, W) * 2 - 1), {}) == "dropped");
  CHECK(Prune(ir::Lt(0, ir::Max(H - 5, W - 5)), {{"W", {8, 8, 1}}}) == "dropped");
  // Equalities that hold for the multiples of a step: decided by trying each binding.
  const Sym halved_twice = ir::FloorDiv(ir::FloorDiv(H + 1, 2) + 1, 2);
  CHECK(Prune(ir::Eq(halved_twice * 4, H), {{"H", {32, 1024, 32}}}) == "dropped");
  CHECK(Prune(ir::Eq(halved_twice * 4, H), {{"H", {1, 64, 1}}}) == "kept");
  CHECK(Prune(ir::Eq(halved_twice * 4, H), {}) == "kept");                               // unbounded
  CHECK(Prune(ir::Eq(H, W), {{"H", {1, 100, 1}}, {"W", {1, 100, 1}}}) == "kept");
  // At most kMaxEnumerated bindings are tried; beyond that a guard is kept and checked per call.
  CHECK(Prune(ir::Eq(ir::Mod(H, 7), 0), {{"H", {7, 7 * 4000, 7}}}) == "dropped");  // 4000 bindings
  CHECK(Prune(ir::Eq(ir::Mod(H, 7), 0), {{"H", {7, 7 * 10000, 1}}}) == "kept");
  // A division by zero at some binding: the prologue must still report it.
  CHECK(Prune(ir::Lt(0, ir::FloorDiv(Sym(10), H - 5) + 100), {{"H", {1, 8, 1}}}) == "kept");
  // A value symbol (an element of an input) may be any int64, a run-time dim (NonZero's
  // count) 0: neither is assumed >= 1 as a dim's symbol is.
  CHECK(Prune(ir::Lt(0, Sym::ValueVar("k")), {}) == "kept");
  CHECK(Prune(ir::Lt(0, Sym::RuntimeVar("n")), {}) == "kept");
  CHECK(Prune(ir::Lt(0, Sym::RuntimeVar("n") + 1), {}) == "dropped");
  CHECK(Prune(ir::Lt(0, Sym::ValueVar("k")), {{"k", {1, 8, 1}}}) == "dropped");  // a profile's range
}

TEST_CASE("a guard no binding in the ranges passes is an error naming it") {
  CHECK(Prune(ir::Lt(0, H - 2), {{"H", {1, 2, 1}}}) ==
        "no input shape in the ranges can run this entry: node 'n' (Op) needs (0 < (H-2)), which fails for every H in 1..2");
  CHECK(Prune(ir::Eq(ir::Mod(H, 2), 1), {{"H", {2, 64, 2}}}) ==
        "no input shape in the ranges can run this entry: node 'n' (Op) needs ((H mod 2) == 1), which fails for every H in 2..64:2");
  // A run-time dim is >= 0, so n < 0 is 0 as soon as it is built.
  CHECK(ir::Lt(Sym::RuntimeVar("n"), 0).ToString() == "0");
  CHECK(Prune(ir::Lt(Sym::RuntimeVar("n"), 0), {}) ==
        "no input shape can run this entry: node 'n' (Op) needs a condition that fails for every input shape (a "
        "dim's symbol is >= 1, a run-time dim >= 0)");
}

}  // namespace kiln::passes
