// The per-row API kernels: one output row per input row, no reduction across
// rows (sq_distances, assign, margins, entmax15, responsibilities).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

template <typename T>
void sq_distances(const T* X, index_t n, index_t d, const T* C, index_t k, T* D, int n_threads) {
  const Engine<T> E(C, k, d);
  auto wss = per_thread(E, n, n_threads);
  drive_rows(E, X, n, wss, [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
    for (index_t r = 0; r < rows; ++r)
      std::memcpy(D + (i0 + r) * k, ws.dbuf.data() + r * E.ld, k * sizeof(T));
  });
}

// Calls f(i, RowMin of row i) for every row of X: in registers on the direct
// path, from the distance block otherwise.
template <typename T, typename F>
void for_each_row_min(const T* X, index_t n, index_t d, const T* C, index_t k, int n_threads, F f) {
  const Engine<T> E(C, k, d, 0, true);
  auto wss = per_thread(E, n, n_threads);
  drive_rows(
      E, X, n, wss,
      [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
        E.min2_rows(X + i0 * d, rows, ws.mins.data(), ws);
        for (index_t r = 0; r < rows; ++r) f(i0 + r, ws.mins[r]);
      },
      false);
}

template <typename T>
void assign(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
            T* min_sq_dist, int n_threads) {
  for_each_row_min(X, n, d, C, k, n_threads, [&](index_t i, const RowMin<T>& m) {
    labels[i] = m.a;
    min_sq_dist[i] = m.m1;
  });
}

template <typename T>
void margins(const T* X, index_t n, index_t d, const T* C, index_t k, T* out, int n_threads) {
  for_each_row_min(X, n, d, C, k, n_threads,
                   [&](index_t i, const RowMin<T>& m) { out[i] = m.m2 - m.m1; });
}

// entmax15 of one score row z (k,) into o (k,); cval (k rounded up to double
// vectors,), cidx (k,) scratch.
template <typename T>
void entmax15_row(const T* z, index_t k, T* o, double* cval, std::int64_t* cidx) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const index_t kv = k / W * W;
  T zmax = -std::numeric_limits<T>::infinity();
  if (kv > 0) {
    V vm = vload(z);
    for (index_t j = W; j < kv; j += W) vm = vmax(vm, vload(z + j));
    for (index_t q = 0; q < W; ++q) zmax = std::max(zmax, vm[q]);
  }
  for (index_t j = kv; j < k; ++j) zmax = std::max(zmax, z[j]);
  // u = z/2 - max(z)/2: halved before the subtraction, so it cannot
  // overflow. Candidates u > -1, i.e. z > max(z) - 2 (a superset test in T,
  // then the exact one in double).
  const double half_max = static_cast<double>(zmax) / 2.0;
  const T lo = zmax - T(2) - (std::fabs(zmax) + T(2)) * T(1e-6);
  const V vlo = vset<T>(lo);
  index_t count = 0;
  // NOTE: no branch per entry (candidates come at random places; the branches
  // mispredicted more than the row's math): the store always, the count only
  // for a candidate; whole blocks below lo are skipped.
  auto consider = [&](index_t j) {
    const double u = static_cast<double>(z[j]) / 2.0 - half_max;
    cval[count] = u;
    cidx[count] = j;
    count += u > -1.0;
  };
  for (index_t j = 0; j < kv; j += W) {
    vstore(o + j, V{});
    if (lane_bits<Cmp::lt>(vlo, vload(z + j)) == 0) continue;
    for (index_t q = 0; q < W; ++q) consider(j + q);
  }
  for (index_t j = kv; j < k; ++j) {
    o[j] = T(0);
    consider(j);
  }
  // r = [u - tau]_+^2 in double vectors: a scalar max or select compiles to a
  // branch, which mispredicts on every other candidate.
  using VD = typename VT<double>::v;
  constexpr index_t WD = VT<double>::W;
  const VD vtau = vset(entmax_tau(cval, cidx, count));  // pads cval: r = 0 there
  for (index_t a = 0; a < count; a += WD) {
    const index_t lanes = std::min(WD, count - a);
    const VD t = vmax(vload(cval + a) - vtau, VD{});
    const VD r = t * t;
    for (index_t q = 0; q < lanes; ++q) o[cidx[a + q]] = static_cast<T>(r[q]);
  }
}

