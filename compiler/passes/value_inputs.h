// Value inputs: the model inputs whose values, not only their shapes, decide the compiled
// program, because they reach an If condition (Silero's `sr`: 16 kHz or 8 kHz). Each element of
// such an input becomes a value symbol: the input Value's `sym` holds a Var per element (named
// after the input: "sr", or "mode_0", "mode_1" for a 1-D one), so shape inference computes with
// it as with a dim, an If on it becomes one entry per outcome, and the entry's prologue binds
// the symbols from the input's values at each call (the input must then be in host memory, as
// TensorRT requires of shape tensors).
//
// Not yet: inputs that reach an op's shape operand (Reshape's shape, Slice's starts, TopK's K).
// Their meta functions take symbolic shape data as dims that are never -1 or 0 and indices that
// are in range, which holds for shapes computed from dims but not for a caller's values, so
// they stay refused ("not known at compile time") until those semantics are decided at run time.
//
// An input qualifies when it is int32, int64 or bool (an If's own condition) with constant dims
// holding 1 to
// kMaxValueElements elements; the search from the If conditions back to the model inputs passes
// through every op but Shape and Size, whose outputs do not depend on their input's values.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"

namespace kiln::passes {

inline constexpr int64_t kMaxValueElements = 64;  // runtime/verify.cc checks the same limit

// Gives each value input of `trace` its value symbols (Value::sym) and returns their names,
// in input order ("sr (input 'sr')"), for the compile log. Inputs that already have `sym` are
// left alone.
std::vector<std::string> MarkValueInputs(ir::Trace& trace);

}  // namespace kiln::passes
