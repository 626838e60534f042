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
#include <cstring>
#include <limits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/lane_compress.hpp"
#include "impl/rows.hpp"
#include "impl/stats.hpp"
#include "impl/stats_accumulators.hpp"
#include "impl/stats_pass.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The first argmin and the two smallest of the biased row D - g~ (row and
// gt [in] (kp,), the padding +inf and 0); lane_min [out]: each lane's minimum
// over the row's vectors (the candidates' bound starts from them).
template <typename T>
inline RowMin<T> biased_row_min2(const T* row, const T* gt, index_t kp,
                                 typename VT<T>::v& lane_min) {
  constexpr index_t W = VT<T>::W;
  Min2<T> m;
  for (index_t j = 0; j < kp; j += W) m.push(vload(row + j) - vload(gt + j));
  lane_min = m.v1;
  return m.finish();
}

// The lanes of u folded in halves (lane q and q ^ S to their minimum, S = W/2,
// W/4, ...) while at least m groups remain: each lane then holds the minimum
// of its group, and the groups left are all held by the lanes.
template <index_t S, typename V>
inline V fold_lanes_min(V u, index_t m) {
  if constexpr (S >= 1) {
    if (S >= m) return fold_lanes_min<S / 2>(vmin(u, lanes_xor<S>(u)), m);
  }
  return u;
}
// Every lane the largest of u's lanes (a tree of log2(W) maxima).
template <typename V>
inline V lanes_max(V u) {
  constexpr index_t W = sizeof(V) / sizeof(u[0]);
  if constexpr (W >= 16) u = vmax(u, lanes_xor<8>(u));
  if constexpr (W >= 8) u = vmax(u, lanes_xor<4>(u));
  if constexpr (W >= 4) u = vmax(u, lanes_xor<2>(u));
  if constexpr (W >= 2) u = vmax(u, lanes_xor<1>(u));
  return u;
}

// The most columns below the bar that biased_row_candidates ranks (its cost is
// that count squared over W); past it the insertion of biased_row_select.
inline constexpr index_t kRankedMax = 64;

