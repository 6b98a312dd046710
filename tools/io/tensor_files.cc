// Reading and writing host tensors: ONNX TensorProto files and NumPy .npy files.
// Every size read from a file is checked against the bytes actually present before any
// allocation, so a corrupt header cannot make us allocate or read out of bounds.
#include "kiln/tensor_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>

#include "tools/io/proto_wire.h"
#include "tools/io/replace_file.h"
#include "runtime/shape_text.h"

namespace kiln::io {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// Product of dims, or nullopt when a dim is negative or the product overflows.
std::optional<int64_t> CheckedElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMaxInt64 / d) return std::nullopt;
    n *= d;
  }
  return n;
}

struct FileBytes {
  std::string data;    // the first min(file_size, max_read) bytes
  uint64_t file_size;
};

// Reads a regular file of at most `limit` bytes (`what` names the limit in the message), or
// only its first `max_read` bytes. The size is checked before the buffer is allocated: a
// sparse 1 TB file is an error, not an abort.
Result<FileBytes> ReadFile(const std::string& path, uint64_t limit, std::string_view what,
                           uint64_t max_read = std::numeric_limits<uint64_t>::max()) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(fmt::format("{}: no such file", path));
  if (fs::is_directory(path, ec)) return InvalidArgument(fmt::format("{}: is a directory, expected a file", path));
  // Opening a FIFO or a device would block or read forever.
  if (!fs::is_regular_file(path, ec)) return InvalidArgument(fmt::format("{}: is not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open for reading", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return DataLoss(fmt::format("{}: cannot determine the file size", path));
  if (static_cast<uint64_t>(size) > limit)
    return ResourceExhausted(
        fmt::format("{}: the file is {} bytes, over the {}-byte limit {}", path, size, limit, what));
  in.seekg(0, std::ios::beg);
  FileBytes f{std::string(), static_cast<uint64_t>(size)};
  const uint64_t n = std::min(f.file_size, max_read);
  try {
    f.data.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(fmt::format("{}: cannot allocate {} bytes to read the file", path, n));
  }
  if (n > 0 && !in.read(f.data.data(), static_cast<std::streamsize>(n)))
    return DataLoss(fmt::format("{}: read failed after {} of {} bytes", path, in.gcount(), n));
  return f;
}

// Whether `t`'s bytes are what its dtype and dims need (the caller adds where).
Status CheckConsistent(const HostTensor& t) {
  if (!IsValidDType(static_cast<int32_t>(t.dtype)))
    return InvalidArgument(fmt::format("tensor '{}' has invalid dtype {}", t.name, DTypeName(t.dtype)));
  auto n = CheckedElements(t.dims);
  if (!n) return InvalidArgument(fmt::format("tensor '{}' has invalid dims {}", t.name, ShapeText(t.dims)));
  const uint64_t want = static_cast<uint64_t>(*n) * DTypeSize(t.dtype);
  if (*n > 0 && want / static_cast<uint64_t>(*n) != DTypeSize(t.dtype))
    return InvalidArgument(fmt::format("tensor '{}' dims {} overflow", t.name, ShapeText(t.dims)));
  if (want != t.bytes.size())
    return InvalidArgument(fmt::format("tensor '{}' {} needs {} bytes but holds {}", t.name, Describe(t), want,
                                       t.bytes.size()));
  return Status::Ok();
}

// ---- TensorProto ------------------------------------------------------------------------

// onnx.TensorProto (onnx/onnx.proto, proto2), read from the wire format without protobuf
// (tools/io/proto_wire.h). A repeated numeric field is accepted packed or not, a singular field
// seen twice keeps its last value, and a record whose wire type does not match its field is
// skipped, as protobuf's own parser treats them.
enum TensorProtoField : uint32_t {
  kDims = 1, kDataType = 2, kSegment = 3, kFloatData = 4, kInt32Data = 5, kStringData = 6, kInt64Data = 7,
  kName = 8, kRawData = 9, kDoubleData = 10, kUInt64Data = 11, kExternalData = 13, kDataLocation = 14,
};
constexpr int32_t kOnnxString = 8, kOnnxComplex64 = 14, kOnnxComplex128 = 15;  // TensorProto.DataType
constexpr uint64_t kDataLocationExternal = 1;                                  // TensorProto.DataLocation

struct TensorProtoFields {
  std::string name;
  std::optional<int32_t> data_type;
  std::vector<int64_t> dims;
  std::optional<std::string_view> raw_data;
  // The typed fields, as their wire values: float_data and double_data hold the bits.
  std::vector<uint64_t> float_data, int32_data, int64_data, double_data, uint64_data;
  int64_t string_data = 0, external_data = 0;
  bool segment = false, external_location = false;
};

// Which typed field of TensorProto holds each data type, per onnx.proto.
enum class ProtoField { kFloat, kInt32, kInt64, kDouble, kUInt64 };

std::string_view ProtoFieldName(ProtoField f) {
  switch (f) {
    case ProtoField::kFloat: return "float_data";
    case ProtoField::kInt32: return "int32_data";
    case ProtoField::kInt64: return "int64_data";
    case ProtoField::kDouble: return "double_data";
    case ProtoField::kUInt64: return "uint64_data";
  }
  return "?";
}

ProtoField FieldFor(DType dt) {
  switch (dt) {
    case DType::kFloat32: return ProtoField::kFloat;
    case DType::kInt64: return ProtoField::kInt64;
    case DType::kFloat64: return ProtoField::kDouble;
    case DType::kUInt32:
    case DType::kUInt64: return ProtoField::kUInt64;
    default: return ProtoField::kInt32;  // int8/16/32, uint8/16, bool, float16, bfloat16
  }
}

const std::vector<uint64_t>& FieldValues(const TensorProtoFields& p, ProtoField f) {
  switch (f) {
    case ProtoField::kFloat: return p.float_data;
    case ProtoField::kInt32: return p.int32_data;
    case ProtoField::kInt64: return p.int64_data;
    case ProtoField::kDouble: return p.double_data;
    case ProtoField::kUInt64: break;
  }
  return p.uint64_data;
}

// Appends a repeated numeric field's record: one value of `scalar` wire type, or a packed run.
bool AppendRepeated(const WireField& f, WireType scalar, std::vector<uint64_t>* out, std::string* error) {
  if (f.type == scalar) {
    out->push_back(f.number);
    return true;
  }
  if (f.type != WireType::kLengthDelimited) return true;  // another wire type: an unknown field
  const int fixed = scalar == WireType::kFixed32 ? 4 : scalar == WireType::kFixed64 ? 8 : 0;
  if (fixed != 0 && f.bytes.size() % static_cast<size_t>(fixed) != 0) {
    *error = fmt::format("packed field {} has {} bytes, not a multiple of {}", f.field, f.bytes.size(), fixed);
    return false;
  }
  if (fixed != 0) out->reserve(out->size() + f.bytes.size() / static_cast<size_t>(fixed));
  WireReader packed(f.bytes);
  uint64_t v = 0;
  while (fixed != 0 ? packed.NextFixed(fixed, &v) : packed.NextVarint(&v)) out->push_back(v);
  if (!packed.error().empty()) {
    *error = fmt::format("packed field {}: {}", f.field, packed.error());
    return false;
  }
  return true;
}

Result<TensorProtoFields> DecodeTensorProto(std::string_view data, std::string_view origin) {
  TensorProtoFields p;
  WireReader r(data);
  WireField f;
  std::string error;
  auto corrupt = [&](const std::string& what) {
    return DataLoss(fmt::format("{}: not a valid serialized onnx.TensorProto ({} bytes; truncated or corrupt: {})",
                                origin, data.size(), what));
  };
  size_t at = 0;  // the record's first byte
  while ((at = r.offset(), r.Next(&f))) {
    const bool varint = f.type == WireType::kVarint, bytes = f.type == WireType::kLengthDelimited;
    bool ok = true;
    switch (f.field) {
      case kDims: {
        std::vector<uint64_t> dims;
        ok = AppendRepeated(f, WireType::kVarint, &dims, &error);
        for (uint64_t d : dims) p.dims.push_back(static_cast<int64_t>(d));
        break;
      }
      case kDataType:
        if (varint) p.data_type = static_cast<int32_t>(static_cast<uint32_t>(f.number));
        break;
      case kSegment: p.segment |= bytes; break;
      case kFloatData: ok = AppendRepeated(f, WireType::kFixed32, &p.float_data, &error); break;
      case kInt32Data: ok = AppendRepeated(f, WireType::kVarint, &p.int32_data, &error); break;
      case kStringData: p.string_data += bytes; break;
      case kInt64Data: ok = AppendRepeated(f, WireType::kVarint, &p.int64_data, &error); break;
      case kName:
        if (bytes) p.name.assign(f.bytes);
        break;
      case kRawData:
        if (bytes) p.raw_data = f.bytes;
        break;
      case kDoubleData: ok = AppendRepeated(f, WireType::kFixed64, &p.double_data, &error); break;
      case kUInt64Data: ok = AppendRepeated(f, WireType::kVarint, &p.uint64_data, &error); break;
      case kExternalData: p.external_data += bytes; break;
      case kDataLocation:
        if (varint) p.external_location = f.number == kDataLocationExternal;
        break;
      default: break;  // doc_string, metadata_props and unknown fields
    }
    if (!ok) return corrupt(fmt::format("at byte {}: {}", at, error));
  }
  if (!r.error().empty()) return corrupt(r.error());
  return p;
}

// Stores element i of a typed field into `out`, narrowing as ONNX specifies (int32_data
// holds the bit pattern of 16-bit floats and the value of small integers).
void StoreTyped(const std::vector<uint64_t>& values, DType dt, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t w = values[static_cast<size_t>(i)];
    const int32_t i32 = static_cast<int32_t>(static_cast<uint32_t>(w));  // an int32 varint, sign-extended
    switch (dt) {
      case DType::kFloat32: { uint32_t v = static_cast<uint32_t>(w); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kFloat64:
      case DType::kInt64:
      case DType::kUInt64: std::memcpy(out + 8 * i, &w, 8); break;
      case DType::kUInt32: { uint32_t v = static_cast<uint32_t>(w); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kInt32: std::memcpy(out + 4 * i, &i32, 4); break;
      case DType::kInt16:
      case DType::kUInt16:
      case DType::kFloat16:
      case DType::kBFloat16: { uint16_t v = static_cast<uint16_t>(i32); std::memcpy(out + 2 * i, &v, 2); break; }
      case DType::kInt8:
      case DType::kUInt8: out[i] = static_cast<uint8_t>(i32); break;
      case DType::kBool: out[i] = i32 != 0 ? 1 : 0; break;
      case DType::kUndefined: break;
    }
  }
}

std::string OnnxTypeName(int32_t t) {
  switch (t) {
    case kOnnxString: return "string";
    case kOnnxComplex64: return "complex64";
    case kOnnxComplex128: return "complex128";
    default: return fmt::format("data_type {}", t);
  }
}

Result<HostTensor> FromProto(const TensorProtoFields& p, std::string_view origin) {
  HostTensor t;
  t.name = p.name;
  const std::string where = p.name.empty() ? std::string(origin) : fmt::format("{} (tensor '{}')", origin, p.name);
  if (p.external_location || p.external_data > 0)
    return Unimplemented(fmt::format("{}: external data is not supported; store the tensor inline", where));
  if (p.segment)
    return Unimplemented(fmt::format("{}: segmented tensors are not supported", where));
  if (!p.data_type || *p.data_type == 0)
    return DataLoss(fmt::format("{}: data_type is missing", where));
  if (!IsValidDType(*p.data_type))
    return Unimplemented(fmt::format("{}: {} is not a Kiln dtype", where, OnnxTypeName(*p.data_type)));
  t.dtype = static_cast<DType>(*p.data_type);
  t.dims = p.dims;
  if (t.dims.size() > static_cast<size_t>(kMaxRank))
    return Unimplemented(fmt::format("{}: rank {} exceeds Kiln's maximum rank {}", where, t.dims.size(), kMaxRank));
  auto n = CheckedElements(t.dims);
  if (!n) return DataLoss(fmt::format("{}: invalid dims {}", where, ShapeText(t.dims)));
  const size_t esize = DTypeSize(t.dtype);
  const ProtoField field = FieldFor(t.dtype);

  // Exactly one place may hold the data: raw_data or the dtype's typed field.
  const ProtoField all[] = {ProtoField::kFloat, ProtoField::kInt32, ProtoField::kInt64, ProtoField::kDouble,
                            ProtoField::kUInt64};
  for (ProtoField f : all) {
    if (f != field && !FieldValues(p, f).empty())
      return DataLoss(fmt::format("{}: dtype {} stores its data in raw_data or {}, but {} has {} values", where,
                                  DTypeName(t.dtype), ProtoFieldName(field), ProtoFieldName(f),
                                  FieldValues(p, f).size()));
  }
  if (p.string_data > 0)
    return DataLoss(fmt::format("{}: dtype {} but string_data has {} values", where, DTypeName(t.dtype),
                                p.string_data));
  const std::vector<uint64_t>& typed = FieldValues(p, field);
  if (p.raw_data) {
    if (!typed.empty())
      return DataLoss(fmt::format("{}: both raw_data and {} are set", where, ProtoFieldName(field)));
    const std::string_view raw = *p.raw_data;
    const uint64_t want = static_cast<uint64_t>(*n);
    if (raw.size() % esize != 0 || raw.size() / esize != want)
      return DataLoss(fmt::format("{}: dims {} of {} need {} elements ({} bytes) but raw_data has {} bytes", where,
                                  ShapeText(t.dims), DTypeName(t.dtype), *n,
                                  want <= kMaxInt64 / esize ? fmt::format("{}", want * esize) : std::string("too many"),
                                  raw.size()));
    t.bytes.assign(raw.begin(), raw.end());
    if (t.dtype == DType::kBool)
      for (uint8_t& b : t.bytes) b = b != 0 ? 1 : 0;
    return t;
  }
  if (static_cast<int64_t>(typed.size()) != *n)
    return DataLoss(fmt::format("{}: dims {} of {} need {} elements but {} has {}", where, ShapeText(t.dims),
                                DTypeName(t.dtype), *n, ProtoFieldName(field), typed.size()));
  t.bytes.resize(static_cast<size_t>(*n) * esize);
  StoreTyped(typed, t.dtype, *n, t.bytes.data());
  return t;
}

// ---- .npy -------------------------------------------------------------------------------

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

struct NpyDescr {
  char code;
  DType dtype;
};
// NumPy kind+size codes for each Kiln dtype. bfloat16 has none.
constexpr NpyDescr kNpyTypes[] = {
    {'f', DType::kFloat32}, {'f', DType::kFloat64}, {'f', DType::kFloat16}, {'i', DType::kInt8},
    {'i', DType::kInt16},   {'i', DType::kInt32},   {'i', DType::kInt64},   {'u', DType::kUInt8},
    {'u', DType::kUInt16},  {'u', DType::kUInt32},  {'u', DType::kUInt64},  {'b', DType::kBool},
};

Result<DType> DTypeFromDescr(const std::string& descr, std::string_view origin) {
  if (descr.size() < 3)
    return Unimplemented(fmt::format("{}: unsupported dtype descr '{}'", origin, descr));
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size_str = descr.substr(2);
  if (!std::all_of(size_str.begin(), size_str.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      size_str.size() > 2)
    return Unimplemented(fmt::format("{}: unsupported dtype descr '{}'", origin, descr));
  const size_t size = static_cast<size_t>(std::stoi(size_str));
  if (order == '>' && size > 1)
    return Unimplemented(fmt::format("{}: big-endian data (descr '{}') is not supported; save it little-endian, "
                                     "e.g. np.save(path, a.astype(a.dtype.newbyteorder('<')))", origin, descr));
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return Unimplemented(fmt::format("{}: unsupported dtype descr '{}'", origin, descr));
  for (const NpyDescr& d : kNpyTypes)
    if (d.code == kind && DTypeSize(d.dtype) == size) {
      if (order == '|' && size > 1) break;  // multi-byte types always carry a byte order
      return d.dtype;
    }
  return Unimplemented(fmt::format("{}: dtype descr '{}' has no Kiln dtype", origin, descr));
}

Result<std::string> DescrFor(DType dt) {
  for (const NpyDescr& d : kNpyTypes)
    if (d.dtype == dt) {
      const size_t size = DTypeSize(dt);
      return fmt::format("{}{}{}", size == 1 ? '|' : '<', d.code, size);
    }
  return Unimplemented(fmt::format("dtype {} has no NumPy .npy equivalent", DTypeName(dt)));
}

// A tiny reader for the Python dict literal in a .npy header, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 576), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view origin) : s_(text), origin_(origin) {}

  Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("expected '{' at the start of the header");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      KILN_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Eat(':')) return Error(fmt::format("expected ':' after '{}'", key));
      SkipSpace();
      if (key == "descr") {
        if (Peek() != '\'' && Peek() != '"')
          return Unimplemented(fmt::format("{}: structured dtypes are not supported", origin_));
        KILN_RETURN_IF_ERROR(ParseString(descr));
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) *fortran = true;
        else if (Word("False")) *fortran = false;
        else return Error("fortran_order must be True or False");
        have_fortran = true;
      } else if (key == "shape") {
        KILN_RETURN_IF_ERROR(ParseShape(shape));
        have_shape = true;
      } else {
        return Error(fmt::format("unexpected key '{}'", key));
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Error("expected ',' or '}'");
    }
    if (!have_descr || !have_fortran || !have_shape)
      return Error("the header must hold 'descr', 'fortran_order' and 'shape'");
    return Status::Ok();
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool Word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  Status Error(std::string what) const {
    return DataLoss(fmt::format("{}: malformed .npy header at character {}: {}", origin_, pos_, what));
  }
  Status ParseString(std::string* out) {
    const char q = Peek();
    if (q != '\'' && q != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::Ok();
  }
  Status ParseShape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!Eat('(')) return Error("shape must be a tuple");
    while (true) {
      SkipSpace();
      if (Eat(')')) return Status::Ok();
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) return Error("shape entries must be non-negative integers");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        const int digit = Peek() - '0';
        if (v > (kMaxInt64 - digit) / 10) return Error("shape entry overflows int64");
        v = v * 10 + digit;
        ++pos_;
      }
      if (Peek() == 'L') ++pos_;  // Python 2 long suffix in old files
      shape->push_back(v);
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat(')')) return Status::Ok();
      return Error("expected ',' or ')' in shape");
    }
  }

  std::string_view s_;
  std::string_view origin_;
  size_t pos_ = 0;
};

