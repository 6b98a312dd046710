// The executors stage of one entry (pipeline.h, passes/executors.h): every op's backend and
// library, and why.
#include "compiler/passes/executors.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {

Status RunExecutors(StageWork& work, StageOutput& out) {
  EntryWork& e = *work.entry;
  KILN_ASSIGN_OR_RETURN(e.trace, passes::AssignExecutors(e.trace));
  out.print = [&e] { return e.trace.Print(); };
  out.ops = static_cast<int>(e.trace.body.nodes.size());
  return Status::Ok();
}

}  // namespace kiln::compiler
