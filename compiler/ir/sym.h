// Symbolic integers: the dims of a trace's tensors and the sizes and offsets of its memory
// plan. A Sym is a constant, a named symbol ("N", "p2o.DynamicDimension.0"), or an
// arithmetic expression over those. Construction simplifies constant sub-expressions and
// the identities x+0, x*1, x*0, x/1, so a fully static model only ever holds constants.
// It also keeps for each expression the range [lo(), hi()] that it takes on every call an
// entry accepts (a dim's symbol is >= 0 or >= 1, a run-time dim >= 0, a value symbol is unbounded),
// and decides from it the comparisons, Max, Min, floordiv and mod that the range settles:
// exported models compute a dim as `where(seq == -1, 1, seq)` or `max(seq, seq)` in every
// layer, and without this the expression doubles with depth.
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
  kFloorMulF32,                // floor(a * f), f the float32 whose bits b holds (FloorMulF32)
};

class Sym {
 public:
  Sym() : Sym(int64_t{0}) {}
  Sym(int64_t v);  // NOLINT: implicit, so `shape = {1, n, 3}` reads naturally
  // A dim's symbol: at least `lo`, which is 0 where the entry's profile admits an empty tensor
  // (every symbol it does not restrict, compiler/profile.h) or 1. Same name, same symbol.
  static Sym Var(std::string name, int64_t lo = 1);
  // A value symbol: an element of a model input whose values the program depends on
  // (passes/value_inputs.h). Unlike a dim's symbol it may be 0 or negative, so no bound is
  // assumed for it. Same name, same symbol: Same() compares names only.
  static Sym ValueVar(std::string name);
  bool is_value_var() const { return node_->op == SymOp::kVar && node_->value == 1; }
  // A run-time dim: a size known only once a node has run (NonZero's count of nonzero
  // elements), at least 0 and at most its bound (ir::RuntimeDim). Same name, same symbol.
  static Sym RuntimeVar(std::string name);
  bool is_runtime_var() const { return node_->op == SymOp::kVar && node_->value == 2; }
  // A derived symbol: a name that stands for `definition`, an expression over the other
  // symbols, so that a dim computed from it stays small however deep the model is (each layer
  // of an exported decoder broadcasts and reshapes the previous one's dims; written out, the
  // expression would double per layer). It has the definition's range, evaluates and
  // substitutes through it, and Vars() lists the definition's symbols; printing gives the name.
  // The artifact holds the definition in its expression table, evaluated once per call
  // (TorchInductor's shape environment names such expressions the same way).
  static Sym Derived(std::string name, const Sym& definition);
  bool is_derived() const { return node_->op == SymOp::kVar && node_->value == 3; }
  const Sym& definition() const { return *node_->a; }  // is_derived() only
  // Whether the expression reads a value symbol, or a run-time dim (through derived symbols too).
  bool reads_value_var() const { return node_->reads_value_var; }
  bool reads_runtime_var() const { return node_->reads_runtime_var; }

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
  // The least and greatest value on every call an entry accepts; INT64_MIN and INT64_MAX stand
  // for unbounded. A symbol's range is its kind's: a dim's symbol [lo, INT64_MAX] (Var), a
  // run-time dim [0, INT64_MAX], a value symbol unbounded.
  int64_t lo() const { return node_->lo; }
  int64_t hi() const { return node_->hi; }
  // True when a >= b on every call an entry accepts, as far as the ranges and the structure
  // show (a + c with c >= 0, a * c with a >= 0 and c >= 1, max(a, x), ...); false when unknown.
  static bool Dominates(const Sym& a, const Sym& b);

  // Readable form: "N", "(N*3)", "((H+1) floordiv 2)".
  std::string ToString() const;
  // Structural equality after simplification; a derived symbol equals its definition.
  bool Same(const Sym& other) const;
  // Symbol names used, sorted and unique; a derived symbol's are its definition's.
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
  friend Sym FloorMulF32(const Sym& a, const Sym& bits);

 private:
  struct Node {
    SymOp op;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const Sym> a, b;
    int64_t size = 1;  // tree_size()
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    bool reads_value_var = false, reads_runtime_var = false;
  };
  // Eval with each derived symbol's value computed once (a chain of them may read each twice).
  std::optional<int64_t> EvalWith(const std::vector<std::pair<std::string, int64_t>>& bindings,
                                  std::vector<std::pair<const Node*, std::optional<int64_t>>>& derived) const;
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
// floor(a * f) where f is the float32 whose bits `bits` holds, zero-extended (a value symbol
// of a float32 input: passes/value_inputs.h), computed in double as onnxruntime sizes a
// Resize by its scales. `bits`' low 32 bits are the float (as the runtime reads
// them). Evaluation fails (no value) when the product is not finite or does not fit int64. Its range is [0, +inf) when a >= 0 and
// `bits` is known to hold a non-negative finite float ([0, 0x7F7FFFFF]), else unbounded.
Sym FloorMulF32(const Sym& a, const Sym& bits);
// The bits of float32 1.0f, and the largest finite positive float32's.
inline constexpr int64_t kF32One = 0x3F800000, kF32MaxFinite = 0x7F7FFFFF;

using SymShape = std::vector<Sym>;

// `s` with every symbol named in `with` replaced by its Sym there (a derived symbol's definition
// substituted, unless `with` names the derived symbol itself).
Sym Substitute(const Sym& s, const std::vector<std::pair<std::string, Sym>>& with);

// The derived symbols `s` reads, each after the ones its definition reads (the order a
// prologue computes them in), appended to `out` unless already there.
void DerivedSymbols(const Sym& s, std::vector<Sym>& out);

// Product of dims (1 for rank 0).
Sym NumElements(const SymShape& shape);
// "[1, N, 3]".
std::string ShapeToString(const SymShape& shape);
// True if every dim is a constant.
bool IsStatic(const SymShape& shape);
// The constant dims; requires IsStatic.
std::vector<int64_t> StaticDims(const SymShape& shape);

}  // namespace kiln::ir
