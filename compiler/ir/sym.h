// Symbolic integers: the dims of a trace's tensors and the sizes and offsets of its memory
// plan. A Sym is a constant, a named symbol ("N", "p2o.DynamicDimension.0"), or an
// arithmetic expression over those. Construction simplifies constant sub-expressions and
// the identities x+0, x*1, x*0, x/1, so a fully static model only ever holds constants.
// Sym is an immutable value type (shared nodes); thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

enum class SymOp : uint8_t {
  kConst, kVar,
  kAdd, kSub, kMul,
  kFloorDiv, kCeilDiv, kMod,   // divisor must be positive at run time
  kMax, kMin,
  kEq, kLt,                    // 1 if true else 0
};

class Sym {
 public:
  Sym() : Sym(int64_t{0}) {}
  Sym(int64_t v);  // NOLINT: implicit, so `shape = {1, n, 3}` reads naturally
  static Sym Var(std::string name);
  // A value symbol: an element of a model input whose values the program depends on
  // (passes/value_inputs.h). Unlike a dim's symbol it may be 0 or negative, so no bound is
  // assumed for it. Same name, same symbol: Same() compares names only.
  static Sym ValueVar(std::string name);
  bool is_value_var() const { return node_->op == SymOp::kVar && node_->value == 1; }
  // A run-time dim: a size known only once a node has run (NonZero's count of nonzero
  // elements), at least 0 and at most its bound (ir::RuntimeDim). Same name, same symbol.
  static Sym RuntimeVar(std::string name);
  bool is_runtime_var() const { return node_->op == SymOp::kVar && node_->value == 2; }

  SymOp op() const { return node_->op; }
  bool is_const() const { return node_->op == SymOp::kConst; }
  // The constant, or nullopt.
  std::optional<int64_t> value() const {
    return is_const() ? std::optional<int64_t>(node_->value) : std::nullopt;
  }
  const std::string& name() const { return node_->name; }  // kVar only
  const Sym& lhs() const { return *node_->a; }
  const Sym& rhs() const { return *node_->b; }
  // Nodes of the expression written out as a tree (shared sub-expressions counted at every
  // use), saturating at INT64_MAX: what printing, comparing or walking it costs. Repeated
  // doubling (s = s + s) makes it exponential in the number of ops, so callers bound it.
  int64_t tree_size() const { return node_->size; }

  // Readable form: "N", "(N*3)", "((H+1) floordiv 2)".
  std::string ToString() const;
  // Structural equality after simplification.
  bool Same(const Sym& other) const;
  // Symbol names used, sorted and unique.
  std::vector<std::string> Vars() const;
  // Evaluates with values for the named symbols; nullopt if a symbol is missing, a
  // division by zero happens or the result overflows int64.
  std::optional<int64_t> Eval(const std::vector<std::pair<std::string, int64_t>>& bindings) const;

  friend Sym operator+(const Sym& a, const Sym& b);
  friend Sym operator-(const Sym& a, const Sym& b);
  friend Sym operator*(const Sym& a, const Sym& b);
  friend Sym FloorDiv(const Sym& a, const Sym& b);
  friend Sym CeilDiv(const Sym& a, const Sym& b);
  friend Sym Mod(const Sym& a, const Sym& b);
  friend Sym Max(const Sym& a, const Sym& b);
  friend Sym Min(const Sym& a, const Sym& b);
  friend Sym Eq(const Sym& a, const Sym& b);
  friend Sym Lt(const Sym& a, const Sym& b);

 private:
  struct Node {
    SymOp op;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const Sym> a, b;
    int64_t size = 1;  // tree_size()
  };
  static Sym Make(SymOp op, const Sym& a, const Sym& b);
  explicit Sym(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  std::shared_ptr<const Node> node_;
};

Sym operator+(const Sym& a, const Sym& b);
Sym operator-(const Sym& a, const Sym& b);
Sym operator*(const Sym& a, const Sym& b);
Sym FloorDiv(const Sym& a, const Sym& b);
Sym CeilDiv(const Sym& a, const Sym& b);
Sym Mod(const Sym& a, const Sym& b);
Sym Max(const Sym& a, const Sym& b);
Sym Min(const Sym& a, const Sym& b);
Sym Eq(const Sym& a, const Sym& b);
Sym Lt(const Sym& a, const Sym& b);

using SymShape = std::vector<Sym>;

// `s` with every symbol named in `with` replaced by its Sym there.
Sym Substitute(const Sym& s, const std::vector<std::pair<std::string, Sym>>& with);

// Product of dims (1 for rank 0).
Sym NumElements(const SymShape& shape);
// "[1, N, 3]".
std::string ShapeToString(const SymShape& shape);
// True if every dim is a constant.
bool IsStatic(const SymShape& shape);
// The constant dims; requires IsStatic.
std::vector<int64_t> StaticDims(const SymShape& shape);

}  // namespace kiln::ir