uint32_t ReadLE(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string StemOf(const std::string& path) { return fs::path(path).stem().string(); }

}  // namespace

// ---- HostTensor -------------------------------------------------------------------------

TensorView HostTensor::view() const {
  // An empty tensor still gets a non-null pointer: the prologue rejects null data.
  alignas(64) static const uint8_t kEmpty[64] = {};
  const void* data = bytes.empty() ? static_cast<const void*>(kEmpty) : bytes.data();
  return TensorView::Host(data, dtype, dims.data(), static_cast<int32_t>(dims.size()));
}

int64_t HostTensor::num_elements() const {
  int64_t n = 1;
  bool saturated = false;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d == 0) return 0;
    if (saturated) continue;
    if (n > kMaxInt64 / d) saturated = true;
    else n *= d;
  }
  return saturated ? kMaxInt64 : n;
}

HostTensor HostTensor::FromView(std::string name, const TensorView& v) {
  HostTensor t;
  t.name = std::move(name);
  t.dtype = v.dtype;
  const int32_t rank = std::clamp(v.rank, 0, kMaxRank);
  t.dims.assign(v.dims, v.dims + rank);
  const int64_t nbytes = v.num_bytes();
  if (nbytes > 0 && v.data != nullptr) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    t.bytes.assign(p, p + nbytes);
  }
  return t;
}

