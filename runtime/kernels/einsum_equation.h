// Parsing of an Einsum equation ("bij,bjk->bik", "...ii->...i", "i,i"), shared by the
// compiler's meta function and the CPU kernel. Allocation-free, so the kernel can parse
// on every call.
//
// Every dim of every operand gets a label id: letters a-z and A-Z are ids 0..51, the dims
// an ellipsis stands for are ids 52.. (right-aligned across operands, numpy broadcasting).
// Without "->", the output is the ellipsis dims followed by the letters used exactly once,
// in alphabetical order (upper case before lower case, as numpy orders them).
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

inline constexpr int kEinsumMaxOperands = 8;
inline constexpr int kEinsumLetters = 52;
inline constexpr int kEinsumMaxLabels = kEinsumLetters + kMaxRank;

struct EinsumSpec {
  int num_operands = 0;
  int ranks[kEinsumMaxOperands] = {};
  int8_t labels[kEinsumMaxOperands][kMaxRank] = {};  // label id of each operand dim
  int ellipsis_dims = 0;                             // dims the ellipsis stands for (max over operands)
  int out_rank = 0;
  int8_t out_labels[kMaxRank] = {};
  bool used[kEinsumMaxLabels] = {};  // labels that appear in some operand
};

// Parses `equation` for operands of the given ranks. InvalidArgument names the problem
// ("equation 'ij,jk->ik': term 2 ...").
Status ParseEinsum(std::string_view equation, const int* ranks, int num_operands, EinsumSpec* spec);

}  // namespace kiln::cpu
