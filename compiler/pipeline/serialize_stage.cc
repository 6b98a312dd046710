// The serialize stage (pipeline.h, serialize/artifact_writer.h): the artifact's bytes. It is
// the last stage, so it records no trace of its own.
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {

Status RunSerialize(StageWork& work, StageOutput&) {
  work.log("serialize");
  KILN_ASSIGN_OR_RETURN(work.bytes, serialize::WriteArtifact(work.artifact));
  return Status::Ok();
}

}  // namespace kiln::compiler
