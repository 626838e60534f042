// Row reductions of a distance row: the two smallest entries and the first
// argmin (Min2, RowMin), the softmax of a row, and the entmax15 threshold and
// responsibilities of a row.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// ---------------------------------------------------------------------------
// Running two smallest values and first argmin, per lane.
// ---------------------------------------------------------------------------

template <typename T>
struct RowMin {
  T m1, m2;
  index_t a;
};

template <typename T>
struct Min2 {
  using V = typename VT<T>::v;
  using VI = typename VT<T>::i;
  static constexpr index_t W = VT<T>::W;
  V v1, v2;
  VI i1, idx;
  Min2() {
    v1 = v2 = vset<T>(std::numeric_limits<T>::infinity());
    i1 = VI{};
    for (index_t q = 0; q < W; ++q) idx[q] = q;
  }
  // The next W entries (columns idx .. idx + W).
  inline void push(V x) {
    const VI lt = x < v1;  // strict: a lane keeps its first minimum
    v2 = vmin(v2, vmax(v1, x));
    i1 = lt ? idx : i1;
    v1 = vmin(v1, x);
    idx += static_cast<typename std::remove_reference<decltype(idx[0])>::type>(W);
  }
  // Merges the lanes with log2(W) shuffles: m1 = the smallest value, a = the
  // smallest index among lanes holding it, m2 = the smallest of the second
  // minima and of the other lanes' minima (m1 again when two lanes hold it).
  inline RowMin<T> finish() const {
    using Int = typename std::remove_reference<decltype(i1[0])>::type;
    const V m1v = hmin(v1);
    const VI big = VI{} + std::numeric_limits<Int>::max();
    const VI at_min = v1 == m1v;
    const VI a_v = hmin_i(at_min ? i1 : big);
    const V inf = vset<T>(std::numeric_limits<T>::infinity());
    const V others = (i1 == a_v) & at_min ? inf : v1;
    const V m2v = hmin(vmin(v2, others));
    return {m1v[0], m2v[0], static_cast<index_t>(a_v[0])};
  }
  // Lane-wise min with the lanes S apart, then 2S, ... (constant shuffle masks).
  template <index_t S, typename U>
  static inline U hmin_from(U v) {
    if constexpr (S < W) {
      VI m;
#pragma GCC unroll 16
      for (index_t q = 0; q < W; ++q) m[q] = q ^ S;
      return hmin_from<2 * S>(vmin(v, __builtin_shuffle(v, m)));
    } else {
      return v;
    }
  }
  static inline V hmin(V v) { return hmin_from<1>(v); }
  static inline VI hmin_i(VI v) { return hmin_from<1>(v); }
};

// The two smallest entries of a row (padding +inf) and the first argmin.
template <typename T>
inline RowMin<T> row_min2(const T* row, index_t kp) {
  constexpr index_t W = VT<T>::W;
  Min2<T> m;
  for (index_t j = 0; j < kp; j += W) m.push(vload(row + j));
  return m.finish();
}

// The per-lane smallest v1 and second smallest v2 merged with the lanes S
// apart, then 2S, ...: every lane ends with the two smallest of all.
template <index_t S, typename V>
inline void min2_lanes_tree(V& v1, V& v2) {
  if constexpr (S >= 1) {
    const V b1 = lanes_xor<S>(v1), b2 = lanes_xor<S>(v2);
    v2 = vmin(vmax(v1, b1), vmin(v2, b2));
    v1 = vmin(v1, b1);
    min2_lanes_tree<S / 2>(v1, v2);
  }
}

// The two smallest entries of a row (padding +inf) as row_min2 has them (m2 =
// m1 when the minimum is tied), without the argmin (a = 0): per lane the
// smallest and second smallest, then log2(W) shuffle steps merging the pairs
// of lanes S apart (min2_lanes_tree). For the softmax step without labels (the values alone
// feed the shift, J and the margin).
template <typename T>
inline RowMin<T> row_min2_values(const T* row, index_t kp) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  // Two running pairs (even and odd W-blocks), merged at the end: one pair's
  // chain of min/max latencies was the loop's limit. Minima are exact, so the
  // result is the same whatever the grouping.
  V v1 = vset<T>(std::numeric_limits<T>::infinity()), v2 = v1, u1 = v1, u2 = v1;
  index_t j = 0;
  for (; j + 2 * W <= kp; j += 2 * W) {
    const V x = vload(row + j), y = vload(row + j + W);
    v2 = vmin(v2, vmax(v1, x));
    v1 = vmin(v1, x);
    u2 = vmin(u2, vmax(u1, y));
    u1 = vmin(u1, y);
  }
  if (j < kp) {
    const V x = vload(row + j);
    v2 = vmin(v2, vmax(v1, x));
    v1 = vmin(v1, x);
  }
  v2 = vmin(vmax(v1, u1), vmin(v2, u2));
  v1 = vmin(v1, u1);
  min2_lanes_tree<W / 2>(v1, v2);
  return {v1[0], v2[0], 0};
}

