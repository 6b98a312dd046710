#include "kiln/tensor_files.h"
#include "tests/temp_dir.h"

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using kiln::testing::ReadBytes;
using kiln::testing::TempDir;
using kiln::testing::WriteBytes;
using kiln::DType;
using kiln::StatusCode;
using kiln::io::HostTensor;

namespace {


template <typename T>
HostTensor NamedTensor(std::string name, DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  HostTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// The elements as T (unlike kiln::testing::Values, no check on the byte count: no assertion).
template <typename T>
std::vector<T> ValuesOf(const HostTensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

// np.save(f, np.array([[1.5, -2.0, 3.25], [0, 1, 2]], dtype='<f4')), byte for byte.
std::string NumpyF32Bytes() {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const float values[] = {1.5f, -2.0f, 3.25f, 0.0f, 1.0f, 2.0f};
  out.append(reinterpret_cast<const char*>(values), sizeof(values));
  return out;
}

std::string NpyWithHeader(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((10 + header.size() + 1 + 63) / 64 * 64 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

}  // namespace

TEST_CASE("tensor files: reads a .npy written by numpy") {
  TempDir dir;
  const std::string path = dir / "pixels.npy";
  WriteBytes(path, NumpyF32Bytes());
  auto t = kiln::io::ReadNpyFile(path);
  REQUIRE(t.ok());
  CHECK(t->name == "pixels");
  CHECK(t->dtype == DType::kFloat32);
  CHECK(t->dims == std::vector<int64_t>{2, 3});
  CHECK(ValuesOf<float>(*t) == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1.0f, 2.0f});
  kiln::TensorView v = t->view();
  CHECK(v.rank == 2);
  CHECK(v.num_elements() == 6);
  CHECK(v.data == t->bytes.data());
}

TEST_CASE("tensor files: .npy scalar, 1-d bool and v2 headers") {
  TempDir dir;
  const std::string sbytes =
      NpyWithHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", std::string("\x07\0\0\0\0\0\0\0", 8));
  auto s = kiln::io::ParseNpy(sbytes.data(), sbytes.size(), "scalar");
  REQUIRE(s.ok());
  CHECK(s->dims.empty());
  CHECK(ValuesOf<int64_t>(*s) == std::vector<int64_t>{7});

  const std::string bbytes = NpyWithHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x00", 2));
  auto b = kiln::io::ParseNpy(bbytes.data(), bbytes.size(), "bool");
  REQUIRE(b.ok());
  CHECK(b->dtype == DType::kBool);
  CHECK(b->dims == std::vector<int64_t>{2});

  // Version 2: a 4-byte header length.
  std::string v2 = NumpyF32Bytes();
  const std::string header = v2.substr(10, 118);
  v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string("\x76\0\0\0", 4) + header + v2.substr(128);
  // The header is now 2 bytes longer before the data, which NumPy allows (alignment is advice).
  auto t2 = kiln::io::ParseNpy(v2.data(), v2.size(), "v2");
  REQUIRE(t2.ok());
  CHECK(t2->dims == std::vector<int64_t>{2, 3});
}

TEST_CASE("tensor files: .npy round trip for every dtype NumPy has") {
  TempDir dir;
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,  DType::kInt16,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8,   DType::kUInt16, DType::kUInt32,
                          DType::kUInt64,  DType::kBool};
  for (DType dt : dtypes) {
    CAPTURE(kiln::DTypeName(dt));
    HostTensor t;
    t.name = "t";
    t.dtype = dt;
    t.dims = {2, 1, 3};
    t.bytes.resize(6 * kiln::DTypeSize(dt));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = dt == DType::kBool ? i % 2 : static_cast<uint8_t>(i * 7 + 1);
    const std::string path = dir / "t.npy";
    REQUIRE(kiln::io::WriteNpyFile(path, t).ok());
    CHECK(ReadBytes(path).size() % 64 == t.bytes.size() % 64);  // data starts 64-aligned
    auto back = kiln::io::ReadNpyFile(path);
    REQUIRE(back.ok());
    CHECK(back->dtype == dt);
    CHECK(back->dims == t.dims);
    CHECK(back->bytes == t.bytes);
  }
  // Scalars and 1-d shapes use NumPy's tuple spelling.
  HostTensor one = NamedTensor<int32_t>("one", DType::kInt32, {3}, {1, 2, 3});
  REQUIRE(kiln::io::WriteNpyFile(dir / "one.npy", one).ok());
  CHECK(ReadBytes(dir / "one.npy").find("'shape': (3,)") != std::string::npos);
  HostTensor scalar = NamedTensor<float>("s", DType::kFloat32, {}, {4.0f});
  REQUIRE(kiln::io::WriteNpyFile(dir / "s.npy", scalar).ok());
  CHECK(ReadBytes(dir / "s.npy").find("'shape': ()") != std::string::npos);
  auto s = kiln::io::ReadNpyFile(dir / "s.npy");
  REQUIRE(s.ok());
  CHECK(ValuesOf<float>(*s) == std::vector<float>{4.0f});

  HostTensor bf = NamedTensor<uint16_t>("bf", DType::kBFloat16, {1}, {0x3f80});
  CHECK(kiln::io::WriteNpyFile(dir / "bf.npy", bf).code() == StatusCode::kUnimplemented);
}

TEST_CASE("tensor files: SerializeNpy's bytes are the file's, and ParseNpy reads them back") {
  TempDir dir;
  HostTensor t = NamedTensor<int16_t>("t", DType::kInt16, {2, 2}, {1, -2, 300, -32768});
  auto bytes = kiln::io::SerializeNpy(t);
  REQUIRE(bytes.ok());
  REQUIRE(kiln::io::WriteNpyFile(dir / "t.npy", t).ok());
  CHECK(*bytes == ReadBytes(dir / "t.npy"));
  // The header NumPy writes for it (np.save gives the same 136 bytes): the 10-byte preamble and
  // the 59-byte dict, padded with spaces and a '\n' so that the data starts at byte 128.
  CHECK(bytes->size() == 128 + 8);
  CHECK(bytes->substr(10, 59) == "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }");
  CHECK(bytes->substr(69, 58) == std::string(58, ' '));
  CHECK((*bytes)[127] == '\n');
  auto back = kiln::io::ParseNpy(bytes->data(), bytes->size(), "memory");
  REQUIRE(back.ok());
  CHECK(ValuesOf<int16_t>(*back) == std::vector<int16_t>{1, -2, 300, -32768});
  // Bytes that do not match dims and dtype are refused, naming the tensor.
  t.bytes.pop_back();
  auto bad = kiln::io::SerializeNpy(t);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "tensor 't' int16[2, 2] needs 8 bytes but holds 7");
}

TEST_CASE("tensor files: malformed .npy files are rejected with a reason") {
  TempDir dir;
  const std::string good = NumpyF32Bytes();
  // Every truncation point fails cleanly.
  for (size_t n = 0; n < good.size(); ++n) {
    auto t = kiln::io::ParseNpy(good.data(), n, "cut.npy");
    CHECK_FALSE(t.ok());
    if (n > 128) CHECK(t.status().message().find("truncated") != std::string::npos);
  }
  WriteBytes(dir / "cut.npy", good.substr(0, good.size() - 1));
  auto cut = kiln::io::ReadNpyFile(dir / "cut.npy");
  CHECK(cut.status().code() == StatusCode::kDataLoss);
  CHECK(cut.status().message().find("cut.npy") != std::string::npos);

  auto extra = kiln::io::ParseNpy((good + "xyz").data(), good.size() + 3, "extra.npy");
  CHECK(extra.status().code() == StatusCode::kDataLoss);
  CHECK(extra.status().message().find("3 extra") != std::string::npos);

  const std::string fortran =
      NpyWithHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0'));
  auto f = kiln::io::ParseNpy(fortran.data(), fortran.size(), "f.npy");
  CHECK(f.status().code() == StatusCode::kUnimplemented);
  CHECK(f.status().message().find("Fortran") != std::string::npos);

  const std::string big = NpyWithHeader("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'));
  auto be = kiln::io::ParseNpy(big.data(), big.size(), "be.npy");
  CHECK(be.status().code() == StatusCode::kUnimplemented);
  CHECK(be.status().message().find("big-endian") != std::string::npos);

  const char* bad_headers[] = {
      "{'descr': '<f4', 'fortran_order': False}",                                      // no shape
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }",                  // negative dim
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",  // overflow
      "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,",
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",  // structured
      "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",           // complex
      "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",            // objects
      "not a dict",
  };
  for (const char* h : bad_headers) {
    CAPTURE(h);
    const std::string bytes = NpyWithHeader(h, std::string(8, '\0'));
    auto t = kiln::io::ParseNpy(bytes.data(), bytes.size(), "bad.npy");
    CHECK_FALSE(t.ok());
    CHECK(t.status().message().find("bad.npy") != std::string::npos);
  }
  // Huge shapes must not allocate: the size check comes first.
  const std::string huge =
      NpyWithHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", "");
  CHECK(kiln::io::ParseNpy(huge.data(), huge.size(), "huge.npy").status().code() == StatusCode::kDataLoss);
  CHECK(kiln::io::ReadNpyFile(dir / "absent.npy").status().code() == StatusCode::kNotFound);
}

TEST_CASE("tensor files: reads TensorProto bytes written by hand") {
  // name "x" (field 8), dims [2] (field 1), data_type FLOAT (field 2), raw_data (field 9).
  std::string bytes;
  bytes += "\x08\x02";
  bytes += "\x10\x01";
  bytes += "\x42\x01x";
  bytes += "\x4a\x08";
  const float values[] = {0.5f, -1.0f};
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  auto t = kiln::io::ParseTensorProto(bytes.data(), bytes.size(), "hand.pb");
  REQUIRE(t.ok());
  CHECK(t->name == "x");
  CHECK(t->dtype == DType::kFloat32);
  CHECK(t->dims == std::vector<int64_t>{2});
  CHECK(ValuesOf<float>(*t) == std::vector<float>{0.5f, -1.0f});

  // Cut inside raw_data: protobuf rejects it.
  CHECK(kiln::io::ParseTensorProto(bytes.data(), bytes.size() - 1, "cut.pb").status().code() ==
        StatusCode::kDataLoss);
  // Cut before raw_data: a valid message with no data for dims [2].
  auto nodata = kiln::io::ParseTensorProto(bytes.data(), 7, "nodata.pb");
  CHECK(nodata.status().code() == StatusCode::kDataLoss);
  CHECK(nodata.status().message().find("nodata.pb") != std::string::npos);
}

TEST_CASE("tensor files: TensorProto round trip and typed fields") {
  TempDir dir;
  const DType dtypes[] = {DType::kFloat32, DType::kUInt8,  DType::kInt8,    DType::kUInt16, DType::kInt16,
                          DType::kInt32,   DType::kInt64,  DType::kBool,    DType::kFloat16, DType::kFloat64,
                          DType::kUInt32,  DType::kUInt64, DType::kBFloat16};
  for (DType dt : dtypes) {
    CAPTURE(kiln::DTypeName(dt));
    HostTensor t;
    t.name = "state";
    t.dtype = dt;
    t.dims = {2, 1, 2};
    t.bytes.resize(4 * kiln::DTypeSize(dt));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = dt == DType::kBool ? i % 2 : static_cast<uint8_t>(3 * i + 1);
    const std::string path = dir / "input_0.pb";
    REQUIRE(kiln::io::WriteTensorProtoFile(path, t).ok());
    auto back = kiln::io::ReadTensorProtoFile(path);
    REQUIRE(back.ok());
    CHECK(back->name == "state");
    CHECK(back->dtype == dt);
    CHECK(back->dims == t.dims);
    CHECK(back->bytes == t.bytes);
  }

  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::INT64);
  p.add_dims(3);
  for (int64_t v : {int64_t{-1}, int64_t{1} << 40, int64_t{5}}) p.add_int64_data(v);
  std::string s = p.SerializeAsString();
  auto i64 = kiln::io::ParseTensorProto(s.data(), s.size(), "i64.pb");
  REQUIRE(i64.ok());
  CHECK(ValuesOf<int64_t>(*i64) == std::vector<int64_t>{-1, int64_t{1} << 40, 5});

  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3c00);  // 1.0
  h.add_int32_data(0xc000);  // -2.0
  s = h.SerializeAsString();
  auto f16 = kiln::io::ParseTensorProto(s.data(), s.size(), "f16.pb");
  REQUIRE(f16.ok());
  CHECK(ValuesOf<uint16_t>(*f16) == std::vector<uint16_t>{0x3c00, 0xc000});

  onnx::TensorProto sc;  // a scalar
  sc.set_data_type(onnx::TensorProto::DOUBLE);
  sc.add_double_data(2.5);
  s = sc.SerializeAsString();
  auto d = kiln::io::ParseTensorProto(s.data(), s.size(), "d.pb");
  REQUIRE(d.ok());
  CHECK(d->dims.empty());
  CHECK(ValuesOf<double>(*d) == std::vector<double>{2.5});

  HostTensor wrong = NamedTensor<float>("w", DType::kFloat32, {3}, {1, 2});
  CHECK(kiln::io::WriteTensorProtoFile(dir / "w.pb", wrong).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("tensor files: malformed TensorProtos are rejected with a reason") {
  auto parse = [](const onnx::TensorProto& p) {
    const std::string s = p.SerializeAsString();
    return kiln::io::ParseTensorProto(s.data(), s.size(), "t.pb").status();
  };
  onnx::TensorProto wrong_field;
  wrong_field.set_name("x");
  wrong_field.set_data_type(onnx::TensorProto::FLOAT);
  wrong_field.add_dims(2);
  wrong_field.add_int64_data(1);
  wrong_field.add_int64_data(2);
  kiln::Status st = parse(wrong_field);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("int64_data") != std::string::npos);
  CHECK(st.message().find("'x'") != std::string::npos);

  onnx::TensorProto short_typed;
  short_typed.set_data_type(onnx::TensorProto::FLOAT);
  short_typed.add_dims(3);
  short_typed.add_float_data(1.0f);
  st = parse(short_typed);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("need 3 elements but float_data has 1") != std::string::npos);

  onnx::TensorProto short_raw;
  short_raw.set_data_type(onnx::TensorProto::FLOAT);
  short_raw.add_dims(2);
  short_raw.add_dims(2);
  short_raw.set_raw_data(std::string(12, '\0'));
  st = parse(short_raw);
  CHECK(st.message().find("raw_data has 12 bytes") != std::string::npos);

  onnx::TensorProto huge;
  huge.set_data_type(onnx::TensorProto::FLOAT);
  huge.add_dims(int64_t{1} << 62);
  huge.add_dims(int64_t{1} << 62);
  CHECK(parse(huge).code() == StatusCode::kDataLoss);

  onnx::TensorProto negative;
  negative.set_data_type(onnx::TensorProto::FLOAT);
  negative.add_dims(-2);
  CHECK(parse(negative).code() == StatusCode::kDataLoss);

  onnx::TensorProto strings;
  strings.set_data_type(onnx::TensorProto::STRING);
  strings.add_dims(1);
  strings.add_string_data("hi");
  CHECK(parse(strings).code() == StatusCode::kUnimplemented);

  onnx::TensorProto external;
  external.set_data_type(onnx::TensorProto::FLOAT);
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  CHECK(parse(external).code() == StatusCode::kUnimplemented);

  onnx::TensorProto no_type;
  no_type.add_dims(1);
  CHECK(parse(no_type).code() == StatusCode::kDataLoss);

  const std::string junk = "\xff\xff\xff\xff garbage";
  CHECK(kiln::io::ParseTensorProto(junk.data(), junk.size(), "junk.pb").status().code() == StatusCode::kDataLoss);
  CHECK(kiln::io::ReadTensorProtoFile("/nonexistent/input_0.pb").status().code() == StatusCode::kNotFound);
}

