// The hard assignment at per-centroid offsets, one fused pass (SPEC.md,
// "Balanced assignments as one pass"): each row's label argmin_j (D_ij - g_j),
// its gap, and the statistics W, N, S, J at those labels, with no (n, k)
// array. The balanced solver (softkmeans.fit.balanced) calls it once per
// iteration at the last offsets and repairs the counts on the rows of small
// gap only.
//
// Numerics: D_ij is the engine's distance (the bits of sq_distances); the
// biased cost is v_ij = D_ij - g~_j in T, g~_j = g_j rounded to T once, so
// that the pass equals sq_distances followed by that subtraction bit for bit.
// The statistics take block_stats's accumulator and order (SparseAccumulator,
// tiles folded per chunk, chunks merged in order): at g = 0 every output is
// block_stats hard's where it takes the row-wise hard accumulation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/rows.hpp"
#include "impl/stats.hpp"
#include "impl/stats_accumulators.hpp"
#include "impl/stats_pass.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The first argmin and the two smallest of the biased row D - g~ (row and
// gt [in] (kp,), the padding +inf and 0).
template <typename T>
inline RowMin<T> biased_row_min2(const T* row, const T* gt, index_t kp) {
  constexpr index_t W = VT<T>::W;
  Min2<T> m;
  for (index_t j = 0; j < kp; j += W) m.push(vload(row + j) - vload(gt + j));
  return m.finish();
}

// An upper bound on the m-th smallest value of the biased row (m <= k): each
// lane's minimum over the row's vectors is the minimum of its own columns,
// and lanes are folded in halves while m remain, so the largest of the
// lanes left is the minimum of one of at least m disjoint groups of columns:
// m columns lie at or below it. +inf where fewer than m lanes (W < m).
template <typename T>
inline T biased_row_mth_bound(const T* row, const T* gt, index_t kp, index_t m) {
  constexpr index_t W = VT<T>::W;
  auto u = vload(row) - vload(gt);
  for (index_t j = W; j < kp; j += W) u = vmin(u, vload(row + j) - vload(gt + j));
  T lane[W];
  vstore(lane, u);
  index_t lanes = W;
  while (lanes % 2 == 0 && lanes / 2 >= m) {
    lanes /= 2;
    for (index_t l = 0; l < lanes; ++l) lane[l] = std::min(lane[l], lane[l + lanes]);
  }
  if (lanes < m) return std::numeric_limits<T>::infinity();
  T top = lane[0];
  for (index_t l = 1; l < lanes; ++l) top = std::max(top, lane[l]);
  return top;
}

// The m smallest biased values of a row below tau (m <= k), ascending, ties
// to the smaller j (so cand[0] is biased_row_min2's label when tau > its
// value): their columns in cand [out] (m,) (-1 past the last held) and
// their distances D_ij in cand_dist [out] (m,). Returns a floor on every
// other column's biased value: the m-th value when m are held, else tau.
// The lanes below the bar are found with one compare a vector; the bar
// starts at the bound on the m-th value (no column above it is among the m
// smallest) and, once m are held, is the m-th value (the others could not
// enter).
template <typename T>
inline T biased_row_candidates(const T* row, const T* gt, index_t k, index_t kp, index_t m, T tau,
                               std::int32_t* cand, T* cand_dist) {
  constexpr index_t W = VT<T>::W;
  constexpr index_t kMaxHeld = 64;
  T value[kMaxHeld];
  index_t held = 0;
  const T bound = biased_row_mth_bound(row, gt, kp, m);
  T bar = std::min(tau, std::nextafter(bound, std::numeric_limits<T>::infinity()));
  for (index_t j0 = 0; j0 < kp; j0 += W) {
    const auto v = vload(row + j0) - vload(gt + j0);
    for (unsigned bits = lane_bits<Cmp::lt>(v, vset<T>(bar)); bits; bits &= bits - 1) {
      const index_t j = j0 + __builtin_ctz(bits);
      const T x = v[j - j0];
      if (j >= k || !(x < bar)) continue;  // padding, or the bar fell since
      index_t at = held < m ? held++ : m - 1;
      while (at > 0 && x < value[at - 1]) {
        value[at] = value[at - 1];
        cand[at] = cand[at - 1];
        --at;
      }
      value[at] = x;
      cand[at] = static_cast<std::int32_t>(j);
      if (held == m) bar = value[m - 1];
    }
  }
  for (index_t t = 0; t < held; ++t) cand_dist[t] = row[cand[t]];
  for (index_t t = held; t < m; ++t) cand[t] = -1, cand_dist[t] = T(0);
  return held == m ? value[m - 1] : tau;
}

