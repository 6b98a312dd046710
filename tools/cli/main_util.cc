// The exit status and main loop shared by `kiln` and `kiln-run` (tools/cli/commands.h).
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "tools/cli/commands.h"

namespace kiln::cli {
namespace {

int exit_code = 0;

// A command's report is only delivered when stdout takes it: a full disk or a closed pipe
// (`kiln inspect m.kiln > /dev/full`) fails the command instead of exiting 0.
int CheckStdoutWritten(int code, const char* tool) {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (std::cout.good() && flushed) return code;
  // No errno here: it belongs to whichever write failed first, possibly long before.
  std::fprintf(stderr, "%s: error: writing to standard output failed (disk full or output closed?)\n", tool);
  return code == 0 ? 1 : code;
}

}  // namespace

int ExitCode() { return exit_code; }
void SetExitCode(int code) { exit_code = code; }

int RunMain(CLI::App& app, int argc, char** argv, const char* tool) {
  app.footer("Exit status: 0 success, 1 the command failed (the message says why), 2 bad command line.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own codes (105 for a failed validator); one code for usage errors.
    return CheckStdoutWritten(app.exit(e) == 0 ? 0 : 2, tool);
  } catch (const std::bad_alloc&) {
    // Last resort: the commands return Status, but a library may still throw.
    std::fprintf(stderr, "%s: error: out of memory\n", tool);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: unexpected failure: %s\n", tool, e.what());
    return 1;
  }
  return CheckStdoutWritten(ExitCode(), tool);
}

}  // namespace kiln::cli
