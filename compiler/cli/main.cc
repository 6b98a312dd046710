// The `kiln` command line: compile, run, inspect.
#include <CLI/CLI.hpp>

#include "compiler/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln: compile ONNX models ahead of time into .kiln artifacts and run them.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::cli::AddCompileCommand(app);
  kiln::cli::AddRunCommand(app);
  kiln::cli::AddInspectCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return kiln::cli::ExitCode();
}
