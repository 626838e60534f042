// Exact assignment pruned by a projection (issue 35, item 3): the labels and
// minimum squared distances of assign (impl/per_row.hpp), bit for bit,
// computing the full distances of each row's candidates only.
//
// Ball groups prune little on a continuum of real descriptors (a row is about
// as far from a group's centre as the group is wide). A projection does: with
// Q (d, p) orthonormal columns (the centroids' leading principal axes, the
// caller's) and mu a centre, each vector v has the augmented coordinates
// a(v) = (Q^T (v - mu), ||(I - Q Q^T)(v - mu)||) in p + 1 dimensions, and
// ||a(x) - a(c)|| <= ||x - c|| (Pythagoras on the span of Q, the reverse
// triangle inequality on its complement). On 1e6 x 128 patch descriptors at
// k = 4096 (bench/ivf.py), p = 32: about 17 candidates a row.
//
// For each row x (rows in blocks of an Engine on the augmented centroids):
//   1. D~ (k,): the augmented distances (that engine's kernel, or split-bf16
//      products on AMX tiles: softkmeans/amx.hpp), lowered to exact bounds
//      lo_j <= ||x - c_j|| by its KernelSlack (the tiles' amx_sq_slack) and by
//      kappa (v - mu) (the rounding of a(v), ProjectionSlack);
//   2. the W lane winners of D~ (argmin over j = q mod W, lane q): the
//      plain pass's distances of them (step 4's chains, one block), the
//      smallest (margins: the second smallest, at most 1/64 above the
//      smallest) the reach;
//   3. lo* a least bound with KernelSlack::floor_within(lo*, ||x - s||) of
//      the plain pass's engine above the reach (the slacks of the centroids
//      near the row, not of the farthest), turned into a threshold tau on
//      D~ (Ea's slacks of the centroids within reach likewise): a centroid
//      with D~_j > tau has lo_j > lo*, so the plain pass's distance to it is
//      strictly above the winner's: neither the minimum nor the first
//      argmin lies there;
//   4. the other candidates (D~_j <= tau, not a lane winner) get the plain
//      pass's distance, computed with its operations (the chain of d fused
//      multiply-adds of engine_bf16.hpp's bf16_exact), folded with the
//      winners' (ties to the least index).
// beyond (margins): a lower bound on the plain pass's distances of the
// centroids left out, from lo* as group_pruned.hpp's left_out_bound (with
// the slacks of the centroids near the row, KernelSlack::floor_within): where
// the second smallest found is at most beyond, it is the row's.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "impl/bounds.hpp"
#include "impl/engine.hpp"
#include "impl/group_pruned.hpp"
#include "impl/per_row.hpp"
#include "impl/transpose.hpp"
#include "softkmeans/amx.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// kappa of the augmented coordinates: ||a~(v) - a(v)|| <= kappa ||v - mu||,
// a~ the coordinates computed (in double, rounded to T), a the exact ones of
// the orthonormal Q^ nearest Q. From g = max |Q^T Q - I| (computed, plus its
// own rounding): ||Q^T Q - I||_2 <= p g = delta, so ||Q - Q^|| <= delta (the
// polar factor). The projection is then within beta = 2 delta + sqrt(p)
// (p + d + 4) 2^-52 (the products in double), the residual's square within
// 3 beta + (d + p + 4) 2^-51 (relative to ||v - mu||^2), the residual within
// the square root of that, and the rounding to T adds 2 u_T. Past delta =
// 1e-3 no bound is claimed (inf: every centroid a candidate).
template <typename T>
double projection_slack(const double* Q, index_t d, index_t p) {
  double g = 0.0;
  for (index_t a = 0; a < p; ++a)
    for (index_t b = 0; b < p; ++b) {
      double s = 0.0;
      for (index_t l = 0; l < d; ++l) s += Q[l * p + a] * Q[l * p + b];
      g = std::max(g, std::abs(s - (a == b ? 1.0 : 0.0)));
    }
  const double dd = static_cast<double>(d), pp = static_cast<double>(p);
  const double delta = pp * (g + (dd + 2) * 0x1p-52);
  if (!(delta < 1e-3)) return std::numeric_limits<double>::infinity();
  const double beta = 2 * delta + std::sqrt(pp) * (pp + dd + 4) * 0x1p-52;
  const double eps_sq = 3 * beta + (dd + pp + 4) * 0x1p-51;
  const double u = std::numeric_limits<T>::epsilon() / 2.0;
  return 1.01 * (beta + std::sqrt(eps_sq) + 2 * u) + 0x1p-50;
}

