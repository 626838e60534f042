// The hard step with distance bounds (Hamerly's): the statistics of
// block_stats(kind hard) at C, computing a row's distances only when its label
// may have changed since the previous step.
//
// Each row carries its label a_i (at the previous step's centroids C_prev) and
// a lower bound lower_i on its exact distance (not squared) to every other
// centroid of C_prev. After the centroids moved by drift_j = ||c_j - c_prev_j||,
// lower_i - max_{j != a_i} drift_j bounds the distances to the other centroids
// of C (triangle inequality). When that bound, turned into a lower bound on the
// *kernel's* squared distances (the rounding of the norm expansion accounted
// for), exceeds an upper bound on the kernel's distance to c_{a_i}, the
// kernel's argmin is a_i: the row keeps its label without its k distances.
// A row failing that test gets a second one that ignores the drift: every other
// centroid is at least 2 h_a - ||x - c_a|| away, h_a half the distance from
// c_a to its nearest other centroid (Hamerly's separation test; it decides the
// rows inside well separated clusters even while far centroids move a lot).
// The other rows are gathered and reduced by Engine::min2_rows, which gives
// their labels, J terms and new lower bounds.
//
// Labels, N and S are therefore bitwise those of block_stats (same labels, the
// same SparseAccumulator additions in the same row, tile and chunk order); so
// are J and the minimum margin when every row is computed (no C_prev). A
// skipped row adds its exact distance to c_{a_i} (direct differences in
// double) to J, within the kernel's rounding of its own value, and no margin.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/stats.hpp"
#include "impl/stats_accumulators.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// How far the kernel's squared distance of a row to a centroid can be from the
// exact one, as two slacks: e_lin on the distance (the rounding of x - s and
// c - s into T), e_sq on the squared distance (the expansion
// ||x - s||^2 + ||c - s||^2 - 2 (x - s).(c - s) summed in T over d terms).
// Each is twice or more the standard bound (gamma_{d+2} (||x - s||^2 +
// ||c - s||^2 + 2 |(x - s).(c - s)|) for the sums; u ||x - s|| + u ||c - s||
// for the roundings), so that a skipped row is never a close call.
template <typename T>
struct KernelSlack {
  double u, b, b2;  // unit roundoff of T; max_j ||c_j - s||, and squared
  index_t d;
  explicit KernelSlack(const Engine<T>& E) : d(E.d) {
    u = std::numeric_limits<T>::epsilon() / 2.0;
    b2 = 0.0;
    if (!E.small)  // cn: the micro-kernel path's ||c_j - s||^2
      for (index_t j = 0; j < E.k; ++j) b2 = std::max(b2, static_cast<double>(E.cn[j]));
    b2 *= 1.0 + 8.0 * u;  // cn is rounded to T
    b = std::sqrt(b2);
  }
  // a: an upper bound on ||x - s||.
  double lin(double a) const { return 2.0 * u * (a + b); }
  double sq(double a) const { return 4.0 * static_cast<double>(d + 8) * u * (a * a + b2); }

  // Whether the kernel's argmin of a row is its label a, given da2 >= its
  // exact squared distance to c_a and lo <= its exact distance to every other
  // centroid. The kernel's D_ia is below (da + e_lin)^2 + e_sq, its D_ij
  // (j != a) above (lo - e_lin)^2 - e_sq. The slacks are taken at
  // ||x - s|| <= ||x - c_a|| + ||c_a - s|| <= lo + b, which holds whenever
  // da <= lo; when da > lo the test fails anyway (its left side exceeds
  // lo^2). So no square root: da <= lo also bounds the cross term 2 e_lin da.
  bool keeps_label(double da2, double lo) const {
    const double ax = lo + b, e_lin = lin(ax), e_sq = sq(ax);
    const double others_lo = lo - e_lin;
    const double rhs = others_lo * others_lo - e_sq - (2.0 * lo + e_lin) * e_lin - e_sq;
    return others_lo > 0.0 && da2 < rhs;
  }
};

