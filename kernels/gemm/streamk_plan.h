#pragma once
// Stream-K for the Hopper GEMM (gemm_wgmma.cuh): which output tiles run data-parallel and how
// the k-steps of the rest are shared out among the CTAs. Plain C++ (and device code), so that
// tests/gemm/StreamKPlan_test.cpp checks the walk without a GPU.
//
// Why: a persistent grid of one CTA per SM runs whole tiles in waves, and a last wave that fills
// few SMs costs as much as a full one (816 x 4096 x 4096 in 128 x 128 tiles: 224 tiles on 132
// SMs, 2 waves of work for 1.7 waves' worth). Stream-K gives every CTA the same number of
// k-steps: the tiles of the last waves are cut along K where a CTA's share ends, and the CTA that
// ran a tile's first k-steps adds the others' partial sums (fp32, through the workspace) before
// its epilogue.
//
// The walk: CTA c first takes the data-parallel tiles c, c + grid, ... (< dp_tiles), then the
// stream-K k-steps [sk_begin(c), sk_begin(c + 1)) of the flattened (tile, k-step) space of the
// remaining tiles. Its piece of a tile is one of
//   - whole: all of the tile's k-steps;
//   - contributor: a piece that starts after the tile's first k-step. It can only be the CTA's
//     first stream-K piece; the CTA writes its sums to its own workspace slot (slot c) and
//     raises its flag;
//   - finalizer: the tile's first k-steps (the CTA's last piece). Its contributors are the CTAs
//     c + 1, c + 2, ... whose ranges begin inside the tile; it waits for their flags, adds their
//     slots, and runs the epilogue.
// A finalizer waits only on CTAs of higher index whose contribution comes first in their own
// walk, so no wait cycle exists; every CTA of the grid is resident (one per SM, grid <= SMs).
#include <stdint.h>

#if defined(__CUDACC__)
#define KILN_STREAMK_HD __host__ __device__
#else
#define KILN_STREAMK_HD
#endif

namespace kiln::gemm {

// The most CTAs a stream-K launch uses (workspace slots the contract reserves; devices with more
// SMs run without stream-K) and the most CTAs a tile is shared among (more would spend the
// saving on partial sums).
constexpr int kStreamKMaxCtas = 160;
constexpr int kStreamKMaxShare = 4;

struct StreamKPlan {
  bool use = false;
  const char* reason = "";  // why not (use == false)
  int grid = 0;             // CTAs
  int64_t dp_tiles = 0;     // tiles [0, dp_tiles): data-parallel
  int64_t sk_tiles = 0;     // tiles [dp_tiles, dp_tiles + sk_tiles): stream-K
  int k_steps = 0;          // per tile

  KILN_STREAMK_HD int64_t sk_iters() const { return sk_tiles * k_steps; }
  // The first stream-K k-step (flattened) of CTA `cta`; sk_begin(grid) == sk_iters().
  KILN_STREAMK_HD int64_t sk_begin(int cta) const { return sk_iters() * cta / grid; }
};

enum class StreamKRole { Whole, Contributor, Finalizer };

// One piece of a CTA's stream-K range: tile `tile` (counted from the first stream-K tile),
// k-steps [ks0, ks1).
struct StreamKPiece {
  int64_t tile = 0;
  int ks0 = 0, ks1 = 0;
  StreamKRole role = StreamKRole::Whole;
};

// The piece at flattened k-step `i` of a range that ends at `end` (exclusive).
KILN_STREAMK_HD inline StreamKPiece stream_k_piece(const StreamKPlan& plan, int64_t i, int64_t end) {
  StreamKPiece p;
  p.tile = i / plan.k_steps;
  const int64_t tile_begin = p.tile * plan.k_steps;
  p.ks0 = int(i - tile_begin);
  p.ks1 = end - tile_begin < plan.k_steps ? int(end - tile_begin) : plan.k_steps;
  p.role = p.ks0 > 0 ? StreamKRole::Contributor : p.ks1 < plan.k_steps ? StreamKRole::Finalizer : StreamKRole::Whole;
  return p;
}

// Whether a CTA's range begins inside stream-K tile `tile` (after its first k-step): the
// finalizer of `tile` (CTA `cta`) adds the slot of every such CTA after it.
KILN_STREAMK_HD inline bool stream_k_contributes(const StreamKPlan& plan, int cta, int64_t tile) {
  if (cta >= plan.grid) return false;
  const int64_t begin = plan.sk_begin(cta);
  return begin > tile * plan.k_steps && begin < (tile + 1) * plan.k_steps;
}

// The plan for `tiles` output tiles of `k_steps` k-steps each on a device of `sms` SMs (one CTA
// each), given `workspace_bytes` and slots of `slot_bytes` (a tile's fp32 sums). Stream-K runs
// where whole-tile waves would leave at least a tenth of the grid's time idle: the last partial
// wave and one full wave before it are shared out, the waves before those stay whole tiles.
inline StreamKPlan plan_stream_k(int64_t tiles, int64_t k_steps, int sms, int64_t workspace_bytes, int64_t slot_bytes) {
  StreamKPlan plan;
  if (tiles <= 0 || sms <= 0) return plan.reason = "no tiles", plan;
  const int64_t waves = (tiles + sms - 1) / sms;
  if (tiles * 10 >= waves * sms * 9) return plan.reason = "whole tiles fill >= 90% of the waves", plan;
  if (k_steps < 2 * kStreamKMaxShare) return plan.reason = "too few k-steps per tile", plan;
  const int64_t sk_tiles = tiles < sms ? tiles : tiles % sms + sms;
  int64_t grid = tiles > sk_tiles ? sms : sk_tiles * kStreamKMaxShare < sms ? sk_tiles * kStreamKMaxShare : sms;
  if (grid > kStreamKMaxCtas) return plan.reason = "more SMs than stream-K slots", plan;
  if (grid * slot_bytes + grid * 4 + 256 > workspace_bytes) return plan.reason = "workspace too small", plan;
  plan.use = true;
  plan.grid = int(grid);
  plan.dp_tiles = tiles - sk_tiles;
  plan.sk_tiles = sk_tiles;
  plan.k_steps = int(k_steps);
  return plan;
}

// Workspace for the stream-K slots and flags of an m x n GEMM (m > 256; below, split-K's
// contract applies): a slot per CTA, at most kStreamKMaxCtas slots of 128 x 256 fp32 sums (the
// largest tile), fewer where the output is small (a grid of at most kStreamKMaxShare CTAs per
// tile), plus the flags.
KILN_STREAMK_HD inline int64_t stream_k_workspace_bytes(int64_t m, int64_t n) {
  const int64_t padded = (m + 127) / 128 * 128 * ((n + 255) / 256 * 256) * kStreamKMaxShare;
  const int64_t cap = int64_t(kStreamKMaxCtas) * 128 * 256;
  return (padded < cap ? padded : cap) * 4 + 4096;
}

}  // namespace kiln::gemm
