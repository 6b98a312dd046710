// AttrMap's out-of-line members.
#include "runtime/attrs.h"

#include <bit>
#include <cstdint>

namespace kiln {

const std::vector<int64_t> AttrMap::kNoInts;
const std::vector<float> AttrMap::kNoFloats;

namespace {

// Floats compare by bits: two attributes are equal when they would serialize the same, so
// NaN equals NaN and 0.0 differs from -0.0 (the compiler uses this to merge identical ops).
bool SameFloat(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

bool SameAttr(const Attr& a, const Attr& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Attr::Kind::kInt: return a.i == b.i;
    case Attr::Kind::kFloat: return SameFloat(a.f, b.f);
    case Attr::Kind::kString: return a.s == b.s;
    case Attr::Kind::kInts: return a.ints == b.ints;
    case Attr::Kind::kFloats:
      if (a.floats.size() != b.floats.size()) return false;
      for (size_t i = 0; i < a.floats.size(); ++i)
        if (!SameFloat(a.floats[i], b.floats[i])) return false;
      return true;
  }
  return false;
}

}  // namespace

// Equal when both hold the same names with the same values; insertion order does not matter.
// Names are unique within a map (Slot reuses an existing name), so equal sizes plus every
// item of *this found in `o` means the sets are equal.
bool AttrMap::operator==(const AttrMap& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (const auto& [name, attr] : items_) {
    const Attr* other = o.Find(name);
    if (!other || !SameAttr(attr, *other)) return false;
  }
  return true;
}

}  // namespace kiln
