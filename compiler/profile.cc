#include "compiler/profile.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/ops/meta_util.h"
#include "compiler/passes/value_inputs.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t pos = 0;;) {
    const size_t at = s.find(sep, pos);
    parts.push_back(s.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    if (at == std::string_view::npos) return parts;
    pos = at + 1;
  }
}

// An integer of at least `lo`, the whole of `s` but blanks.
bool ParseAtLeast(std::string_view s, int64_t lo, int64_t* v) {
  s = Trim(s);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && *v >= lo;
}

// Rounds min up and a finite max down to multiples of the divisor; false when nothing is left.
bool Normalise(DimRange& r) {
  if (r.min % r.divisor) {
    if (r.min > kNoMax - r.divisor) return false;
    r.min += r.divisor - r.min % r.divisor;
  }
  if (r.max != kNoMax) r.max -= r.max % r.divisor;
  return r.min <= r.max && r.min != kNoMax;
}

Result<DimRange> ParseSpec(std::string_view spec, const std::string& where) {
  const std::string_view spec_text = spec;
  DimRange r;
  const size_t colon = spec.rfind(':');
  if (colon != std::string_view::npos) {
    if (!ParseAtLeast(spec.substr(colon + 1), 1, &r.divisor))
      return InvalidArgument(fmt::format("{}: divisor '{}' is not an integer >= 1", where, spec.substr(colon + 1)));
    spec = spec.substr(0, colon);
  }
  const size_t dots = spec.find("..");
  if (dots == std::string_view::npos) {
    if (!ParseAtLeast(spec, 0, &r.min))
      return InvalidArgument(fmt::format("{}: '{}' is not a dim value >= 0, a range LO..HI or LO..", where, spec));
    r.max = r.min;
  } else {
    const std::string_view lo = spec.substr(0, dots), hi = Trim(spec.substr(dots + 2));
    if (!ParseAtLeast(lo, 0, &r.min))
      return InvalidArgument(fmt::format("{}: range start '{}' is not an integer >= 0", where, lo));
    if (!hi.empty() && !ParseAtLeast(hi, 0, &r.max))
      return InvalidArgument(fmt::format("{}: range end '{}' is not an integer >= 0", where, hi));
  }
  if (!Normalise(r)) return InvalidArgument(fmt::format("{}: '{}' admits no value", where, Trim(spec_text)));
  return r;
}

// The dim of `input` that `dim` names: its position, or the first dim bound to that symbol.
Result<int> FindDim(const ir::Value& input, const std::string& dim, const std::string& where) {
  const int rank = static_cast<int>(input.shape.size());
  if (rank == 0)
    return InvalidArgument(fmt::format("{}: input '{}' is a scalar (rank 0): it has no dims to constrain", where,
                                       input.name));
  if (!dim.empty() && dim.find_first_not_of("0123456789") == std::string::npos) {
    int64_t pos = 0;
    const auto [end, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), pos);
    if (ec != std::errc() || pos >= rank)
      return InvalidArgument(fmt::format("{}: input '{}' has rank {} ({}), so it has no dim {}", where, input.name,
                                         rank, ir::ShapeToString(input.shape), dim));
    return static_cast<int>(pos);
  }
  for (int d = 0; d < rank; ++d)
    if (input.shape[d].op() == ir::SymOp::kVar && input.shape[d].name() == dim) return d;
  return InvalidArgument(fmt::format("{}: input '{}' {} has no dim named '{}' (name a symbol it declares, or a "
                                     "position 0..{})",
                                     where, input.name, ir::ShapeToString(input.shape), dim, rank - 1));
}

// V | '[' V (',' V)* ']', each V a number (an integer, or a decimal as strtod reads it).
Result<std::vector<std::string>> ParseValues(std::string_view text, const std::string& where) {
  std::string_view s = Trim(text);
  const bool bracketed = !s.empty() && s.front() == '[';
  if (bracketed) {
    if (s.back() != ']') return InvalidArgument(fmt::format("{}: '{}' has no closing ']'", where, s));
    s = s.substr(1, s.size() - 2);
  }
  std::vector<std::string> out;
  if (bracketed && Trim(s).empty()) return out;  // '[]': an empty tensor, such as a Reduce's empty axes
  for (std::string_view item : Split(s, ',')) {
    item = Trim(item);
    double v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc::result_out_of_range && end == item.data() + item.size())
      return InvalidArgument(fmt::format("{}: '{}' is out of range for a double", where, item));
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      return InvalidArgument(fmt::format("{}: '{}' is not a number (expected V or [V,V,...], each a decimal such as "
                                         "-2, 0.5 or 1e-3)", where, item));
    out.emplace_back(item);
  }
  if (!bracketed && out.size() > 1)
    return InvalidArgument(fmt::format("{}: several values need brackets: [{}]", where, s));
  return out;
}