std::string Describe(const HostTensor& t) { return fmt::format("{}{}", DTypeName(t.dtype), ShapeText(t.dims)); }

// ---- TensorProto ------------------------------------------------------------------------

Result<HostTensor> ParseTensorProto(const void* data, size_t size, std::string_view origin) {
  if (size > kMaxTensorProtoFileBytes)
    return Unimplemented(fmt::format("{}: {} bytes exceeds protobuf's 2 GiB message limit", origin, size));
  KILN_ASSIGN_OR_RETURN(TensorProtoFields p,
                        DecodeTensorProto(std::string_view(static_cast<const char*>(data), size), origin));
  return FromProto(p, origin);
}

Result<HostTensor> ReadTensorProtoFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(FileBytes f,
                        ReadFile(path, kMaxTensorProtoFileBytes, "for a serialized TensorProto (protobuf's message limit)"));
  return ParseTensorProto(f.data.data(), f.data.size(), path);
}

Status WriteTensorProtoFile(const std::string& path, const HostTensor& t) {
  KILN_RETURN_IF_ERROR_CTX(CheckConsistent(t), path);
  if (t.bytes.size() > kMaxTensorProtoFileBytes - t.name.size() - 64 * (t.dims.size() + 2))
    return InvalidArgument(fmt::format("{}: tensor '{}' {} is over the 2 GiB that a TensorProto can hold", path,
                                       t.name, Describe(t)));
  WireWriter w;
  for (int64_t d : t.dims) w.Varint(kDims, static_cast<uint64_t>(d));
  w.Varint(kDataType, static_cast<uint64_t>(static_cast<int32_t>(t.dtype)));
  w.Bytes(kName, t.name);
  w.Bytes(kRawData, t.bytes.data(), t.bytes.size());
  return ReplaceFile(path, w.out().data(), w.out().size());
}

