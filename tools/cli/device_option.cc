#include "tools/cli/device_option.h"

#include <vector>

#include "runtime/backend.h"

namespace kiln::cli {

CLI::Option* AddDeviceOption(CLI::App* cmd, std::string& device, std::string_view help) {
  std::vector<std::string> names;
  std::string list;
  for (const BackendRegistration& r : RegisteredBackends()) {
    names.emplace_back(r.name);
    list += std::string(r.name) + ", ";
  }
  names.emplace_back("auto");
  return cmd->add_option("--device", device, list + "or auto (default): " + std::string(help))
      ->check(CLI::IsMember(names));
}

Device DeviceNamed(std::string_view name) {
  for (const BackendRegistration& r : RegisteredBackends())
    if (name == r.name) return r.device;
  return Device::kAuto;
}

}  // namespace kiln::cli
