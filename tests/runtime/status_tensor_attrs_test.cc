#include <doctest/doctest.h>
#include <cmath>
#include <limits>
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/attrs.h"
namespace kiln {
TEST_CASE("Status, Result and the error macros") {
  Status ok; CHECK(ok.ok()); CHECK(ok.message().empty()); CHECK(ok.ToString() == "OK"); CHECK(ok.WithContext("x").ok());
  Status e = InvalidArgument("bad"); CHECK(!e.ok()); CHECK(e.code() == StatusCode::kInvalidArgument);
  CHECK(e.ToString() == "INVALID_ARGUMENT: bad"); CHECK(e.WithContext("load").message() == "load: bad");
  Status c = e; CHECK(c.message() == "bad"); Status m = std::move(c); CHECK(m.code()==StatusCode::kInvalidArgument);
  CHECK(Status(StatusCode::kOk, "ignored").ok());
  CHECK(StatusCodeName(StatusCode::kDeviceError) == "DEVICE_ERROR");
  CHECK(DataLoss("x").code()==StatusCode::kDataLoss); CHECK(Internal("x").code()==StatusCode::kInternal);
  Result<int> r = 3; CHECK(r.ok()); CHECK(*r == 3);
  Result<int> r2 = NotFound("f"); CHECK(!r2.ok()); CHECK(r2.status().code()==StatusCode::kNotFound);
  Result<int> r3 = Status(); CHECK(r3.status().code()==StatusCode::kInternal);
  auto f = []() -> Status { KILN_RETURN_IF_ERROR_CTX(OutOfRange("i"), "ctx"); return Status(); };
  CHECK(f().message()=="ctx: i");
  auto g = []() -> Result<int> { KILN_ASSIGN_OR_RETURN(int v, Result<int>(4)); return v + 1; };
  CHECK(*g() == 5);
}
TEST_CASE("DType sizes and names, TensorView sizes") {
  CHECK(DTypeSize(DType::kFloat32)==4); CHECK(DTypeSize(DType::kBFloat16)==2); CHECK(DTypeSize(DType::kUndefined)==0);
  CHECK(DTypeSize(static_cast<DType>(8))==0); CHECK(DTypeName(DType::kBool)=="bool"); CHECK(DTypeName(static_cast<DType>(8))=="undefined(8)");
  CHECK(DTypeName(static_cast<DType>(999))=="undefined(?)");
  CHECK(IsValidDType(1)); CHECK(!IsValidDType(0)); CHECK(!IsValidDType(8)); CHECK(IsValidDType(16)); CHECK(!IsValidDType(-1));
  float x[6];
  auto v = TensorView::Host(x, DType::kFloat32, {2,3}); CHECK(v.rank==2); CHECK(v.num_elements()==6); CHECK(v.num_bytes()==24);
  auto s = TensorView::Host(x, DType::kFloat32, {}); CHECK(s.rank==0); CHECK(s.num_elements()==1);
  auto big = TensorView::Host(x, DType::kFloat32, {1,2,3,4,5,6,7,8,9}); CHECK(big.rank==9); CHECK(big.dims[7]==8);
  const int64_t M = std::numeric_limits<int64_t>::max();
  auto sat = TensorView::Host(x, DType::kFloat64, {int64_t{1}<<40, int64_t{1}<<40}); CHECK(sat.num_elements()==M); CHECK(sat.num_bytes()==M);
  auto nb = TensorView::Host(x, DType::kFloat64, {int64_t{1}<<61}); CHECK(nb.num_elements()==int64_t{1}<<61); CHECK(nb.num_bytes()==M);
  auto z = TensorView::Host(x, DType::kFloat32, {M, 0}); CHECK(z.num_elements()==0); CHECK(z.num_bytes()==0);
  auto neg = TensorView::Host(x, DType::kFloat32, {-1, 2}); CHECK(neg.num_elements()==-1); CHECK(neg.num_bytes()==-1);
}
TEST_CASE("attrs") {
  AttrMap a, b; CHECK(a==b);
  a.SetInt("axis", 1); a.SetFloats("scales", {1.f, NAN}); b.SetFloats("scales", {1.f, NAN}); CHECK(!(a==b)); b.SetInt("axis", 1); CHECK(a==b);
  b.SetInt("axis", 2); CHECK(!(a==b)); b.SetFloat("axis", 1.f); CHECK(!(a==b));
  CHECK(a.GetInts("none").empty()); CHECK(a.GetFloats("axis").empty());
  AttrMap c, d; c.SetFloat("e", 0.f); d.SetFloat("e", -0.f); CHECK(!(c==d));
}
}  // namespace kiln