// exp(-g / (2 sigma^2)) of the gaps g >= 0 (+inf in the padding) of a row,
// W at a time, in base 2: scaled(g) = g * -log2(e) / (2 sigma^2) is the
// exponent (the scale capped at the largest T, so 0 * it is 0), lo the
// exponent below which vexp2 flushes to exactly 0, exp(s) the result.
template <typename T>
struct GapExp {
  using V = typename VT<T>::v;
  V c, lo;
  explicit GapExp(T inv_t)
      : c(vset<T>(static_cast<T>(-std::min<double>(static_cast<double>(inv_t) * 1.4426950408889634,
                                                   std::numeric_limits<T>::max())))),
        lo(vset<T>(std::is_same<T, float>::value ? static_cast<T>(kExp2FlushFloat)
                                                 : static_cast<T>(kExp2FlushDouble))) {}
  V scaled(V g) const { return g * c; }
  static V exp(V s) { return vexp2(s); }
};

// Softmax of the row from its distances: row_j <- exp(-(D_j - m1) / (2 sigma^2))
// (the log-sum-exp shift by the row max, written on the gap so the nearest
// centroid gets exp(0) = 1 exactly and exact ties share). Returns sum_j e_j
// (>= 1). With normalize, row_j <- e_j / sum. inv_t = 1 / (2 sigma^2), finite
// (capped), so the gaps (>= 0, +inf in the padding) never give 0 * inf.
// nz [out, nullable] (kp / W,): 0 where a W-block of the row is all exact
// zeros (every score underflows), else 1. The exp runs on every block: a
// branch skipping the all-zero ones mispredicted on every other block where
// they mix with live ones (k = 1024), and vexp2 returns the same +0.0 there.
template <typename T>
inline double softmax_row(T* row, index_t kp, T m1, T inv_t, bool normalize,
                          std::uint8_t* nz = nullptr) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const V vm = vset<T>(m1);
  const GapExp<T> ex(inv_t);
  // The sum in virtual lanes (vec.hpp): the padding's exact zeros, and the
  // vectors past kp (a narrower unit's), add nothing.
  V acc[kVirtual];
  for (index_t v = 0; v < kVirtual; ++v) acc[v] = V{};
  for (index_t j0 = 0; j0 < kp; j0 += kVirtual * W) {
#pragma GCC unroll 4
    for (index_t v = 0; v < kVirtual; ++v) {
      const index_t j = j0 + v * W;
      if (kVirtual > 1 && j >= kp) break;
      const V s = ex.scaled(vload(row + j) - vm);
      const V e = ex.exp(s);
      vstore(row + j, e);
      acc[v] += e;
      if (nz) nz[j / W] = !all_less(s, ex.lo);
    }
  }
  const double sum = virtual_lane_sum(acc);
  if (normalize) {
    const V sc = vset<T>(static_cast<T>(1.0 / sum));
    for (index_t j = 0; j < kp; j += W) vstore(row + j, vload(row + j) * sc);
  }
  return sum;
}

// SPEC.md's size test of the sort-based entmax15 algorithm for the s largest
// candidates (v the s-th, a1 and a2 the sums of them and of their squares):
// tau_s <= v, i.e. M_s - v <= sqrt(delta_s) with M_s >= v (a mean of the s
// largest), i.e. (a1 - s v)^2 <= s delta_s s = s - s a2 + a1^2 (both sides
// times s^2): no division and no square root per size (they would cost most of
// the row), tau computed once at the end. V: double, or double vectors (one
// row per lane).
template <typename V>
inline auto entmax_size_qualifies(V a1, V a2, V v, V s) {
  const V lhs = a1 - s * v;
  return lhs * lhs <= s - s * a2 + a1 * a1;
}

