#include "tools/cli/shape_option.h"

#include <cerrno>
#include <cstdlib>

namespace kiln::cli {

bool ParseShape(const std::string& text, std::string& name, std::vector<int64_t>& dims, std::string& error) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    error = "expected NAME:DIMS such as images:1x3x224x224, got '" + text + "'";
    return false;
  }
  name = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  dims.clear();
  size_t pos = 0;
  while (true) {
    size_t x = rest.find('x', pos);
    std::string d = rest.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (d == "?" || d == "-1") {
      dims.push_back(-1);
    } else {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0 || errno == ERANGE) {
        error = "dim '" + d + "' in '" + text + "' is not a non-negative 64-bit integer, '?' or -1";
        return false;
      }
      dims.push_back(v);
    }
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return true;
}

}  // namespace kiln::cli