// Up to this many columns entmax15 puts rows in the vector lanes and sorts
// with a sorting network of this many inputs (short rows are padded).
inline constexpr index_t kEntmaxLaneK = 8;

// The double vector {p[0], p[stride], p[2 stride], ...} built in registers
// (lane by lane stores and a vector load of them stall on store forwarding).
template <typename V, typename T, std::size_t... Q>
inline V strided(const T* p, index_t stride, std::index_sequence<Q...>) {
  return V{static_cast<double>(p[static_cast<index_t>(Q) * stride])...};
}

// entmax15 of the W rows (W = double lanes) z (W, k), k <= kEntmaxLaneK, into
// o (W, k): rows in the lanes, the same u as entmax15_row, the candidates
// sorted descending by a sorting network (19 compare-exchanges, no branches)
// and SPEC.md's scan with entmax_tau_sorted's test, its sums in its order:
// the same tau as the oracle, bit for bit. For short rows the sort's
// mispredictions and the per-row reductions cost several times the math.
template <typename T>
void entmax15_lane_rows(const T* z, index_t k, T* o) {
  using V = typename VT<double>::v;
  constexpr index_t W = VT<double>::W, K = kEntmaxLaneK;
  const V below = vset(-2.0);  // padding, and the clamp of non-candidates
  V u[K], s[K];
  V zmax = vset(-std::numeric_limits<double>::infinity());
  for (index_t j = 0; j < K; ++j) u[j] = below;
  for (index_t j = 0; j < k; ++j) {
    u[j] = strided<V>(z + j, k, std::make_index_sequence<W>{});
    zmax = vmax(zmax, u[j]);
  }
  const V half_max = zmax / 2.0;
  for (index_t j = 0; j < k; ++j) u[j] = vmax(u[j] / 2.0 - half_max, below);
  for (index_t j = 0; j < K; ++j) s[j] = u[j];
  // Knuth's 19-comparator network for 8 inputs, descending.
  static constexpr int kNet[19][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {0, 4}, {1, 5}, {2, 6},
                                      {3, 7}, {0, 1}, {2, 3}, {4, 5}, {6, 7}, {2, 4}, {3, 5},
                                      {1, 4}, {3, 6}, {1, 2}, {3, 4}, {5, 6}};
  // Unrolled, so that s stays in registers (a loop indexes it in memory).
#pragma GCC unroll 19
  for (const auto& ce : kNet) {
    const V a = s[ce[0]], b = s[ce[1]];
    s[ce[0]] = vmax(a, b);
    s[ce[1]] = vmin(a, b);
  }
  // entmax_tau_sorted's scan in every lane: a lane stops at its first failing
  // size (or its first non-candidate, u <= -1).
  const V one = vset(1.0), minus_one = vset(-1.0);
  V s1 = s[0], s2 = s[0] * s[0], size = one;
  auto alive = s[0] == s[0];
  for (index_t j = 1; j < K; ++j) {
    const V v = s[j], ds = vset(static_cast<double>(j + 1));
    const V a1 = s1 + v, a2 = s2 + v * v;
    alive = alive & (v > minus_one) & entmax_size_qualifies(a1, a2, v, ds);
    s1 = alive ? a1 : s1;
    s2 = alive ? a2 : s2;
    size = alive ? ds : size;
  }
  const V tau = entmax_tau_of_sums(size, s1, s2);
  for (index_t j = 0; j < k; ++j) {
    const V t = u[j] - tau;
    const V r = (t > V{}) & (u[j] > minus_one) ? t * t : V{};
    for (index_t q = 0; q < W; ++q) o[q * k + j] = static_cast<T>(r[q]);
  }
}