// SPEC.md's tau_s = M_s - sqrt(delta_s) from the sums s1, s2 of the support
// (size s) and of its squares.
template <typename V>
inline V entmax_tau_of_sums(V s, V s1, V s2) {
  const V M = s1 / s, Q = s2 / s;
  const V delta = (1.0 - s * (Q - M * M)) / s;
  if constexpr (std::is_same<V, double>::value) {
    return M - std::sqrt(std::max(delta, 0.0));
  } else {
    return M - vsqrt(vmax(delta, V{}));
  }
}

// entmax15 threshold by SPEC.md's sort-based algorithm on candidates
// u (count,) in (-1, 0] (halved, max-shifted scores; the max is 0): sorts
// them descending (with their indices), returns tau. Running sums in double;
// values in (-1, 0] keep Q_s - M_s^2 well conditioned. The oracle of
// entmax_tau, and its fallback.
inline double entmax_tau_sorted(double* u, std::int64_t* idx, index_t count) {
  // Insertion sort for the usual handful of candidates, Shell sort (in place,
  // no allocation inside the parallel region) for many.
  index_t gap = 1;
  while (gap < count / 3) gap = 3 * gap + 1;
  for (; gap >= 1; gap /= 3) {
    for (index_t a = gap; a < count; ++a) {
      const double v = u[a];
      const std::int64_t iv = idx[a];
      index_t b = a;
      for (; b >= gap && u[b - gap] < v; b -= gap) {
        u[b] = u[b - gap];
        idx[b] = idx[b - gap];
      }
      u[b] = v;
      idx[b] = iv;
    }
  }
  double s1 = 0.0, s2 = 0.0;
  index_t size = 0;
  for (index_t s = 1; s <= count; ++s) {
    const double v = u[s - 1];
    const double a1 = s1 + v, a2 = s2 + v * v;
    // The qualifying sizes form a prefix 1..s* (as in deep-spin/entmax, which
    // counts them): stop at the first failure.
    if (s > 1 && !entmax_size_qualifies(a1, a2, v, static_cast<double>(s))) break;
    s1 = a1;
    s2 = a2;
    size = s;
  }
  // size >= 1: size 1 always qualifies
  return entmax_tau_of_sums(static_cast<double>(size), s1, s2);
}

// Count, sum, sum of squares and minimum of d = u - lo over the u > lo of
// u (count rounded up to double vectors; the padding <= lo): one vector pass,
// in virtual lanes (vec.hpp; entry a in lane a % 8), the lanes summed in order.
struct EntmaxSums {
  double n, s1, s2, mn;
};
inline EntmaxSums entmax_sums_above(const double* u, index_t count, double lo) {
  using V = VT<double>::v;
  constexpr index_t W = VT<double>::W;
  const V vlo = vset(lo), one = vset(1.0), inf = vset(std::numeric_limits<double>::infinity());
  V n[kVirtual], s1[kVirtual], s2[kVirtual], mn = inf;
  for (index_t v = 0; v < kVirtual; ++v) n[v] = s1[v] = s2[v] = V{};
  for (index_t a0 = 0; a0 < count; a0 += kVirtual * W) {
#pragma GCC unroll 4
    for (index_t v = 0; v < kVirtual; ++v) {
      const index_t a = a0 + v * W;
      if (kVirtual > 1 && a >= count) break;
      const V d = vload(u + a) - vlo;
      const auto in = d > V{};
      const V dp = in ? d : V{};
      n[v] += in ? one : V{};
      s1[v] += dp;
      s2[v] = vfma(dp, dp, s2[v]);
      mn = vmin(mn, in ? d : inf);
    }
  }
  EntmaxSums r{0.0, 0.0, 0.0, mn[0]};
  for (index_t v = 0; v < kVirtual; ++v)
    for (index_t q = 0; q < W; ++q) {
      r.n += n[v][q];
      r.s1 += s1[v][q];
      r.s2 += s2[v][q];
      r.mn = std::min(r.mn, mn[q]);
    }
  return r;
}

// Newton steps of entmax_tau before it falls back to the sort (rows need 3-5;
// the fallback guards against rounding stalls).
inline constexpr int kEntmaxNewtonSteps = 16;