// The TensorProto reader and writer use the wire format directly (tools/io/proto_wire.h), without
// protobuf; protobuf's own classes are the reference here.
TEST_CASE("tensor files: TensorProto wire format agrees with protobuf's") {
  // The writer's bytes are protobuf's serialization of the same message.
  HostTensor t = NamedTensor<float>("input:0", DType::kFloat32, {1, 3}, {1.5f, -2.0f, 0.25f});
  TempDir dir;
  REQUIRE(kiln::io::WriteTensorProtoFile(dir / "t.pb", t).ok());
  onnx::TensorProto p;
  p.set_name("input:0");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(1);
  p.add_dims(3);
  p.set_raw_data(t.bytes.data(), t.bytes.size());
  CHECK(ReadBytes(dir / "t.pb") == p.SerializeAsString());

  // Repeated numeric fields unpacked (one record per value, as proto2 writes fields not marked
  // packed), and an int32_data value below zero (a 10-byte varint): int8 -3 and 100.
  std::string unpacked = "\x08\x02\x10\x03";  // dims [2], data_type INT8
  unpacked += "\x28\xfd\xff\xff\xff\xff\xff\xff\xff\xff\x01";  // int32_data -3
  unpacked += "\x28\x64";  // int32_data 100
  auto i8 = kiln::io::ParseTensorProto(unpacked.data(), unpacked.size(), "unpacked.pb");
  REQUIRE(i8.ok());
  CHECK(ValuesOf<int8_t>(*i8) == std::vector<int8_t>{-3, 100});
  onnx::TensorProto ref;
  REQUIRE(ref.ParseFromString(unpacked));
  CHECK(ref.int32_data_size() == 2);
  CHECK(ref.int32_data(0) == -3);

  // float_data packed and unpacked in one message: protobuf appends both.
  onnx::TensorProto f;
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(3);
  f.add_float_data(1.0f);
  f.add_float_data(2.0f);
  std::string mixed = f.SerializeAsString();
  mixed += "\x25";  // field 4, fixed32: 3.0f
  const float three = 3.0f;
  mixed.append(reinterpret_cast<const char*>(&three), 4);
  REQUIRE(ref.ParseFromString(mixed));
  CHECK(ref.float_data_size() == 3);
  auto floats = kiln::io::ParseTensorProto(mixed.data(), mixed.size(), "mixed.pb");
  REQUIRE(floats.ok());
  CHECK(ValuesOf<float>(*floats) == std::vector<float>{1, 2, 3});

  // A record whose wire type does not match its field is an unknown field to protobuf: here
  // data_type as a length-delimited record leaves data_type unset.
  std::string mistyped = "\x08\x01\x12\x01\x01\x4a\x04" "abcd";
  REQUIRE(ref.ParseFromString(mistyped));
  CHECK(!ref.has_data_type());
  auto missing = kiln::io::ParseTensorProto(mistyped.data(), mistyped.size(), "mistyped.pb");
  CHECK(missing.status().code() == StatusCode::kDataLoss);
  CHECK(missing.status().message().find("data_type is missing") != std::string::npos);

  // Malformed wire data that protobuf also refuses: a packed fixed32 run of 5 bytes, a length
  // past the end, a varint past the end, field number 0.
  for (const std::string& bad : {std::string("\x10\x01\x22\x05\x00\x00\x80\x3f\x00", 9),
                                 std::string("\x10\x01\x4a\x09" "abc", 6), std::string("\x10\xff", 2),
                                 std::string("\x00\x01", 2)}) {
    CAPTURE(bad.size());
    CHECK(!ref.ParseFromString(bad));
    kiln::Status st = kiln::io::ParseTensorProto(bad.data(), bad.size(), "bad.pb").status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("bad.pb") != std::string::npos);
    CHECK(st.message().find("at byte") != std::string::npos);
  }
}

