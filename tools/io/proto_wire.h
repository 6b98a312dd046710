// tools/io/proto_wire.h: the protocol buffers wire format, the small part the tools need to
// read and write one message kind (onnx.TensorProto, tools/io/tensor_files.cc) without linking
// protobuf. Encoding per https://protobuf.dev/programming-guides/encoding/: a message is a
// sequence of (tag, value) records; tag = field_number << 3 | wire_type; wire types 0 varint,
// 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit (3 and 4, the deprecated groups, are
// refused). Every length is checked against the bytes left before it is used.
// Thread-compatible: a WireReader reads bytes its caller keeps alive; a WireWriter owns its
// output string.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln::io {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One record of a message: its field number, wire type and value (`number` for varint and
// fixed types, `bytes` for length-delimited ones, a view into the reader's input).
struct WireField {
  uint32_t field = 0;
  WireType type = WireType::kVarint;
  uint64_t number = 0;
  std::string_view bytes;
};

// Reads the records of one message in order. Next() returns false at the end of the input or
// on malformed input; error() is then non-empty and says what and at which byte offset.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool Next(WireField* f) {
    if (pos_ == data_.size() || !error_.empty()) return false;
    const size_t start = pos_;
    uint64_t tag = 0;
    if (!Varint(&tag)) return false;
    const uint64_t number = tag >> 3;
    if (number == 0 || number > 536870911) return Fail(start, "field number 0 or over 2^29 - 1");
    f->field = static_cast<uint32_t>(number);
    switch (tag & 7) {
      case 0:
        f->type = WireType::kVarint;
        return Varint(&f->number);
      case 1:
        f->type = WireType::kFixed64;
        return Fixed(8, &f->number);
      case 5:
        f->type = WireType::kFixed32;
        return Fixed(4, &f->number);
      case 2: {
        f->type = WireType::kLengthDelimited;
        uint64_t len = 0;
        if (!Varint(&len)) return false;
        if (len > data_.size() - pos_)
          return Fail(start, "a length of " + std::to_string(len) + " bytes with " +
                                 std::to_string(data_.size() - pos_) + " left");
        f->bytes = data_.substr(pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return true;
      }
      default:
        return Fail(start, "wire type " + std::to_string(tag & 7) + " (groups and unknown types are not read)");
    }
  }

  // A packed repeated field's values, one at a time (its bytes in a WireReader of their own).
  bool NextVarint(uint64_t* v) { return pos_ < data_.size() && error_.empty() && Varint(v); }
  bool NextFixed(int bytes, uint64_t* v) { return pos_ < data_.size() && error_.empty() && Fixed(bytes, v); }
  bool at_end() const { return pos_ == data_.size(); }

  const std::string& error() const { return error_; }
  size_t offset() const { return pos_; }

 private:
  bool Fail(size_t at, const std::string& what) {
    error_ = "at byte " + std::to_string(at) + ": " + what;
    return false;
  }
  bool Varint(uint64_t* v) {
    const size_t start = pos_;
    uint64_t out = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ == data_.size()) return Fail(start, "a varint runs past the end");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && (b & 0x7e) != 0) return Fail(start, "a varint over 64 bits");
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = out;
        return true;
      }
    }
    return Fail(start, "a varint longer than 10 bytes");
  }
  bool Fixed(int bytes, uint64_t* v) {
    if (data_.size() - pos_ < static_cast<size_t>(bytes))
      return Fail(pos_, "a " + std::to_string(bytes * 8) + "-bit value runs past the end");
    uint64_t out = 0;
    for (int i = bytes - 1; i >= 0; --i) out = (out << 8) | static_cast<uint8_t>(data_[pos_ + i]);
    pos_ += static_cast<size_t>(bytes);
    *v = out;
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
  std::string error_;
};

// Appends records to a message.
class WireWriter {
 public:
  void Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    Raw(v);
  }
  void Bytes(uint32_t field, std::string_view b) { Bytes(field, b.data(), b.size()); }
  void Bytes(uint32_t field, const void* data, size_t size) {
    Tag(field, 2);
    Raw(size);
    out_.append(static_cast<const char*>(data), size);
  }
  std::string& out() { return out_; }

 private:
  void Tag(uint32_t field, int type) { Raw(uint64_t{field} << 3 | static_cast<uint64_t>(type)); }
  void Raw(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

}  // namespace kiln::io