// Where the pass writes each row's candidates (m = 0: nowhere): those within
// band of the row's best biased value, at most m.
template <typename T>
struct BiasedCandidates {
  index_t m = 0;
  T band = T(0);
  std::int32_t* cand = nullptr;  // (n, m)
  T* dist = nullptr;             // (n, m)
  T* floor = nullptr;            // (n,)
};

// One row block of the pass (rows i0 .. i0 + rows of X (n, d)): distances in
// s.dbuf, then per row its biased label, gap and distance to its label (and
// its candidates), and its W, J and one-hot N, S.
template <typename T>
void biased_block(const Engine<T>& E, const T* X, const double* w, const T* gt, index_t i0,
                  index_t rows, const SparseAccumulator<T>& acc, ChunkStats& chunk,
                  StatsScratch<T, typename SparseAccumulator<T>::Tile>& s, std::int64_t* labels,
                  T* gap, T* dist, const BiasedCandidates<T>& out) {
  const index_t d = E.d;
  double W = chunk.W, J = chunk.J;
  for (index_t r = 0; r < rows; ++r) {
    const index_t i = i0 + r;
    const T* row = s.dbuf.data() + r * E.ld;
    const RowMin<T> m = biased_row_min2(row, gt, E.kp);
    const double wi = w[i];
    labels[i] = m.a;
    dist[i] = row[m.a];
    gap[i] = E.k >= 2 ? m.m2 - m.m1 : std::numeric_limits<T>::infinity();
    W += wi;
    J += rounded_product(wi, static_cast<double>(dist[i]));
    if (out.m > 0)
      out.floor[i] = biased_row_candidates(row, gt, E.k, E.kp, out.m, m.m1 + out.band,
                                           out.cand + i * out.m, out.dist + i * out.m);
  }
  for (index_t i = i0; i < i0 + rows; ++i) acc.one_hot(s.tile, X + i * d, w[i], labels[i]);
  chunk.set_sums(W, J, J, chunk.mm);
}

template <typename T>
void biased_hard_stats(const T* X, index_t n, index_t d, const T* C, index_t k, const double* g,
                       const double* w, double* W, double* N, double* S, double* distortion,
                       std::int64_t* labels, T* gap, T* dist, index_t m, double band,
                       std::int32_t* cand, T* cand_dist, T* floor, int n_threads) {
  const BiasedCandidates<T> out{m, static_cast<T>(band), cand, cand_dist, floor};
  const Engine<T> E(C, k, d, kDistBlockBytes, false);
  std::vector<T> gt(E.kp, T(0));
  for (index_t j = 0; j < k; ++j) gt[j] = static_cast<T>(g[j]);
  const SparseAccumulator<T> acc(E);
  std::vector<ChunkStats> chunks(stats_chunks(n, k, d));
  for (ChunkStats& c : chunks) {
    c.N.assign(k, 0.0);
    c.S.assign(k * d, 0.0);
  }
  using Scratch = StatsScratch<T, typename SparseAccumulator<T>::Tile>;
  auto scratch = per_thread<Scratch>(E, n, n_threads, [&](Scratch& s) { acc.init(s.tile); });
  drive(
      E, X, n, static_cast<index_t>(chunks.size()), scratch,
      [&](index_t c, Scratch& s, index_t i0, index_t rows) {
        biased_block(E, X, w, gt.data(), i0, rows, acc, chunks[c], s, labels, gap, dist, out);
      },
      [&](index_t c, Scratch& s) { acc.fold(s.tile, chunks[c]); });
  double objective = 0.0, min_margin = 0.0;
  merge_in_chunk_order(chunks, k, d, BlockStatsOut{W, N, S, &objective, distortion, &min_margin});
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