// Q (d, p) with its columns padded by zeros to p8 = p rounded up to 8.
inline std::vector<double> padded_axes(const double* Q, index_t d, index_t p) {
  const index_t p8 = round_up(p, 8);
  std::vector<double> out(d * p8, 0.0);
  for (index_t l = 0; l < d; ++l) std::copy(Q + l * p, Q + (l + 1) * p, out.data() + l * p8);
  return out;
}

// a~ of rows V[0 .. rows) [out] (rows, p + 1) in T, and their ||v - mu||
// (in double, rounded up) [out] (rows,); Q8 (d, p8) padded_axes; y (R, d)
// and (R, p8) scratch. R rows (minus mu, in double, first) by a vector of
// axes at a time, the R sums in vector registers (of the unit's width: R
// sums of 8 doubles spill AVX2's 16 registers, 26% of that unit's pass).
template <typename T>
void augmented(const T* V, index_t rows, const double* Q8, const double* mu, index_t d, index_t p,
               T* out, double* norm, double* y) {
  constexpr index_t DW = SOFTKMEANS_VEC_BYTES / sizeof(double);
  static_assert(DW >= 1 && 8 % DW == 0, "p8 holds whole vectors of axes");
  using DV = double __attribute__((vector_size(DW * sizeof(double))));
  constexpr index_t R = 8;
  const index_t p8 = round_up(p, 8);
  double* xc = y;                // (R, d) the rows minus mu
  double* proj = y + R * d;      // (R, p8)
  for (index_t r0 = 0; r0 < rows; r0 += R) {
    const index_t rn = std::min(R, rows - r0);
    for (index_t r = 0; r < R; ++r) {
      const T* v = V + (r0 + std::min(r, rn - 1)) * d;
      for (index_t l = 0; l < d; ++l) xc[r * d + l] = static_cast<double>(v[l]) - mu[l];
    }
    for (index_t a0 = 0; a0 < p8; a0 += DW) {
      DV acc[R] = {};
      for (index_t l = 0; l < d; ++l) {
        DV q;
        std::memcpy(&q, Q8 + l * p8 + a0, sizeof q);
#pragma GCC unroll 8
        for (index_t r = 0; r < R; ++r) acc[r] += q * xc[r * d + l];
      }
      for (index_t r = 0; r < R; ++r)
        for (index_t a = 0; a < DW; ++a) proj[r * p8 + a0 + a] = acc[r][a];
    }
    for (index_t r = 0; r < rn; ++r) {
      const double n2 = direct_sq_distance(V + (r0 + r) * d, mu, d);
      double y2 = 0.0;
      T* o = out + (r0 + r) * (p + 1);
      for (index_t a = 0; a < p; ++a) {
        y2 += proj[r * p8 + a] * proj[r * p8 + a];
        o[a] = static_cast<T>(proj[r * p8 + a]);
      }
      o[p] = static_cast<T>(std::sqrt(std::max(n2 - y2, 0.0)));
      norm[r0 + r] = std::sqrt(n2) * (1.0 + 0x1p-40);
    }
  }
}

// x rounded to T towards +inf.
template <typename T>
T round_up_to(double x) {
  T t = static_cast<T>(x);
  if (static_cast<double>(t) < x) t = std::nextafter(t, std::numeric_limits<T>::infinity());
  return t;
}

// What every thread reads: the plain pass's engine (its shift, norms and
// shifted centroids, row-major, for the candidates' chains), the engine on
// the augmented centroids, and the slacks.
template <typename T>
struct Projected {
  const T* C;
  index_t k, d, p;
  const double* mu;
  Engine<T> E;             // assign's: its bits
  KernelSlack<T> slack;    // of E
  std::vector<T> crow;     // (k, d) the shifted centroids of E's lanes
  std::vector<double> q8;  // padded_axes of Q
  double kappa;            // projection_slack of Q
  double ec = 0.0;         // max_j kappa ||c_j - mu|| (set with ca: declared before it)
  std::vector<T> ca;       // (k, p + 1) the augmented centroids
  Engine<T> Ea;            // on ca
  KernelSlack<T> slack_a;  // of Ea
  // Step 1 on matrix units (float, the choice amx, softkmeans/amx.hpp): ca
  // minus Ea's shift, split for the tiles; D~ then has amx_sq_slack's bound.
  AmxPanels amx;

