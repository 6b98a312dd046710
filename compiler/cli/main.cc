// The `kiln` command line: compile, run, inspect, bench.
#include <CLI/CLI.hpp>

#include "compiler/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln: compile ONNX models ahead of time into .kiln artifacts and run them.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::cli::AddCompileCommand(app);
  kiln::cli::AddRunCommand(app);
  kiln::cli::AddInspectCommand(app);
  kiln::cli::AddBenchCommand(app);
  app.footer("Exit status: 0 success, 1 the command failed (the message says why), 2 bad command line.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own codes (105 for a failed validator); one code for usage errors.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return kiln::cli::ExitCode();
}
