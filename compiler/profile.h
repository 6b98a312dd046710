// Compile profiles: the shape specialisations `kiln compile --profile` asks for. Each profile
// becomes one entry of the artifact (more when a shape-dependent If splits it), compiled for
// the shapes the profile admits: static where it fixes every dim, symbolic elsewhere, with the
// profile's ranges checked by the entry's prologue.
//
//   --profile 'images:N=1'                                   N fixed: a static entry
//   --profile 'images:N=1..64,H=32..1024:32,W=32..1024:32'   ranges; H and W multiples of 32
//   --profile 'images:0=1..64'                               dim 0 by position
//   --profile 'boxes:N=0..100'                               N up to 100; 0 is an empty tensor
//   --profile 'x:N=4;mask:1=4..16'                           constraints on several inputs
//   --profile default                                        the model's own shapes
//   --profile 'sr=16000'                                     input sr holds 16000: a value entry
//   --profile 'axes=[0,2];x:N=1'                             values and dims together
//   --profile 'scales=[1,1,2,2]'                             a float input's values
//
// Grammar: PROFILE := 'default' | GROUP (';' GROUP)*
//          GROUP   := INPUT ':' DIM '=' SPEC (',' DIM '=' SPEC)*      constraints on dims
//                   | INPUT '=' NUM | INPUT '=' '[' NUM (',' NUM)* ']'  an input's values
//   INPUT  a runtime input's name; it may itself contain ':' (the last ':' before the first
//          '=' ends it, as in TensorFlow-style names "input_1:0")
//   DIM    the dim's symbol as the model declares it ("N", "p2o.DynamicDimension.0", or the
//          "<input>_dim<i>" name Kiln gives an unnamed dim), or its position (digits)
//   SPEC   V | LO..HI | LO.. (no upper bound), each optionally ':K' (a multiple of K);
//          values >= 0 (0: an empty tensor), K >= 1
//   NUM    a number as strtod reads it (an integer for an integer or bool input): the input's
//          elements in row-major order. A group without ':' before its '=', or whose value is
//          bracketed, fixes values (so an input named "ids:0" takes 'ids:0=[5]').
// A symbol shared by several inputs is one symbol: constraining it at one input constrains
// every dim bound to it, and two constraints on it must overlap. A symbol no constraint names
// takes any size, 0 included, as onnxruntime's do: a symbolic dim may be empty unless the
// profile's range excludes 0, and the entry is compiled for that (Sym::Var's lo), so an empty
// tensor runs through the same entry, and a call the model's own rules refuse there (a Conv
// whose output would have no rows, a Reshape that cannot infer -1) fails its guard with the
// reason.
//
// Values. An input whose values decide the program (a Reduce's axes, a Resize's sizes, Silero's
// sample rate) can be fixed per entry, as Thunder's cache keys on the values of its scalar
// inputs: the entry is compiled as if `--constant-input` had bound the input, the input stays in
// the model's signature, and the entry's prologue checks each element at every call (a call
// with other values misses that entry, naming the input and the element). Such an input is
// int32, int64, bool (0 or 1), float16, bfloat16, float32 or float64 with at most 64 elements,
// and must be in host memory; a floating-point value is rounded to the input's dtype and
// checked bit for bit (passes::FloatBits).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::compiler {

// The values a dim may take: min <= v <= max and v % divisor == 0. min and max >= 0 (a
// profile's own; a symbol it does not name is >= 0), divisor >= 1.
struct DimRange {
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
  int64_t divisor = 1;

  bool fixed() const { return min == max; }
  bool Contains(int64_t v) const { return v >= min && v <= max && v % divisor == 0; }
  // True when every value of `o` is in this range (both normalised, as ParseProfile makes them).
  bool Includes(const DimRange& o) const {
    return o.min >= min && o.max <= max && (o.fixed() ? o.min % divisor == 0 : o.divisor % divisor == 0);
  }
  // The values in profile syntax: "1", "1..64", "32..1024:32", ">= 8", ">= 8:8".
  std::string Values() const;
  // With a name: "N=1", "N in 1..64", "N in 32..1024:32", "N >= 8", "N >= 8:8".
  std::string Describe(const std::string& name) const;
};

struct DimConstraint {
  std::string input;
  std::string dim;  // symbol name, or a position in decimal digits
  DimRange range;
};

// An input's elements, row-major: 'sr=16000', 'axes=[0,2]', 'scales=[1,1,2,2.5]'; each a
// number as written, read in the input's dtype when the profile is resolved.
struct ValueConstraint {
  std::string input;
  std::vector<std::string> elements;
};

struct Profile {
  std::string text;                     // as the user wrote it
  std::vector<DimConstraint> dims;      // empty (and no values): the model's own shapes ('default')
  std::vector<ValueConstraint> values;  // inputs whose values the entry fixes
};

// Parses one --profile value. Errors: kInvalidArgument saying what was expected and where
// in the text, e.g. "'images:N=64..1': range 64..1 is empty".
Result<Profile> ParseProfile(std::string_view text);

// A profile applied to a model's imported trace.
struct ResolvedProfile {
  std::string name;  // the entry's name: "N=1", "N in 1..64, H in 32..1024:32", or "default"
  // Fixed dims for the importer (onnx_import::ImportOptions::input_shapes): one per input
  // with a fixed symbol, -1 where the dim keeps its declaration.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Symbols that stay symbolic, with the range the prologue checks (>= 0 where the profile
  // says nothing).
  std::map<std::string, DimRange> ranges;
  // Every symbol the inputs declare, with the values this profile admits (min == max where
  // it fixes the symbol; >= 0 where it says nothing).
  std::map<std::string, DimRange> symbols;
  // Inputs whose values this profile fixes (passes::BindInputValues), by name: integers and
  // bools as int64, floating-point elements as the bits of the input's dtype (passes::
  // FloatBits), which the prologue compares bit for bit.
  std::map<std::string, std::vector<int64_t>> values;
  // True when every input shape (and value) `other` admits, this profile admits too. Both must
  // be resolved against the same trace.
  bool Includes(const ResolvedProfile& other) const;
};

// Resolves `profile` against the runtime inputs of `imported` (the model as imported with
// the user's --shape overrides). Errors (kInvalidArgument): an input that is not a runtime
// input (the message lists them), a dim name or position the input does not have (the
// message shows its declared shape), a range that excludes a dim the model fixes,
// constraints on one symbol that do not overlap, and values for an input that is not int32,
// int64, bool, float16, bfloat16, float32 or float64, whose element count differs from the
// values', or that a value does not fit (an integer input given 2.5, an int32 one 2^31).
Result<ResolvedProfile> ResolveProfile(const Profile& profile, const ir::Trace& imported);

// The order in which entries are tried: the given order, except that a profile whose shapes
// all fit inside another's goes before it ('N=1' before 'N in 1..64'), so the specialised
// entry serves the calls it can. Indices into `profiles`.
std::vector<size_t> TryOrder(const std::vector<ResolvedProfile>& profiles);

}  // namespace kiln::compiler
