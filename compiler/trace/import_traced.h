// compiler/trace/import_traced.h: the `import` stage of a traced model (include/kiln/trace.h),
// in the form compiler::CompileImported takes (compile.h, ImportFn).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::trace {

// A copy of the recorded trace with the dims in `input_shapes` fixed (input name -> dims, -1
// keeps a dim as declared), every node's outputs inferred again for them, and no guards (the
// `canonical` stage derives them, as for an imported ONNX model). Errors (kInvalidArgument): a
// name that is no input, a rank that differs from the declaration, a fixed dim that differs
// from a declared size; an op that rejects the fixed shapes, naming the node.
Result<ir::Trace> ImportTraced(const ir::Trace& recorded,
                               const std::map<std::string, std::vector<int64_t>>& input_shapes);

}  // namespace kiln::trace
