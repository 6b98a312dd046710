// tools/cli/commands.h: the runtime-side subcommands (run, bench, inspect, check, sign), shared by
// the full `kiln` tool and the runtime-only `kiln-run`. Each Add*Command registers its options and a
// callback on `app`; the callback stores its exit status for ExitCode(). They link the runtime
// and small libraries only (fmt, CLI11, nlohmann/json, OpenSSL's libcrypto): never the compiler, ONNX or protobuf.
// Not thread-safe: one command line per process.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void AddRunCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddCheckCommand(CLI::App& app);
void AddSignCommand(CLI::App& app);  // only where KILN_WITH_CRYPTO: it links libcrypto

// The exit status the chosen subcommand's callback stored (0 when none ran).
int ExitCode();
void SetExitCode(int code);

// Parses the command line, runs the chosen subcommand and returns the process exit status:
// 0 success, 1 the command failed (it printed why), 2 a bad command line. Exceptions a library
// still throws become status 1 with a message; a report that standard output did not take
// (disk full, closed pipe) turns success into 1. `tool` names the program in messages.
int RunMain(CLI::App& app, int argc, char** argv, const char* tool);

}  // namespace kiln::cli
