// runtime/shape_text.h: the one spelling of a shape in messages, logs and reports.
#include "runtime/shape_text.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_CASE("ShapeText: dims in brackets, separated by a comma and a space, and a scalar is []") {
  CHECK(kiln::ShapeText(std::vector<int64_t>{1, 3, 224, 224}) == "[1, 3, 224, 224]");
  CHECK(kiln::ShapeText(std::vector<int64_t>{0}) == "[0]");
  CHECK(kiln::ShapeText(std::vector<int64_t>{}) == "[]");
  const int64_t dims[] = {2, -1, 7};
  CHECK(kiln::ShapeText({dims, 2}) == "[2, -1]");  // a pointer and a rank, as TensorView holds them
}

TEST_CASE("ShapeText: each dim spelled by a function, for symbols and expressions") {
  const std::vector<std::string> dims = {"N", "3", "(H * 2)"};
  CHECK(kiln::ShapeText(dims.size(), [&](size_t i) { return dims[i]; }) == "[N, 3, (H * 2)]");
  CHECK(kiln::ShapeText(0, [](size_t) { return std::string("unused"); }) == "[]");
}
