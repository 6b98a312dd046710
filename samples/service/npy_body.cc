#include "npy_body.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <random>

namespace {

struct NpyDType {
  std::string_view descr;
  kiln::DType dtype;
};
// numpy's own spelling of each dtype's descr ('|' for byte-sized types).
constexpr NpyDType kNpyDTypes[] = {
    {"<f4", kiln::DType::kFloat32}, {"<f8", kiln::DType::kFloat64}, {"<f2", kiln::DType::kFloat16},
    {"|i1", kiln::DType::kInt8},    {"|u1", kiln::DType::kUInt8},   {"<i2", kiln::DType::kInt16},
    {"<u2", kiln::DType::kUInt16},  {"<i4", kiln::DType::kInt32},   {"<u4", kiln::DType::kUInt32},
    {"<i8", kiln::DType::kInt64},   {"<u8", kiln::DType::kUInt64},  {"|b1", kiln::DType::kBool},
};

constexpr std::string_view kMagic = "\x93NUMPY";

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This reads exactly that grammar (string keys; string, True/False or int-tuple values).
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view s) : s_(s) {}

  struct Header {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<int64_t>> shape;
  };

  kiln::Result<Header> Read() {
    Header h;
    if (!Eat('{')) return Expected("'{'");
    while (!Eat('}')) {
      std::optional<std::string> key = String();
      if (!key) return Expected("a quoted key or '}'");
      if (!Eat(':')) return Expected("':'");
      if (*key == "descr") {
        if (!(h.descr = String())) return Expected("a quoted dtype (structured dtypes are not supported)");
      } else if (*key == "fortran_order") {
        if (Word("True")) h.fortran_order = true;
        else if (Word("False")) h.fortran_order = false;
        else return Expected("True or False");
      } else if (*key == "shape") {
        if (!(h.shape = Tuple())) return Expected("a tuple of non-negative integers");
      } else {
        return kiln::InvalidArgument("unknown key '" + *key + "'");
      }
      if (!Eat(',') && !Peek('}')) return Expected("',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Expected("only spaces after the dict");
    if (!h.descr || !h.fortran_order || !h.shape) return kiln::InvalidArgument("needs 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  kiln::Status Expected(const std::string& what) const {
    return kiln::InvalidArgument("expected " + what + " at byte " + std::to_string(pos_));
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n')) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  bool Word(std::string_view w) {
    SkipSpace();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    const size_t end = s_.find(s_[pos_], pos_ + 1);
    if (end == std::string_view::npos) return std::nullopt;
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  std::optional<int64_t> Int() {
    SkipSpace();
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v)) return std::nullopt;
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 writers
    return v;
  }
  std::optional<std::vector<int64_t>> Tuple() {
    if (!Eat('(')) return std::nullopt;
    std::vector<int64_t> dims;
    while (!Eat(')')) {
      std::optional<int64_t> d = Int();
      // One dim past kMaxRank is kept so that RequestInputs::Add names the rank.
      if (!d || dims.size() > static_cast<size_t>(kiln::kMaxRank)) return std::nullopt;
      dims.push_back(*d);
      if (!Eat(',') && !Peek(')')) return std::nullopt;
    }
    return dims;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

uint32_t LittleEndian(std::string_view bytes) {
  uint32_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

}  // namespace

kiln::Status ParseNpyInput(std::string_view name, std::string_view npy, RequestInputs& inputs) {
  const std::string where = "input '" + std::string(name) + "': .npy";
  if (npy.substr(0, kMagic.size()) != kMagic || npy.size() < 10) {
    return kiln::InvalidArgument(where + ": not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<uint8_t>(npy[6]);
  if (major < 1 || major > 3) return kiln::InvalidArgument(where + ": version " + std::to_string(major) + ", expected 1 to 3");
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (npy.size() < 8 + len_bytes) return kiln::InvalidArgument(where + ": truncated header");
  const uint64_t header_len = LittleEndian(npy.substr(8, len_bytes));
  const uint64_t data_offset = 8 + len_bytes + header_len;
  if (data_offset > npy.size()) {
    return kiln::InvalidArgument(where + ": header of " + std::to_string(header_len) + " bytes runs past the file's " +
                                 std::to_string(npy.size()) + " bytes");
  }
  kiln::Result<HeaderReader::Header> header = HeaderReader(npy.substr(8 + len_bytes, header_len)).Read();
  if (!header.ok()) return header.status().WithContext(where + " header");
  if (*header->fortran_order) return kiln::InvalidArgument(where + ": fortran_order True; send C-order data");
  const std::string& descr = *header->descr;
  const NpyDType* type = nullptr;
  for (const NpyDType& t : kNpyDTypes) {
    if (t.descr == descr) type = &t;
  }
  if (!type) {
    if (!descr.empty() && descr[0] == '>') return kiln::InvalidArgument(where + ": dtype '" + descr + "' is big-endian; send little-endian data");
    return kiln::InvalidArgument(where + ": dtype '" + descr + "' is not one Kiln takes");
  }
  const std::string_view data = npy.substr(data_offset);
  const size_t item = kiln::DTypeSize(type->dtype);
  if (data.size() % item != 0) {
    return kiln::InvalidArgument(where + " has " + std::to_string(data.size()) + " data bytes, not a multiple of " +
                                 std::to_string(item) + " (" + std::string(kiln::DTypeName(type->dtype)) + ")");
  }
  if (type->dtype == kiln::DType::kBool) {
    const size_t bad = data.find_first_not_of(std::string_view("\0\1", 2));
    if (bad != std::string_view::npos) {
      return kiln::InvalidArgument(where + ": bool element " + std::to_string(bad) + " is " +
                                   std::to_string(static_cast<uint8_t>(data[bad])) + ", expected 0 or 1");
    }
  }
  KILN_ASSIGN_OR_RETURN(HostTensor * t, inputs.Add(name, type->dtype, std::move(*header->shape),
                                                   static_cast<int64_t>(data.size() / item)));
  std::memcpy(t->data(), data.data(), data.size());
  return kiln::Status();
}

kiln::Result<std::string> WriteNpy(const kiln::TensorView& t) {
  const NpyDType* type = nullptr;
  for (const NpyDType& n : kNpyDTypes) {
    if (n.dtype == t.dtype) type = &n;
  }
  if (!type) return kiln::Unimplemented("dtype " + std::string(kiln::DTypeName(t.dtype)) + " has no .npy dtype");
  std::string dict = "{'descr': '" + std::string(type->descr) + "', 'fortran_order': False, 'shape': (";
  for (int32_t i = 0; i < t.rank; ++i) dict += std::to_string(t.dims[i]) + (t.rank == 1 ? "," : i + 1 < t.rank ? ", " : "");
  dict += "), }";
  // Version 1.0: magic, 1, 0, uint16 header length; the header ends in '\n' and pads the data
  // offset to a multiple of 64.
  const size_t header_len = (10 + dict.size() + 1 + 63) / 64 * 64 - 10;
  dict.resize(header_len - 1, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header_len & 0xff);
  out += static_cast<char>(header_len >> 8);
  out += dict;
  out.append(static_cast<const char*>(t.data), static_cast<size_t>(t.num_bytes()));
  return out;
}

kiln::Result<MultipartBody> NpyMultipartOutputs(const std::vector<kiln::TensorInfo>& infos,
                                                const std::vector<kiln::TensorView>& outputs) {
  std::vector<std::string> files;
  for (size_t i = 0; i < outputs.size() && i < infos.size(); ++i) {
    kiln::Result<std::string> npy = WriteNpy(outputs[i]);
    if (!npy.ok()) return npy.status().WithContext("output '" + infos[i].name + "'");
    files.push_back(std::move(*npy));
  }
  // A boundary must not occur inside a part: draw until none contains it (one draw, in practice).
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string boundary;
  auto occurs = [&] {
    for (const std::string& f : files) {
      if (f.find(boundary) != std::string::npos) return true;
    }
    return false;
  };
  do {
    char hex[40];
    std::snprintf(hex, sizeof hex, "kiln-%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    boundary = hex;
  } while (occurs());
  MultipartBody out{"multipart/form-data; boundary=" + boundary, ""};
  for (size_t i = 0; i < files.size(); ++i) {
    out.body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + infos[i].name + "\"; filename=\"" +
                infos[i].name + ".npy\"\r\nContent-Type: application/x-npy\r\n\r\n" + files[i] + "\r\n";
  }
  out.body += "--" + boundary + "--\r\n";
  return out;
}