  Projected(const T* C_, index_t k_, index_t d_, const double* Q, const double* mu_, index_t p_)
      : C(C_),
        k(k_),
        d(d_),
        p(p_),
        mu(mu_),
        E(C_, k_, d_, 0, true),
        slack(E),
        crow(k_ * d_),
        q8(padded_axes(Q, d_, p_)),
        kappa(projection_slack<T>(Q, d_, p_)),
        ca(augment_centroids()),
        Ea(ca.data(), k_, p_ + 1),
        slack_a(Ea) {
    if constexpr (std::is_same<T, float>::value)
      if (E.ch.amx && p + 1 <= 256 && amx_available())
        amx = amx_panels(ca.data(), k, p + 1, Ea.shift.data());
    constexpr index_t LC = Engine<T>::LC;
    for (index_t j = 0; j < k; ++j)
      for (index_t l = 0; l < d; ++l) crow[j * d + l] = E.cl[j / LC * d * LC + l * LC + j % LC];
  }

 private:
  // ca, and ec.
  std::vector<T> augment_centroids() {
    std::vector<T> out(k * (p + 1));
    std::vector<double> y(8 * (d + round_up(p, 8))), norm(k);
    augmented(C, k, q8.data(), mu, d, p, out.data(), norm.data(), y.data());
    ec = kappa * *std::max_element(norm.begin(), norm.end());
    return out;
  }
};

// Per thread: a block of augmented rows and one row's candidates.
template <typename T>
struct ProjectedScratch : Workspace<T> {  // Ea's
  std::vector<T> xa;                     // (mb, p + 1)
  std::vector<double> xnorm, y;          // (mb,) ||x - mu||; (p,)
  std::vector<T> xs;                     // (mb, d) the rows minus E's shift
  std::vector<T> xn;                     // (mb,) their squared norms (pack_group's bits)
  std::vector<std::int32_t> cand;        // (kp,)
  std::vector<T> dtile;                  // (kTileBlockRows, tiles x 16) D~ from the tiles
  std::vector<std::uint16_t> parts;      // the tiles' rows (amx_parts_size)
  std::int64_t n_distances = 0;
};

// Rows a block where step 1 runs on AMX tiles: 32 and 64 took the same time
// (1e6 patch descriptors, k = 4096, 2 threads); at 128 a block's D~ (2 MiB)
// outgrew L2 and the pass took about 1.15 times as long.
inline constexpr index_t kTileBlockRows = 32;
static_assert(kTileBlockRows <= kAmxRows, "one call of amx_distances a block");

// D~ of rows xa[0 .. rows) [out] (rows, ld) on AMX tiles (float); false: the
// float engine's instead (no tiles, or a row beyond their range).
template <typename T>
bool tile_distances(const Projected<T>& P, const T* xa, index_t rows, T* out, index_t ld,
                    std::uint16_t* parts) {
  if constexpr (std::is_same<T, float>::value)
    return !P.amx.b.empty() && amx_distances(P.amx, xa, rows, out, ld, parts);
  return false;
}

// Rows V[0 .. rows) minus E's shift [out] (rows, d) and their squared norms
// [out] (rows,), summed as pack_group sums them (a chain of fused
// multiply-adds in coordinate order: the plain pass's bits); R rows' chains
// at a time.
template <typename T>
void shifted_rows(const Engine<T>& E, const T* V, index_t rows, T* xs, T* xn) {
  constexpr index_t R = 8;
  const index_t d = E.d;
  for (index_t r = 0; r < rows; ++r)  // (not i % d: a division an element, 5% of the pass)
    for (index_t l = 0; l < d; ++l) xs[r * d + l] = V[r * d + l] - E.shift[l];
  for (index_t r0 = 0; r0 < rows; r0 += R) {
    const index_t rn = std::min(R, rows - r0);
    T acc[R] = {};
    for (index_t l = 0; l < d; ++l)
#pragma GCC unroll 8
      for (index_t r = 0; r < R; ++r) {
        const T v = xs[(r0 + std::min(r, rn - 1)) * d + l];
        acc[r] = lane_mul_add(v, v, acc[r]);
      }
    for (index_t r = 0; r < rn; ++r) xn[r0 + r] = acc[r];
  }
}

