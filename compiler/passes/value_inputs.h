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

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

inline constexpr int64_t kMaxValueElements = 64;  // runtime/verify.cc checks the same limit

// The values that `seeds` depend on through values, not only shapes: the seeds themselves, and
// back from each through the node producing it (its inputs, an If's branch outputs), except
// through Shape and Size, whose outputs do not depend on their input's values.
std::set<ir::ValueId> ValuesReaching(const ir::Trace& trace, std::vector<ir::ValueId> seeds);

// True when `v` can be a value input: int32, int64 or bool, not a constant, with constant dims
// holding 1 to kMaxValueElements elements.
bool IsValueInputCandidate(const ir::Value& v);

// The element count of `v`, whose dims are constants, or kMaxValueElements + 1 when it holds
// more (or a dim is symbolic).
int64_t ValueElements(const ir::Value& v);

// Gives each value input of `trace` its value symbols (Value::sym) and returns their names,
// in input order ("sr (input 'sr')"), for the compile log. Inputs that already have `sym` are
// left alone.
std::vector<std::string> MarkValueInputs(ir::Trace& trace);

// Fixes the values of the named inputs for one entry (a profile's 'sr=16000' or 'axes=[0,2]',
// compiler/profile.h): every node (and branch) that read the input reads a constant holding
// `values` instead, so the entry compiles as if --constant-input had bound it, while the input
// keeps its place in the signature with those elements as its constant `sym`, which the entry's
// prologue checks at each call. Call it before MarkValueInputs, which leaves such inputs alone.
// Errors (kInvalidArgument): a name that is no runtime input, an input that is not int32,
// int64 or bool with constant dims, an element count other than the values'.
Status BindInputValues(ir::Trace& trace, const std::map<std::string, std::vector<int64_t>>& values);

}  // namespace kiln::passes
