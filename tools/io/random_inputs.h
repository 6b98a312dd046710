// tools/io/random_inputs.h: seeded random inputs for a model, for `kiln bench --random`.
//
//   KILN_ASSIGN_OR_RETURN(auto shapes, kiln::io::ResolveInputShapes(model.inputs(), model.entries(),
//                                                                   {{"x", {1, 3, 224, 224}}}));
//   KILN_ASSIGN_OR_RETURN(auto inputs, kiln::io::RandomInputs(model.inputs(), shapes, /*seed=*/1));
//
// Thread-compatible; no state between calls.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kiln/tensor_files.h"
#include "kiln/runtime.h"

namespace kiln::io {

// Concrete shapes for `inputs` (Model::inputs(), in order). Each dim is, in this order of
// precedence: the number given for it in `given` (a --shape; -1, written '?', leaves it to
// the rules after); the artifact's constant; the value a given shape binds to the same symbol
// ("N" in x:[N,3] given as 2x3 makes N = 2 for y:[N]); the value the entries fix: from the
// first entry (in `entries`' order, the order Run tries them) whose profile fixes every symbol
// still open ("N=1, T=64" in EntryInfo::name), else from the first that fixes the most of
// them; or the first form of a symbol listing the entries' values ("1|4" gives 1). Errors
// (kInvalidArgument): a name in `given` that is no input; a given shape of the wrong rank or
// contradicting a constant dim; a dim none of the rules decides, naming the input, the dim
// and its symbol and saying to pass --shape NAME:DIMS.
Result<std::vector<std::vector<int64_t>>> ResolveInputShapes(std::span<const TensorInfo> inputs,
                                                             std::span<const EntryInfo> entries,
                                                             const std::map<std::string, std::vector<int64_t>>& given);

// One tensor per input with the given shapes, its values drawn from a std::mt19937_64 seeded
// with `seed` (the same seed gives the same values): floating types uniform in [-1, 1); integer
// types uniform in 0..9 (small and non-negative: valid indices and counts for most models);
// bool 0 or 1. Errors: kResourceExhausted when a tensor's size overflows or cannot be allocated;
// kUnimplemented for kUndefined.
Result<std::vector<HostTensor>> RandomInputs(std::span<const TensorInfo> inputs,
                                             std::span<const std::vector<int64_t>> shapes, uint64_t seed);

}  // namespace kiln::io
