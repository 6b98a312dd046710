// CUDA graphs of one context (CudaOptions::graphs): each segment of device work
// (runtime/backend.h, Segment) is captured at its second run with the same key, and replayed
// after. The key holds everything a captured launch bakes in: the entry and segment, the buffer
// addresses (the arena and the library workspace move when they grow, the inputs are the
// caller's) and, through the binding, the size arguments. A key's first run is not captured: it
// does the libraries' lazy set-up. Input staging, symbolic values and the executor's copies stay
// outside the graphs. Stats::graph_hits and graph_misses count replays and captures.
//
// Thread-compatible: owned by one context's backend.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kiln/stats.h"
#include "kiln/status.h"
#include "runtime/cuda/driver.h"

namespace kiln::cuda {

class GraphCache {
 public:
  explicit GraphCache(const Driver& drv) : drv_(&drv) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache();

  // The key being built for the next Find (cleared there; its storage is kept).
  std::vector<int64_t>& key() { return key_; }

  enum class Step { kRun, kCapture, kReplay };
  // What to do with the segment of key(): run it (its key's first run), capture it (the second:
  // a miss), or replay its graph (a hit).
  Step Find(Stats& stats);
  // Capture of the segment's work on `stream`: Begin, the work enqueued, then End with the
  // work's status and whether the capture is kept (false: something in it cannot be captured,
  // and nothing captured ran). A kept capture is instantiated and stored under the key.
  Status BeginCapture(CUstream stream);
  Status EndCapture(CUstream stream, Status enqueued, bool keep);
  // Launches the graph of the key of the last Find.
  Status Replay(CUstream stream);

 private:
  const Driver* drv_;
  std::vector<int64_t> key_;
  std::map<std::vector<int64_t>, CUgraphExec> graphs_;
  std::map<std::vector<int64_t>, int> seen_;  // keys run once, uncaptured
  CUgraphExec current_ = nullptr;             // the graph of the last Find's key, when it has one
};

}  // namespace kiln::cuda