template <typename T>
void entmax15(const T* Z, index_t n, index_t k, T* R, int n_threads) {
  const int nt = resolve_threads(n_threads, n * k);
  std::vector<std::vector<double>> cv(nt, std::vector<double>(round_up(k, VT<double>::W)));
  std::vector<std::vector<std::int64_t>> ci(nt, std::vector<std::int64_t>(k));
  const std::atomic<int>* cancel = thread_cancel_flag();
  // Rows in lane groups of W where k is small, one by one otherwise. The last
  // n % W rows of a small k take the lanes too, padded with zero rows: which
  // rows are in a full group depends on W, and the lanes' tau (the sort's) and
  // entmax15_row's (Newton's closed form) may differ in the last bit, so every
  // row of a small k takes the lanes at every level.
  constexpr index_t W = VT<double>::W;
  const index_t group = k <= kEntmaxLaneK ? W : 1;
  const index_t n_groups = n / group;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t g = 0; g < n_groups; ++g) {
    if (cancel && cancel->load(std::memory_order_relaxed)) continue;  // results discarded
    const index_t i = g * group;
    if (group > 1) {
      entmax15_lane_rows(Z + i * k, k, R + i * k);
    } else {
      const int th = omp_get_thread_num();
      entmax15_row(Z + i * k, k, R + i * k, cv[th].data(), ci[th].data());
    }
  }
  const index_t i_tail = n_groups * group;
  if (group > 1 && i_tail < n) {
    std::vector<T> zb(group * k, T(0)), ob(group * k);
    std::copy(Z + i_tail * k, Z + n * k, zb.begin());
    entmax15_lane_rows(zb.data(), k, ob.data());
    std::copy(ob.begin(), ob.begin() + (n - i_tail) * k, R + i_tail * k);
    return;
  }
  for (index_t i = i_tail; i < n; ++i)
    entmax15_row(Z + i * k, k, R + i * k, cv[0].data(), ci[0].data());
}

// The responsibilities of `kind` of one distance row (kp,) into o (k,); the
// row is overwritten (softmax) and ws holds the entmax15 candidates.
template <typename T>
struct ResponsibilityRow {
  index_t k, kp;
  Kind kind;
  double sigma2;
  T inv_t;  // 1 / (2 sigma^2), capped at the largest T
  ResponsibilityRow(index_t k_, index_t kp_, Kind kind_, double sigma)
      : k(k_), kp(kp_), kind(kind_), sigma2(sigma * sigma) {
    inv_t = static_cast<T>(std::min<double>(1.0 / (2.0 * sigma2), std::numeric_limits<T>::max()));
  }
  void operator()(T* row, T* o, Workspace<T>& ws) const {
    const RowMin<T> m = row_min2(row, kp);
    if (kind == Kind::hard) {
      std::fill(o, o + k, T(0));
      o[m.a] = T(1);
    } else if (kind == Kind::softmax) {
      softmax_row(row, kp, m.m1, inv_t, true);
      std::memcpy(o, row, k * sizeof(T));
    } else {
      double extra;
      const index_t s = entmax_row(row, kp, m.m1, sigma2, ws.cval.data(), ws.cidx.data(), &extra);
      std::fill(o, o + k, T(0));
      for (index_t a = 0; a < s; ++a) o[ws.cidx[a]] = static_cast<T>(ws.cval[a]);
    }
  }
};

template <typename T>
void responsibilities(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind,
                      double sigma, T* R, int n_threads) {
  const Engine<T> E(C, k, d);
  auto wss = per_thread(E, n, n_threads);
  const ResponsibilityRow<T> resp(k, E.kp, kind, sigma);
  drive_rows(E, X, n, wss, [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
    for (index_t r = 0; r < rows; ++r) resp(ws.dbuf.data() + r * E.ld, R + (i0 + r) * k, ws);
  });
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
