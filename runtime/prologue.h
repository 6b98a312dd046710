// The prologue of an entry as plain data (copied out of the FlatBuffer at load), and the
// interpreter that decides whether a call's inputs fit the entry.
//
//   PrologueFailure why;
//   if (!RunPrologue(prologue, exprs, inputs, MemoryKind::kHost, scratch, &why))
//     reason = FormatPrologueFailure(prologue, exprs, why, memory, &scratch);  // failure path only
//
// RunPrologue is the per-call hot path: no allocation, no exceptions, no strings. It
// stops at the first failing check and records it in a small POD; the message is built
// only when the caller asks for it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/tensor.h"
#include "runtime/expr_eval.h"

namespace kiln {

struct PrologueDim {
  int32_t symbol = -1;  // -1: the dim must equal `value`; else index into Prologue::symbols
  int64_t value = 0;
  int64_t min = 1;      // symbol range, inclusive
  int64_t max = INT64_MAX;
  int64_t divisor = 1;  // symbol must be a multiple of this (>= 1)
};

struct PrologueInput {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<PrologueDim> dims;  // rank = size
  // Value symbols: one check per element (row-major) of an int32, int64 or bool (0 or 1) input
  // with constant dims, read from host memory; empty when the prologue reads no element.
  std::vector<PrologueDim> values = {};
};

struct PrologueGuard {
  int32_t expr = 0;  // index into the entry's expr table; must evaluate nonzero
  std::string text;
};

// The largest value of a run-time dim (a symbol an instruction sets, runtime/model_impl.h's
// PreparedRuntimeDim), which the prologue evaluates with the guards.
struct PrologueBound {
  int32_t expr = 0;
  int32_t symbol = 0;
};

struct Prologue {
  std::vector<PrologueInput> inputs;
  std::vector<PrologueGuard> guards;
  std::vector<PrologueBound> bounds;
  std::vector<std::string> symbols;  // the entry's symbol names
  // Guards and bounds read exprs [0, guard_exprs): the prefix evaluated after the input checks.
  int32_t guard_exprs = 0;
};

// Caller-owned buffers RunPrologue writes into, sized once per entry.
struct PrologueScratch {
  std::vector<int64_t> symbol_values;  // symbols.size(); the binding, valid after success
  std::vector<int32_t> bound_by;       // symbols.size(); input that bound each symbol
  std::vector<int64_t> expr_values;    // >= guard_exprs

  void Resize(const Prologue& p) {
    symbol_values.assign(p.symbols.size(), 0);
    bound_by.assign(p.symbols.size(), -1);
    expr_values.assign(static_cast<size_t>(p.guard_exprs), 0);
  }
};

enum class PrologueCheck : uint8_t {
  kInputCount,      // got = inputs given
  kNullData,
  kMemoryKind,      // got = MemoryKind found
  kDType,           // got = dtype found
  kMisaligned,      // got = pointer value
  kRank,            // got = rank found
  kDim,             // constant dim: got = dim found
  kSymbolMismatch,  // got = dim found, bound = value bound by input `bound_input`
  kSymbolRange,     // got = dim found
  kSymbolDivisor,   // got = dim found
  kGuard,           // guard `guard` evaluated to 0
  kGuardError,      // evaluating the guards and bounds failed: see `expr`
  kValueMemory,     // an input whose values the prologue reads is not in host memory: got = kind
};

struct PrologueFailure {
  PrologueCheck check = PrologueCheck::kInputCount;
  int32_t input = -1;
  int32_t dim = -1;     // with `value`: the element index into PrologueInput::values
  bool value = false;   // kDim, kSymbol*: the check of an element's value, not of a dim
  int32_t guard = -1;
  int32_t bound_input = -1;
  int64_t got = 0;
  int64_t bound = 0;
  ExprFailure expr;
};

// The `memory` a CUDA context passes: host or device inputs are both fine (copies are the
// backend's business); an unknown kind still fails.
inline constexpr MemoryKind kAnyMemory = static_cast<MemoryKind>(-1);

// Checks, in order: input count; per input, data pointer non-null, memory kind, dtype,
// pointer aligned to the element size, rank, then each dim (constant: equal; symbol: bound
// at first use, equal at later uses, within [min, max], a multiple of divisor), then for an
// input with value checks its memory (host, whatever `memory` allows: the prologue reads it)
// and each element as a dim is checked; then the guards (the exprs they and the bounds read
// evaluated into scratch.expr_values). On success scratch.symbol_values holds the binding.
bool RunPrologue(const Prologue& prologue, std::span<const Expr> exprs,
                 std::span<const TensorView> inputs, MemoryKind memory, PrologueScratch& scratch,
                 PrologueFailure* why);

// The failed check as a sentence, e.g. "input 'x' dim 2 (H) = 31, expected a multiple of
// 32". Given `scratch` (that of the failed RunPrologue call), a failed guard names the
// symbols it reads as they were bound, and where from: "guard (0 < (H-2)) from node 'c' (Conv), whose
// output 'y' dim 2 must be >= 1 does not hold for H = 2 (input 'x' dim 2)". The caller adds
// the entry ("entry 0 (default): ").
std::string FormatPrologueFailure(const Prologue& prologue, std::span<const Expr> exprs,
                                  const PrologueFailure& why, MemoryKind memory,
                                  const PrologueScratch* scratch = nullptr);

// An input's declared shape, e.g. "[N, 3, H, W]".
std::string PrologueShapeText(const Prologue& prologue, const PrologueInput& input);

// The whole prologue, one check per line, for `kiln inspect`.
std::string PrologueText(const Prologue& prologue, std::span<const Expr> exprs);

}  // namespace kiln