// Element `text` of a value profile read in `dtype`: an integer (int64 for bool and the integer
// dtypes), or the bits of the floating-point value rounded to `dtype` (passes::FloatBits).
// `shown` gets the value as the entry's name shows it.
Result<int64_t> ReadElement(const std::string& text, DType dtype, const std::string& where, std::string* shown) {
  if (ir::meta::IsFloat(dtype)) {
    double d = 0;
    std::from_chars(text.data(), text.data() + text.size(), d);  // ParseValues checked it
    const int64_t bits = passes::FloatBits(dtype, d);
    *shown = fmt::format("{}", passes::FloatFromBits(dtype, bits));
    return bits;
  }
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return InvalidArgument(fmt::format("{} = {} does not fit its dtype", where, text));
  if (ec != std::errc() || end != text.data() + text.size())
    return InvalidArgument(fmt::format("{} = {} is not an integer", where, text));
  const bool fits = dtype == DType::kInt64 ? true : dtype == DType::kInt32 ? v >= INT32_MIN && v <= INT32_MAX : v == 0 || v == 1;
  if (!fits) return InvalidArgument(fmt::format("{} = {} does not fit its dtype", where, v));
  *shown = std::to_string(v);
  return v;
}

}  // namespace

std::string DimRange::Values() const {
  const std::string step = divisor == 1 ? "" : fmt::format(":{}", divisor);
  if (fixed()) return std::to_string(min);
  if (max == kNoMax) return fmt::format(">= {}{}", min, step);
  return fmt::format("{}..{}{}", min, max, step);
}

std::string DimRange::Describe(const std::string& name) const {
  if (fixed()) return name + "=" + Values();
  return name + (max == kNoMax ? " " : " in ") + Values();
}

Result<Profile> ParseProfile(std::string_view text) {
  Profile p;
  p.text = std::string(text);
  if (Trim(text) == "default") return p;
  const std::string where = fmt::format("profile '{}'", text);
  for (std::string_view group : Split(text, ';')) {
    group = Trim(group);
    const size_t eq = group.find('=');
    const size_t colon = eq == std::string_view::npos ? std::string_view::npos : group.rfind(':', eq);
    const bool values = eq != std::string_view::npos && eq > 0 &&
                        (colon == std::string_view::npos || Trim(group.substr(eq + 1)).starts_with('['));
    if (values) {
      const std::string input(Trim(group.substr(0, eq)));
      KILN_ASSIGN_OR_RETURN(std::vector<std::string> elements,
                            ParseValues(group.substr(eq + 1), fmt::format("{} {}", where, input)));
      for (const ValueConstraint& v : p.values)
        if (v.input == input) return InvalidArgument(fmt::format("{}: input '{}' has values twice", where, input));
      p.values.push_back({input, std::move(elements)});
      continue;
    }
    if (colon == std::string_view::npos || colon == 0)
      return InvalidArgument(fmt::format("{}: expected INPUT:DIM=VALUE[,DIM=VALUE...] (for example images:N=1..64), "
                                         "INPUT=VALUES (for example sr=16000 or axes=[0,2]) or 'default', got '{}'",
                                         where, group));
    const std::string input(Trim(group.substr(0, colon)));
    for (std::string_view item : Split(group.substr(colon + 1), ',')) {
      const size_t at = item.find('=');
      if (at == std::string_view::npos)
        return InvalidArgument(fmt::format("{}: expected DIM=VALUE after '{}:', got '{}'", where, input, item));
      const std::string dim(Trim(item.substr(0, at)));
      if (dim.empty()) return InvalidArgument(fmt::format("{}: missing dim name before '=' in '{}'", where, item));
      KILN_ASSIGN_OR_RETURN(DimRange r, ParseSpec(item.substr(at + 1), fmt::format("{} {}:{}", where, input, dim)));
      p.dims.push_back({input, dim, r});
    }
  }
  return p;
}