// entmax15 threshold tau of candidates u (count >= 1,) in (-1, 0] (halved,
// max-shifted scores; the max is 0): sum_a [u_a - tau]_+^2 = 1. The same tau as
// SPEC.md's sort-based algorithm without sorting: h(t) = sum_a [u_a - t]_+^2 is
// convex and decreasing, so Newton steps from a lower bound lo (h(lo) >= 1;
// lo = -1 to start, the top entry alone) stay lower bounds. On S = {u > lo}
// (d = u - lo), SPEC.md's closed form tau_S = lo + mean(d) - sqrt(delta_S) is
// tau exactly when tau_S <= min_S u: h is then sum_S (u - t)^2 on
// [lo, min_S u], and tau_S its root there (S is the support). Otherwise
// h(min_S u) > 1, so min_S u is a lower bound too and leaves S. Each step is
// one vector pass over the candidates, no branches per entry (the sort's
// mispredictions cost most of the row). The order of (u, idx) may change (the
// fallback sorts them). u has room for count rounded up to double vectors: the
// entries past count become kEntmaxPad (never in the support).
inline constexpr double kEntmaxPad = -2.0;
inline double entmax_tau(double* u, std::int64_t* idx, index_t count) {
  if (count == 1) return -1.0;
  for (index_t a = count; a < round_up(count, VT<double>::W); ++a) u[a] = kEntmaxPad;
  double lo = -1.0;
  for (int step = 0; step < kEntmaxNewtonSteps; ++step) {
    const EntmaxSums s = entmax_sums_above(u, count, lo);
    // tau_S - lo = M - sqrt(delta) <= min d as entmax_tau_sorted tests it,
    // times n: (s1 - n min d)^2 <= n^2 delta = n - n s2 + s1^2 (s1 >= n min d),
    // so the step's latency has no division and no square root.
    const double n2_delta = s.n - s.n * s.s2 + s.s1 * s.s1;
    const double lhs = s.s1 - s.n * s.mn;
    if (n2_delta >= 0.0 && lhs * lhs <= n2_delta) return lo + (s.s1 - std::sqrt(n2_delta)) / s.n;
    // Newton: lo + (h(lo) - 1) / -h'(lo), h(lo) = s2, -h'(lo) = 2 s1.
    const double next = lo + std::max((s.s2 - 1.0) / (2.0 * s.s1), s.mn);
    if (!(next > lo)) break;  // rounding stalled
    lo = next;
  }
  return entmax_tau_sorted(u, idx, count);
}

// entmax15 responsibilities of a distance row: candidates are the j with
// D_j - m1 < 4 sigma^2 (u_j = -(D_j - m1) / (4 sigma^2) > -1); cval/cidx
// (kp,) [out] get the support's r values and indices, returns its size.
// extra [out]: sum_j r_j (D_j - m1) - 2 sigma^2 H(r), the Tsallis objective
// minus m1 (one-hot rows give exactly 0).
template <typename T>
inline index_t entmax_row(const T* row, index_t kp, T m1, double sigma2, double* cval,
                          std::int64_t* cidx, double* extra) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  // NOTE: u = -gap / (4 sigma^2) by division, not by a precomputed inverse, and
  // gap == 0 always a candidate: when 4 sigma^2 is subnormal or underflows to 0
  // the inverse is inf (0 * inf = NaN) and `gap < thr` would admit nothing.
  const double thr = 4.0 * sigma2;
  const V vthr = vset<T>(static_cast<T>(std::min<double>(thr, std::numeric_limits<T>::max())));
  const V vm = vset<T>(m1);
  index_t count = 0;
  for (index_t j = 0; j < kp; j += W) {
    const V g = vload(row + j) - vm;
    if (!any_less_equal(g, vthr)) continue;  // a superset; exact test below in double
    for (index_t q = 0; q < W; ++q) {
      const double gap = static_cast<double>(row[j + q]) - static_cast<double>(m1);
      if (gap < thr || gap == 0.0) {
        cval[count] = gap > 0.0 ? -gap / thr : 0.0;
        cidx[count] = j + q;
        ++count;
      }
    }
  }
  const double tau = entmax_tau(cval, cidx, count);
  index_t supp = 0;
  double lin = 0.0, p15 = 0.0;
  for (index_t a = 0; a < count; ++a) {
    const double t = cval[a] - tau;
    if (t <= 0.0) continue;
    const double r = t * t;
    const double gap = -cval[a] * thr;
    lin += r * gap;
    p15 += r * t;  // r^(3/2) = t^3
    cval[supp] = r;
    cidx[supp] = cidx[a];
    ++supp;
  }
  *extra = lin - 2.0 * sigma2 * (4.0 / 3.0) * (1.0 - p15);
  return supp;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