// biased_row_candidates by insertion, column by column, of those below bar
// (>= the m-th smallest value, <= tau): the bar falls to the m-th value once
// m are held (the others could not enter). Branches on every value below the
// bar: for the rows with many columns below it.
template <typename T>
inline T biased_row_select(const T* row, const T* gt, index_t k, index_t kp, index_t m, T bar,
                           T tau, std::int32_t* cand, T* cand_dist) {
  constexpr index_t W = VT<T>::W;
  T value[kRankedMax];
  index_t held = 0;
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

// Writes each ranked column straight to the row's outputs (those placed at m
// or later to a spare entry), cand [out] (m,) and dist [out] (m,) first -1
// and 0. NOTE: the entry is picked by masks, not by `at < m ? ... : ...`:
// GCC turns that select into a branch, mispredicted once in two places where
// more than m columns are below the bar.
template <typename T>
struct Placed {
  std::int32_t* cand;
  T* dist;
  index_t m;
  std::int32_t spare_cand = 0;
  T spare_dist = T(0);
  Placed(std::int32_t* cand_out, T* dist_out, index_t m_) : cand(cand_out), dist(dist_out), m(m_) {
    fill_none(cand, dist, m);
  }
  template <typename P>
  static P* pick(P* held, P* spare, std::uintptr_t keep) {
    return reinterpret_cast<P*>((reinterpret_cast<std::uintptr_t>(held) & keep) |
                                (reinterpret_cast<std::uintptr_t>(spare) & ~keep));
  }
  template <typename I>
  void put(index_t at, I j, const T* row) {
    const std::uintptr_t keep = std::uintptr_t(0) - static_cast<std::uintptr_t>(at < m);
    *pick(cand + at, &spare_cand, keep) = static_cast<std::int32_t>(j);
    *pick(dist + at, &spare_dist, keep) = row[j];
  }
  // The floor once the c columns below the bar are placed: the m-th biased
  // value (row [in] and gt [in] the row's distances and offsets: v's bits).
  T floor(index_t c, T tau, const T* row, const T* gt) const {
    return c >= m ? row[cand[m - 1]] - gt[cand[m - 1]] : tau;
  }
};

// How many lanes of y come before the value x of a column after the first
// `earlier` lanes' columns (before those of the rest): a smaller value, or the
// same value in one of the first `earlier` lanes.
template <typename V>
inline index_t count_before(V y, V x, index_t earlier) {
  const unsigned first = (1u << earlier) - 1u;
  const unsigned lt = lane_bits<Cmp::lt>(y, x), le = lane_bits<Cmp::le>(y, x);
  return __builtin_popcount((lt & ~first) | (le & first));
}

// The candidates from the c columns below the bar of a row, packed in column
// order (val [in] (c + W,), the biased values, +inf past c; idx [in] (c,)
// their columns; row [in] the row's distances): each one's place is the count
// of the others before it (a smaller value, or the same and a smaller j, so
// the places are 0 .. c - 1), the first m places are held. Outputs and return
// as biased_row_candidates's.
template <typename T, typename I>
inline T ranked_candidates(const T* row, const T* gt, const T* val, const I* idx, index_t c,
                           index_t m, T tau, std::int32_t* cand, T* cand_dist) {
  constexpr index_t W = VT<T>::W;
  Placed<T> placed(cand, cand_dist, m);
  const index_t vectors = (c + W - 1) / W;
  for (index_t i = 0; i < c; ++i) {
    const auto x = vset<T>(val[i]);
    index_t place = 0;
    for (index_t q = 0; q < vectors; ++q) {
      const auto y = vload(val + q * W);
      place += count_before(y, x, std::min(std::max(i - q * W, index_t(0)), W));
    }
    placed.put(place, idx[i], row);
  }
  return placed.floor(c, tau, row, gt);
}

// The candidates from the c <= W columns below the bar of a row packed in
// the lanes of P (their biased values, +inf past c) and PI (their columns, 0
// past c): ranked_candidates with the one vector in registers. The first
// kFixedLanes lanes are placed whatever c (those past c to the spare entry):
// no loop exit to mispredict on the rows with few columns below the bar.
inline constexpr index_t kFixedLanes = 4;
template <typename T>
[[gnu::always_inline]] inline T ranked_packed(const T* row, const T* gt, typename VT<T>::v P,
                                              typename VT<T>::i PI, index_t c, index_t m, T tau,
                                              std::int32_t* cand, T* cand_dist) {
  constexpr index_t W = VT<T>::W;
  Placed<T> placed(cand, cand_dist, m);
  const auto place_of = [&P](index_t i) { return count_before(P, vset<T>(P[i]), i); };
#pragma GCC unroll 4
  for (index_t i = 0; i < std::min(kFixedLanes, W); ++i)
    placed.put(i < c ? place_of(i) : m, PI[i], row);
  for (index_t i = kFixedLanes; i < c; ++i) placed.put(place_of(i), PI[i], row);
  return placed.floor(c, tau, row, gt);
}

// An upper bound on the m-th smallest value of the biased row (m <= k) from
// lane_min [in], each lane's minimum over the row's vectors (biased_row_min2's),
// the minimum of its own columns; lanes are folded in halves while m remain, so the largest of the
// lanes left is the minimum of one of at least m disjoint groups of columns:
// m columns lie at or below it. +inf where fewer than m lanes (W < m).
// In registers: the fold by lane shuffles (lane q ^ S holds lane q's group
// after each), then the largest lane by a max tree.
template <typename T>
inline T biased_row_mth_bound(typename VT<T>::v lane_min, index_t m) {
  constexpr index_t W = VT<T>::W;
  if (W < m) return std::numeric_limits<T>::infinity();
  return lanes_max(fold_lanes_min<W / 2>(lane_min, m))[0];
}

// The m smallest biased values of a row below tau (m <= k), ascending, ties
// to the smaller j (so cand[0] is biased_row_min2's label when tau > its
// value): their columns in cand [out] (m,) (-1 past the last held) and
// their distances D_ij in cand_dist [out] (m,). Returns a floor on every
// other column's biased value: the m-th value when m are held, else tau.
// The bar starts at the bound on the m-th value (no column above it is among
// the m smallest): the columns below it (at or below the bound, below tau)
// are packed in column order, each one's place is the count of those before
// it (a smaller value, or the same and a smaller j), and the first m places
// are held. No branch on the values. Up to W columns below the bar are packed
// in one vector (in registers where the ISA can: no store and reload), up to
// kRankedMax in memory; past that, biased_row_select.
template <typename T>
inline T biased_row_candidates(const T* row, const T* gt, typename VT<T>::v lane_min, index_t k,
                               index_t kp, index_t m, T tau, std::int32_t* cand, T* cand_dist) {
  constexpr index_t W = VT<T>::W;
  using I = lane_index_t<T>;
  using VI = typename VT<T>::i;
  const T inf = std::numeric_limits<T>::infinity();
  const T bound = biased_row_mth_bound<T>(lane_min, m);
  const auto upto = vset<T>(bound == bound ? bound : inf), below = vset<T>(tau);
  VI first;  // the columns of the first vector
  for (index_t q = 0; q < W; ++q) first[q] = static_cast<I>(q);
  // The biased values of the W columns from j0 and those of them below the bar.
  const auto below_bar = [&](index_t j0, unsigned& bits) {
    const auto v = vload(row + j0) - vload(gt + j0);
    bits = lane_bits<Cmp::le>(v, upto) & lane_bits<Cmp::lt>(v, below);
    if (j0 + W > k) bits &= (1u << (k - j0)) - 1u;  // not the padding
    return v;
  };
  auto P = vset<T>(inf);
  VI PI{};
  index_t c = 0;
  if constexpr (kPacksInRegisters) {
    for (index_t j0 = 0; j0 < kp; j0 += W) {
      unsigned bits;
      const auto v = below_bar(j0, bits);
      append_lanes<T>(v, first + static_cast<I>(j0), bits, c, P, PI);
      c += __builtin_popcount(bits);
    }
    if (c <= W) return ranked_packed(row, gt, P, PI, c, m, tau, cand, cand_dist);
    c = 0;  // packed again, in memory
  }
  T val[kRankedMax + 16];
  I idx[kRankedMax + 16];
  for (index_t j0 = 0; j0 < kp && c <= kRankedMax; j0 += W) {
    unsigned bits;
    const auto v = below_bar(j0, bits);
    c += compress_lanes<T>(v, first + static_cast<I>(j0), bits, val + c, idx + c);
  }
  if (c > kRankedMax) {
    const T bar = std::min(tau, std::nextafter(bound, inf));
    return biased_row_select(row, gt, k, kp, m, bar, tau, cand, cand_dist);
  }
  vstore(val + c, vset<T>(inf));  // never before any
  if (c > W) return ranked_candidates(row, gt, val, idx, c, m, tau, cand, cand_dist);
  P = vload(val);
  std::memcpy(&PI, idx, sizeof PI);
  for (index_t q = c; q < W; ++q) PI[q] = 0;  // a column to read past c
  return ranked_packed(row, gt, P, PI, c, m, tau, cand, cand_dist);
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
    typename VT<T>::v lane_min;
    const RowMin<T> m = biased_row_min2(row, gt, E.kp, lane_min);
    const double wi = w[i];
    labels[i] = m.a;
    dist[i] = row[m.a];
    gap[i] = E.k >= 2 ? m.m2 - m.m1 : std::numeric_limits<T>::infinity();
    W += wi;
    J += rounded_product(wi, static_cast<double>(dist[i]));
    if (out.m > 0)
      out.floor[i] = biased_row_candidates(row, gt, lane_min, E.k, E.kp, out.m, m.m1 + out.band,
                                           out.cand + i * out.m, out.dist + i * out.m);
  }
  // NOTE: one_hot_labels, not one_hot row by row: its loop at d = 16 keeps the
  // tile's pointers in registers (0.3 ms of 10 a 1e5-row call, k = 64).
  acc.one_hot_labels(s.tile, X + i0 * d, w + i0, labels + i0, rows);
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
