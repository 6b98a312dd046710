// NonMaxSuppression's selection, shared by the CPU kernel (runtime/kernels/vision.cc) and the
// meta function (compiler/ops/meta_vision.cc): the op's output shape [num_selected, 3]
// depends on the data, so the compiler runs this same selection over constant inputs to
// size the output that the kernel then fills when the node is folded.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kiln::cpu {

struct NmsParams {
  int64_t batches = 0, classes = 0, boxes = 0;
  bool center_point_box = false;  // [x_center, y_center, width, height] instead of corners
  int64_t max_per_class = 0;      // absent input: 0, no box is selected
  float iou_threshold = 0;
  bool has_score_threshold = false;
  float score_threshold = 0;
};

// True when box b suppresses box a (IOU strictly above the threshold), as ONNX's reference:
// corners in either order, empty intersections and degenerate boxes never suppress.
inline bool NmsSuppresses(const float* a, const float* b, bool center, float iou_threshold) {
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (center) {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  } else {
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]), ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]), by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
  }
  const float ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  const float iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (!(ix1 > ix0) || !(iy1 > iy0)) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  const float uni = area_a + area_b - inter;
  if (!(inter > 0) || !(area_a > 0) || !(area_b > 0) || !(uni > 0)) return false;
  return inter / uni > iou_threshold;
}

// Calls emit(batch, class, box) for every selected box, in ONNX's output order: batches,
// then classes, then boxes by descending score (ties: the lower box index first).
// boxes: [batches, boxes, 4]; scores: [batches, classes, boxes]; `order` and `kept` are
// scratch of p.boxes elements each. Returns the number of selected boxes.
template <typename Emit>
int64_t NmsSelect(const float* boxes, const float* scores, const NmsParams& p, int64_t* order, int64_t* kept,
                  Emit&& emit) {
  int64_t total = 0;
  for (int64_t b = 0; b < p.batches; ++b) {
    const float* bb = boxes + b * p.boxes * 4;
    for (int64_t c = 0; c < p.classes; ++c) {
      const float* sc = scores + (b * p.classes + c) * p.boxes;
      int64_t n = 0;
      for (int64_t i = 0; i < p.boxes; ++i)
        if (!p.has_score_threshold || sc[i] > p.score_threshold) order[n++] = i;
      // A strict total order even with NaN scores (sorted last), which std::sort needs.
      std::sort(order, order + n, [&](int64_t i, int64_t j) {
        const bool ni = sc[i] != sc[i], nj = sc[j] != sc[j];
        if (ni != nj) return nj;
        if (!ni && sc[i] != sc[j]) return sc[i] > sc[j];
        return i < j;
      });
      int64_t nk = 0;
      for (int64_t k = 0; k < n && nk < p.max_per_class; ++k) {
        bool keep = true;
        for (int64_t s = 0; s < nk && keep; ++s)
          keep = !NmsSuppresses(bb + order[k] * 4, bb + kept[s] * 4, p.center_point_box, p.iou_threshold);
        if (!keep) continue;
        kept[nk++] = order[k];
        emit(b, c, order[k]);
        ++total;
      }
    }
  }
  return total;
}

}  // namespace kiln::cpu
