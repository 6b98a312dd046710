// The `kiln` command line: compile, run, inspect, bench, ops.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "compiler/cli/commands.h"
#include "kiln/version.h"

namespace {

// A command's report is only delivered when stdout takes it: a full disk or a closed pipe
// (`kiln inspect m.kiln > /dev/full`) fails the command instead of exiting 0.
int CheckStdoutWritten(int code) {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (std::cout.good() && flushed) return code;
  // No errno here: it belongs to whichever write failed first, possibly long before.
  std::fprintf(stderr, "kiln: error: writing to standard output failed (disk full or output closed?)\n");
  return code == 0 ? 1 : code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kiln: compile ONNX models ahead of time into .kiln artifacts and run them.", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln " KILN_VERSION_STRING);
  kiln::cli::AddCompileCommand(app);
  kiln::cli::AddRunCommand(app);
  kiln::cli::AddInspectCommand(app);
  kiln::cli::AddBenchCommand(app);
  kiln::cli::AddOpsCommand(app);
  app.footer("Exit status: 0 success, 1 the command failed (the message says why), 2 bad command line.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own codes (105 for a failed validator); one code for usage errors.
    return CheckStdoutWritten(app.exit(e) == 0 ? 0 : 2);
  } catch (const std::bad_alloc&) {
    // Last resort: the commands return Status, but a library may still throw.
    std::fprintf(stderr, "kiln: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: unexpected failure: %s\n", e.what());
    return 1;
  }
  return CheckStdoutWritten(kiln::cli::ExitCode());
}
