// Text helpers the test files share: they are compiled together, a batch of them per translation
// unit (tests/CMakeLists.txt), so a helper several of them need is defined here once rather than
// copied into each (tests/unity/check_names.py).
#pragma once

#include <string_view>

namespace kiln::testing {

// Whether `text` contains `part`.
inline bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace kiln::testing
