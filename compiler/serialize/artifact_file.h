// Writing a .kiln file so that programs which have the previous artifact at that path
// mapped keep working: the bytes go to a sibling temporary file, which is then renamed over
// the path. Rewriting a mapped file in place would make its readers fault (SIGBUS), and a
// failed write would leave half an artifact behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::serialize {

// Errors: kFailedPrecondition naming the path and the system's reason (no such folder,
// permission denied, disk full, the path is a folder).
Status WriteArtifactFile(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace kiln::serialize