Result<ResolvedProfile> ResolveProfile(const Profile& profile, const ir::Trace& imported) {
  const std::string where = fmt::format("profile '{}'", profile.text);
  auto find_input = [&](const std::string& name) -> Result<const ir::Value*> {
    std::string names;
    for (ir::ValueId id : imported.inputs) {
      names += (names.empty() ? "'" : ", '") + imported.value(id).name + "'";
      if (imported.value(id).name == name) return &imported.value(id);
    }
    return InvalidArgument(fmt::format("{}: '{}' is not a runtime input of the model (inputs: {})", where, name,
                                       names.empty() ? "none" : names));
  };
  ResolvedProfile out;
  // Values: checked against the input's dtype and element count. A 1-D input of symbolic
  // length gets that length fixed, as 'INPUT:0=COUNT' would.
  std::vector<DimConstraint> dims = profile.dims;
  std::string value_names;
  for (const ValueConstraint& c : profile.values) {
    KILN_ASSIGN_OR_RETURN(const ir::Value* input, find_input(c.input));
    const std::string at = fmt::format("{}: input '{}' {}{}", where, c.input, DTypeName(input->dtype),
                                       ir::ShapeToString(input->shape));
    if (!passes::CanFixValues(input->dtype))
      return InvalidArgument(fmt::format("{}: only int32, int64, bool, float16, bfloat16, float32 and float64 inputs "
                                         "can have their values fixed", at));
    const int64_t count = static_cast<int64_t>(c.elements.size());
    if (count > passes::kMaxValueElements)
      return InvalidArgument(fmt::format("{}: {} values, over the limit of {}", at, count, passes::kMaxValueElements));
    if (input->shape.size() == 1 && !input->shape[0].is_const()) {
      dims.push_back({c.input, "0", DimRange{count, count, 1}});
    } else {
      int64_t elements = 1;
      for (const ir::Sym& d : input->shape) {
        if (!d.is_const())
          return InvalidArgument(fmt::format("{}: its element count is not fixed; fix its dims too, as in "
                                             "'{}:0=...'",
                                             at, c.input));
        elements = std::min(elements * std::min(*d.value(), passes::kMaxValueElements + 1),
                            passes::kMaxValueElements + 1);
      }
      if (elements != count)
        return InvalidArgument(fmt::format("{}: has {} elements, the profile gives {}", at,
                                           elements > passes::kMaxValueElements ? "over 64" : std::to_string(elements),
                                           count));
    }
    std::vector<int64_t> elements;
    std::vector<std::string> shown(c.elements.size());
    for (size_t k = 0; k < c.elements.size(); ++k) {
      KILN_ASSIGN_OR_RETURN(int64_t e, ReadElement(c.elements[k], input->dtype, fmt::format("{}: element {}", at, k),
                                                   &shown[k]));
      elements.push_back(e);
    }
    out.values[c.input] = std::move(elements);
    value_names += fmt::format("{}{}={}", value_names.empty() ? "" : ", ", c.input,
                               input->shape.empty() && count == 1 ? shown[0]
                                                                  : fmt::format("[{}]", fmt::join(shown, ",")));
  }
  std::map<std::string, DimRange> ranges;
  std::vector<std::string> order;  // symbols in the order the profile names them
  for (const DimConstraint& c : dims) {
    KILN_ASSIGN_OR_RETURN(const ir::Value* input, find_input(c.input));
    KILN_ASSIGN_OR_RETURN(int d, FindDim(*input, c.dim, where));
    const ir::Sym& s = input->shape[d];
    if (s.is_const()) {
      if (!c.range.Contains(*s.value()))
        return InvalidArgument(fmt::format("{}: input '{}' dim {} is fixed to {} by the model (or --shape), not {}",
                                           where, c.input, d, *s.value(), c.range.Values()));
      continue;
    }
    const std::string& sym = s.name();
    auto [it, added] = ranges.emplace(sym, c.range);
    if (added) {
      order.push_back(sym);
      continue;
    }
    DimRange& r = it->second;
    const DimRange before = r;
    r.min = std::max(r.min, c.range.min);
    r.max = std::min(r.max, c.range.max);
    const int64_t g = std::gcd(r.divisor, c.range.divisor);
    const bool overflow = __builtin_mul_overflow(r.divisor / g, c.range.divisor, &r.divisor);
    if (overflow || !Normalise(r))
      return InvalidArgument(fmt::format("{}: {} and {} admit no common value", where, before.Describe(sym),
                                         c.range.Describe(sym)));
  }

  for (const std::string& sym : order) out.name += (out.name.empty() ? "" : ", ") + ranges[sym].Describe(sym);
  if (!value_names.empty()) out.name += (out.name.empty() ? "" : ", ") + value_names;
  if (out.name.empty()) out.name = "default";
  for (ir::ValueId id : imported.inputs) {
    const ir::Value& v = imported.value(id);
    std::vector<int64_t> dims(v.shape.size(), -1);
    bool any = false;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d].op() != ir::SymOp::kVar) continue;
      // A symbol the profile does not name takes any size, 0 included (DimRange's default).
      const DimRange& r = ranges.emplace(v.shape[d].name(), DimRange{}).first->second;
      out.symbols[v.shape[d].name()] = r;
      if (r.fixed()) dims[d] = r.min, any = true;
    }
    if (any) out.input_shapes[v.name] = std::move(dims);
  }
  for (const auto& [sym, r] : ranges)
    if (!r.fixed()) out.ranges.emplace(sym, r);
  return out;
}

bool ResolvedProfile::Includes(const ResolvedProfile& other) const {
  for (const auto& [input, elements] : values) {
    auto it = other.values.find(input);
    if (it == other.values.end() || it->second != elements) return false;
  }
  for (const auto& [sym, r] : symbols) {
    auto it = other.symbols.find(sym);
    if (it == other.symbols.end() || !r.Includes(it->second)) return false;
  }
  return true;
}

std::vector<size_t> TryOrder(const std::vector<ResolvedProfile>& profiles) {
  std::vector<size_t> left(profiles.size()), order;
  for (size_t i = 0; i < left.size(); ++i) left[i] = i;
  while (!left.empty()) {
    // The first remaining profile with no other remaining one strictly inside it.
    auto next = std::find_if(left.begin(), left.end(), [&](size_t i) {
      return std::none_of(left.begin(), left.end(), [&](size_t j) {
        return j != i && profiles[i].Includes(profiles[j]) && !profiles[j].Includes(profiles[i]);
      });
    });
    if (next == left.end()) next = left.begin();  // not reached: strict inclusion has no cycles
    order.push_back(*next);
    left.erase(next);
  }
  return order;
}

}  // namespace kiln::compiler
