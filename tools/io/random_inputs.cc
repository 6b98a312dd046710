#include "tools/io/random_inputs.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>
#include <random>

#include <fmt/format.h>

#include "runtime/half.h"
#include "runtime/shape_text.h"

namespace kiln::io {
namespace {

// Dims in --shape's DIMS form, "1x3x224x224", to quote the option back.
std::string DimsOption(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

// A non-negative decimal integer, all of `text`; `value` is untouched otherwise.
bool ParseInt(std::string_view text, int64_t& value) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return false;
  value = v;
  return true;
}

using SymbolValues = std::map<std::string, int64_t, std::less<>>;

// The symbols an entry's profile fixes: "N=1, T in 1..64; not (T > 1)" gives N = 1 (the
// EntryInfo::name format: profile clauses joined by ", ", then If outcomes after "; ").
SymbolValues FixedByEntry(const std::string& name) {
  SymbolValues fixed;
  const std::string_view profile = std::string_view(name).substr(0, name.find("; "));
  size_t pos = 0;
  while (pos <= profile.size()) {
    const size_t comma = profile.find(", ", pos);
    const std::string_view clause =
        profile.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const size_t eq = clause.find('=');
    int64_t value = 0;
    if (eq != std::string_view::npos && eq > 0 && ParseInt(clause.substr(eq + 1), value))
      fixed.emplace(std::string(clause.substr(0, eq)), value);
    if (comma == std::string_view::npos) break;
    pos = comma + 2;
  }
  return fixed;
}

// "pass --shape x:DIMS, numbers for its dims [N, 3, 224, 224] joined by 'x'" for the error of
// an undecided dim.
std::string ShapeHint(const TensorInfo& t) {
  const std::string dims = ShapeText(t.shape.size(), [&](size_t i) {
    return t.shape[i].value >= 0 ? std::to_string(t.shape[i].value) : t.shape[i].symbol;
  });
  return fmt::format("pass --shape {}:DIMS, numbers for its dims {} joined by 'x' ('?' takes the value an entry "
                     "fixes)",
                     t.name, dims);
}

Status CheckGiven(std::span<const TensorInfo> inputs, const std::map<std::string, std::vector<int64_t>>& given) {
  for (const auto& [name, dims] : given) {
    auto it = std::find_if(inputs.begin(), inputs.end(), [&name = name](const TensorInfo& t) { return t.name == name; });
    if (it == inputs.end()) {
      std::string names;
      for (const TensorInfo& t : inputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
      return InvalidArgument(fmt::format("--shape names '{}', which is not an input of the model (inputs: {})", name,
                                         names.empty() ? "none" : names));
    }
    if (dims.size() != it->shape.size())
      return InvalidArgument(fmt::format("--shape {}:{} has rank {}, the input has rank {}", name, DimsOption(dims),
                                         dims.size(), it->shape.size()));
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] >= 0 && it->shape[d].value >= 0 && it->shape[d].value != dims[d])
        return InvalidArgument(
            fmt::format("--shape {}:{}: dim {} is {} in the artifact", name, DimsOption(dims), d, it->shape[d].value));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::vector<int64_t>>> ResolveInputShapes(std::span<const TensorInfo> inputs,
                                                             std::span<const EntryInfo> entries,
                                                             const std::map<std::string, std::vector<int64_t>>& given) {
  KILN_RETURN_IF_ERROR(CheckGiven(inputs, given));
  // Each input's dims as given: a --shape's numbers (-1 where it writes '?'), else the
  // artifact's constants and -1 for its symbolic dims.
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorInfo& t : inputs) {
    if (auto it = given.find(t.name); it != given.end()) {
      shapes.push_back(it->second);
    } else {
      std::vector<int64_t> dims;
      for (const DimInfo& dim : t.shape) dims.push_back(dim.value);
      shapes.push_back(std::move(dims));
    }
  }
  SymbolValues bound;  // symbols whose value a --shape gives
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < inputs[i].shape.size(); ++d)
      if (inputs[i].shape[d].value < 0 && shapes[i][d] >= 0) bound.emplace(inputs[i].shape[d].symbol, shapes[i][d]);
  // Symbols still open, then the first entry that fixes them all, else the first that fixes
  // the most of them (the error below then names the dims still open).
  std::vector<std::string> open;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < inputs[i].shape.size(); ++d) {
      const DimInfo& dim = inputs[i].shape[d];
      if (shapes[i][d] < 0 && dim.value < 0 && !bound.count(dim.symbol) && dim.symbol.find('|') == std::string::npos)
        open.push_back(dim.symbol);
    }
  if (!open.empty()) {
    SymbolValues pick;
    size_t most = 0;
    for (const EntryInfo& e : entries) {
      SymbolValues fixed = FixedByEntry(e.name);
      // An entry for empty tensors (a profile's 'N=0') times nothing: never picked.
      std::erase_if(fixed, [](const auto& f) { return f.second == 0; });
      const size_t n = static_cast<size_t>(
          std::count_if(open.begin(), open.end(), [&](const std::string& s) { return fixed.count(s) > 0; }));
      if (n > most) {
        most = n;
        pick = std::move(fixed);
      }
      if (n == open.size()) break;
    }
    for (const std::string& s : open)
      if (auto f = pick.find(s); f != pick.end()) bound.emplace(s, f->second);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = inputs[i];
    std::vector<int64_t>& dims = shapes[i];
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const DimInfo& dim = t.shape[d];
      if (dims[d] >= 0) continue;
      int64_t value = dim.value;
      if (value < 0) {
        const std::string_view first = std::string_view(dim.symbol).substr(0, dim.symbol.find('|'));
        if (auto b = bound.find(dim.symbol); b != bound.end())
          value = b->second;
        else if (first.size() < dim.symbol.size() && !ParseInt(first, value))
          if (auto f = bound.find(first); f != bound.end()) value = f->second;
      }
      if (value < 0)
        return InvalidArgument(
            fmt::format("input '{}' dim {} is symbolic ('{}') and no entry of the artifact fixes it: "
                        "{}",
                        t.name, d, dim.symbol, ShapeHint(t)));
      dims[d] = value;
    }
  }
  return shapes;
}

