// --device of `kiln run` and `kiln bench`: the registered backends' names (runtime/backend.h,
// RegisteredBackends: "cuda", "cpu") or "auto", the choices listed in --help from the registry.
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kiln/runtime.h"

namespace kiln::cli {

// Adds --device to `cmd`, storing the name in `device`; `help` follows the choices in --help.
CLI::Option* AddDeviceOption(CLI::App* cmd, std::string& device, std::string_view help);
// The Device a name the option accepted stands for ("auto": Device::kAuto).
Device DeviceNamed(std::string_view name);

}  // namespace kiln::cli
