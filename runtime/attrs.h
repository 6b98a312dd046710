// Op attributes as the runtime and the compiler both see them: a small ordered map from
// attribute name (ONNX spelling) to an int, float, string, or int/float list.
// Thread-compatible value type. Lookups never allocate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

struct Attr {
  enum class Kind : uint8_t { kInt, kFloat, kString, kInts, kFloats };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

class AttrMap {
 public:
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  const Attr* Find(std::string_view name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  int64_t GetInt(std::string_view name, int64_t def) const {
    const Attr* a = Find(name);
    return a && a->kind == Attr::Kind::kInt ? a->i : def;
  }
  float GetFloat(std::string_view name, float def) const {
    const Attr* a = Find(name);
    return a && a->kind == Attr::Kind::kFloat ? a->f : def;
  }
  std::string_view GetString(std::string_view name, std::string_view def) const {
    const Attr* a = Find(name);
    return a && a->kind == Attr::Kind::kString ? std::string_view(a->s) : def;
  }
  // Empty when absent.
  const std::vector<int64_t>& GetInts(std::string_view name) const {
    const Attr* a = Find(name);
    return a && a->kind == Attr::Kind::kInts ? a->ints : kNoInts;
  }
  const std::vector<float>& GetFloats(std::string_view name) const {
    const Attr* a = Find(name);
    return a && a->kind == Attr::Kind::kFloats ? a->floats : kNoFloats;
  }

  void SetInt(std::string name, int64_t v) { Slot(std::move(name), Attr::Kind::kInt).i = v; }
  void SetFloat(std::string name, float v) { Slot(std::move(name), Attr::Kind::kFloat).f = v; }
  void SetString(std::string name, std::string v) {
    Slot(std::move(name), Attr::Kind::kString).s = std::move(v);
  }
  void SetInts(std::string name, std::vector<int64_t> v) {
    Slot(std::move(name), Attr::Kind::kInts).ints = std::move(v);
  }
  void SetFloats(std::string name, std::vector<float> v) {
    Slot(std::move(name), Attr::Kind::kFloats).floats = std::move(v);
  }
  void Erase(std::string_view name) {
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == name) { items_.erase(it); return; }
  }

  const std::vector<std::pair<std::string, Attr>>& items() const { return items_; }
  bool operator==(const AttrMap& o) const;

 private:
  Attr& Slot(std::string name, Attr::Kind kind) {
    for (auto& [k, v] : items_)
      if (k == name) { v = Attr{}; v.kind = kind; return v; }
    items_.emplace_back(std::move(name), Attr{});
    items_.back().second.kind = kind;
    return items_.back().second;
  }
  static const std::vector<int64_t> kNoInts;
  static const std::vector<float> kNoFloats;
  std::vector<std::pair<std::string, Attr>> items_;
};

}  // namespace kiln