// The plain pass's distance of the row (xs: minus E's shift, xn its norm as
// pack_group sums it) to each centroid of cand[0 .. m): f(j, D) in cand's
// order. The chain of d fused multiply-adds in coordinate order from 0, then
// (xn + cn) - 2 a by one more and the clamp at 0 (bf16_exact's operations).
template <typename T, typename F>
void exact_candidates(const Projected<T>& P, const T* xs, T xn, const std::int32_t* cand,
                      index_t m, F f) {
  constexpr index_t B = 16;
  const index_t d = P.d;
  for (index_t c0 = 0; c0 < m; c0 += B) {
    const index_t nb = std::min(B, m - c0);
    const T* cr[B];
    for (index_t b = 0; b < B; ++b) cr[b] = P.crow.data() + cand[c0 + std::min(b, nb - 1)] * d;
    alignas(64) T acc[B] = {};
#ifdef SOFTKMEANS_TRANSPOSE16
    if constexpr (std::is_same<T, float>::value) {
      // 16 chains in the lanes of one vector, fed 16 coordinates at a time
      // by a 16 x 16 transpose of the candidates' rows (the scalar chains
      // below took 4 times as long).
      __m512 a = _mm512_setzero_ps();
      for (index_t l0 = 0; l0 < d; l0 += 16) {
        const index_t len = std::min<index_t>(16, d - l0);
        const __mmask16 mask = static_cast<__mmask16>((1u << len) - 1u);
        __m512 cv[16];
#pragma GCC unroll 16
        for (index_t b = 0; b < B; ++b) cv[b] = _mm512_maskz_loadu_ps(mask, cr[b] + l0);
        transpose16(cv);
        if (len == 16) {
#pragma GCC unroll 16
          for (index_t t = 0; t < 16; ++t)
            a = _mm512_fmadd_ps(_mm512_set1_ps(xs[l0 + t]), cv[t], a);
        } else {
          for (index_t t = 0; t < len; ++t)
            a = _mm512_fmadd_ps(_mm512_set1_ps(xs[l0 + t]), cv[t], a);
        }
      }
      _mm512_store_ps(acc, a);
    } else
#elif defined(SOFTKMEANS_TRANSPOSE8)
    if constexpr (std::is_same<T, float>::value) {
      // The same 16 chains in the lanes of two vectors (independent: one
      // hides the other's latency), fed 8 coordinates at a time.
      __m256 a[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      for (index_t l0 = 0; l0 < d; l0 += 8) {
        const index_t len = std::min<index_t>(8, d - l0);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len)), iota);
#pragma GCC unroll 2
        for (index_t h = 0; h < 2; ++h) {
          __m256 cv[8];
#pragma GCC unroll 8
          for (index_t b = 0; b < 8; ++b) cv[b] = _mm256_maskload_ps(cr[8 * h + b] + l0, mask);
          transpose8(cv);
          if (len == 8) {
#pragma GCC unroll 8
            for (index_t t = 0; t < 8; ++t)
              a[h] = _mm256_fmadd_ps(_mm256_set1_ps(xs[l0 + t]), cv[t], a[h]);
          } else {
            for (index_t t = 0; t < len; ++t)
              a[h] = _mm256_fmadd_ps(_mm256_set1_ps(xs[l0 + t]), cv[t], a[h]);
          }
        }
      }
      _mm256_store_ps(acc, a[0]);
      _mm256_store_ps(acc + 8, a[1]);
    } else
#endif
    {
      for (index_t l = 0; l < d; ++l) {
        const T xl = xs[l];
#pragma GCC unroll 16
        for (index_t b = 0; b < B; ++b) acc[b] = lane_mul_add(xl, cr[b][l], acc[b]);
      }
    }
    for (index_t b = 0; b < nb; ++b) {
      const index_t j = cand[c0 + b];
      const T u = lane_mul_add(acc[b], T(-2), xn + P.E.cnl[j]);
      f(j, u > T(0) ? u : T(0));
    }
  }
}

