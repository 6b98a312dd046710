// The compiler's subcommands of the `kiln` tool (the runtime's are in tools/cli/commands.h).
// Each Add*Command registers its options and a callback; the callback stores its exit status
// with SetExitCode().
#pragma once

#include <CLI/CLI.hpp>

#include "tools/cli/commands.h"

namespace kiln::cli {

void AddCompileCommand(CLI::App& app);
void AddOpsCommand(CLI::App& app);

}  // namespace kiln::cli
