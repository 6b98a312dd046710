// Random inputs for `kiln bench --random`: which shape each input gets (constants, --shape,
// shared symbols, the entries' fixed values) and the values drawn.
#include "tools/io/random_inputs.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "runtime/half.h"

namespace kiln::io {
namespace {

TensorInfo Info(const std::string& name, std::vector<DimInfo> shape, DType dtype = DType::kFloat32) {
  return {name, dtype, std::move(shape)};
}
DimInfo Sym(const std::string& s) { return {-1, s}; }
DimInfo Const(int64_t v) { return {v, ""}; }
EntryInfo Entry(const std::string& name) {
  EntryInfo e;
  e.name = name;
  return e;
}

std::vector<std::vector<int64_t>> Shapes(const std::vector<TensorInfo>& inputs, const std::vector<EntryInfo>& entries,
                                         const std::map<std::string, std::vector<int64_t>>& given = {}) {
  auto r = ResolveInputShapes(inputs, entries, given);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *r;
}

std::string Error(const std::vector<TensorInfo>& inputs, const std::vector<EntryInfo>& entries,
                  const std::map<std::string, std::vector<int64_t>>& given = {}) {
  auto r = ResolveInputShapes(inputs, entries, given);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

using Dims = std::vector<std::vector<int64_t>>;

TEST_CASE("random inputs: shapes from constants, --shape, shared symbols and the entries") {
  const std::vector<EntryInfo> none = {Entry("default")};
  CHECK(Shapes({Info("x", {Const(2), Const(3)})}, none) == Dims{{2, 3}});
  // A given shape binds N for the other input that uses it.
  const std::vector<TensorInfo> two = {Info("x", {Sym("N"), Const(3)}), Info("y", {Sym("N")})};
  CHECK(Shapes(two, none, {{"x", {5, 3}}}) == Dims{{5, 3}, {5}});
  // The first entry that fixes every open symbol: entry 0 leaves T open, entry 1 fixes both.
  const std::vector<TensorInfo> nt = {Info("x", {Sym("N"), Sym("T")})};
  CHECK(Shapes(nt, {Entry("N=1, T in 1..64"), Entry("N=4, T=8; not (T > 1)")}) == Dims{{4, 8}});
  CHECK(Shapes({Info("x", {Sym("N"), Const(3)})}, {Entry("N=1"), Entry("N=4")}) == Dims{{1, 3}});
  // A symbol listing the entries' values: the first.
  CHECK(Shapes({Info("x", {Sym("1|4"), Const(2)})}, none) == Dims{{1, 2}});
  // --shape wins over the entries.
  CHECK(Shapes({Info("x", {Sym("N"), Const(3)})}, {Entry("N=1")}, {{"x", {7, 3}}}) == Dims{{7, 3}});
  CHECK(Shapes({Info("s", {})}, none) == Dims{{}});
  // '?' (-1) in a --shape takes what the other rules decide: here the entry's N.
  const std::vector<TensorInfo> nchw = {Info("x", {Sym("N"), Const(3), Sym("H"), Sym("W")})};
  CHECK(Shapes(nchw, {Entry("N=1")}, {{"x", {-1, 3, 64, 32}}}) == Dims{{1, 3, 64, 32}});
  CHECK(Shapes(nchw, {Entry("N=1")}, {{"x", {-1, -1, 8, 8}}}) == Dims{{1, 3, 8, 8}});
  // An empty-tensor entry (a profile's range from 0) is never the one benchmarked.
  CHECK(Shapes({Info("x", {Sym("N"), Const(3)})}, {Entry("N=0"), Entry("N=4")}) == Dims{{4, 3}});
  CHECK(Shapes({Info("x", {Sym("N"), Const(3)})}, {Entry("N=0"), Entry("N in 1..8")}, {{"x", {0, 3}}}) == Dims{{0, 3}});
}

TEST_CASE("random inputs: an undecided dim or a wrong --shape is a precise error") {
  const std::vector<EntryInfo> entries = {Entry("default"), Entry("N in 1..64")};
  const std::string open = Error({Info("x", {Sym("N"), Const(3)})}, entries);
  CHECK(open.find("input 'x' dim 0 is symbolic ('N')") != std::string::npos);
  CHECK(open.find("pass --shape x:DIMS, numbers for its dims [N, 3]") != std::string::npos);
  const std::vector<TensorInfo> x = {Info("x", {Sym("N"), Const(3)})};
  CHECK(Error(x, entries, {{"y", {1, 3}}}).find("'y', which is not an input of the model (inputs: 'x')") !=
        std::string::npos);
  CHECK(Error(x, entries, {{"x", {1, 3, 1}}}).find("has rank 3, the input has rank 2") != std::string::npos);
  CHECK(Error(x, entries, {{"x", {1, 4}}}).find("dim 1 is 3 in the artifact") != std::string::npos);
  CHECK(Error(x, entries, {{"x", {-1, 3}}}).find("dim 0 is symbolic") != std::string::npos);
  // An entry that fixes only some symbols: the error names a dim it leaves open, not one it fixes.
  const std::vector<TensorInfo> nchw = {Info("x", {Sym("N"), Const(3), Sym("H"), Sym("W")})};
  CHECK(Error(nchw, {Entry("N=1")}).find("input 'x' dim 2 is symbolic ('H')") != std::string::npos);
}

TEST_CASE("random inputs: values by dtype, reproducible from the seed") {
  const std::vector<TensorInfo> inputs = {Info("f", {Const(1000)}), Info("i", {Const(1000)}, DType::kInt64),
                                          Info("b", {Const(1000)}, DType::kBool),
                                          Info("h", {Const(1000)}, DType::kFloat16)};
  const Dims shapes = {{1000}, {1000}, {1000}, {1000}};
  auto a = RandomInputs(inputs, shapes, 7);
  REQUIRE(a.ok());
  REQUIRE(a->size() == 4);
  const HostTensor& f = (*a)[0];
  CHECK(f.name == "f");
  CHECK(f.dims == std::vector<int64_t>{1000});
  REQUIRE(f.bytes.size() == 4000);
  float lo = 1, hi = -1;
  for (int k = 0; k < 1000; ++k) {
    float v;
    std::memcpy(&v, f.bytes.data() + 4 * k, 4);
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  CHECK(lo >= -1.0f);
  CHECK(lo < -0.9f);  // 1000 uniform draws reach both ends of [-1, 1)
  CHECK(hi < 1.0f);
  CHECK(hi > 0.9f);
  const HostTensor& i = (*a)[1];
  REQUIRE(i.bytes.size() == 8000);
  bool seen[10] = {};
  for (int k = 0; k < 1000; ++k) {
    int64_t v;
    std::memcpy(&v, i.bytes.data() + 8 * k, 8);
    REQUIRE(v >= 0);
    REQUIRE(v <= 9);
    seen[v] = true;
  }
  CHECK(std::all_of(std::begin(seen), std::end(seen), [](bool s) { return s; }));
  int ones = 0;
  for (uint8_t v : (*a)[2].bytes) {
    REQUIRE(v <= 1);
    ones += v;
  }
  CHECK(ones > 400);
  CHECK(ones < 600);
  for (int k = 0; k < 1000; ++k) {
    uint16_t h;
    std::memcpy(&h, (*a)[3].bytes.data() + 2 * k, 2);
    const float v = HalfToFloat(h);
    REQUIRE(v >= -1.0f);
    REQUIRE(v <= 1.0f);  // rounding to half may reach 1.0
  }
  auto again = RandomInputs(inputs, shapes, 7);
  auto other = RandomInputs(inputs, shapes, 8);
  REQUIRE(again.ok());
  REQUIRE(other.ok());
  CHECK((*again)[0].bytes == f.bytes);
  CHECK((*other)[0].bytes != f.bytes);
}

TEST_CASE("random inputs: a shape too large for memory is an error, not a crash") {
  auto r = RandomInputs(std::vector<TensorInfo>{Info("x", {Const(-1)})}, Dims{{int64_t{1} << 40, int64_t{1} << 40}}, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kiln::io
