// The hard step with group distance bounds (Yinyang's: Ding et al. 2015, with
// Hamerly's separation test): the statistics of block_stats(kind hard) at C,
// computing only the distances that may change a row's label since the
// previous step.
//
// The centroids are split once into t <= 32 groups (the caller's; contiguous
// slot ranges of the lane panels, Engine::order_lanes). Each row carries its
// label a_i (at the previous step's C_prev) and, per group g, a lower bound
// lower_ig on its exact distance (not squared) to the group's centroids other
// than c_a; memory n (8 + 8 t) bytes. After the centroids moved by drift_j =
// ||c_j - c_prev_j||, lower_ig - max_{j in g, j != a} drift_j bounds the
// distances to g's centroids of C (triangle inequality), and so does
// 2 h_a - ||x - c_a||, h_a half the distance from c_a to its nearest other
// centroid (Hamerly's separation: it holds whatever the drift). A bound,
// turned into a lower bound on the *kernel's* squared distances (the rounding
// of the norm expansion accounted for, KernelSlack), that exceeds an upper
// bound on the kernel's distance to c_a rules the group out. The global test
// (the least bound over all groups) skips the row; else the groups not ruled
// out, and c_a's own group (its distance in the kernel's bits), are computed
// by Engine::lanes_min2 over their slots, rows in the lanes: the rows that need
// every group packed once, the others gathered again per group. Each group
// gives the two smallest and the first argmin of its centroids; the row's
// label is the smallest over the computed groups, ties to the smallest
// centroid, which is the plain pass's argmin since every skipped centroid's
// kernel distance is above c_a's. The computed groups' minima give their new
// bounds; the others keep theirs.
//
// Labels, N and S are therefore bitwise those of block_stats (same labels, the
// same SparseAccumulator additions in the same row, tile and chunk order); so
// are J and the minimum margin when every distance is computed (no C_prev). A
// skipped row adds its exact distance to c_a (direct differences in double)
// to J, within the kernel's rounding of its own value, and no margin. With
// `exact` (a fit's final pass) every row computes at least its own group, so J
// has the kernel's bits, and a row's margin is exact when the second smallest
// of its computed groups is below the skipped groups' bounds; the rows where
// it is not, and whose bound on the margin is below the least margin found,
// are computed in full after the pass: the minimum margin is block_stats's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
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
  // a: an upper bound on ||x - s|| (one row's, or a vector of rows').
  template <typename D>
  D lin(D a) const {
    return 2.0 * u * (a + b);
  }
  template <typename D>
  D sq(D a) const {
    return 4.0 * static_cast<double>(d + 8) * u * (a * a + b2);
  }

  // Whether the kernel's argmin of a row is its label a, given da2 >= its
  // exact squared distance to c_a and lo <= its exact distance to every other
  // centroid. The kernel's D_ia is below (da + e_lin)^2 + e_sq, its D_ij
  // (j != a) above (lo - e_lin)^2 - e_sq. The slacks are taken at
  // ||x - s|| <= ||x - c_a|| + ||c_a - s|| <= lo + b, which holds whenever
  // da <= lo; when da > lo the test fails anyway (its left side exceeds
  // lo^2). So no square root: da <= lo also bounds the cross term 2 e_lin da.
  bool keeps_label(double da2, double lo) const {
    if (lo == std::numeric_limits<double>::infinity()) return true;  // no other centroid
    double others_lo, rhs;
    label_test(lo, others_lo, rhs);
    return others_lo > 0.0 && da2 < rhs;
  }
  // keeps_label of a vector of rows: bit q for row q.
  template <typename VD>
  unsigned keeps_labels(VD da2, VD lo) const {
    VD others_lo, rhs;
    label_test(lo, others_lo, rhs);
    const VD inf = vset(std::numeric_limits<double>::infinity());
    return lane_bits<Cmp::le>(inf, lo) |
           (lane_bits<Cmp::lt>(VD{}, others_lo) & lane_bits<Cmp::lt>(da2, rhs));
  }

 private:
  // keeps_label's test: others_lo > 0 and da2 < rhs (lo finite).
  template <typename D>
  void label_test(D lo, D& others_lo, D& rhs) const {
    const D ax = lo + b, e_lin = lin(ax), e_sq = sq(ax);
    others_lo = lo - e_lin;
    rhs = others_lo * others_lo - e_sq - (2.0 * lo + e_lin) * e_lin - e_sq;
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

// The two largest drifts of a group of centroids and where the largest is: a
// row labelled j_first moves away from the group's others by at most the second.
struct Drifts {
  double first = 0.0, second = 0.0;
  index_t j_first = -1;
  // Per lane (a vector of rows' labels), the drift that bounds the row's move
  // away from the group's others.
  template <typename VI>
  typename VT<double>::v other_than(VI a) const {
    return a == j_first ? vset(second) : vset(first);
  }
  void add(index_t j, double drift) {
    if (drift > first) {
      second = first;
      first = drift;
      j_first = j;
    } else {
      second = std::max(second, drift);
    }
  }
};

// (t,) the drifts of each group's centroids (group[j] in [0, t)).
template <typename T>
std::vector<Drifts> group_drifts(const T* C, const T* C_prev, index_t k, index_t d,
                                 const std::int64_t* group, index_t t) {
  std::vector<Drifts> dr(t);
  for (index_t j = 0; j < k; ++j) {
    double s = 0.0;
    for (index_t l = 0; l < d; ++l) {
      const double v = static_cast<double>(C[j * d + l]) - static_cast<double>(C_prev[j * d + l]);
      s += v * v;
    }
    // Rounded up: the sum of d squares in double is within (d + 2) 2^-53.
    dr[group[j]].add(j, std::sqrt(s) * (1.0 + 1e-12));
  }
  return dr;
}

// The groups in the engine's lane panels: group g in slots [begin_g, end_g)
// (multiples of Engine::LC; its centroids in increasing order, then padding),
// so that lanes_min2 over a group's slots finds its first argmin (ties to the
// smallest centroid, as the plain pass's).
struct GroupSlots {
  index_t t;
  std::vector<index_t> begin, end, count;  // (t,) slot ranges; real members
  std::vector<index_t> centroid_of_slot;   // (slots,) -1 in the padding
  GroupSlots(const std::int64_t* group, index_t k, index_t t_, index_t lc)
      : t(t_), begin(t_), end(t_), count(t_, 0) {
    for (index_t j = 0; j < k; ++j) ++count[group[j]];
    for (index_t g = 0; g < t; ++g) {
      begin[g] = static_cast<index_t>(centroid_of_slot.size());
      for (index_t j = 0; j < k; ++j)
        if (group[j] == g) centroid_of_slot.push_back(j);
      centroid_of_slot.resize(round_up(static_cast<index_t>(centroid_of_slot.size()), lc), -1);
      end[g] = static_cast<index_t>(centroid_of_slot.size());
    }
  }
};

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
  std::vector<std::uint32_t> want;  // (mb,) the groups a row needs computed (0: skipped)
  std::vector<std::uint32_t> got;   // (mb,) the groups computed for it
  std::vector<index_t> full;        // the rows (positions in the block) that need every group
  std::vector<T> gathered;          // (mb, d) those rows, packed in the Workspace
  std::vector<index_t> part;        // the other rows that need the current group
  std::vector<T> gathered_part;     // (mb, d) those rows, packed in part_ws
  std::vector<index_t> computed;    // the rows (positions in the block) that need any group
  Workspace<T> part_ws;
  std::vector<RowMin<T>> per_group;  // (mb, t) each computed group's minima (centroids)
  std::vector<double> label_sq;      // (mb,) each row's squared distance to its label: exact for
                                     // a skipped row (direct differences), the kernel's if computed
  index_t n_computed = 0;
  std::int64_t n_distances = 0;
};

