// Reading and writing host tensors: ONNX TensorProto files and NumPy .npy files.
// Every size read from a file is checked against the bytes actually present before any
// allocation, so a corrupt header cannot make us allocate or read out of bounds.
#include "compiler/io/tensor_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>

#include "compiler/serialize/artifact_file.h"

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

std::string DimsString(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
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

// Checks that a tensor's byte count agrees with its dims and dtype before writing it.
Status CheckConsistent(const HostTensor& t, std::string_view path) {
  if (!IsValidDType(static_cast<int32_t>(t.dtype)))
    return InvalidArgument(fmt::format("{}: tensor '{}' has invalid dtype {}", path, t.name, DTypeName(t.dtype)));
  auto n = CheckedElements(t.dims);
  if (!n) return InvalidArgument(fmt::format("{}: tensor '{}' has invalid dims {}", path, t.name, DimsString(t.dims)));
  const uint64_t want = static_cast<uint64_t>(*n) * DTypeSize(t.dtype);
  if (*n > 0 && want / static_cast<uint64_t>(*n) != DTypeSize(t.dtype))
    return InvalidArgument(fmt::format("{}: tensor '{}' dims {} overflow", path, t.name, DimsString(t.dims)));
  if (want != t.bytes.size())
    return InvalidArgument(fmt::format("{}: tensor '{}' {} needs {} bytes but holds {}", path, t.name,
                                       Describe(t), want, t.bytes.size()));
  return Status::Ok();
}

// ---- TensorProto ------------------------------------------------------------------------

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

int FieldSize(const onnx::TensorProto& p, ProtoField f) {
  switch (f) {
    case ProtoField::kFloat: return p.float_data_size();
    case ProtoField::kInt32: return p.int32_data_size();
    case ProtoField::kInt64: return p.int64_data_size();
    case ProtoField::kDouble: return p.double_data_size();
    case ProtoField::kUInt64: return p.uint64_data_size();
  }
  return 0;
}

// Stores element i of a typed field into `out`, narrowing as ONNX specifies (int32_data
// holds the bit pattern of 16-bit floats and the value of small integers).
void StoreTyped(const onnx::TensorProto& p, DType dt, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i);
    switch (dt) {
      case DType::kFloat32: { float v = p.float_data(k); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kFloat64: { double v = p.double_data(k); std::memcpy(out + 8 * i, &v, 8); break; }
      case DType::kInt64: { int64_t v = p.int64_data(k); std::memcpy(out + 8 * i, &v, 8); break; }
      case DType::kUInt64: { uint64_t v = p.uint64_data(k); std::memcpy(out + 8 * i, &v, 8); break; }
      case DType::kUInt32: { uint32_t v = static_cast<uint32_t>(p.uint64_data(k)); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kInt32: { int32_t v = p.int32_data(k); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kInt16:
      case DType::kUInt16:
      case DType::kFloat16:
      case DType::kBFloat16: { uint16_t v = static_cast<uint16_t>(p.int32_data(k)); std::memcpy(out + 2 * i, &v, 2); break; }
      case DType::kInt8:
      case DType::kUInt8: out[i] = static_cast<uint8_t>(p.int32_data(k)); break;
      case DType::kBool: out[i] = p.int32_data(k) != 0 ? 1 : 0; break;
      case DType::kUndefined: break;
    }
  }
}

std::string OnnxTypeName(int32_t t) {
  switch (t) {
    case onnx::TensorProto::STRING: return "string";
    case onnx::TensorProto::COMPLEX64: return "complex64";
    case onnx::TensorProto::COMPLEX128: return "complex128";
    default: return fmt::format("data_type {}", t);
  }
}

Result<HostTensor> FromProto(const onnx::TensorProto& p, std::string_view origin) {
  HostTensor t;
  t.name = p.name();
  const std::string where = p.name().empty() ? std::string(origin) : fmt::format("{} (tensor '{}')", origin, p.name());
  if (p.data_location() == onnx::TensorProto::EXTERNAL || p.external_data_size() > 0)
    return Unimplemented(fmt::format("{}: external data is not supported; store the tensor inline", where));
  if (p.has_segment())
    return Unimplemented(fmt::format("{}: segmented tensors are not supported", where));
  if (!p.has_data_type() || p.data_type() == onnx::TensorProto::UNDEFINED)
    return DataLoss(fmt::format("{}: data_type is missing", where));
  if (!IsValidDType(p.data_type()))
    return Unimplemented(fmt::format("{}: {} is not a Kiln dtype", where, OnnxTypeName(p.data_type())));
  t.dtype = static_cast<DType>(p.data_type());
  t.dims.assign(p.dims().begin(), p.dims().end());
  if (t.dims.size() > static_cast<size_t>(kMaxRank))
    return Unimplemented(fmt::format("{}: rank {} exceeds Kiln's maximum rank {}", where, t.dims.size(), kMaxRank));
  auto n = CheckedElements(t.dims);
  if (!n) return DataLoss(fmt::format("{}: invalid dims {}", where, DimsString(t.dims)));
  const size_t esize = DTypeSize(t.dtype);
  const ProtoField field = FieldFor(t.dtype);

  // Exactly one place may hold the data: raw_data or the dtype's typed field.
  const ProtoField all[] = {ProtoField::kFloat, ProtoField::kInt32, ProtoField::kInt64, ProtoField::kDouble,
                            ProtoField::kUInt64};
  for (ProtoField f : all) {
    if (f != field && FieldSize(p, f) > 0)
      return DataLoss(fmt::format("{}: dtype {} stores its data in raw_data or {}, but {} has {} values", where,
                                  DTypeName(t.dtype), ProtoFieldName(field), ProtoFieldName(f), FieldSize(p, f)));
  }
  if (p.string_data_size() > 0)
    return DataLoss(fmt::format("{}: dtype {} but string_data has {} values", where, DTypeName(t.dtype),
                                p.string_data_size()));
  const int typed = FieldSize(p, field);
  if (p.has_raw_data()) {
    if (typed > 0)
      return DataLoss(fmt::format("{}: both raw_data and {} are set", where, ProtoFieldName(field)));
    const uint64_t want = static_cast<uint64_t>(*n);
    if (p.raw_data().size() % esize != 0 || p.raw_data().size() / esize != want)
      return DataLoss(fmt::format("{}: dims {} of {} need {} elements ({} bytes) but raw_data has {} bytes", where,
                                  DimsString(t.dims), DTypeName(t.dtype), *n,
                                  want <= kMaxInt64 / esize ? fmt::format("{}", want * esize) : std::string("too many"),
                                  p.raw_data().size()));
    t.bytes.assign(p.raw_data().begin(), p.raw_data().end());
    if (t.dtype == DType::kBool)
      for (uint8_t& b : t.bytes) b = b != 0 ? 1 : 0;
    return t;
  }
  if (static_cast<int64_t>(typed) != *n)
    return DataLoss(fmt::format("{}: dims {} of {} need {} elements but {} has {}", where, DimsString(t.dims),
                                DTypeName(t.dtype), *n, ProtoFieldName(field), typed));
  t.bytes.resize(static_cast<size_t>(*n) * esize);
  StoreTyped(p, t.dtype, *n, t.bytes.data());
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

std::string Describe(const HostTensor& t) { return fmt::format("{}{}", DTypeName(t.dtype), DimsString(t.dims)); }

// ---- TensorProto ------------------------------------------------------------------------

Result<HostTensor> ParseTensorProto(const void* data, size_t size, std::string_view origin) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
    return Unimplemented(fmt::format("{}: {} bytes exceeds protobuf's 2 GiB message limit", origin, size));
  onnx::TensorProto p;
  if (!p.ParseFromArray(data, static_cast<int>(size)))
    return DataLoss(fmt::format("{}: not a valid serialized onnx.TensorProto ({} bytes; truncated or corrupt)",
                                origin, size));
  return FromProto(p, origin);
}

Result<HostTensor> ReadTensorProtoFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(FileBytes f,
                        ReadFile(path, kMaxTensorProtoFileBytes, "for a serialized TensorProto (protobuf's message limit)"));
  return ParseTensorProto(f.data.data(), f.data.size(), path);
}

Status WriteTensorProtoFile(const std::string& path, const HostTensor& t) {
  KILN_RETURN_IF_ERROR(CheckConsistent(t, path));
  onnx::TensorProto p;
  p.set_name(t.name);
  p.set_data_type(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) p.add_dims(d);
  p.set_raw_data(t.bytes.data(), t.bytes.size());
  std::string out;
  if (!p.SerializeToString(&out))
    return Internal(fmt::format("{}: serializing tensor '{}' {} failed (over 2 GiB?)", path, t.name, Describe(t)));
  return serialize::ReplaceFile(path, out.data(), out.size());
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
  if (!n) return DataLoss(fmt::format("{}: shape {} overflows", origin, DimsString(l.shape)));
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
                                DimsString(l.shape), DTypeName(l.dtype),
                                need_elems <= static_cast<uint64_t>(kMaxInt64) / esize
                                    ? fmt::format("{}", need_elems * esize) : std::string("too many"),
                                have));
  l.data_bytes = need_elems * esize;
  if (l.data_bytes != have)
    return DataLoss(fmt::format("{}: shape {} of {} needs {} data bytes but the file has {} ({} extra)", origin,
                                DimsString(l.shape), DTypeName(l.dtype), l.data_bytes, have, have - l.data_bytes));
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

