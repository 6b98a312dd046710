// Subcommands of the `kiln` tool. Each Add*Command registers its options and a callback;
// the callback stores its exit code for ExitCode().
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void AddCompileCommand(CLI::App& app);
void AddRunCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddOpsCommand(CLI::App& app);
int ExitCode();
void SetExitCode(int code);

}  // namespace kiln::cli
