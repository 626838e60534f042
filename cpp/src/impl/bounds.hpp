// The ingredients of hard_stats_bounded's bound tests (impl/bounded.hpp): the
// kernel's rounding slack, Hamerly's half separations, the groups' drifts and
// their slots in the engine's lane panels, and the exact distance of a row to
// its label.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// A set of centroid groups, bit g for group g: at most kMaxGroups of them.
using GroupMask = std::uint64_t;
constexpr index_t kMaxGroups = 64;
inline GroupMask group_bit(index_t g) { return GroupMask{1} << g; }

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

  // The slacks of one row, ||x - s|| <= a, and of the centroids within r of
  // it: their ||c - s|| <= a + r (and <= b), so those slacks, not b's. Where
  // most of a row's distances are far below b^2 (rows near the shift, dense
  // regions), b's slack is what decides: on patch descriptors at k = 4096,
  // lo*^2 - da2 of the projected pass was 0.05-0.1 at b = 18.
  double lin_within(double a, double r) const { return 2.0 * u * (a + std::min(b, a + r)); }
  double sq_within(double a, double r) const {
    const double c = std::min(b, a + r);
    return 4.0 * static_cast<double>(d + 8) * u * (a * a + c * c);
  }
  // A lower bound on the kernel's distance of a row with ||x - s|| <= a to
  // every centroid at distance t >= lo: such a centroid has ||c - s|| <= a +
  // t (and b): with c = min(b, a + lo), s = t - lo >= 0 and k = 4 (d + 8) u,
  // its kernel's distance is at least
  //   g(s) = ((lo - e_lin) + (1 - 2u) s)^2 - k (a^2 + (c + s)^2),
  // e_lin = lin_within(a, lo), and g(s) - g(0) = s [((1 - 2u)^2 - k) s +
  // 2 (1 - 2u) (lo - e_lin) - 2 k c] >= 0 wherever (1 - 2u) (lo - e_lin) >=
  // k c (k < 1/2 below d = 2^20 in float): g(0) there; elsewhere (lo tiny
  // beside c) from b's slacks (||x - s|| <= a, every ||c - s|| <= b).
  double floor_within(double lo, double a) const {
    double e_lin, e_sq;
    if (!slacks_within(lo, a, e_lin, e_sq)) {
      e_lin = lin(a);
      e_sq = sq(a);
    }
    const double l = lo - e_lin;
    return l > 0.0 ? l * l - e_sq : 0.0;
  }
  // Whether the kernel's argmin of a row is its label a, given da2 >= its
  // exact squared distance to c_a and lo <= its exact distance to every other
  // centroid, for a vector of rows: bit q for row q. The kernel's D_ia is
  // below (da + e_lin)^2 + e_sq, its D_ij (j != a) above (lo - e_lin)^2 -
  // e_sq. The slacks are taken at ||x - s|| <= ||x - c_a|| + ||c_a - s|| <=
  // lo + b, which holds whenever da <= lo; when da > lo the test fails anyway
  // (its left side exceeds lo^2). So no square root: da <= lo also bounds the
  // cross term 2 e_lin da.
  template <typename VD>
  unsigned keeps_labels(VD da2, VD lo) const {
    VD others_lo, rhs;
    label_test(lo, others_lo, rhs);
    const VD inf = vset(std::numeric_limits<double>::infinity());
    return lane_bits<Cmp::le>(inf, lo) |
           (lane_bits<Cmp::lt>(VD{}, others_lo) & lane_bits<Cmp::lt>(da2, rhs));
  }

 private:
  // The slacks at lo of floor_within [out], and whether g grows there.
  bool slacks_within(double lo, double a, double& e_lin, double& e_sq) const {
    const double c = std::min(b, a + lo), k = 4.0 * static_cast<double>(d + 8) * u;
    e_lin = 2.0 * u * (a + c);
    e_sq = k * (a * a + c * c);
    return (1.0 - 2.0 * u) * (lo - e_lin) >= k * c;
  }
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
// Blocks of mb centroids on up to n_threads threads (k^2 d multiply-adds: about
// a sixteenth of a pass, on the calling thread it was a serial part of every
// bounded step); each centroid's minima are its own: the same bits.
template <typename T>
std::vector<double> half_separations(const Engine<T>& E, const T* C, const KernelSlack<T>& slack,
                                     int n_threads) {
  const index_t k = E.k, d = E.d, n_blocks = (k + E.mb - 1) / E.mb;
  const int nt = static_cast<int>(
      std::min<index_t>(resolve_threads(n_threads, k * k * d), n_blocks));
  std::vector<double> half(k);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    Workspace<T> ws;
    E.init(ws);
#pragma omp for schedule(dynamic, 1)
    for (index_t b = 0; b < n_blocks; ++b) {
      const index_t j0 = b * E.mb, rows = std::min(E.mb, k - j0);
      E.min2_rows(C + j0 * d, rows, ws.mins.data(), ws);
      for (index_t r = 0; r < rows; ++r) {
        const RowMin<T>& m = ws.mins[r];
        // The smallest over the other centroids: m2 when the argmin is c itself.
        const double other = static_cast<double>(m.a == j0 + r ? m.m2 : m.m1);
        const double lo =
            std::sqrt(std::max(other - slack.sq(slack.b), 0.0)) - slack.lin(slack.b);
        half[j0 + r] = std::max(lo, 0.0) / 2.0;
      }
    }
  }
  return half;
}

