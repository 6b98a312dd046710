// Whether the op table (runtime/op_table.h) and the code behind its rows agree. `kiln ops
// --check` prints what this finds and fails, and the build runs it after linking `kiln`, so an
// op added to one place but not the others fails the build.
#pragma once

#include <string>
#include <vector>

namespace kiln::ir {

// One line per disagreement, naming the op and what is missing where; empty when they agree:
//  - a row without a meta function (compiler/ops/registry.h) or a CPU kernel
//    (runtime/kernels/kernel.h);
//  - a meta function or CPU kernel without a row (Kiln's internal "kiln." ops excepted);
//  - a generated kind without its lowering, or a lowering the row does not call for
//    (fusion::LoweringProblems).
std::vector<std::string> OpTableProblems();

}  // namespace kiln::ir