// Half the distance from each centroid to its nearest other centroid, bounded
// below: a row x labelled a is at least 2 h_a - ||x - c_a|| from every other
// centroid (triangle inequality), whatever the centroids' drift, which
// decides most rows of well separated clusters at once. The distances are the
// kernel's own (Engine::min2_rows on the rows of C; the row's own centroid is
// one of its two smallest), turned into exact bounds by the slack.
template <typename T>
std::vector<double> half_separations(const Engine<T>& E, const T* C, const KernelSlack<T>& slack) {
  const index_t k = E.k, d = E.d;
  Workspace<T> ws;
  E.init(ws);
  std::vector<double> half(k);
  for (index_t j0 = 0; j0 < k; j0 += E.mb) {
    const index_t rows = std::min(E.mb, k - j0);
    E.min2_rows(C + j0 * d, rows, ws.mins.data(), ws);
    for (index_t r = 0; r < rows; ++r) {
      const RowMin<T>& m = ws.mins[r];
      // The smallest over the other centroids: m2 when the argmin is c itself.
      const double other = static_cast<double>(m.a == j0 + r ? m.m2 : m.m1);
      const double lo = std::sqrt(std::max(other - slack.sq(slack.b), 0.0)) - slack.lin(slack.b);
      half[j0 + r] = std::max(lo, 0.0) / 2.0;
    }
  }
  return half;
}

// The two largest drifts and where the largest is: a row labelled j_max moves
// away from the others by at most the second.
struct Drifts {
  double first = 0.0, second = 0.0;
  index_t j_first = -1;
  double other_than(index_t a) const { return a == j_first ? second : first; }
};

template <typename T>
Drifts centroid_drifts(const T* C, const T* C_prev, index_t k, index_t d) {
  Drifts dr;
  for (index_t j = 0; j < k; ++j) {
    double s = 0.0;
    for (index_t l = 0; l < d; ++l) {
      const double v = static_cast<double>(C[j * d + l]) - static_cast<double>(C_prev[j * d + l]);
      s += v * v;
    }
    // Rounded up: the sum of d squares in double is within (d + 2) 2^-53.
    const double drift = std::sqrt(s) * (1.0 + 1e-12);
    if (drift > dr.first) {
      dr.second = dr.first;
      dr.first = drift;
      dr.j_first = j;
    } else {
      dr.second = std::max(dr.second, drift);
    }
  }
  return dr;
}

