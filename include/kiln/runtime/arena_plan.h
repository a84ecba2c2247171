// The memory plan of a function's temporaries (docs/ARCHITECTURE.md, "Memory plan"): every
// temporary of a generated function lives in one arena (the kernel contract's workspace), at an
// offset chosen per call from the temporaries' sizes (formulas over the size symbols, evaluated
// for this call) and their lifetimes (the first and last stage that touches them, fixed at
// compile time). Buffers whose lifetimes do not overlap share bytes.
//
// Placement is greedy by size, as TensorFlow Lite's arena planner: the largest buffer first, each
// at the lowest 256-byte aligned offset that does not overlap a placed buffer alive at the same
// time. The result is at least the largest live set (live_bytes) and in practice equal to it or
// close. Header-only, no allocation, no exceptions: compiled into every generated library.
#ifndef KILN_RUNTIME_ARENA_PLAN_H_
#define KILN_RUNTIME_ARENA_PLAN_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace kiln::abi {

struct ArenaBuffer {
  size_t bytes;    // size for this call (rounded up to 256 by plan_arena)
  int32_t first;   // first stage that reads or writes it
  int32_t last;    // last stage that reads or writes it
  size_t offset;   // set by plan_arena
};

inline size_t arena_round(size_t bytes) { return (bytes + 255) / 256 * 256; }

inline bool arena_lifetimes_overlap(const ArenaBuffer& a, const ArenaBuffer& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Sets every buffer's offset; returns the arena's size in bytes. `n` <= 4096.
inline size_t plan_arena(ArenaBuffer* buffers, int n) {
  static constexpr int kMax = 4096;
  if (n <= 0) return 0;
  if (n > kMax) n = kMax;
  bool placed[kMax];
  for (int i = 0; i < n; ++i) {
    placed[i] = false;
    buffers[i].bytes = arena_round(buffers[i].bytes);
  }
  size_t total = 0;
  for (int round = 0; round < n; ++round) {
    int next = -1;  // the largest unplaced buffer (earliest on ties: deterministic)
    for (int i = 0; i < n; ++i) {
      if (!placed[i] && (next < 0 || buffers[i].bytes > buffers[next].bytes)) next = i;
    }
    ArenaBuffer& b = buffers[next];
    // Candidate offsets: 0 and the end of every placed buffer alive at the same time; the lowest
    // one that overlaps none of them wins.
    size_t best = SIZE_MAX;
    for (int c = -1; c < n; ++c) {
      if (c >= 0 && (!placed[c] || !arena_lifetimes_overlap(buffers[c], b))) continue;
      const size_t start = c < 0 ? 0 : buffers[c].offset + buffers[c].bytes;
      if (start >= best) continue;
      bool fits = true;
      for (int o = 0; o < n && fits; ++o) {
        if (!placed[o] || !arena_lifetimes_overlap(buffers[o], b)) continue;
        fits = start + b.bytes <= buffers[o].offset || buffers[o].offset + buffers[o].bytes <= start;
      }
      if (fits) best = start;
    }
    b.offset = best;
    placed[next] = true;
    if (best + b.bytes > total) total = best + b.bytes;
  }
  return total;
}

// The largest sum of sizes of buffers alive at one stage: the least any plan needs.
inline size_t arena_live_bytes(const ArenaBuffer* buffers, int n) {
  size_t peak = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t stage = buffers[i].first;  // the peak is reached where some buffer starts
    size_t live = 0;
    for (int j = 0; j < n; ++j) {
      if (buffers[j].first <= stage && stage <= buffers[j].last) live += arena_round(buffers[j].bytes);
    }
    if (live > peak) peak = live;
  }
  return peak;
}

// The offsets of the last symbol values seen on this thread, so that repeated calls at one shape
// do not plan again. `Plan` fills offsets[] for symbols[] and returns the arena's size.
template <int NumBuffers, int NumSymbols>
struct ArenaCache {
  bool valid = false;
  int64_t symbols[NumSymbols > 0 ? NumSymbols : 1] = {};
  size_t offsets[NumBuffers > 0 ? NumBuffers : 1] = {};

  template <typename Plan>
  const size_t* get(const int64_t* symbol_values, Plan plan) {
    if (!valid || (NumSymbols > 0 && memcmp(symbols, symbol_values, sizeof(int64_t) * NumSymbols) != 0)) {
      if (NumSymbols > 0) memcpy(symbols, symbol_values, sizeof(int64_t) * NumSymbols);
      plan(symbol_values, offsets);
      valid = true;
    }
    return offsets;
  }
};

}  // namespace kiln::abi

#endif  // KILN_RUNTIME_ARENA_PLAN_H_