// A least lo (from sqrt(reach)) whose floor_within(lo, a) is above reach, a
// >= ||x - s|| the row's, or inf: doubling steps, then bisection between the
// last that failed and the first that held (doubling alone overshot the
// needed rise by up to 2x: on patch descriptors whose nearest is far below
// the centroids' spread, that rise is most of tau). Only the lo returned is
// claimed: the plain pass's distance of every centroid at distance >= lo is
// then above reach (floor_within covers every farther centroid).
template <typename T>
double least_above(const KernelSlack<T>& slack, double reach, double a) {
  const double lo0 = std::sqrt(reach) * (1.0 + 0x1p-40);
  const double scale = lo0 + slack.b + 0x1p-1000;
  double failed = 0.0;
  for (double f = 0x1p-24; f <= 1.0; f *= 2) {
    if (!(slack.floor_within(lo0 + f * scale, a) > reach)) {
      failed = f;
      continue;
    }
    double held = f;
    for (int step = 0; step < 5; ++step) {
      const double mid = 0.5 * (failed + held);
      (slack.floor_within(lo0 + mid * scale, a) > reach ? held : failed) = mid;
    }
    return lo0 + held * scale;
  }
  return std::numeric_limits<double>::infinity();
}

// The least and second least plain-pass distance found so far and the first
// argmin (in index order) among them; fold takes them in any order (label 0
// while none is below inf, as the plain pass's fold in index order gives).
template <typename T>
struct Nearest {
  T v1 = std::numeric_limits<T>::infinity(), v2 = v1;
  index_t a = 0;
  void fold(index_t j, T dist) {
    v2 = std::min(v2, std::max(v1, dist));
    if (dist < v1 || (dist == v1 && j < a)) {
      v1 = dist;
      a = j;
    }
  }
};

// An upper bound on ||x - s|| from xn = fl(||fl(x - s)||^2), a chain of d
// roundings: each coordinate of x - s is within u of its rounding, the sum
// within d u / (1 - d u) of its exact value (no second pass over x; inf or
// NaN: b's slacks are taken).
template <typename T>
double shifted_norm_up(T xn, index_t d) {
  const double u = std::numeric_limits<T>::epsilon() / 2.0;
  return std::sqrt(static_cast<double>(xn) / (1.0 - 2.0 * (d + 2) * u)) / (1.0 - 2.0 * u);
}

