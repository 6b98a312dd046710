// The NAME:DIMS value of `--shape` (kiln compile, kiln bench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

// "NAME:1x3x224x224"; a dim of "?" or "-1" reads as -1 (symbolic). The name may contain ':';
// the shape is after the last one. False with `error` set when the text is malformed.
bool ParseShape(const std::string& text, std::string& name, std::vector<int64_t>& dims, std::string& error);

}  // namespace kiln::cli