Status WriteNpyFile(const std::string& path, const HostTensor& t) {
  KILN_RETURN_IF_ERROR(CheckConsistent(t, path));
  Result<std::string> descr = DescrFor(t.dtype);
  if (!descr.ok()) return descr.status().WithContext(path);
  // NumPy's tuple spelling: "()", "(5,)", "(1, 576)".
  const std::string shape = t.dims.size() == 1 ? fmt::format("{},", t.dims[0]) : fmt::format("{}", fmt::join(t.dims, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", *descr, shape);
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
  return serialize::ReplaceFile(path, out.data(), out.size());
}

// ---- input and output folders -------------------------------------------------------------

std::string NpyFileNameForInput(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c == '/' || c == ':') c = '_';
  return out + ".npy";
}

Result<std::vector<HostTensor>> ReadInputDir(const std::string& dir, const std::vector<std::string>& input_names) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(fmt::format("{}: no such input folder", dir));
  if (!fs::is_directory(dir, ec)) return InvalidArgument(fmt::format("{}: not a folder", dir));
  const fs::path base(dir);
  std::vector<HostTensor> out;
  out.reserve(input_names.size());

  if (fs::exists(base / "input_0.pb", ec)) {
    for (size_t i = 0; i < input_names.size(); ++i) {
      const std::string path = (base / fmt::format("input_{}.pb", i)).string();
      if (!fs::exists(path, ec))
        return NotFound(fmt::format("{}: missing; the model has {} inputs and input {} is '{}'", path,
                                    input_names.size(), i, input_names[i]));
      KILN_ASSIGN_OR_RETURN(HostTensor t, ReadTensorProtoFile(path));
      if (!t.name.empty() && t.name != input_names[i])
        return InvalidArgument(fmt::format("{}: holds tensor '{}' but model input {} is '{}'", path, t.name, i,
                                           input_names[i]));
      t.name = input_names[i];
      out.push_back(std::move(t));
    }
    const std::string extra = (base / fmt::format("input_{}.pb", input_names.size())).string();
    if (fs::exists(extra, ec))
      return InvalidArgument(fmt::format("{}: unexpected; the model has only {} inputs", extra, input_names.size()));
    return out;
  }

  for (size_t i = 0; i < input_names.size(); ++i) {
    const std::string path = (base / NpyFileNameForInput(input_names[i])).string();
    if (!fs::exists(path, ec))
      return NotFound(fmt::format("{}: no input_0.pb and no {} for input {} '{}'", dir, NpyFileNameForInput(input_names[i]),
                                  i, input_names[i]));
    KILN_ASSIGN_OR_RETURN(HostTensor t, ReadNpyFile(path));
    t.name = input_names[i];
    out.push_back(std::move(t));
  }
  return out;
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
