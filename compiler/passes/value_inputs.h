// Value inputs: the model inputs whose values, not only their shapes, decide the compiled
// program, because they reach an If condition (Silero's `sr`: 16 kHz or 8 kHz) or one of the
// shape operands whose meta functions are exact for any int64 value (IsValueShapeOperand:
// Reshape's shape, with its 0 and -1 decided at each call, Expand's shape, whose 1s keep the
// input's dims, Slice's starts and ends, Pad's pads, Split's sizes, Resize's sizes, TopK's K,
// Tile's repeats, ConstantOfShape's, CenterCropPad's and AffineGrid's sizes, a window's size,
// Range's start, limit and delta (of either sign), Col2Im's image_shape and block_shape,
// MaxUnpool's output_shape, MelWeightMatrix's num_mel_bins and dft_length, STFT's frame_step
// and frame_length, a Loop's trip count, OneHot's depth; and the axes and steps: the reductions',
// Squeeze's and Unsqueeze's axes, Slice's axes and steps, Pad's axes, DFT's axis, over which each
// output dim is an expression, meta::ValueAxesHits). Each element of such an input
// becomes a value symbol (ir::Sym::ValueVar): the input Value's `sym` holds one per element
// (named after the input: "sr", or "mode_0", "mode_1" for a 1-D one), so shape inference
// computes with it as with a dim, an If on it becomes one entry per outcome, every shape
// computed from it is an expression checked by guards where the compiler needs a bound, and
// the entry's prologue binds the symbols from the input's values at each call (the input must
// then be in host memory, as TensorRT requires of shape tensors). Lowerings that need such a
// value as a constant leave the op unfused, to its CPU kernel, which reads the input at each
// call.
//
// Between the input and the operand, the integer ops carry the symbols in their elements
// (meta::Elements): arithmetic, comparisons, Concat, Gather, Slice, Shape of a tensor sized by
// them, ... (an expanded ONNX function computes CenterCropPad's pads as Div(Sub(Max(shape,
// Shape(x)), Shape(x)), 2)). A value symbol's sign is not known until the call, so integer Div
// and Mod put the sign of their result in the expression (ops/meta_elementwise.cc), and a
// Squeeze without axes keeps a dim that reads a value symbol, guarded not to be 1 (the rank
// must be known; a value profile compiles the call where it is 1).
//
// A float32 model input read directly as a float shape operand (IsFloatShapeOperand: a Resize's
// scales, OneHot's depth) is one too: its value symbols hold the elements' bits, which
// ir::FloorMulF32 reads; a float computed inside the model is not tracked.
//
// Not value inputs: values whose sizes need float arithmetic (a float Range's start, limit and
// delta; Resize's sizes with a kept aspect ratio). Their meta functions need the values; a value
// profile (compiler/profile.h) fixes them per entry, or --constant-input binds them. The table
// above lists every meta function that reads elements into a shape:
// compiler/pipeline/canonical_stage.cc checks that no other op computes a shape from a value
// symbol.
//
// An input qualifies when it is int32, int64 or bool (an If's own condition) with constant dims
// holding 1 to kMaxValueElements elements; the search from the If conditions and the shape
// operands back to the model inputs passes through every op but Shape and Size, whose outputs
// do not depend on their input's values.
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

// True when input `input` of `op` is a shape operand read as value symbols (above).
bool IsValueShapeOperand(const std::string& op, int input);
// True when `op` has such an operand, or a float one (IsFloatShapeOperand): its output shapes
// may hold value symbols.
bool HasValueShapeOperand(const std::string& op);
// True when input `input` of `op` is a float shape operand: a Resize's scales, OneHot's depth.
// A float32 model input read there directly becomes value symbols of its elements' bits
// (meta::Float32Bits), and the sizes computed from it are FloorMulF32 expressions.
bool IsFloatShapeOperand(const std::string& op, int input);

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

// True when a value profile can fix the values of an input of `dtype`: int32, int64 and bool
// (whose elements can also be value symbols), and float16, bfloat16, float32 and float64, whose
// elements the prologue compares bit for bit (FloatBits).
bool CanFixValues(DType dtype);
// The bits of `value` rounded to the floating-point `dtype` (to nearest, ties to even), as the
// prologue reads an element of that dtype: zero-extended to int64 (float64: its bit pattern).
int64_t FloatBits(DType dtype, double value);
// The value those bits hold.
double FloatFromBits(DType dtype, int64_t bits);

// Fixes the values of the named inputs for one entry (a profile's 'sr=16000', 'axes=[0,2]' or
// 'scales=[1,1,2,2]', compiler/profile.h): every node (and branch) that read the input reads a
// constant holding `values` (floating-point elements as FloatBits) instead, so the entry
// compiles as if --constant-input had bound it, while the input keeps its place in the
// signature with those elements as its constant `sym`, which the entry's prologue checks at
// each call. Call it before MarkValueInputs, which leaves such inputs alone. Errors
// (kInvalidArgument): a name that is no runtime input, an input that CanFixValues refuses or
// whose dims are not constants, an element count other than the values'.
Status BindInputValues(ir::Trace& trace, const std::map<std::string, std::vector<int64_t>>& values);

}  // namespace kiln::passes
