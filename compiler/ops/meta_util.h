// Helpers shared by the meta functions (compiler/ops/meta_*.cc): reading the elements of
// small integer tensors as Syms, broadcasting symbolic shapes, axis normalisation, dtype
// checks and a little symbolic arithmetic that keeps shape expressions short.
//
// Conventions used by every meta function:
//  - A named symbol (a dim of a model input) is a dim, so it is >= 0 at run time.
//  - Where two dims must be equal and are not provably so (two different symbols, or a
//    symbol against a constant), the meta function assumes they are equal and records
//    the assumption as a guard of the trace (`Eq(a, b)`), which the prologue checks.
//    Two different constants are an InvalidArgument.
//  - Messages say what was expected and what was found; the caller (InferNode) prefixes
//    "node 'NAME' (OP): ".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/sym.h"
#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"
#include "kiln/status.h"

namespace kiln::ir::meta {

// Elements are tracked (as `Value::sym`) only for tensors with at most this many.
inline constexpr int64_t kMaxSymElements = 1024;

// ---- element access --------------------------------------------------------------------
// The elements of `v` as Syms: `v.sym` if set (on an integer or bool tensor), else the constant
// data of an integer or bool tensor with at most kMaxSymElements elements; nullopt otherwise.
std::optional<std::vector<Sym>> Elements(const Value& v);
// The elements of a float32 value input (passes/value_inputs.h) as Syms of their bits,
// zero-extended (a value symbol each, or a constant; FloorMulF32 reads them); nullopt for any
// other value.
std::optional<std::vector<Sym>> Float32Bits(const Value& v);
// Same, only when every element is a constant.
std::optional<std::vector<int64_t>> ConstInts(const Value& v);
// Constant data of a float (or integer) tensor as doubles (at most kMaxSymElements).
std::optional<std::vector<double>> FloatElements(const Value& v);
// The static element count of `v`, or nullopt when its shape is symbolic.
std::optional<int64_t> StaticCount(const Value& v);
// Sets output i's sym elements (ignored when the output is absent or when `elems` is
// longer than kMaxSymElements).
void SetSym(MetaContext& ctx, int i, std::vector<Sym> elems);

// ---- dtypes ------------------------------------------------------------------------------
bool IsFloat(DType t);    // float16/32/64, bfloat16
bool IsInteger(DType t);  // signed and unsigned integers (not bool)
bool IsSignedInt(DType t);
bool IsNumeric(DType t);  // IsFloat || IsInteger
std::string DTypeStr(DType t);

enum DTypeSet : unsigned {
  kFloats = 1u << 0,
  kSignedInts = 1u << 1,
  kUnsignedInts = 1u << 2,
  kBools = 1u << 3,
  kInts = kSignedInts | kUnsignedInts,
  kNumeric = kFloats | kInts,
  kAll = kNumeric | kBools,
};
bool InSet(DType t, unsigned set);
// InvalidArgument("input NAME: expected dtype in {...}, found int64") when not in `set`.
Status CheckDType(const Value& v, std::string_view what, unsigned set);
// InvalidArgument when a and b differ ("inputs A and B: expected the same dtype, ...").
Status CheckSameDType(const Value& a, std::string_view an, const Value& b, std::string_view bn);

// ---- inputs and attributes ----------------------------------------------------------------
// Input i, or InvalidArgument("missing required input i (NAME)").
Result<const Value*> Need(MetaContext& ctx, int i, std::string_view what);
// Input i when present and not an empty (zero-element) placeholder.
const Value* Optional(MetaContext& ctx, int i);
// InvalidArgument unless the rank is in [lo, hi].
Status CheckRank(const Value& v, std::string_view what, int lo, int hi);
// Normalises axis into [0, rank); InvalidArgument when outside [-rank, rank).
Result<int> NormAxis(int64_t axis, int rank, std::string_view what = "axis");
// Normalises and checks a list of axes (no duplicates).
Result<std::vector<int>> NormAxes(const std::vector<int64_t>& axes, int rank,
                                  std::string_view what = "axes");
// The elements of a parameter input (axes, pads, repeats, ...) that must be constant:
// Unimplemented("data-dependent output shape: ...") when they are not known.
Result<std::vector<int64_t>> NeedConstInts(const Value& v, std::string_view what);
// Same, but symbolic elements are allowed.
Result<std::vector<Sym>> NeedElements(const Value& v, std::string_view what);
// Attribute values of an int list, defaulting to `n` copies of `def` when absent;
// InvalidArgument when present with a length other than n.
Result<std::vector<int64_t>> IntsAttr(const AttrMap& attrs, std::string_view name, size_t n,
                                      int64_t def);

// ---- symbolic dims ----------------------------------------------------------------------
// x + c, folding into an existing constant offset: AddC(H - 1, 2) is H + 1.
Sym AddC(const Sym& x, int64_t c);
// a - b, cancelling a common base: SubS(H + 3, H - 1) is 4.
Sym SubS(const Sym& a, const Sym& b);
// a + b with constant offsets merged.
Sym AddS(const Sym& a, const Sym& b);
// True when `s` involves a value symbol (ir::Sym::ValueVar), so its sign is not known.
bool HasValueVar(const Sym& s);
// True when `s` reads a run-time dim (Sym::RuntimeVar).
bool HasRuntimeVar(const Sym& s);
// The index a Slice bound `k` stands for on a dim of length `d` (a start, or an end when
// `is_end`), clamped as ONNX Slice-13 specifies: a negative k counts from the end; then with
// step > 0 it is clamped to [0, d], with step < 0 a start to [0, d - 1] and an end to
// [-1, d - 1]. Symbolic d gives exact Min/Max expressions (never an in-range assumption),
// except that a constant |k| >= INT32_MAX means "past the end" (exporters write INT64_MAX,
// INT32_MAX). A symbolic k of unknown sign (a value symbol) picks its form at run time:
// (k < 0) * clamp(d + k) + (k >= 0) * clamp(k).
Result<Sym> SliceBound(const Sym& d, const Sym& k, int64_t step, bool is_end);
// a / b for a product a that b divides: cancels common factors; FloorDiv otherwise.
// Sets *exact to false when the cancellation was not complete.
Sym DivExact(const Sym& a, const Sym& b, bool* exact = nullptr);
// Requires a == b: OK when Same(); InvalidArgument(`what`: expected A, found B) when both
// are constants and differ; otherwise records the guard Eq(a, b) on the trace.
Status Unify(MetaContext& ctx, const Sym& expected, const Sym& found, std::string_view what);
// Requires `holds` (1 where a condition holds, 0 where not) on every call: InvalidArgument(`error`)
// when it is the constant 0, a guard (AddGuard, with `why`) when it is symbolic (a value symbol's).
Status Require(MetaContext& ctx, const Sym& holds, std::string_view error, std::string_view why);
// Records a guard (an expression that must be nonzero at run time), once. Its origin names the
// node, then `why` when given ("whose output 'y' dim 2 must be >= 1").
void AddGuard(MetaContext& ctx, const Sym& g, std::string_view why = {});

// True when every element of `v` is a constant; ConstValues then gives them.
bool AllConst(const std::vector<Sym>& v);
std::vector<int64_t> ConstValues(const std::vector<Sym>& v);

// Axes that arrive with each call (value symbols, passes/value_inputs.h: an axes input the model
// does not fix) over dims 0..rank-1: for each dim i, how many of `axes` name it (a == i or
// a == i - rank), 0 or 1 under the guards this adds (each axis in [-rank, rank - 1], no dim
// named twice, as ONNX requires of a Reduce's, Squeeze's, Unsqueeze's, Slice's and Pad's axes).
std::vector<Sym> ValueAxesHits(MetaContext& ctx, const std::vector<Sym>& axes, int64_t rank);
// Whether axis `a` names dim i of rank `rank`: Eq(a, i) + Eq(a, i - rank).
Sym NamesDim(const Sym& a, int64_t i, int64_t rank);
// The `count` dims of `shape` that `hits` (ValueAxesHits) does not name, in order.
SymShape DimsNotHit(const SymShape& shape, const std::vector<Sym>& hits, int64_t count);

// A run-time dim of the node's output `output` (ir::RuntimeDim): a Sym::RuntimeVar named after
// that output ("idx.count"), at most `bound`, recorded in the trace once. Run-time dims in
// `bound` are replaced by their own bounds, so it reads only input symbols.
Sym NewRuntimeDim(MetaContext& ctx, int output, const Sym& bound, std::string_view what);
// A run-time dim that nothing bounds ahead of time (a while loop's iterations): its bound is
// a room symbol, a Sym::Var named after the output ("y.rows") that no input binds and the
// runtime sets, `initial_room` (>= 1) at first and doubled when a call needs more.
Sym NewGrowingRuntimeDim(MetaContext& ctx, int output, int64_t initial_room, std::string_view what);

// How Broadcast treats two dims that differ symbolically.
enum class BroadcastDims {
  kAssumeEqual,  // guard Eq(a, b): the op's kernels and libraries need equal dims
  // Decided at each call, for ops whose kernels broadcast from the run-time shapes (the CPU
  // kernels' strides, generated kernels' coordinates, fusion/lower.cc): either dim may be 1.
  kAtRunTime,
};

// Multidirectional (numpy) broadcast of two shapes. Dims: Same -> that dim; a constant 1
// broadcasts; two different constants other than 1 are an InvalidArgument naming both
// shapes. Otherwise, with kAssumeEqual: a symbol against a constant other than 1 gives the
// constant (guard Eq(sym, c)), two different symbols give the first (guard Eq(a, b)). With
// kAtRunTime (a tensor dim is >= 1, or >= 0 where it is provably >= 0 and may be 0: a Slice
// length, a run-time dim; for every call an entry accepts): the constant, else Max(a, b)
// (times min(a, b, 1) where one may be 0), with the guard that one of them is 1 or both are
// equal.
Result<SymShape> Broadcast(MetaContext& ctx, const SymShape& a, const SymShape& b,
                           BroadcastDims mode = BroadcastDims::kAssumeEqual);
// Broadcasts the elements of `v` (static shape `from`) to the static shape `to`.
std::vector<Sym> BroadcastElements(const std::vector<Sym>& v, const std::vector<int64_t>& from,
                                   const std::vector<int64_t>& to);

// Sliding-window attributes shared by Conv, ConvTranspose, MaxPool and AveragePool.
struct Window {
  int n = 0;  // spatial rank
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: n begins then n ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};
// Reads and validates strides, dilations (when `has_dilations`), pads, auto_pad and
// ceil_mode for the given (already validated) kernel shape.
Result<Window> ReadWindow(const AttrMap& attrs, const std::vector<int64_t>& kernel,
                          bool has_dilations);
// The output spatial dims of a window op over `in` (the input's spatial dims):
// NOTSET: floor-or-ceil((in + pb + pe - dil*(k-1) - 1) / s) + 1 (with ceil_mode, a last
// window that starts in the end padding is dropped, as PyTorch and onnxruntime do);
// VALID: the same with zero pads; SAME_UPPER/SAME_LOWER: ceil(in / s). Each must be at least
// 1, as for onnxruntime's Conv: a constant one below is an InvalidArgument, a symbolic one gets
// a guard (a window op's extent is never 0 by clamping, as a Slice's length may be).
Result<SymShape> WindowOutput(MetaContext& ctx, const SymShape& in, const Window& w);

std::string Str(const SymShape& s);
// Registers `name` with its meta function.
inline void Def(std::vector<OpDef>& ops, std::string name, MetaFn fn) {
  ops.push_back(OpDef{std::move(name), std::move(fn)});
}
// InvalidArgument when the node has more outputs than the op defines.
Status CheckMaxOutputs(MetaContext& ctx, int max);

std::string Str(const std::vector<int64_t>& v);
// A floating-point value as the shortest text that reads back to it ("2.5", "1e-05", "inf"),
// for messages; never std::to_string's fixed six decimals.
std::string FloatStr(double v);

}  // namespace kiln::ir::meta
