// `kiln-run`: the runtime-only tool (run, bench, inspect), for machines and builds without the
// compiler (KILN_BUILD_COMPILER=OFF: edge boards, the aarch64 build). It links libkiln_runtime
// and no ONNX, protobuf or NVRTC; the full `kiln` tool has the same subcommands and `compile`.
#include <CLI/CLI.hpp>

#include "kiln/version.h"
#include "tools/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln's runtime tool: run, benchmark and inspect .kiln artifacts (compile them with `kiln compile`).",
               "kiln-run"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln-run " KILN_VERSION_STRING);
  kiln::cli::AddRunCommand(app);
  kiln::cli::AddInspectCommand(app);
  kiln::cli::AddCheckCommand(app);
  kiln::cli::AddBenchCommand(app);
#if KILN_WITH_CRYPTO
  kiln::cli::AddSignCommand(app);
#endif
  return kiln::cli::RunMain(app, argc, argv, "kiln-run");
}