// ---- .npy -------------------------------------------------------------------------------

namespace {

// How much of a .npy file ReadNpyFile reads to parse its header (NumPy's are under 100 bytes
// for any rank Kiln supports).
constexpr uint64_t kMaxNpyHeadRead = uint64_t{1} << 20;

// What a .npy header declares: the data starts at `data_offset` and holds `data_bytes`.
struct NpyLayout {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
  uint64_t data_bytes = 0;
};

// Parses the preamble and header from the first `size` bytes of a file of `file_size` bytes
// (ParseNpy passes all of it, ReadNpyFile only the head) and checks the declared data size
// against the file's before anything else is read.
Result<NpyLayout> ParseNpyHeader(const uint8_t* p, size_t size, uint64_t file_size, std::string_view origin) {
  if (size < kNpyMagicLen + 2 || std::memcmp(p, kNpyMagic, kNpyMagicLen) != 0)
    return DataLoss(fmt::format("{}: not a .npy file (missing the \\x93NUMPY magic)", origin));
  const int major = p[6];
  const int minor = p[7];
  if (major < 1 || major > 3)
    return Unimplemented(fmt::format("{}: .npy format version {}.{} is not supported (1.0 to 3.0 are)", origin,
                                     major, minor));
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kNpyMagicLen + 2 + len_bytes;
  if (size < prefix) return DataLoss(fmt::format("{}: truncated in the .npy preamble ({} bytes)", origin, size));
  const size_t header_len = ReadLE(p + 8, len_bytes);
  if (header_len > file_size - prefix)
    return DataLoss(fmt::format("{}: truncated: header says {} header bytes but only {} follow", origin, header_len,
                                file_size - prefix));
  if (header_len > size - prefix)
    return ResourceExhausted(fmt::format("{}: the .npy header is {} bytes, over the {}-byte limit", origin,
                                         header_len, kMaxNpyHeadRead - prefix));
  const std::string_view header(reinterpret_cast<const char*>(p + prefix), header_len);

  NpyLayout l;
  std::string descr;
  bool fortran = false;
  KILN_RETURN_IF_ERROR(HeaderParser(header, origin).Parse(&descr, &fortran, &l.shape));
  KILN_ASSIGN_OR_RETURN(l.dtype, DTypeFromDescr(descr, origin));
  if (l.shape.size() > static_cast<size_t>(kMaxRank))
    return Unimplemented(fmt::format("{}: rank {} exceeds Kiln's maximum rank {}", origin, l.shape.size(), kMaxRank));
  auto n = CheckedElements(l.shape);
  if (!n) return DataLoss(fmt::format("{}: shape {} overflows", origin, ShapeText(l.shape)));
  // Fortran order only matters when more than one dim is above 1, but we reject it always:
  // the data would be silently transposed otherwise, and np.ascontiguousarray fixes it.
  if (fortran)
    return Unimplemented(fmt::format("{}: Fortran-order (column-major) data is not supported; save a C-order "
                                     "array (np.save(path, np.ascontiguousarray(a)))", origin));
  const size_t esize = DTypeSize(l.dtype);
  l.data_offset = prefix + header_len;
  const uint64_t have = file_size - l.data_offset;
  const uint64_t need_elems = static_cast<uint64_t>(*n);
  if (need_elems > have / esize)
    return DataLoss(fmt::format("{}: truncated: shape {} of {} needs {} data bytes but the file has {}", origin,
                                ShapeText(l.shape), DTypeName(l.dtype),
                                need_elems <= static_cast<uint64_t>(kMaxInt64) / esize
                                    ? fmt::format("{}", need_elems * esize) : std::string("too many"),
                                have));
  l.data_bytes = need_elems * esize;
  if (l.data_bytes != have)
    return DataLoss(fmt::format("{}: shape {} of {} needs {} data bytes but the file has {} ({} extra)", origin,
                                ShapeText(l.shape), DTypeName(l.dtype), l.data_bytes, have, have - l.data_bytes));
  return l;
}

HostTensor NpyTensor(NpyLayout l, const uint8_t* data) {
  HostTensor t;
  t.dtype = l.dtype;
  t.dims = std::move(l.shape);
  t.bytes.assign(data, data + l.data_bytes);
  if (t.dtype == DType::kBool)
    for (uint8_t& b : t.bytes) b = b != 0 ? 1 : 0;
  return t;
}

}  // namespace