TEST_CASE("tensor files: ReadInputDir loads input_N.pb or NAME.npy in model order") {
  TempDir dir;
  HostTensor audio = NamedTensor<float>("input", DType::kFloat32, {1, 4}, {1, 2, 3, 4});
  HostTensor sr = NamedTensor<int64_t>("sr", DType::kInt64, {}, {16000});
  REQUIRE(kiln::io::WriteTensorProtoFile(dir / "input_0.pb", audio).ok());
  REQUIRE(kiln::io::WriteTensorProtoFile(dir / "input_1.pb", sr).ok());
  auto in = kiln::io::ReadInputDir(dir.path.string(), {"input", "sr"});
  REQUIRE(in.ok());
  REQUIRE(in->size() == 2);
  CHECK((*in)[0].dims == std::vector<int64_t>{1, 4});
  CHECK(ValuesOf<int64_t>((*in)[1]) == std::vector<int64_t>{16000});

  auto missing = kiln::io::ReadInputDir(dir.path.string(), {"input", "sr", "state"});
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("input_2.pb") != std::string::npos);
  CHECK(missing.status().message().find("'state'") != std::string::npos);

  auto extra = kiln::io::ReadInputDir(dir.path.string(), {"input"});
  CHECK(extra.status().message().find("input_1.pb") != std::string::npos);

  auto swapped = kiln::io::ReadInputDir(dir.path.string(), {"sr", "input"});
  CHECK(swapped.status().code() == StatusCode::kInvalidArgument);

  TempDir npy;
  CHECK(kiln::io::NpyFileNameForInput("encoder/x:0") == "encoder_x_0.npy");
  REQUIRE(kiln::io::WriteNpyFile(npy / "encoder_x_0.npy", audio).ok());
  REQUIRE(kiln::io::WriteNpyFile(npy / "sr.npy", sr).ok());
  auto n = kiln::io::ReadInputDir(npy.path.string(), {"encoder/x:0", "sr"});
  REQUIRE(n.ok());
  CHECK((*n)[0].name == "encoder/x:0");
  CHECK((*n)[0].bytes == audio.bytes);
  auto none = kiln::io::ReadInputDir(npy.path.string(), {"state"});
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(none.status().message().find("state.npy") != std::string::npos);
  CHECK(kiln::io::ReadInputDir(npy / "nope", {"x"}).status().code() == StatusCode::kNotFound);
}