Result<std::vector<HostTensor>> RandomInputs(std::span<const TensorInfo> inputs,
                                             std::span<const std::vector<int64_t>> shapes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < inputs.size() && i < shapes.size(); ++i) {
    HostTensor t;
    t.name = inputs[i].name;
    t.dtype = inputs[i].dtype;
    t.dims = shapes[i];
    const size_t size = DTypeSize(t.dtype);
    if (size == 0) return Unimplemented(fmt::format("input '{}' has dtype {}", t.name, DTypeName(t.dtype)));
    const int64_t n = t.num_elements();
    if (n < 0 || n == INT64_MAX || static_cast<uint64_t>(n) > UINT64_MAX / 8 / size)
      return ResourceExhausted(fmt::format("input '{}' of shape {} is too large", t.name, ShapeText(t.dims)));
    try {
      t.bytes.resize(static_cast<size_t>(n) * size);
    } catch (const std::bad_alloc&) {
      return ResourceExhausted(fmt::format("cannot allocate {} bytes for input '{}'", n * size, t.name));
    }
    uint8_t* p = t.bytes.data();
    for (int64_t k = 0; k < n; ++k, p += size) {
      auto put = [&](auto v) { std::memcpy(p, &v, sizeof v); };
      switch (t.dtype) {
        case DType::kFloat32: put(static_cast<float>(real(rng))); break;
        case DType::kFloat64: put(real(rng)); break;
        case DType::kFloat16: put(FloatToHalf(static_cast<float>(real(rng)))); break;
        case DType::kBFloat16: put(FloatToBF16(static_cast<float>(real(rng)))); break;
        case DType::kBool: put(static_cast<uint8_t>(small(rng) & 1)); break;
        case DType::kUInt8: put(static_cast<uint8_t>(small(rng))); break;
        case DType::kInt8: put(static_cast<int8_t>(small(rng))); break;
        case DType::kUInt16: put(static_cast<uint16_t>(small(rng))); break;
        case DType::kInt16: put(static_cast<int16_t>(small(rng))); break;
        case DType::kInt32: put(static_cast<int32_t>(small(rng))); break;
        case DType::kUInt32: put(static_cast<uint32_t>(small(rng))); break;
        case DType::kInt64: put(static_cast<int64_t>(small(rng))); break;
        case DType::kUInt64: put(static_cast<uint64_t>(small(rng))); break;
        case DType::kUndefined: break;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kiln::io
