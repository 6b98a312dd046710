#include "compiler/ops/op_table_check.h"

#include <string_view>

#include "compiler/fusion/rules.h"
#include "compiler/ops/registry.h"
#include "runtime/kernels/kernel.h"
#include "runtime/op_table.h"

namespace kiln::ir {
namespace {

bool Internal(std::string_view op) { return op.rfind("kiln.", 0) == 0; }

}  // namespace

std::vector<std::string> OpTableProblems() {
  std::vector<std::string> problems;
  for (const OpInfo& info : AllOpInfo()) {
    const std::string op(info.op);
    if (!FindOp(info.op)) problems.push_back(op + ": a row in the op table but no meta function (compiler/ops/)");
    if (!cpu::FindKernel(info.op)) problems.push_back(op + ": a row in the op table but no CPU kernel (runtime/cpu/)");
  }
  for (const OpDef* def : AllOps())
    if (!Internal(def->name) && !FindOpInfo(def->name))
      problems.push_back(def->name + ": a meta function but no row in the op table (runtime/op_table.cc)");
  for (const cpu::KernelDef& k : cpu::AllKernels())
    if (!Internal(k.op) && !FindOpInfo(k.op))
      problems.push_back(std::string(k.op) + ": a CPU kernel but no row in the op table (runtime/op_table.cc)");
  for (std::string& p : fusion::LoweringProblems()) problems.push_back(std::move(p));
  return problems;
}

}  // namespace kiln::ir