// The two largest drifts of a group of centroids and where the largest is: a
// row labelled j_first moves away from the group's others by at most the second.
struct Drifts {
  double first = 0.0, second = 0.0;
  index_t j_first = -1;
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
  GroupMask all_groups = 0;                // bit g: group g is not empty
  index_t n_groups = 0;                    // the non-empty groups
  GroupSlots(const std::int64_t* group, index_t k, index_t t_, index_t lc)
      : t(t_), begin(t_), end(t_), count(t_, 0) {
    for (index_t j = 0; j < k; ++j) ++count[group[j]];
    for (index_t g = 0; g < t; ++g)
      if (count[g] > 0) all_groups |= group_bit(g);
    for (index_t g = 0; g < t; ++g) n_groups += count[g] > 0;
    for (index_t g = 0; g < t; ++g) {
      begin[g] = static_cast<index_t>(centroid_of_slot.size());
      for (index_t j = 0; j < k; ++j)
        if (group[j] == g) centroid_of_slot.push_back(j);
      centroid_of_slot.resize(round_up(static_cast<index_t>(centroid_of_slot.size()), lc), -1);
      end[g] = static_cast<index_t>(centroid_of_slot.size());
    }
  }
};

// Engine::lanes_min2 over the first `vectors` row vectors of a lane group
// only (the rest padding): a group's last lane group of a block often holds a
// few rows (the final pass computes each row's own group: about mb / t rows a
// group), and all LR vectors cost LR / vectors the multiply-adds. Each lane
// folds the same distances in the same order whichever row vectors run
// together (lanes_min2_part): the same bits.
template <typename T>
void lanes_min2_first(const Engine<T>& E, index_t vectors, const T* xg,
                      const typename Engine<T>::V* xnv, index_t j_begin, index_t j_end,
                      typename Engine<T>::V* v1p, typename Engine<T>::V* v2p,
                      typename Engine<T>::VI* i1p) {
  using En = Engine<T>;
  if (vectors >= En::LR) {
    E.lanes_min2(xg, xnv, j_begin, j_end, v1p, v2p, i1p);
    return;
  }
  index_t q0 = 0;
  if constexpr (En::LR > 2)
    for (; q0 + 2 <= vectors; q0 += 2)
      E.template lanes_min2_part<true, 2, 2 * En::LC>(xg, xnv, q0, j_begin, j_end, v1p, v2p, i1p);
  for (; q0 < vectors; ++q0)
    E.template lanes_min2_part<true, 1, 2 * En::LC>(xg, xnv, q0, j_begin, j_end, v1p, v2p, i1p);
}

// The minima of group g's centroids (its slots) for the m rows packed in ws
// (Engine::pack_lanes, m <= mb): f(q, RowMin) for row q of the packing, its
// argmin a centroid (the first in slot order: the smallest of the group).
// Each distance is the plain pass's bits (Engine::lanes_min2). NOTE: not the
// bf16 candidate pass: its bound (~0.8% of D on 1e6 x 128 descriptors, k =
// 4096) left a row 15 of a 64-centroid group's slots to recompute (the pass
// pays below 4), and the bounded steps took 1.7-2.4x the time (issue 24).
template <typename T, typename F>
void packed_group_minima(const Engine<T>& E, const GroupSlots& slots, index_t g, index_t m,
                         Workspace<T>& ws, F f) {
  using En = Engine<T>;
  constexpr index_t G = En::LR * En::W;  // rows of a lane group
  const index_t kc = E.lane_block(), n_lane = (m + G - 1) / G;
  for (index_t lg = 0; lg < n_lane; ++lg) E.reset_lanes(lg, ws);
  for (index_t j0 = slots.begin[g]; j0 < slots.end[g]; j0 += kc)
    for (index_t lg = 0; lg < n_lane; ++lg) {
      auto* lanes = ws.lanes.data() + 3 * lg * En::LR;
      const index_t vectors = std::min(En::LR, (m - lg * G + En::W - 1) / En::W);
      lanes_min2_first(E, vectors, ws.xt.data() + lg * E.d * G, lanes + 2 * En::LR, j0,
                       std::min(slots.end[g], j0 + kc), lanes, lanes + En::LR,
                       ws.lane_idx.data() + lg * En::LR);
    }
  for (index_t q = 0; q < m; ++q) {
    const index_t lg = q / G, v = (q % G) / En::W, ln = q % En::W;
    const auto* lanes = ws.lanes.data() + 3 * lg * En::LR;
    const index_t slot = static_cast<index_t>(ws.lane_idx[lg * En::LR + v][ln]);
    f(q, RowMin<T>{lanes[v][ln], lanes[En::LR + v][ln], slots.centroid_of_slot[slot]});
  }
}

// Squared distance of x to y by direct differences in double (within
// (d + 2) 2^-53 of the exact value, relative). Eight interleaved partial sums,
// added pairwise at the end: vectorized, and no chain of d dependent adds
// (a skipped row costs this and little else).
template <typename T, typename U = T>
[[gnu::always_inline]] inline double direct_sq_distance(const T* x, const U* y, index_t d) {
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

// Rounds a squared distance by direct_sq_distance up (multiplied: the sum of
// d squares in double is within (d + 2) 2^-53 of the exact one, relative;
// 4 times that). 2 - sq_rounding_up(d) rounds it down.
inline double sq_rounding_up(index_t d) { return 1.0 + 4.0 * static_cast<double>(d + 2) * 0x1p-53; }

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