template <typename T>
void hard_stats_bounded(const T* X, index_t n, index_t d, const T* C, index_t k, const T* C_prev,
                        const std::int64_t* group, index_t t, const double* w, double* W, double* N,
                        double* S, double* distortion, double* min_margin, std::int64_t* labels,
                        double* lower, bool exact, index_t* n_computed, std::int64_t* n_distances,
                        int n_threads) {
  Engine<T> engine(C, k, d, kDistBlockBytes, true);
  // The direct path (d <= kSmallDim) has no shift to bound its rounding by,
  // and its rows cost little: every row is computed there, by min2_rows.
  const bool grouped = !engine.small;
  const bool bounded = C_prev != nullptr && grouped;
  const KernelSlack<T> slack(engine);
  // The separations cost k^2 d, on the calling thread: taken when that is at
  // most about a sixteenth of a pass (before the lanes are put in group order).
  const std::vector<double> half_sep =
      bounded && k >= 2 && n >= 16 * k ? half_separations(engine, C, slack) : std::vector<double>{};
  const GroupSlots slots(group, k, t, Engine<T>::LC);
  if (grouped) engine.order_lanes(slots.centroid_of_slot);
  const Engine<T>& E = engine;
  const std::vector<Drifts> drifts =
      bounded ? group_drifts(C, C_prev, k, d, group, t) : std::vector<Drifts>{};
  std::uint32_t all_groups = 0;  // the non-empty ones
  for (index_t g = 0; g < t; ++g)
    if (slots.count[g] > 0) all_groups |= std::uint32_t{1} << g;
  const double up = 1.0 + 4.0 * static_cast<double>(d + 2) * 0x1p-53;
  const double inf = std::numeric_limits<double>::infinity();
  const SparseAccumulator<T> acc(E);
  double objective;  // hard: J again
  const BlockStatsOut out{W, N, S, &objective, distortion, min_margin};
  std::vector<ChunkStats> chunks(stats_chunks(n, k, d));
  // exact: per chunk the rows whose margin may be below the computed ones'
  // minimum, with a lower bound on their margin.
  std::vector<std::vector<std::pair<index_t, double>>> unsure(exact ? chunks.size() : 0);
  for (ChunkStats& c : chunks) {
    c.N.assign(k, 0.0);
    c.S.assign(k * d, 0.0);
  }
  constexpr index_t G = Engine<T>::LR * Engine<T>::W;  // rows of a lane group
  using Scratch = BoundedScratch<T>;
  auto scratch = per_thread<Scratch>(E, n, n_threads, [&](Scratch& s) {
    const index_t mb = E.mb_pad();
    acc.init(s.tile);
    s.want.assign(mb, 0);
    s.got.assign(mb, 0);
    s.full.reserve(mb);
    s.computed.assign(mb, 0);
    s.gathered.assign(mb * d, T(0));
    s.part.reserve(mb);
    s.gathered_part.assign(mb * d, T(0));
    E.init(s.part_ws);
    s.per_group.assign(mb * t, RowMin<T>{});
    s.label_sq.assign(mb, 0.0);
  });

  // The bound tests of rows i0 .. i0 + rows (row i labelled a, previous
  // bounds lower[i, :]): want[r] the groups whose centroids may be nearer
  // than c_a (0: the row keeps its label; exact: c_a's own group, its
  // distance in the kernel's bits for J), da2[r] its squared distance to c_a;
  // the bounds updated. A vector of rows at a time: row by row, each row's
  // chain of latencies (its distance, a square root, the test) was most of a
  // skipped row's time. The rows failing the global test (the least bound
  // over all groups) take the group test one by one.
  auto bound_tests = [&](index_t i0, index_t rows, std::uint32_t* want, double* da2) {
    using VD = typename VT<double>::v;
    using VI = typename VT<double>::i;
    constexpr index_t B = VT<double>::W;
    alignas(64) double dv[B], hs[B], lb[B];
    alignas(64) std::int64_t av[B];
    for (index_t r0 = 0; r0 < rows; r0 += B) {
      const index_t rn = std::min(B, rows - r0);
      for (index_t q = 0; q < B; ++q) {  // lanes past rn repeat the last row
        const index_t i = i0 + r0 + std::min(q, rn - 1);
        const index_t a = static_cast<index_t>(labels[i]);
        av[q] = a;
        dv[q] = direct_sq_distance(X + i * d, C + a * d, d);
        hs[q] = half_sep.empty() ? 0.0 : half_sep[a];
      }
      const VD da2u = vload(dv) * up;
      // Hamerly's separation bounds every other centroid whatever the drift.
      const VD lo_sep = half_sep.empty() ? vset(-inf) : 2.0 * vload(hs) - vsqrt(da2u);
      const VI a = *reinterpret_cast<const VI*>(av);
      VD lo = vset(inf);  // over all groups: the global test
      for (index_t g = 0; g < t; ++g) {
        for (index_t q = 0; q < B; ++q) lb[q] = lower[(i0 + r0 + std::min(q, rn - 1)) * t + g];
        const VD bound = vmax(vload(lb) - drifts[g].other_than(a), lo_sep);
        vstore(lb, bound);
        for (index_t q = 0; q < rn; ++q) lower[(i0 + r0 + q) * t + g] = lb[q];
        lo = vmin(lo, bound);
      }
      const unsigned keep = slack.keeps_labels(da2u, lo);
      for (index_t q = 0; q < rn; ++q) da2[r0 + q] = dv[q];
      if (t == 1) {  // the group test is the global one: a select, not a branch
        for (index_t q = 0; q < rn; ++q) want[r0 + q] = keep >> q & 1 ? (exact ? 1u : 0u) : 1u;
        continue;
      }
      for (index_t q = 0; q < rn; ++q) {
        const index_t r = r0 + q;
        const std::uint32_t own = std::uint32_t{1} << group[av[q]];
        if (keep >> q & 1) {
          want[r] = exact ? own : 0;
          continue;
        }
        // The group test; c_a's own group always (its distance in the kernel's bits).
        const double* lbr = lower + (i0 + r) * t;
        std::uint32_t w_r = own;
        for (index_t g = 0; g < t; ++g)
          if (!slack.keeps_label(dv[q] * up, lbr[g])) w_r |= std::uint32_t{1} << g;
        want[r] = w_r & all_groups;
      }
    }
  };

  // The minima of group g's centroids for the rows `which` (positions in the
  // block) packed, in that order, in ws: into s.per_group and s.got.
  const index_t kc = E.lane_block();
  auto group_minima = [&](index_t g, const std::vector<index_t>& which, Workspace<T>& ws,
                          Scratch& s) {
    using En = Engine<T>;
    const index_t m = static_cast<index_t>(which.size()), n_lane = (m + G - 1) / G;
    for (index_t lg = 0; lg < n_lane; ++lg) E.reset_lanes(lg, ws);
    for (index_t j0 = slots.begin[g]; j0 < slots.end[g]; j0 += kc)
      for (index_t lg = 0; lg < n_lane; ++lg) {
        auto* st = ws.lanes.data() + 3 * lg * En::LR;
        E.lanes_min2(ws.xt.data() + lg * d * G, st + 2 * En::LR, j0,
                     std::min(slots.end[g], j0 + kc), st, st + En::LR,
                     ws.lane_idx.data() + lg * En::LR);
      }
    for (index_t q = 0; q < m; ++q) {
      const index_t lg = q / G, v = (q % G) / En::W, ln = q % En::W;
      const auto* st = ws.lanes.data() + 3 * lg * En::LR;
      const index_t slot = static_cast<index_t>(ws.lane_idx[lg * En::LR + v][ln]);
      s.per_group[which[q] * t + g] = {st[v][ln], st[En::LR + v][ln], slots.centroid_of_slot[slot]};
      s.got[which[q]] |= std::uint32_t{1} << g;
    }
    s.n_distances += m * slots.count[g];
  };

  // A group's rows are computed G at a time, padded: rows that need only
  // some groups join those that need all (packed once, every group computed)
  // where that fills the full rows' padding or saves lane groups overall.
  index_t n_groups = 0;
  for (index_t g = 0; g < t; ++g) n_groups += slots.count[g] > 0;
  auto promote_to_full = [&](Scratch& s, index_t rows) {
    s.part.clear();
    for (index_t r = 0; r < rows; ++r)
      if (s.want[r] != 0 && s.want[r] != all_groups) s.part.push_back(r);
    if (s.part.empty()) return;
    std::stable_sort(s.part.begin(), s.part.end(), [&](index_t p, index_t q) {
      return __builtin_popcount(s.want[p]) > __builtin_popcount(s.want[q]);
    });
    index_t per_group[32] = {}, after[32];
    for (index_t r : s.part)
      for (index_t g = 0; g < t; ++g) per_group[g] += s.want[r] >> g & 1;
    auto lane_groups = [&](const index_t* counts) {
      index_t sum = 0;
      for (index_t g = 0; g < t; ++g) sum += (counts[g] + G - 1) / G;
      return sum;
    };
    const index_t np = static_cast<index_t>(s.part.size());
    index_t q = 0, free = (G - static_cast<index_t>(s.full.size()) % G) % G;
    while (q < np) {
      const index_t b = free > 0 ? std::min(free, np - q) : std::min(G, np - q);
      std::copy(per_group, per_group + t, after);
      for (index_t p = q; p < q + b; ++p)
        for (index_t g = 0; g < t; ++g) after[g] -= s.want[s.part[p]] >> g & 1;
      // Filling padding is free; a new lane group of full rows costs n_groups.
      if (free == 0 && lane_groups(per_group) - lane_groups(after) <= n_groups) break;
      for (index_t p = q; p < q + b; ++p) {
        s.want[s.part[p]] = all_groups;
        s.full.push_back(s.part[p]);
      }
      std::copy(after, after + t, per_group);
      q += b;
      free = 0;
    }
    std::sort(s.full.begin(), s.full.end());  // in place when every row is full
  };

  drive(
      E, X, n, static_cast<index_t>(chunks.size()), scratch,
      [&](index_t c, Scratch& s, index_t i0, index_t rows) {
        if (bounded)
          bound_tests(i0, rows, s.want.data(), s.label_sq.data());
        else
          std::fill(s.want.begin(), s.want.begin() + rows, all_groups);
        // The rows to compute (m), and those that need every group, in order;
        // appended without a branch (in a block of both kinds it mispredicted).
        s.full.resize(rows);
        index_t m = 0, n_all = 0;
        for (index_t r = 0; r < rows; ++r) {
          s.got[r] = 0;
          s.computed[m] = r;
          m += s.want[r] != 0;
          s.full[n_all] = r;
          n_all += s.want[r] == all_groups;
        }
        s.full.resize(n_all);
        if (bounded) promote_to_full(s, rows);
        if (!grouped) {
          E.min2_rows(X + i0 * d, rows, s.mins.data(), s);
        } else if (m > 0) {
          // The rows that need every group packed once (in place when all
          // rows do: the first step); the others gathered and packed again
          // for each group they need.
          const T* src = X + i0 * d;
          const index_t n_full = static_cast<index_t>(s.full.size());
          if (n_full > 0 && n_full < rows) {
            for (index_t q = 0; q < n_full; ++q)
              std::copy(src + s.full[q] * d, src + (s.full[q] + 1) * d, s.gathered.data() + q * d);
            src = s.gathered.data();
          }
          if (n_full > 0) E.pack_lanes(src, n_full, s);
          for (index_t g = 0; g < t; ++g) {
            if (!(all_groups >> g & 1)) continue;
            group_minima(g, s.full, s, s);
            s.part.clear();
            for (index_t r = 0; r < rows; ++r)
              if (s.want[r] != all_groups && (s.want[r] >> g & 1)) s.part.push_back(r);
            if (s.part.empty()) continue;
            const index_t n_part = static_cast<index_t>(s.part.size());
            for (index_t q = 0; q < n_part; ++q)
              std::copy(X + (i0 + s.part[q]) * d, X + (i0 + s.part[q] + 1) * d,
                        s.gathered_part.data() + q * d);
            E.pack_lanes(s.gathered_part.data(), n_part, s.part_ws);
            group_minima(g, s.part, s.part_ws, s);
          }
        }
        s.n_computed += m;
        // The computed rows' labels, distances (into di, which holds the
        // skipped rows' exact ones), margins and bounds; then the row pass of
        // stats_rows in row order, without a branch on the kind of row.
        ChunkStats& chunk = chunks[c];
        double Wc = chunk.W, J = chunk.J, mm = chunk.mm;
        double* di = s.label_sq.data();
        for (index_t p = 0; p < (grouped ? m : rows); ++p) {
          const index_t r = grouped ? s.computed[p] : p;
          const index_t i = i0 + r;
          const double wi = w[i];
          const T* x = X + i * d;
          if (!grouped) {
            const RowMin<T>& mn = s.mins[r];
            labels[i] = mn.a;
            if (wi > 0.0) mm = std::min(mm, static_cast<double>(mn.m2 - mn.m1));
            di[r] = static_cast<double>(mn.m1);
            for (index_t g = 0; g < t; ++g) lower[i * t + g] = -inf;
          } else {
            // The two smallest over the computed groups, ties to the smallest
            // centroid: the plain pass's argmin (the other groups' are larger).
            T m1 = std::numeric_limits<T>::infinity(), m2 = m1;
            index_t a = -1;
            for (index_t g = 0; g < t; ++g) {
              if (!(s.got[r] >> g & 1)) continue;
              const RowMin<T>& pg = s.per_group[r * t + g];
              if (a < 0 || pg.m1 < m1 || (pg.m1 == m1 && pg.a < a)) {
                m2 = std::min(m1, pg.m2);
                m1 = pg.m1;
                a = pg.a;
              } else {
                m2 = std::min(m2, pg.m1);
              }
            }
            labels[i] = a;
            di[r] = static_cast<double>(m1);
            // The computed groups' new bounds: an upper bound on ||x - s||, then
            // the exact distance to the group's nearest other than c_a bounded below.
            const double ax = std::sqrt(direct_sq_distance(x, E.shift.data(), d) * up);
            if (wi > 0.0 && s.got[r] == all_groups) {
              mm = std::min(mm, static_cast<double>(m2 - m1));
            } else if (wi > 0.0 && exact) {
              // The skipped groups' kernel distances are above (lo - e_lin)^2 - e_sq
              // (KernelSlack): when m2 is not above that, it is the row's second
              // smallest and its margin is exact; else the margin is at least
              // that bound less m1, and the row is computed in full after the
              // pass if that may be below the least margin.
              const double e_lin = slack.lin(ax), e_sq = slack.sq(ax);
              double others = inf;
              for (index_t g = 0; g < t; ++g) {
                if (s.got[r] >> g & 1 || !(all_groups >> g & 1)) continue;
                const double lo = lower[i * t + g] - e_lin;
                others = std::min(others, lo > 0.0 ? lo * lo - e_sq : 0.0);
              }
              if (static_cast<double>(m2) <= others) {
                mm = std::min(mm, static_cast<double>(m2 - m1));
              } else {
                const double least = others - static_cast<double>(m1);
                if (least * (1.0 - 1e-6) <= mm) unsure[c].emplace_back(i, least);
              }
            }
            if (!bounded)  // the first call: no bounds yet (+inf over an empty group)
              for (index_t g = 0; g < t; ++g) lower[i * t + g] = inf;
            for (index_t g = 0; g < t; ++g) {
              if (!(s.got[r] >> g & 1)) continue;
              const RowMin<T>& pg = s.per_group[r * t + g];
              const double other = static_cast<double>(group[a] == g ? pg.m2 : pg.m1);
              lower[i * t + g] = std::sqrt(std::max(other - slack.sq(ax), 0.0)) - slack.lin(ax);
            }
          }
        }
        for (index_t r = 0; r < rows; ++r) {
          const index_t i = i0 + r;
          const double wi = w[i];
          Wc += wi;
          J += rounded_product(wi, di[r]);
          acc.one_hot(s.tile, X + i * d, wi, static_cast<index_t>(labels[i]));
        }
        chunk.W = Wc;
        chunk.J = chunk.obj = J;
        chunk.mm = mm;
      },
      [&](index_t c, Scratch& s) { acc.fold(s.tile, chunks[c]); }, false);
  merge_in_chunk_order(chunks, k, d, out);
  if (exact && k >= 2) {
    // The rows whose margin may be the least, in full (the margin is a
    // minimum: the order does not matter). (1 - 1e-6): the bound is rounded
    // in double and the margin in T; a row kept out has margin >= the least.
    std::vector<T>& rows_buf = scratch[0].gathered;
    index_t m = 0;
    auto flush = [&] {
      E.min2_rows(rows_buf.data(), m, scratch[0].mins.data(), scratch[0]);
      for (index_t q = 0; q < m; ++q) {
        const RowMin<T>& mn = scratch[0].mins[q];
        *min_margin = std::min(*min_margin, static_cast<double>(mn.m2 - mn.m1));
      }
      scratch[0].n_distances += m * k;
      m = 0;
    };
    const double least_known = *min_margin;
    for (const auto& chunk_rows : unsure)
      for (const auto& [i, least] : chunk_rows) {
        if (least * (1.0 - 1e-6) > least_known) continue;
        std::copy(X + i * d, X + (i + 1) * d, rows_buf.data() + m * d);
        if (++m == E.mb) flush();
      }
    if (m > 0) flush();
  }
  index_t total = 0;
  std::int64_t distances = 0;
  for (const Scratch& s : scratch) {
    total += s.n_computed;
    distances += s.n_distances;
  }
  *n_computed = total;
  *n_distances = grouped ? distances : static_cast<std::int64_t>(n) * k;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
