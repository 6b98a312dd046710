// The `kiln` command line: compile, run, inspect, bench, ops. run, inspect and bench are the
// runtime tools (tools/cli/), which `kiln-run` also has.
#include <CLI/CLI.hpp>

#include "compiler/cli/commands.h"
#include "kiln/version.h"
#include "tools/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln: compile ONNX models ahead of time into .kiln artifacts and run them.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln " KILN_VERSION_STRING);
  kiln::cli::AddCompileCommand(app);
  kiln::cli::AddRunCommand(app);
  kiln::cli::AddInspectCommand(app);
  kiln::cli::AddCheckCommand(app);
  kiln::cli::AddBenchCommand(app);
#if KILN_WITH_CRYPTO
  kiln::cli::AddSignCommand(app);
#endif
  kiln::cli::AddOpsCommand(app);
  return kiln::cli::RunMain(app, argc, argv, "kiln");
}
