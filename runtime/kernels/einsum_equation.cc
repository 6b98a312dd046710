#include "runtime/kernels/einsum_equation.h"

#include <string>

namespace kiln::cpu {
namespace {

int LetterId(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

// One term of the equation with spaces removed: its letters and where its ellipsis is.
struct Term {
  int8_t letters[kEinsumMaxLabels] = {};
  int num_letters = 0;
  int ellipsis_at = -1;  // index into letters before which the ellipsis stands
};

Status Bad(std::string_view equation, const std::string& what) {
  return InvalidArgument("equation '" + std::string(equation) + "': " + what);
}

// "term K" (1-based) for an input term, "the output" for term -1; built only for errors,
// since the kernel parses on every call and must not allocate on success.
std::string TermName(int term) { return term < 0 ? "the output" : "term " + std::to_string(term + 1); }

// Reads the term [begin, end) of the equation.
Status ReadTerm(std::string_view eq, size_t begin, size_t end, int term, Term* t) {
  for (size_t i = begin; i < end; ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (i + 2 >= end || eq[i + 1] != '.' || eq[i + 2] != '.')
        return Bad(eq, TermName(term) + ": a '.' that does not start an ellipsis '...'");
      if (t->ellipsis_at >= 0) return Bad(eq, TermName(term) + ": more than one ellipsis");
      t->ellipsis_at = t->num_letters;
      i += 2;
      continue;
    }
    const int id = LetterId(c);
    if (id < 0) return Bad(eq, TermName(term) + ": unexpected character '" + std::string(1, c) + "' (labels are letters)");
    if (t->num_letters >= kEinsumMaxLabels) return Bad(eq, TermName(term) + ": too many labels");
    t->letters[t->num_letters++] = static_cast<int8_t>(id);
  }
  return Status::Ok();
}

}  // namespace

Status ParseEinsum(std::string_view eq, const int* ranks, int num_operands, EinsumSpec* spec) {
  *spec = EinsumSpec{};
  if (num_operands < 1) return Bad(eq, "expected at least one operand");
  if (num_operands > kEinsumMaxOperands)
    return Unimplemented("equation '" + std::string(eq) + "': " + std::to_string(num_operands) +
                         " operands, at most " + std::to_string(kEinsumMaxOperands) + " supported");
  const size_t arrow = eq.find("->");
  const std::string_view lhs = eq.substr(0, arrow);
  if (arrow != std::string_view::npos && eq.find("->", arrow + 2) != std::string_view::npos)
    return Bad(eq, "more than one '->'");
  Term terms[kEinsumMaxOperands];
  size_t begin = 0;
  int n = 0;
  for (;;) {
    const size_t comma = lhs.find(',', begin);
    const size_t end = comma == std::string_view::npos ? lhs.size() : comma;
    if (n == num_operands)
      return Bad(eq, "more terms than the " + std::to_string(num_operands) + " inputs");
    KILN_RETURN_IF_ERROR(ReadTerm(eq, begin, end, n, &terms[n]));
    ++n;
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (n != num_operands)
    return Bad(eq, std::to_string(n) + " terms for " + std::to_string(num_operands) + " inputs");
  spec->num_operands = n;
  int count[kEinsumLetters] = {};
  for (int k = 0; k < n; ++k) {
    const Term& t = terms[k];
    const int r = ranks[k];
    if (t.ellipsis_at < 0 ? r != t.num_letters : r < t.num_letters)
      return Bad(eq, TermName(k) + " has " + std::to_string(t.num_letters) + " labels" +
                         (t.ellipsis_at < 0 ? "" : " and an ellipsis") + " for input " + std::to_string(k) +
                         " of rank " + std::to_string(r));
    if (r > kMaxRank) return Bad(eq, "input " + std::to_string(k) + " has rank " + std::to_string(r));
    const int e = r - t.num_letters;
    if (e > spec->ellipsis_dims) spec->ellipsis_dims = e;
    spec->ranks[k] = r;
    for (int d = 0, l = 0; d < r; ++d) {
      const bool in_ellipsis = t.ellipsis_at >= 0 && d >= t.ellipsis_at && d < t.ellipsis_at + e;
      spec->labels[k][d] = in_ellipsis ? -1 : t.letters[l++];
      if (!in_ellipsis) ++count[spec->labels[k][d]];
    }
  }
  // Ellipsis dims, right-aligned: an operand with e of E dims uses the last e ids.
  for (int k = 0; k < n; ++k) {
    const int e = spec->ranks[k] - terms[k].num_letters;
    for (int j = 0; j < e; ++j)
      spec->labels[k][terms[k].ellipsis_at + j] = static_cast<int8_t>(kEinsumLetters + spec->ellipsis_dims - e + j);
    for (int d = 0; d < spec->ranks[k]; ++d) spec->used[spec->labels[k][d]] = true;
  }
  int& out = spec->out_rank;
  if (arrow == std::string_view::npos) {
    for (int j = 0; j < spec->ellipsis_dims; ++j) spec->out_labels[out++] = static_cast<int8_t>(kEinsumLetters + j);
    for (int id = 0; id < kEinsumLetters; ++id)
      if (count[id] == 1) {
        if (out == kMaxRank) return Bad(eq, "the output has more than " + std::to_string(kMaxRank) + " dims");
        spec->out_labels[out++] = static_cast<int8_t>(id);
      }
    return Status::Ok();
  }
  Term o;
  KILN_RETURN_IF_ERROR(ReadTerm(eq, arrow + 2, eq.size(), -1, &o));
  bool seen[kEinsumLetters] = {};
  for (int l = 0; l <= o.num_letters; ++l) {
    if (l == o.ellipsis_at)
      for (int j = 0; j < spec->ellipsis_dims; ++j) {
        if (out == kMaxRank) return Bad(eq, "the output has more than " + std::to_string(kMaxRank) + " dims");
        spec->out_labels[out++] = static_cast<int8_t>(kEinsumLetters + j);
      }
    if (l == o.num_letters) break;
    const int id = o.letters[l];
    const char c = static_cast<char>(id < 26 ? 'A' + id : 'a' + id - 26);
    if (seen[id]) return Bad(eq, "the output repeats label '" + std::string(1, c) + "'");
    if (!count[id]) return Bad(eq, "the output label '" + std::string(1, c) + "' is in no input term");
    if (out == kMaxRank) return Bad(eq, "the output has more than " + std::to_string(kMaxRank) + " dims");
    seen[id] = true;
    spec->out_labels[out++] = static_cast<int8_t>(id);
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