Result<HostTensor> ParseNpy(const void* data, size_t size, std::string_view origin) {
  const auto* p = static_cast<const uint8_t*>(data);
  KILN_ASSIGN_OR_RETURN(NpyLayout l, ParseNpyHeader(p, size, size, origin));
  const uint8_t* start = p + l.data_offset;
  return NpyTensor(std::move(l), start);
}

Result<HostTensor> ReadNpyFile(const std::string& path) {
  // The header first, so that a file whose size disagrees with its header is refused before
  // its data is read.
  KILN_ASSIGN_OR_RETURN(FileBytes head, ReadFile(path, kMaxNpyFileBytes, "for a .npy file", kMaxNpyHeadRead));
  KILN_ASSIGN_OR_RETURN(NpyLayout l, ParseNpyHeader(reinterpret_cast<const uint8_t*>(head.data.data()),
                                                    head.data.size(), head.file_size, path));
  KILN_ASSIGN_OR_RETURN(FileBytes f, ReadFile(path, kMaxNpyFileBytes, "for a .npy file"));
  if (f.file_size != head.file_size)
    return DataLoss(fmt::format("{}: the file changed size while being read ({} then {} bytes)", path,
                                head.file_size, f.file_size));
  const auto* data = reinterpret_cast<const uint8_t*>(f.data.data()) + l.data_offset;
  HostTensor t = NpyTensor(std::move(l), data);
  t.name = StemOf(path);
  return t;
}