TEST_CASE("tensor files: WriteOutputDir and views of host tensors") {
  TempDir dir;
  HostTensor a = NamedTensor<float>("prob", DType::kFloat32, {1, 1}, {0.25f});
  HostTensor empty = NamedTensor<float>("none", DType::kFloat32, {0, 3}, {});
  REQUIRE(kiln::io::WriteOutputDir(dir / "out/set0", {a, empty}).ok());
  auto back = kiln::io::ReadTensorProtoFile(dir / "out/set0/output_1.pb");
  REQUIRE(back.ok());
  CHECK(back->dims == std::vector<int64_t>{0, 3});
  CHECK(back->view().data != nullptr);  // the prologue rejects null pointers, also for empty tensors

  const float values[] = {1, 2, 3, 4, 5, 6};
  HostTensor copy = HostTensor::FromView("c", kiln::TensorView::Host(values, DType::kFloat32, {3, 2}));
  CHECK(copy.dims == std::vector<int64_t>{3, 2});
  CHECK(ValuesOf<float>(copy) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(kiln::io::Describe(copy) == "float32[3, 2]");
}

TEST_CASE("tensor files: a sparse file over the size limit is kResourceExhausted before any allocation") {
  TempDir dir;
  // 1 TB that takes no disk: reading it used to size a buffer from st_size (std::bad_alloc).
  for (const char* name : {"input_0.pb", "x.npy"}) {
    std::filesystem::path p = dir.path / name;
    std::ofstream(p).close();
    std::filesystem::resize_file(p, uint64_t{1} << 40);
  }
  auto pb = kiln::io::ReadTensorProtoFile(dir / "input_0.pb");
  CHECK(pb.status().code() == StatusCode::kResourceExhausted);
  CHECK(pb.status().message() == dir / "input_0.pb" +
                                     ": the file is 1099511627776 bytes, over the 2147483647-byte limit for a "
                                     "serialized TensorProto (protobuf's message limit)");
  auto npy = kiln::io::ReadNpyFile(dir / "x.npy");
  CHECK(npy.status().code() == StatusCode::kResourceExhausted);
  CHECK(npy.status().message() ==
        dir / "x.npy" + ": the file is 1099511627776 bytes, over the 17179869184-byte limit for a .npy file");
  // ReadInputDir (kiln run --inputs) goes through the same readers.
  CHECK(kiln::io::ReadInputDir(dir.path.string(), {"x"}).status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("tensor files: writers refuse a FIFO in place of the file instead of blocking on it") {
  TempDir dir;
  // kiln run --outputs DIR: an output_0.pb that is a FIFO blocked the open forever.
  const std::string fifo = dir / "output_0.pb";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  HostTensor t = NamedTensor<float>("y", DType::kFloat32, {2}, {1, 2});
  kiln::Status st = kiln::io::WriteOutputDir(dir.path.string(), {t});
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK(st.message() == "cannot write '" + fifo +
                            "': it exists and is a FIFO; the file is written by a rename, which would replace it: "
                            "give a regular file path");
  CHECK(kiln::io::WriteNpyFile(fifo, t).code() == StatusCode::kFailedPrecondition);
  REQUIRE(kiln::io::WriteNpyFile(dir / "y.npy", t).ok());
  CHECK(kiln::io::ReadNpyFile(dir / "y.npy")->bytes == t.bytes);
}

TEST_CASE("tensor files: a .npy whose size disagrees with its header is refused before its data is read") {
  TempDir dir;
  HostTensor t = NamedTensor<float>("x", DType::kFloat32, {4}, {1, 2, 3, 4});
  REQUIRE(kiln::io::WriteNpyFile(dir / "x.npy", t).ok());
  const uint64_t small = std::filesystem::file_size(dir / "x.npy");
  // 15 GiB, under the 16 GiB limit and sparse: reading it whole would take 15 GiB of memory.
  std::filesystem::resize_file(dir / "x.npy", uint64_t{15} << 30);
  auto r = kiln::io::ReadNpyFile(dir / "x.npy");
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message() == dir / "x.npy" + ": shape [4] of float32 needs 16 data bytes but the file has " +
                                    std::to_string((uint64_t{15} << 30) - (small - 16)) + " (" +
                                    std::to_string((uint64_t{15} << 30) - small) + " extra)");
  // No magic at all: refused after reading the head only.
  std::filesystem::path zeros = dir.path / "zeros.npy";
  std::ofstream(zeros).close();
  std::filesystem::resize_file(zeros, uint64_t{15} << 30);
  auto z = kiln::io::ReadNpyFile(zeros.string());
  CHECK(z.status().code() == StatusCode::kDataLoss);
  CHECK(z.status().message() == zeros.string() + ": not a .npy file (missing the \\x93NUMPY magic)");
}
