#pragma once
// Per-call choices among the Hopper tiles a schedule prints (host code; generated calls evaluate
// them from the bound dims): the wide or narrow tile (wgmma_prefers_wide), a SWAP_AB tile
// (wgmma_swap_choice), and the environment switches that benchmarks use to compare a path on and
// off in one process (KILN_GEMM_SWAP, KILN_GEMM_CLUSTER_SPLIT; kiln_gemm.cuh's KILN_GEMV_WGMMA).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "gemm_problem.cuh"
#include "gemm_ptx.cuh"

namespace kiln::gemm {

// Which of two Hopper tiles a call should use (the schedule prints both; measured on H200,
// bench/gemm/NOTES.md): the wide bm x bn one when K is at least `min_k` (the mainloop dominates)
// and its tiles, counted in whole waves of one tile per SM, are no more work than the narrow
// nbm x nbn one's (816 x 4096 x 4096: 112 wide tiles in one wave against 224 narrow ones in two,
// 48-50 us against 52-62, three runs); the narrow one otherwise (short K: the epilogue is a large
// share; more waves of wide tiles than the narrow ones need).
inline bool wgmma_prefers_wide(const Problem& p, int64_t bm, int64_t bn, int64_t min_k, int64_t nbm, int64_t nbn) {
  if (p.k < min_k) return false;
  const int64_t sms = detail::device_sm_count();
  auto waves_work = [&](int64_t tm, int64_t tn) {
    const int64_t tiles = p.batch() * ((p.m + tm - 1) / tm) * ((p.n + tn - 1) / tn);
    return (tiles + sms - 1) / sms * tm * tn;
  };
  return waves_work(bm, bn) <= waves_work(nbm, nbn);
}

// A Hopper tile's shape as the per-call choices below weigh it: bm x bn outputs of the kernel's
// problem (SWAP_AB: weight rows x tokens), cooperative or ping-pong.
struct WgmmaTileShape {
  int64_t bm = 0, bn = 0;
  bool pingpong = false;
};

// The K splits gemm_wgmma's launch plans for `tiles` tiles of a batch-1 call with fewer tiles than
// SMs, before it checks residency or workspace: as many as fill the SMs, at most 8 (portable
// clusters), no fewer than 4 k-steps each (0 or 1: no split).
inline int64_t wgmma_planned_splits(int64_t tiles, int64_t k_steps) {
  return std::min<int64_t>({detail::device_sm_count() / tiles, 8, k_steps / 4});
}

// Those splits, counted by the choice below only where each keeps at least kWgmmaLongSplitSteps
// k-steps (a long K, where the cluster's reduction is a small share of a split's time; not measured
// on short K, e.g. ViT's 768).
constexpr int64_t kWgmmaLongSplitSteps = 64;
inline int64_t wgmma_long_k_splits(const Problem& p, int64_t tiles) {
  const int64_t k_steps = (p.k + 63) / 64;
  if (p.batch() != 1 || tiles >= detail::device_sm_count()) return 1;
  const int64_t splits = wgmma_planned_splits(tiles, k_steps);
  if (splits < 2 || k_steps / splits < kWgmmaLongSplitSteps) return 1;
  return splits;
}

// The SM time a call's tiles take in whole waves, in output elements per k-step: a cooperative
// tile holds an SM for a wave, a ping-pong one shares it with a second tile; a cooperative tile
// whose K is split (wgmma_long_k_splits) counts 1/splits of it per unit. Across the tiles of run
// s20a (H200, 816 and 4096 tokens; bench/gemm/NOTES.md, session 20) the time per unit of it was
// within +-10% of 0.40 us per 128 x 128 x 64, padding past M or N included.
inline int64_t wgmma_waves_work(const Problem& p, WgmmaTileShape t, bool swapped) {
  const int64_t rows = swapped ? p.n : p.m, cols = swapped ? p.m : p.n;
  const int64_t slots = detail::device_sm_count() * (t.pingpong ? 2 : 1);
  const int64_t tiles = p.batch() * ((rows + t.bm - 1) / t.bm) * ((cols + t.bn - 1) / t.bn);
  const int64_t splits = t.pingpong ? 1 : wgmma_long_k_splits(p, tiles);
  return (tiles * splits + slots - 1) / slots * t.bm * t.bn * (t.pingpong ? 2 : 1) / splits;
}

namespace detail {
// SWAP_AB tiles may be chosen unless KILN_GEMM_SWAP=0.
inline bool swap_ab_enabled() {
  static const bool on = env_switch_on("KILN_GEMM_SWAP");
  return on;
}
// Split-K through clusters unless KILN_GEMM_CLUSTER_SPLIT=0.
inline bool cluster_split_enabled() {
  static const bool on = env_switch_on("KILN_GEMM_CLUSTER_SPLIT");
  return on;
}
}  // namespace detail

// Which tile a call runs: 0 the one its schedule picked without SWAP_AB (`current`; for single
// products the wide or narrow tile by wgmma_prefers_wide), 1 or 2 the SWAP_AB tile `swap1` or
// `swap2` (BN tokens; bn 0: none) whose whole waves are the least work, if that is under 0.95x
// `current`'s (H200, session 20: 816 x 16384 x 2048 on 128 x 272 88 us against 98 on 128 x 128;
// 816 x 4096 x 4096 on 128 x 208 43 against 48 on 128 x 256; Gemma's gate*up at 816 tokens on
// 128 x 136 175 against 192 on 64 x 128 ping-pong). A SWAP_AB tile needs a K-major A (the tokens)
// and a short epilogue where it holds more than 68 accumulators per B (the transposed epilogue runs
// unrolled from the registers).
template <typename Epilogue>
int wgmma_swap_choice(const Problem& p, const Epilogue&, WgmmaTileShape current, WgmmaTileShape swap1, WgmmaTileShape swap2 = {}) {
  const bool a_k = p.a.stride_k == 1 && (p.m == 1 || p.a.stride_mn != 1);
  if (!a_k || !detail::swap_ab_enabled()) return 0;
  int64_t best = wgmma_waves_work(p, current, false) * 95 / 100;
  int choice = 0;
  const WgmmaTileShape swaps[2] = {swap1, swap2};
  for (int i = 0; i < 2; ++i) {
    if (swaps[i].bn == 0 || (EpilogueIsLong<Epilogue>::value && swaps[i].bn / 2 > 68)) continue;
    const int64_t work = wgmma_waves_work(p, swaps[i], true);
    if (work < best) best = work, choice = i + 1;
  }
  return choice;
}

}  // namespace kiln::gemm
