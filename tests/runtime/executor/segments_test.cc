// SplitSegments (runtime/executor/segments.h): where an entry's straight-line segments end, and
// the arena tensors' lifetimes the executor's CPU fallback regions copy by. Hand-built entries,
// expected values by hand.
#include "runtime/executor/segments.h"

#include <doctest/doctest.h>

#include <vector>

namespace kiln {
namespace {

using Predicates = std::vector<PreparedInstruction::Predicate>;

PreparedEntry Entry(std::vector<Control> control, std::vector<Predicates> when, std::vector<int32_t> runtime_dim_of) {
  PreparedEntry pe;
  for (size_t k = 0; k < control.size(); ++k) {
    PreparedInstruction& pi = pe.instructions.emplace_back();
    pi.control = control[k];
    pi.when = when[k];
  }
  pe.runtime_dim_of = std::move(runtime_dim_of);
  return pe;
}

constexpr Control kWork = Control::kNone;

TEST_CASE("segments: one straight-line run is one segment") {
  PreparedEntry pe = Entry({kWork, kWork, kWork}, {{}, {}, {}}, {-1, -1, -1});
  SplitSegments(pe);
  CHECK(pe.segment_end == std::vector<int32_t>{3, 3, 3});
}

TEST_CASE("segments end where predicates change, at a run-time Loop's control, and after a run-time dim") {
  const Predicates then_c = {{5, true}}, else_c = {{5, false}};
  // 0 1 | 2 3 (then) | 4 (else) | 5 LoopBegin | 6 7 body, 7 sets a run-time dim | 8 | 9 LoopEnd | 10
  PreparedEntry pe = Entry({kWork, kWork, kWork, kWork, kWork, Control::kLoopBegin, kWork, kWork, kWork,
                            Control::kLoopEnd, kWork},
                           {{}, {}, then_c, then_c, else_c, {}, {}, {}, {}, {}, {}},
                           {-1, -1, -1, -1, -1, -1, -1, 0, -1, 1, -1});
  SplitSegments(pe);
  CHECK(pe.segment_end == std::vector<int32_t>{2, 2, 4, 4, 5, 6, 8, 8, 9, 10, 11});
}

TEST_CASE("segments: the arena tensors' writer and last reader come from the liveness") {
  PreparedEntry pe = Entry({kWork, kWork}, {{}, {}}, {-1, -1});
  pe.tensors.resize(4);
  pe.liveness.tensors = {1, 3};
  pe.liveness.first = {0, 1};
  pe.liveness.last = {1, 2};  // tensor 3 is an entry output: live to the instruction count
  SplitSegments(pe);
  CHECK(pe.written_at == std::vector<int32_t>{-1, 0, -1, 1});
  CHECK(pe.last_read_at == std::vector<int32_t>{-1, 1, -1, 2});
}

}  // namespace
}  // namespace kiln