// The threshold on row r's augmented distances (step 3) and lo*, from its
// lane winners (step 2), whose plain-pass distances (xs, xn: the row minus
// E's shift and its norm, x_up >= ||x - s||) it folds into near and lists in
// won; two: with margins (the reach is the second smallest).
template <typename T>
T row_threshold(const Projected<T>& P, const T* Drow, bool amx, const T* xa, double xnorm,
                const T* xs, T xn, double x_up, bool two, double& lo_star, Nearest<T>& near,
                std::int32_t* won, index_t& n_won) {
  using V = typename VT<T>::v;
  using VI = typename VT<T>::i;
  using Int = typename std::remove_reference<decltype(VI{}[0])>::type;
  constexpr index_t W = VT<T>::W;
  const Engine<T>& Ea = P.Ea;
  const T inf_t = std::numeric_limits<T>::infinity();
  // Four sets of lane minima (chains of independent selects), then one.
  constexpr index_t S = 4;
  V m[S];
  VI win[S], jv[S];
  for (index_t t = 0; t < S; ++t) {
    m[t] = vset(inf_t);
    win[t] = VI{};
    for (index_t q = 0; q < W; ++q) jv[t][q] = static_cast<Int>(t * W + q);
  }
  index_t j0 = 0;
  for (; j0 + S * W <= Ea.kp; j0 += S * W)
#pragma GCC unroll 4
    for (index_t t = 0; t < S; ++t) {
      const V v = vload(Drow + j0 + t * W);
      const VI lt = v < m[t];
      win[t] = lt ? jv[t] : win[t];
      m[t] = lt ? v : m[t];
      jv[t] += static_cast<Int>(S * W);
    }
  for (; j0 < Ea.kp; j0 += W) {
    const V v = vload(Drow + j0);
    const VI lt = v < m[0];
    win[0] = lt ? jv[0] : win[0];
    m[0] = lt ? v : m[0];
    jv[0] += static_cast<Int>(W);
  }
  for (index_t t = 1; t < S; ++t) {
    const VI lt = m[t] < m[0];
    win[0] = lt ? win[t] : win[0];
    m[0] = lt ? m[t] : m[0];
  }
  // The W winners' plain-pass distances at once (one block of the
  // candidates' chains: it took about as long as the direct distances in
  // double of the winners within reach it replaced, and the threshold then
  // needs no slack on the winner's side).
  n_won = 0;
  for (index_t q = 0; q < W; ++q) {
    const index_t j = static_cast<index_t>(win[0][q]);
    if (m[0][q] < inf_t && j < P.k) won[n_won++] = static_cast<std::int32_t>(j);
  }
  exact_candidates(P, xs, xn, won, n_won, [&](index_t j, T dist) { near.fold(j, dist); });
  // How far the candidates reach: the least distance found; with margins the
  // second least, but at most 1/64 beyond the least: a fit's final pass needs
  // a row's second smallest only where its margin may be the least of all
  // (its caller computes in full the rows whose bound beyond says it may be);
  // reaching to the second least left 48 candidates a row where the nearest
  // alone left 33 (2e4 patch descriptors, k = 4096, p = 31), and the final
  // pass took 1.15 times the plain one.
  const double v1 = static_cast<double>(near.v1);
  const double reach = two ? std::min(static_cast<double>(near.v2), v1 * (1.0 + 1.0 / 64)) : v1;
  lo_star = least_above(P.slack, reach, x_up);
  const double inf = std::numeric_limits<double>::infinity();
  if (!(lo_star < inf)) return inf_t;
  const double ax =
      std::sqrt(direct_sq_distance(xa, Ea.shift.data(), P.p + 1) * sq_rounding_up(P.p + 1));
  // L bounds the augmented distance (computed coordinates) of every centroid
  // within lo*; those centroids are within L of the row in Ea's space too.
  const double L = lo_star + P.kappa * xnorm + P.ec;
  double tau;
  if (amx) {  // such a centroid c has ||c - s|| <= ax + L
    tau = (L * L + amx_sq_slack(ax, ax + L, L * L, P.p + 1)) * (1.0 + 0x1p-48);
  } else {
    const double lo = L + P.slack_a.lin_within(ax, L);
    tau = (lo * lo + P.slack_a.sq_within(ax, L)) * (1.0 + 0x1p-48);
  }
  return tau < inf ? round_up_to<T>(tau) : inf_t;
}

// Row i (its augmented distances Drow): label, minimum, and with margins the
// second smallest and beyond.
template <typename T>
void projected_row(const Projected<T>& P, index_t i, const T* Drow, bool amx, const T* xa,
                   double xnorm, const T* xs, T xn, ProjectedScratch<T>& s, std::int64_t* labels,
                   T* min_sq_dist, T* second, double* beyond) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const index_t d = P.d;
  double lo_star = 0.0;
  Nearest<T> near;
  std::int32_t won[W];
  index_t n_won = 0;
  const double x_up = shifted_norm_up(xn, d);
  const T tau = row_threshold(P, Drow, amx, xa, xnorm, xs, xn, x_up, second != nullptr, lo_star,
                              near, won, n_won);
  // The candidates (D~ <= tau) but the winners, whose distances near holds:
  // lane q's winner is won's entry of lane q, if any.
  std::int32_t lane_winner[W];
  for (index_t q = 0; q < W; ++q) lane_winner[q] = -1;
  for (index_t t = 0; t < n_won; ++t) lane_winner[won[t] % W] = won[t];
  index_t m = 0;
  const V tv = vset(tau);
  for (index_t j0 = 0; j0 < P.Ea.kp; j0 += W)
    for (unsigned bits = lane_bits<Cmp::le>(vload(Drow + j0), tv); bits != 0; bits &= bits - 1) {
      const index_t q = __builtin_ctz(bits);
      s.cand[m] = static_cast<std::int32_t>(j0 + q);
      m += lane_winner[q] != j0 + q;
    }
  while (m > 0 && s.cand[m - 1] >= P.k) --m;  // the padding (inf <= inf)
  exact_candidates(P, xs, xn, s.cand.data(), m, [&](index_t j, T dist) { near.fold(j, dist); });
  s.n_distances += m + n_won;
  labels[i] = near.a;
  min_sq_dist[i] = near.v1;
  if (second == nullptr) return;
  second[i] = near.v2;
  double out = std::numeric_limits<double>::infinity();
  if (m + n_won < P.k) out = P.slack.floor_within(lo_star, x_up);
  beyond[i] = out;
}