Result<std::string> SerializeNpy(const HostTensor& t) {
  KILN_RETURN_IF_ERROR(CheckConsistent(t));
  KILN_ASSIGN_OR_RETURN(std::string descr, DescrFor(t.dtype));
  // NumPy's tuple spelling: "()", "(5,)", "(1, 576)".
  const std::string shape = t.dims.size() == 1 ? fmt::format("{},", t.dims[0]) : fmt::format("{}", fmt::join(t.dims, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends in '\n'.
  const bool v2 = header.size() + 1 + 10 > 65535;
  const size_t prefix = kNpyMagicLen + 2 + (v2 ? 4 : 2);
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  std::string out(kNpyMagic, kNpyMagicLen);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += header;
  out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

Status WriteNpyFile(const std::string& path, const HostTensor& t) {
  Result<std::string> npy = SerializeNpy(t);
  if (!npy.ok()) return npy.status().WithContext(path);
  return ReplaceFile(path, npy->data(), npy->size());
}

// ---- input and output folders -------------------------------------------------------------

std::string NpyFileNameForInput(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c == '/' || c == ':') c = '_';
  return out + ".npy";
}

namespace {

// ReadInputDir and ReadOutputDir: `kind` is "input" or "output".
Result<std::vector<HostTensor>> ReadTensorDir(const std::string& dir, const std::vector<std::string>& input_names,
                                               std::string_view kind) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(fmt::format("{}: no such {} folder", dir, kind));
  if (!fs::is_directory(dir, ec)) return InvalidArgument(fmt::format("{}: not a folder", dir));
  const fs::path base(dir);
  std::vector<HostTensor> out;
  out.reserve(input_names.size());

  if (fs::exists(base / fmt::format("{}_0.pb", kind), ec)) {
    for (size_t i = 0; i < input_names.size(); ++i) {
      const std::string path = (base / fmt::format("{}_{}.pb", kind, i)).string();
      if (!fs::exists(path, ec))
        return NotFound(fmt::format("{}: missing; the model has {} {}s and {} {} is '{}'", path,
                                    input_names.size(), kind, kind, i, input_names[i]));
      KILN_ASSIGN_OR_RETURN(HostTensor t, ReadTensorProtoFile(path));
      if (!t.name.empty() && t.name != input_names[i])
        return InvalidArgument(fmt::format("{}: holds tensor '{}' but model {} {} is '{}'", path, t.name, kind, i,
                                           input_names[i]));
      t.name = input_names[i];
      out.push_back(std::move(t));
    }
    const std::string extra = (base / fmt::format("{}_{}.pb", kind, input_names.size())).string();
    if (fs::exists(extra, ec))
      return InvalidArgument(fmt::format("{}: unexpected; the model has only {} {}s", extra, input_names.size(), kind));
    return out;
  }

  for (size_t i = 0; i < input_names.size(); ++i) {
    const std::string path = (base / NpyFileNameForInput(input_names[i])).string();
    if (!fs::exists(path, ec))
      return NotFound(fmt::format("{}: no {}_0.pb and no {} for {} {} '{}'", dir, kind, NpyFileNameForInput(input_names[i]),
                                  kind, i, input_names[i]));
    KILN_ASSIGN_OR_RETURN(HostTensor t, ReadNpyFile(path));
    t.name = input_names[i];
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<std::vector<HostTensor>> ReadInputDir(const std::string& dir, const std::vector<std::string>& input_names) {
  return ReadTensorDir(dir, input_names, "input");
}

Result<std::vector<HostTensor>> ReadOutputDir(const std::string& dir, const std::vector<std::string>& output_names) {
  return ReadTensorDir(dir, output_names, "output");
}

Status WriteOutputDir(const std::string& dir, const std::vector<HostTensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FailedPrecondition(fmt::format("{}: cannot create folder: {}", dir, ec.message()));
  for (size_t i = 0; i < outputs.size(); ++i)
    KILN_RETURN_IF_ERROR(WriteTensorProtoFile((fs::path(dir) / fmt::format("output_{}.pb", i)).string(), outputs[i]));
  return Status::Ok();
}

}  // namespace kiln::io