// Squared distance of x to y by direct differences in double (within
// (d + 2) 2^-53 of the exact value, relative). Eight interleaved partial sums,
// added pairwise at the end: vectorized, and no chain of d dependent adds
// (a skipped row costs this and little else).
template <typename T>
[[gnu::always_inline]] inline double direct_sq_distance(const T* x, const T* y, index_t d) {
  constexpr index_t P = 8;
  double part[P] = {};
  index_t l = 0;
  for (; l + P <= d; l += P)
#pragma GCC unroll 8
    for (index_t q = 0; q < P; ++q) {
      const double v = static_cast<double>(x[l + q]) - static_cast<double>(y[l + q]);
      part[q] += v * v;
    }
  for (index_t q = 0; l < d; ++l, ++q) {
    const double v = static_cast<double>(x[l]) - static_cast<double>(y[l]);
    part[q] += v * v;
  }
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

template <typename T>
struct BoundedScratch : Workspace<T> {
  typename SparseAccumulator<T>::Tile tile;
  std::vector<T> gathered;         // (mb, d) the rows of a block that are computed
  std::vector<index_t> computed;   // their positions in the block
  std::vector<double> skipped_sq;  // (mb,) a skipped row's squared distance; NaN if computed
  index_t n_computed = 0;
};

template <typename T>
void hard_stats_bounded(const T* X, index_t n, index_t d, const T* C, index_t k, const T* C_prev,
                        const double* w, double* W, double* N, double* S, double* distortion,
                        double* min_margin, std::int64_t* labels, double* lower,
                        index_t* n_computed, int n_threads) {
  const Engine<T> E(C, k, d, kDistBlockBytes, true);
  // The direct path (d <= kSmallDim) has no shift to bound its rounding by,
  // and its rows cost little: every row is computed there.
  const bool bounded = C_prev != nullptr && !E.small;
  const KernelSlack<T> slack(E);
  const Drifts drifts = bounded ? centroid_drifts(C, C_prev, k, d) : Drifts{};
  // The separations cost k^2 d, on the calling thread: taken when that is at
  // most about a sixteenth of a pass.
  const std::vector<double> half_sep =
      bounded && k >= 2 && n >= 16 * k ? half_separations(E, C, slack) : std::vector<double>{};
  const double up = 1.0 + 4.0 * static_cast<double>(d + 2) * 0x1p-53;
  const SparseAccumulator<T> acc(E);
  double objective;  // hard: J again
  const BlockStatsOut out{W, N, S, &objective, distortion, min_margin};
  std::vector<ChunkStats> chunks(stats_chunks(n, k, d));
  for (ChunkStats& c : chunks) {
    c.N.assign(k, 0.0);
    c.S.assign(k * d, 0.0);
  }
  using Scratch = BoundedScratch<T>;
  auto scratch = per_thread<Scratch>(E, n, n_threads, [&](Scratch& s) {
    acc.init(s.tile);
    s.gathered.assign(E.mb_pad() * d, T(0));
    s.computed.reserve(E.mb_pad());
    s.skipped_sq.assign(E.mb_pad(), 0.0);
  });
  const double nan = std::numeric_limits<double>::quiet_NaN();
  drive(
      E, X, n, static_cast<index_t>(chunks.size()), scratch,
      [&](index_t c, Scratch& s, index_t i0, index_t rows) {
        // Which rows keep their label by the bounds; the others gathered.
        s.computed.clear();
        for (index_t r = 0; r < rows; ++r) {
          const index_t i = i0 + r;
          s.skipped_sq[r] = nan;
          if (bounded) {
            const index_t a = static_cast<index_t>(labels[i]);
            const T* x = X + i * d;
            const double da2 = direct_sq_distance(x, C + a * d, d);
            // Drift first (no square root); then the separation of c_a.
            double lo = lower[i] - drifts.other_than(a);
            bool keep = slack.keeps_label(da2 * up, lo);
            if (!keep && !half_sep.empty()) {
              const double lo_sep = 2.0 * half_sep[a] - std::sqrt(da2 * up);
              if (lo_sep > lo) {
                lo = lo_sep;
                keep = slack.keeps_label(da2 * up, lo);
              }
            }
            if (keep) {
              lower[i] = lo;
              s.skipped_sq[r] = da2;
              continue;
            }
          }
          if (bounded)
            std::copy(X + i * d, X + (i + 1) * d, s.gathered.data() + s.computed.size() * d);
          s.computed.push_back(r);
        }
        const index_t m = static_cast<index_t>(s.computed.size());
        // Every row computed (the first step): the rows in place, no copy.
        if (m > 0) E.min2_rows(m == rows ? X + i0 * d : s.gathered.data(), m, s.mins.data(), s);
        s.n_computed += m;
        // The row pass of stats_rows, in row order.
        ChunkStats& chunk = chunks[c];
        double Wc = chunk.W, J = chunk.J, mm = chunk.mm;
        index_t q = 0;  // next computed row
        for (index_t r = 0; r < rows; ++r) {
          const index_t i = i0 + r;
          const double wi = w[i];
          const T* x = X + i * d;
          double Di;
          if (q < m && s.computed[q] == r) {
            const RowMin<T>& mn = s.mins[q++];
            labels[i] = mn.a;
            if (wi > 0.0) mm = std::min(mm, static_cast<double>(mn.m2 - mn.m1));
            Di = static_cast<double>(mn.m1);
            if (!E.small) {
              // An upper bound on ||x - s||, then the exact distance to the
              // second nearest bounded below.
              const double ax = std::sqrt(direct_sq_distance(x, E.shift.data(), d) * up);
              const double m2 = static_cast<double>(mn.m2);
              lower[i] = std::sqrt(std::max(m2 - slack.sq(ax), 0.0)) - slack.lin(ax);
            } else {
              lower[i] = -std::numeric_limits<double>::infinity();
            }
          } else {
            Di = s.skipped_sq[r];
          }
          Wc += wi;
          J += rounded_product(wi, Di);
          acc.one_hot(s.tile, x, wi, static_cast<index_t>(labels[i]));
        }
        chunk.W = Wc;
        chunk.J = chunk.obj = J;
        chunk.mm = mm;
      },
      [&](index_t c, Scratch& s) { acc.fold(s.tile, chunks[c]); }, false);
  merge_in_chunk_order(chunks, k, d, out);
  index_t total = 0;
  for (const Scratch& s : scratch) total += s.n_computed;
  *n_computed = total;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