template <typename T>
void assign_projected(const T* X, index_t n, index_t d, const T* C, index_t k, const double* Q,
                      const double* mu, index_t p, std::int64_t* labels, T* min_sq_dist,
                      T* second, double* beyond, std::int64_t* n_distances, int n_threads) {
  if (d <= kSmallDim || p + 1 <= kSmallDim) {  // no lane panels (or slack) to use: the plain pass
    assign_grouped(X, n, d, C, k, std::vector<std::int64_t>(k, 0).data(), 1, labels, min_sq_dist,
                   second, beyond, n_distances, n_threads);
    return;
  }
  const Projected<T> P(C, k, d, Q, mu, p);
  const Engine<T>& Ea = P.Ea;
  // Blocks of kTileBlockRows rows where step 1 may run on the tiles.
  const bool tiles = !P.amx.b.empty();
  const index_t pa = p + 1, mb = tiles ? kTileBlockRows : Ea.mb, n_blocks = (n + mb - 1) / mb;
  const index_t ld_tile = P.amx.tiles * 16;
  std::vector<ProjectedScratch<T>> scratch(
      std::min<index_t>(resolve_threads(n_threads, n * k * d), n_blocks));
  for (ProjectedScratch<T>& s : scratch) {
    Ea.init(s);
    s.xa.assign(mb * pa, T(0));
    s.xnorm.assign(mb, 0.0);
    s.y.assign(8 * (d + round_up(p, 8)), 0.0);
    s.xs.assign(mb * d, T(0));
    s.xn.assign(mb, T(0));
    s.cand.assign(Ea.kp, 0);
    if (tiles) {
      s.dtile.assign(mb * ld_tile, T(0));
      s.parts.assign(amx_parts_size(P.amx), 0);
    }
  }
  const int nt = static_cast<int>(scratch.size());
  const std::atomic<int>* cancel = thread_cancel_flag();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t blk = 0; blk < n_blocks; ++blk) {
    if (cancel && cancel->load(std::memory_order_relaxed)) continue;
    ProjectedScratch<T>& s = scratch[omp_get_thread_num()];
    const index_t i0 = blk * mb, rows = std::min(mb, n - i0);
    augmented(X + i0 * d, rows, P.q8.data(), mu, d, p, s.xa.data(), s.xnorm.data(), s.y.data());
    shifted_rows(P.E, X + i0 * d, rows, s.xs.data(), s.xn.data());
    auto each_row = [&](const T* D, index_t ld, bool amx, index_t r0, index_t m) {
      for (index_t r = r0; r < r0 + m; ++r)
        projected_row(P, i0 + r, D + (r - r0) * ld, amx, s.xa.data() + r * pa, s.xnorm[r],
                      s.xs.data() + r * d, s.xn[r], s, labels, min_sq_dist, second, beyond);
    };
    if (tile_distances(P, s.xa.data(), rows, s.dtile.data(), ld_tile, s.parts.data())) {
      each_row(s.dtile.data(), ld_tile, true, 0, rows);
      continue;
    }
    for (index_t r0 = 0; r0 < rows; r0 += Ea.mb) {
      const index_t m = std::min(Ea.mb, rows - r0);
      Ea.distances(s.xa.data() + r0 * pa, m, s);
      each_row(s.dbuf.data(), Ea.ld, false, r0, m);
    }
  }
  std::int64_t total = 0;
  for (const ProjectedScratch<T>& s : scratch) total += s.n_distances;
  *n_distances = total;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
