// Kernel bodies, compiled once per instruction set. Each including translation
// unit defines SOFTKMEANS_ISA (scalar, avx2, avx512), SOFTKMEANS_VEC_BYTES (the
// vector width it targets) and SOFTKMEANS_MR (rows of the register-blocked
// micro-kernel), plus its own compiler flags; the namespace keeps the per-ISA
// instantiations distinct (ODR).
//
// Vectors are GCC/Clang vector extensions of SOFTKMEANS_VEC_BYTES bytes: the
// same source becomes SSE2 (scalar level: the portable baseline and the
// oracle), AVX2+FMA or AVX-512 code by the flags of the including unit.
#pragma once

#ifndef SOFTKMEANS_ISA
#error "define SOFTKMEANS_ISA before including kernels_impl.hpp"
#endif
#ifndef SOFTKMEANS_VEC_BYTES
#error "define SOFTKMEANS_VEC_BYTES before including kernels_impl.hpp"
#endif
#ifndef SOFTKMEANS_MR
#error "define SOFTKMEANS_MR before including kernels_impl.hpp"
#endif

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "softkmeans/config.hpp"
#include "softkmeans/kernels.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// ---------------------------------------------------------------------------
// Vectors
// ---------------------------------------------------------------------------

typedef float vf __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef double vd __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int32_t vi32 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int64_t vi64 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef float vf_u __attribute__((vector_size(SOFTKMEANS_VEC_BYTES), aligned(4), may_alias));
typedef double vd_u __attribute__((vector_size(SOFTKMEANS_VEC_BYTES), aligned(8), may_alias));

template <typename T>
struct VT;
template <>
struct VT<float> {
  using v = vf;
  using u = vf_u;
  using i = vi32;
  static constexpr index_t W = SOFTKMEANS_VEC_BYTES / 4;
};
template <>
struct VT<double> {
  using v = vd;
  using u = vd_u;
  using i = vi64;
  static constexpr index_t W = SOFTKMEANS_VEC_BYTES / 8;
};

template <typename T>
inline typename VT<T>::v vload(const T* p) {
  return *reinterpret_cast<const typename VT<T>::u*>(p);
}
template <typename T>
inline void vstore(T* p, typename VT<T>::v x) {
  *reinterpret_cast<typename VT<T>::u*>(p) = x;
}
template <typename T>
inline typename VT<T>::v vset(T x) {
  return typename VT<T>::v{} + x;
}
template <typename V>
inline V vmin(V a, V b) {
  return a < b ? a : b;
}
template <typename V>
inline V vmax(V a, V b) {
  return a > b ? a : b;
}

// True when a_q < b_q in every lane. NOTE: a lane loop over a vector-extension
// mask compiles to one extract per lane (~50 instructions for 16 floats); the
// compare-to-mask instructions make it one compare and one test.
inline bool all_less(vf a, vf b) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_LT_OQ) == 0xFFFF;
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  return _mm256_movemask_ps(_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_LT_OQ)) == 0xFF;
#else
  const auto m = a < b;
  bool all = true;
  for (index_t q = 0; q < VT<float>::W; ++q) all &= (m[q] != 0);
  return all;
#endif
}
inline bool all_less(vd a, vd b) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  return _mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_LT_OQ) == 0xFF;
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  return _mm256_movemask_pd(_mm256_cmp_pd((__m256d)a, (__m256d)b, _CMP_LT_OQ)) == 0xF;
#else
  const auto m = a < b;
  bool all = true;
  for (index_t q = 0; q < VT<double>::W; ++q) all &= (m[q] != 0);
  return all;
#endif
}

// True when a_q <= b_q in at least one lane (ordered: NaN lanes are false).
inline bool any_less_equal(vf a, vf b) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_LE_OQ) != 0;
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  return _mm256_movemask_ps(_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_LE_OQ)) != 0;
#else
  const auto m = a <= b;
  bool any = false;
  for (index_t q = 0; q < VT<float>::W; ++q) any |= (m[q] != 0);
  return any;
#endif
}
inline bool any_less_equal(vd a, vd b) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  return _mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_LE_OQ) != 0;
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  return _mm256_movemask_pd(_mm256_cmp_pd((__m256d)a, (__m256d)b, _CMP_LE_OQ)) != 0;
#else
  const auto m = a <= b;
  bool any = false;
  for (index_t q = 0; q < VT<double>::W; ++q) any |= (m[q] != 0);
  return any;
#endif
}

constexpr index_t round_up(index_t a, index_t b) { return (a + b - 1) / b * b; }

// exp(x) for x <= 0 (the max-shifted scores), vectorized. Range reduction
// x = n ln2 + r, |r| <= ln2/2, polynomial 1 + r + r^2 q(r) (so exp(0) = 1
// exactly) with q fitted for the minimax relative error on that interval (degree 5
// in all for float, 8 for double: approximation error 1.1e-7 and 1.2e-12 relative,
// against the 1e-4 / 1e-10 parity tolerances), scaling by 2^n through the exponent
// bits. NOTE: results below the smallest normal number (x < -87 float, -708
// double) are flushed to exactly 0 instead of denormals: they are < 1e-37
// (float) / 1e-307 (double) of the row's largest entry, and exact zeros let
// the accumulation skip them.
inline vf vexp(vf x) {
  const vf lo = vset<float>(-87.0f);
  const vf xc = vmax(x, lo);
  const vf t = xc * 1.44269504088896341f;
  const vf nf = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  vf r = xc - nf * 0.693145751953125f;
  r = r - nf * 1.42860682030941723212e-6f;
  vf p = vset<float>(0.008312505669891834f);
  p = p * r + 0.04189009591937065f;
  p = p * r + 0.16667114198207855f;
  p = p * r + 0.499992311000824f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const vi32 ni = __builtin_convertvector(nf, vi32);
  const vi32 bits = (ni + 127) << 23;
  const vf scale = reinterpret_cast<const vf&>(bits);
  const vf res = p * scale;
  return x < lo ? vf{} : res;
}

inline vd vexp(vd x) {
  const vd lo = vset<double>(-708.0);
  const vd xc = vmax(x, lo);
  const vd t = xc * 1.4426950408889634074;
  const vd nf = (t + 6755399441055744.0) - 6755399441055744.0;  // round to nearest
  vd r = xc - nf * 6.93145751953125e-1;
  r = r - nf * 1.42860682030941723212e-6;
  vd p = vset<double>(2.4708294663993273e-05);
  p = p * r + 0.0001990894176633983;
  p = p * r + 0.0013889197137043968;
  p = p * r + 0.008333281803813633;
  p = p * r + 0.04166666440490332;
  p = p * r + 0.16666666784456427;
  p = p * r + 0.5000000000426867;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const vi64 ni = __builtin_convertvector(nf, vi64);
  const vi64 bits = (ni + 1023) << 52;
  const vd scale = reinterpret_cast<const vd&>(bits);
  const vd res = p * scale;
  return x < lo ? vd{} : res;
}

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

// ---------------------------------------------------------------------------
// Distance engine: centroids prepared once per call, distance blocks per row
// block.
// ---------------------------------------------------------------------------

template <typename T>
struct Workspace {
  std::vector<T> xb;    // (mb_pad, d) shifted rows (micro-kernel path)
  std::vector<T> xn;    // (mb_pad,) their squared norms
  std::vector<T> dbuf;  // (mb_pad, kp) the distance block, then responsibilities
  std::vector<T> st;    // per-tile float partial of S: (k, d), or (dp, kp) transposed
  std::vector<T> xt;    // (dp, mb_pad) weighted rows, transposed (softmax accumulation)
  std::vector<double> nt;  // (k,) per-tile partial of N (hard, entmax15)
  std::vector<std::uint8_t> nz;  // (mb_pad, kp / W) nonzero W-blocks of softmax rows
  std::vector<RowMin<T>> mins;   // (mb_pad,) row reductions of the direct path
  std::vector<std::int64_t> cidx;  // (k,) entmax15 candidates
  std::vector<double> cval;        // (k,) their values
};

template <typename T>
struct Engine {
  using V = typename VT<T>::v;
  static constexpr index_t W = VT<T>::W;
  static constexpr index_t NR = 2 * W;
  static constexpr index_t MR = SOFTKMEANS_MR;

  index_t d = 0, k = 0, kp = 0, mb = 0;
  bool small = false;
  std::vector<T> shift;  // (d,)
  std::vector<T> cp;     // micro-kernel path: (kp / NR) panels of (d, NR)
  std::vector<T> cn;     // (kp,) ||c_j - s||^2, +inf in the padding
  std::vector<T> ct;     // direct path: (d, kp) transposed centroids
  std::vector<T> cpad;   // direct path: (kp,) 0, then +inf in the padding
  std::vector<T> craw;   // direct path: (k, d) the centroids (across-rows reduction)

  // block_bytes: size of the distance block (rows x kp) a row block fills.
  Engine(const T* C, index_t k_, index_t d_, index_t block_bytes = kDistBlockBytes)
      : d(d_), k(k_) {
    small = d <= kSmallDim;
    kp = round_up(k, small ? W : NR);
    const index_t by_bytes = block_bytes / (kp * static_cast<index_t>(sizeof(T)));
    mb = std::max<index_t>(MR, std::min<index_t>(round_up(kRowTile, MR), by_bytes / MR * MR));
    if (small) {
      ct.assign(d * kp, T(0));
      for (index_t j = 0; j < k; ++j)
        for (index_t l = 0; l < d; ++l) ct[l * kp + j] = C[j * d + l];
      cpad.assign(kp, T(0));
      for (index_t j = k; j < kp; ++j) cpad[j] = std::numeric_limits<T>::infinity();
      craw.assign(C, C + k * d);
      return;
    }
    // The shift: the mean of C rounded to a multiple of a power of two no
    // larger than the centroids' spread. Distances are invariant under it;
    // it removes the cancellation of the norm expansion far from the origin
    // (points at 100 with spread 0.1), and on integer data with spread >= 1 it
    // is an integer, so integer-valued distances stay exact.
    std::vector<double> mu(d, 0.0);
    for (index_t j = 0; j < k; ++j)
      for (index_t l = 0; l < d; ++l) mu[l] += static_cast<double>(C[j * d + l]);
    for (index_t l = 0; l < d; ++l) mu[l] /= static_cast<double>(k);
    double spread = 0.0;
    for (index_t j = 0; j < k; ++j)
      for (index_t l = 0; l < d; ++l)
        spread = std::max(spread, std::fabs(static_cast<double>(C[j * d + l]) - mu[l]));
    shift.assign(d, T(0));
    for (index_t l = 0; l < d; ++l) {
      if (spread > 0.0) {
        const double q = std::ldexp(1.0, std::ilogb(spread));
        shift[l] = static_cast<T>(std::nearbyint(mu[l] / q) * q);
      } else {
        shift[l] = C[l];  // all centroids equal: shift by them exactly
      }
    }
    cp.assign((kp / NR) * d * NR, T(0));
    cn.assign(kp, std::numeric_limits<T>::infinity());
    for (index_t j = 0; j < k; ++j) {
      const index_t p = j / NR, jj = j % NR;
      double nrm = 0.0;
      for (index_t l = 0; l < d; ++l) {
        const T c = C[j * d + l] - shift[l];
        cp[(p * d + l) * NR + jj] = c;
        nrm += static_cast<double>(c) * static_cast<double>(c);
      }
      cn[j] = static_cast<T>(nrm);
    }
  }

  index_t mb_pad() const { return round_up(mb, MR); }

  void init(Workspace<T>& ws) const {
    ws.dbuf.assign(mb_pad() * kp, T(0));
    if (small) ws.mins.assign(mb_pad(), RowMin<T>{});
    if (!small) {
      ws.xb.assign(mb_pad() * d, T(0));
      ws.xn.assign(mb_pad(), T(0));
    }
  }

  // dbuf [out] (rows, kp) with row stride kp: D of rows X[0..rows), +inf in
  // the padding columns k..kp.
  void distances(const T* X, index_t rows, Workspace<T>& ws) const {
    T* out = ws.dbuf.data();
    if (small) {
      switch (d) {
        case 1: direct<1>(X, rows, out); break;
        case 2: direct<2>(X, rows, out); break;
        case 3: direct<3>(X, rows, out); break;
        default: direct<4>(X, rows, out); break;
      }
      return;
    }
    T* xb = ws.xb.data();
    T* xn = ws.xn.data();
    const index_t rows_pad = round_up(rows, MR);
    for (index_t r = 0; r < rows; ++r) {
      T nrm = 0;
      for (index_t l = 0; l < d; ++l) {
        const T v = X[r * d + l] - shift[l];
        xb[r * d + l] = v;
        nrm += v * v;
      }
      xn[r] = nrm;
    }
    for (index_t r = rows; r < rows_pad; ++r) {
      for (index_t l = 0; l < d; ++l) xb[r * d + l] = T(0);
      xn[r] = T(0);
    }
    for (index_t p = 0; p < kp / NR; ++p)
      for (index_t r0 = 0; r0 < rows_pad; r0 += MR)
        micro(xb + r0 * d, cp.data() + p * d * NR, xn + r0, cn.data() + p * NR,
              out + r0 * kp + p * NR);
  }

  // Direct differences, vectorized over centroids with broadcasts of x.
  template <int D>
  void direct(const T* X, index_t rows, T* out) const {
    for (index_t r = 0; r < rows; ++r) {
      V xs[D];
      for (int l = 0; l < D; ++l) xs[l] = vset<T>(X[r * D + l]);
      T* o = out + r * kp;
      for (index_t j = 0; j < kp; j += W) {
        V s = V{};
        for (int l = 0; l < D; ++l) {
          const V df = xs[l] - vload(ct.data() + l * kp + j);
          s += df * df;
        }
        vstore(o + j, s + vload(cpad.data() + j));
      }
    }
  }

  // Direct path fused with the reduction: the two smallest distances of row x
  // and the first argmin, in registers (no distance row is stored).
  template <int D>
  RowMin<T> direct_min2(const T* x) const {
    V xs[D];
    for (int l = 0; l < D; ++l) xs[l] = vset<T>(x[l]);
    Min2<T> m;
    for (index_t j = 0; j < kp; j += W) {
      V s = vload(cpad.data() + j);
      for (int l = 0; l < D; ++l) {
        const V df = xs[l] - vload(ct.data() + l * kp + j);
        s += df * df;
      }
      m.push(s);
    }
    return m.finish();
  }

  // Small k: W rows at a time in the lanes, centroids broadcast; per lane the
  // running min, second min and first argmin (strict <: ties keep the
  // smallest j). out [out] (rows,).
  template <int D>
  void direct_min2_rows(const T* X, index_t rows, RowMin<T>* out) const {
    using VI = typename VT<T>::i;
    for (index_t r0 = 0; r0 < rows; r0 += W) {
      const index_t rn = std::min<index_t>(W, rows - r0);
      alignas(64) T xt[D][W];
      for (index_t q = 0; q < W; ++q) {
        const index_t r = r0 + std::min<index_t>(q, rn - 1);
        for (int l = 0; l < D; ++l) xt[l][q] = X[r * D + l];
      }
      V xv[D];
      for (int l = 0; l < D; ++l) xv[l] = vload(&xt[l][0]);
      const T inf = std::numeric_limits<T>::infinity();
      V v1 = vset<T>(inf), v2 = vset<T>(inf);
      VI i1 = VI{};
      const T* c = craw.data();
      for (index_t j = 0; j < k; ++j) {
        V sv = V{};
        for (int l = 0; l < D; ++l) {
          const V df = xv[l] - c[j * D + l];
          sv += df * df;
        }
        const VI lt = sv < v1;
        v2 = vmin(v2, vmax(v1, sv));
        i1 = lt ? (VI{} + static_cast<typename std::remove_reference<decltype(i1[0])>::type>(j)) : i1;
        v1 = vmin(v1, sv);
      }
      for (index_t q = 0; q < rn; ++q) out[r0 + q] = {v1[q], v2[q], static_cast<index_t>(i1[q])};
    }
  }

  // The whole hard step for the direct path and k <= kSmallK, W rows per
  // vector: distances, argmin (strict <), margin, and the accumulation of N, S,
  // J by label masks into per-lane tile partials. w [in] (rows,); acc [in,out]
  // (k (d + 1) + 2, W): N_j (k rows), S_jl (k d rows), J, min margin.
  // labels [out, nullable] (rows,): the argmins.
  template <int D>
  void hard_rows(const T* X, const double* w, index_t rows, T* acc,
                 std::int64_t* labels) const {
    using VI = typename VT<T>::i;
    using Int = typename std::remove_reference<decltype(VI{}[0])>::type;
    const T inf = std::numeric_limits<T>::infinity();
    T* nacc = acc;
    T* sacc = acc + k * W;
    T* jacc = acc + k * (D + 1) * W;
    T* macc = jacc + W;
    const T* c = craw.data();
    for (index_t r0 = 0; r0 < rows; r0 += W) {
      const index_t rn = std::min<index_t>(W, rows - r0);
      alignas(64) T xt[D][W];
      alignas(64) T wt[W];
      for (index_t q = 0; q < W; ++q) {
        const index_t r = r0 + std::min<index_t>(q, rn - 1);
        for (int l = 0; l < D; ++l) xt[l][q] = X[r * D + l];
        wt[q] = q < rn ? static_cast<T>(w[r]) : T(0);  // padding lanes weigh 0
      }
      V xv[D];
      for (int l = 0; l < D; ++l) xv[l] = vload(&xt[l][0]);
      const V wv = vload(wt);
      V v1 = vset<T>(inf), v2 = vset<T>(inf);
      VI i1 = VI{};
      for (index_t j = 0; j < k; ++j) {
        V sv = V{};
        for (int l = 0; l < D; ++l) {
          const V df = xv[l] - c[j * D + l];
          sv += df * df;
        }
        const VI lt = sv < v1;
        v2 = vmin(v2, vmax(v1, sv));
        i1 = lt ? (VI{} + static_cast<Int>(j)) : i1;
        v1 = vmin(v1, sv);
      }
      if (labels)
        for (index_t q = 0; q < rn; ++q) labels[r0 + q] = static_cast<std::int64_t>(i1[q]);
      vstore(jacc, vload(jacc) + wv * v1);
      const V gap = v2 - v1;
      vstore(macc, vmin(vload(macc), wv > V{} ? gap : vset<T>(inf)));
      V wx[D];
      for (int l = 0; l < D; ++l) wx[l] = wv * xv[l];
      for (index_t j = 0; j < k; ++j) {
        const VI hit = i1 == (VI{} + static_cast<Int>(j));
        vstore(nacc + j * W, vload(nacc + j * W) + (hit ? wv : V{}));
        for (int l = 0; l < D; ++l) {
          T* sp = sacc + (j * D + l) * W;
          vstore(sp, vload(sp) + (hit ? wx[l] : V{}));
        }
      }
    }
  }

  void hard_rows_any(const T* X, const double* w, index_t rows, T* acc,
                     std::int64_t* labels) const {
    switch (d) {
      case 1: hard_rows<1>(X, w, rows, acc, labels); return;
      case 2: hard_rows<2>(X, w, rows, acc, labels); return;
      case 3: hard_rows<3>(X, w, rows, acc, labels); return;
      default: hard_rows<4>(X, w, rows, acc, labels); return;
    }
  }

  // Reduces rows X[0..rows) to RowMin (direct path), out [out] (rows,).
  void min2_rows(const T* X, index_t rows, RowMin<T>* out) const {
    if (k <= kSmallK) {
      switch (d) {
        case 1: direct_min2_rows<1>(X, rows, out); return;
        case 2: direct_min2_rows<2>(X, rows, out); return;
        case 3: direct_min2_rows<3>(X, rows, out); return;
        default: direct_min2_rows<4>(X, rows, out); return;
      }
    }
    for (index_t r = 0; r < rows; ++r) out[r] = min2_of_row(X + r * d);
  }

  RowMin<T> min2_of_row(const T* x) const {
    switch (d) {
      case 1: return direct_min2<1>(x);
      case 2: return direct_min2<2>(x);
      case 3: return direct_min2<3>(x);
      default: return direct_min2<4>(x);
    }
  }

  // The register-blocked micro-kernel: MR rows x NR centroids of x.c
  // accumulated over d in MR x 2 vector registers, then
  // D = ||x||^2 + ||c||^2 - 2 x.c clamped at 0, stored with row stride kp.
  void micro(const T* xb, const T* cpan, const T* xn, const T* cnp, T* out) const {
    V a0[MR], a1[MR];
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) a0[r] = a1[r] = V{};
    for (index_t l = 0; l < d; ++l) {
      const V c0 = vload(cpan + l * NR);
      const V c1 = vload(cpan + l * NR + W);
#pragma GCC unroll 16
      for (index_t r = 0; r < MR; ++r) {
        const V xv = vset<T>(xb[r * d + l]);
        a0[r] += xv * c0;
        a1[r] += xv * c1;
      }
    }
    const V cn0 = vload(cnp), cn1 = vload(cnp + W);
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) {
      const V x = vset<T>(xn[r]);
      V d0 = (x + cn0) - (a0[r] + a0[r]);
      V d1 = (x + cn1) - (a1[r] + a1[r]);
      d0 = vmax(d0, V{});
      d1 = vmax(d1, V{});
      vstore(out + r * kp, d0);
      vstore(out + r * kp + W, d1);
    }
  }
};

// ---------------------------------------------------------------------------
// Row reductions
// ---------------------------------------------------------------------------

// The two smallest entries of a row (padding +inf) and the first argmin.
template <typename T>
inline RowMin<T> row_min2(const T* row, index_t kp) {
  constexpr index_t W = VT<T>::W;
  Min2<T> m;
  for (index_t j = 0; j < kp; j += W) m.push(vload(row + j));
  return m.finish();
}

// Softmax of the row from its distances: row_j <- exp(-(D_j - m1) / (2 sigma^2))
// (the log-sum-exp shift by the row max, written on the gap so the nearest
// centroid gets exp(0) = 1 exactly and exact ties share). Returns sum_j e_j
// (>= 1). With normalize, row_j <- e_j / sum.
// nz [out, nullable] (kp / W,): 0 where a W-block of the row is all exact
// zeros (every score underflows; its exp is skipped), else 1.
template <typename T>
inline double softmax_row(T* row, index_t kp, T m1, T inv_t, bool normalize,
                          std::uint8_t* nz = nullptr) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const V vm = vset<T>(m1), vi = vset<T>(inv_t);
  const V vlo = vset<T>(sizeof(T) == 4 ? T(-87) : T(-708));  // vexp's flush threshold
  V acc = V{};
  for (index_t j = 0; j < kp; j += W) {
    const V g = vload(row + j) - vm;
    const V s = g > V{} ? -(g * vi) : V{};  // no 0 * inf
    if (all_less(s, vlo)) {
      vstore(row + j, V{});
      if (nz) nz[j / W] = 0;
      continue;
    }
    const V e = vexp(s);
    vstore(row + j, e);
    acc += e;
    if (nz) nz[j / W] = 1;
  }
  double sum = 0.0;
  for (index_t q = 0; q < W; ++q) sum += static_cast<double>(acc[q]);
  if (normalize) {
    const V sc = vset<T>(static_cast<T>(1.0 / sum));
    for (index_t j = 0; j < kp; j += W) vstore(row + j, vload(row + j) * sc);
  }
  return sum;
}

// entmax15 threshold by SPEC.md's sort-based algorithm on candidates
// u (count,) in (-1, 0] (halved, max-shifted scores; the max is 0): sorts
// them descending (with their indices), returns tau. Running sums in double;
// values in (-1, 0] keep Q_s - M_s^2 well conditioned.
inline double entmax_tau(double* u, std::int64_t* idx, index_t count) {
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
  double s1 = 0.0, s2 = 0.0, tau = u[0] - 1.0;
  for (index_t s = 1; s <= count; ++s) {
    const double v = u[s - 1];
    s1 += v;
    s2 += v * v;
    const double ds = static_cast<double>(s);
    const double M = s1 / ds, Q = s2 / ds;
    const double delta = (1.0 - ds * (Q - M * M)) / ds;
    const double tau_s = M - std::sqrt(std::max(delta, 0.0));
    // The qualifying sizes form a prefix 1..s* (as in deep-spin/entmax, which
    // counts them): stop at the first failure.
    if (tau_s > v) break;
    tau = tau_s;
  }
  return tau;
}

// entmax15 responsibilities of a distance row: candidates are the j with
// D_j - m1 < 4 sigma^2 (u_j = -(D_j - m1) / (4 sigma^2) > -1); cval/cidx
// [out] get the support's r values and indices, returns its size.
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
    if (t <= 0.0) break;  // sorted descending
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

// ---------------------------------------------------------------------------
// The parallel driver: tiles of kRowTile rows grouped into n_chunks chunks
// (independent of the thread count), chunks processed in parallel, the tiles
// of a chunk in order, row blocks of engine.mb rows within a tile.
// ---------------------------------------------------------------------------

inline index_t n_tiles_of(index_t n) { return (n + kRowTile - 1) / kRowTile; }

// With need_dbuf false the block function gets no distance block (it reduces
// rows itself, e.g. by Engine::min2_of_row).
template <typename T, typename BlockFn, typename TileEndFn>
void drive(const Engine<T>& E, const T* X, index_t n, index_t n_chunks, int nt,
           std::vector<Workspace<T>>& wss, BlockFn block_fn, TileEndFn tile_end,
           bool need_dbuf = true) {
  const index_t n_tiles = n_tiles_of(n);
  const index_t d = E.d;
  // Read on the calling thread: the flag is installed per thread.
  const std::atomic<int>* cancel = thread_cancel_flag();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (index_t c = 0; c < n_chunks; ++c) {
    Workspace<T>& ws = wss[omp_get_thread_num()];
    const index_t t0 = c * n_tiles / n_chunks, t1 = (c + 1) * n_tiles / n_chunks;
    for (index_t t = t0; t < t1; ++t) {
      if (cancel && cancel->load(std::memory_order_relaxed)) break;  // results discarded
      const index_t i_end = std::min(n, (t + 1) * kRowTile);
      for (index_t i0 = t * kRowTile; i0 < i_end; i0 += E.mb) {
        const index_t rows = std::min(E.mb, i_end - i0);
        if (need_dbuf) E.distances(X + i0 * d, rows, ws);
        block_fn(c, ws, i0, rows);
      }
      tile_end(c, ws);
    }
  }
}

template <typename T>
std::vector<Workspace<T>> make_workspaces(const Engine<T>& E, int nt) {
  std::vector<Workspace<T>> wss(nt);
  for (auto& ws : wss) E.init(ws);
  return wss;
}

inline auto no_tile_end = [](index_t, auto&) {};

// ---------------------------------------------------------------------------
// API kernels
// ---------------------------------------------------------------------------

template <typename T>
void sq_distances(const T* X, index_t n, index_t d, const T* C, index_t k, T* D, int nt) {
  const Engine<T> E(C, k, d);
  auto wss = make_workspaces(E, nt);
  drive(E, X, n, n_tiles_of(n), nt, wss,
        [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
          for (index_t r = 0; r < rows; ++r)
            std::memcpy(D + (i0 + r) * k, ws.dbuf.data() + r * E.kp, k * sizeof(T));
        },
        no_tile_end);
}

template <typename T>
void assign(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
            T* min_sq_dist, int nt) {
  const Engine<T> E(C, k, d);
  auto wss = make_workspaces(E, nt);
  drive(E, X, n, n_tiles_of(n), nt, wss,
        [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
          if (E.small) E.min2_rows(X + i0 * d, rows, ws.mins.data());
          for (index_t r = 0; r < rows; ++r) {
            const RowMin<T> m = E.small ? ws.mins[r] : row_min2(ws.dbuf.data() + r * E.kp, E.kp);
            labels[i0 + r] = m.a;
            min_sq_dist[i0 + r] = m.m1;
          }
        },
        no_tile_end, !E.small);
}

template <typename T>
void margins(const T* X, index_t n, index_t d, const T* C, index_t k, T* out, int nt) {
  const Engine<T> E(C, k, d);
  auto wss = make_workspaces(E, nt);
  drive(E, X, n, n_tiles_of(n), nt, wss,
        [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
          if (E.small) E.min2_rows(X + i0 * d, rows, ws.mins.data());
          for (index_t r = 0; r < rows; ++r) {
            const RowMin<T> m = E.small ? ws.mins[r] : row_min2(ws.dbuf.data() + r * E.kp, E.kp);
            out[i0 + r] = m.m2 - m.m1;
          }
        },
        no_tile_end, !E.small);
}

template <typename T>
void entmax15(const T* Z, index_t n, index_t k, T* R, int nt) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  std::vector<std::vector<double>> cv(nt, std::vector<double>(k));
  std::vector<std::vector<std::int64_t>> ci(nt, std::vector<std::int64_t>(k));
  const std::atomic<int>* cancel = thread_cancel_flag();
#pragma omp parallel for schedule(static) num_threads(nt)
  for (index_t i = 0; i < n; ++i) {
    if (cancel && cancel->load(std::memory_order_relaxed)) continue;  // results discarded
    const int th = omp_get_thread_num();
    double* cval = cv[th].data();
    std::int64_t* cidx = ci[th].data();
    const T* z = Z + i * k;
    T* o = R + i * k;
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
    const T lo = zmax - T(2) - std::fabs(zmax) * T(1e-6);
    const V vlo = vset<T>(lo);
    index_t count = 0;
    auto consider = [&](index_t j) {
      const double u = static_cast<double>(z[j]) / 2.0 - half_max;
      if (u > -1.0) {
        cval[count] = u;
        cidx[count] = j;
        ++count;
      }
    };
    for (index_t j = 0; j < kv; j += W) {
      const auto m = vload(z + j) > vlo;
      vstore(o + j, V{});
      bool any = false;
      for (index_t q = 0; q < W; ++q) any |= (m[q] != 0);
      if (any)
        for (index_t q = 0; q < W; ++q) consider(j + q);
    }
    for (index_t j = kv; j < k; ++j) {
      o[j] = T(0);
      consider(j);
    }
    const double tau = entmax_tau(cval, cidx, count);
    for (index_t a = 0; a < count; ++a) {
      const double t = cval[a] - tau;
      if (t <= 0.0) break;
      o[cidx[a]] = static_cast<T>(t * t);
    }
  }
}

template <typename T>
void responsibilities(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind,
                      double sigma, T* R, int nt) {
  const Engine<T> E(C, k, d);
  auto wss = make_workspaces(E, nt);
  for (auto& ws : wss) {
    ws.cval.assign(E.kp, 0.0);
    ws.cidx.assign(E.kp, 0);
  }
  const double sigma2 = sigma * sigma;
  const T inv_t = static_cast<T>(std::min<double>(1.0 / (2.0 * sigma2), std::numeric_limits<T>::max()));
  drive(E, X, n, n_tiles_of(n), nt, wss,
        [&](index_t, Workspace<T>& ws, index_t i0, index_t rows) {
          for (index_t r = 0; r < rows; ++r) {
            T* row = ws.dbuf.data() + r * E.kp;
            T* o = R + (i0 + r) * k;
            const RowMin<T> m = row_min2(row, E.kp);
            if (kind == Kind::hard) {
              std::fill(o, o + k, T(0));
              o[m.a] = T(1);
            } else if (kind == Kind::softmax) {
              softmax_row(row, E.kp, m.m1, inv_t, true);
              std::memcpy(o, row, k * sizeof(T));
            } else {
              double extra;
              const index_t s = entmax_row(row, E.kp, m.m1, sigma2, ws.cval.data(),
                                           ws.cidx.data(), &extra);
              std::fill(o, o + k, T(0));
              for (index_t a = 0; a < s; ++a) o[ws.cidx[a]] = static_cast<T>(ws.cval[a]);
            }
          }
        },
        no_tile_end);
}

// Statistics of one chunk: N (k), S (k, d), objective, J, min margin.
struct ChunkStats {
  std::vector<double> N, S;
  double W = 0.0, obj = 0.0, J = 0.0, mm = std::numeric_limits<double>::infinity();
};

inline index_t stats_chunks(index_t n, index_t k, index_t d) {
  const index_t per = (k * d + k) * 8 + 64;
  const index_t cap = std::max<index_t>(4, std::min<index_t>(kMaxChunks, kChunkStatsBytes / per));
  return std::min(n_tiles_of(n), cap);
}

// The fused pass behind objective, centroid_step and gradients.
// grad_X [out, nullable] (n, d); N [out, nullable] (k,) and S [out, nullable]
// (k, d) (both or neither; S of the original, unshifted x); obj, J, mm [out].
// S^T += A R for one row block: A [in] (dp, rows) with row stride lda (the
// weighted rows w_r x_r^T, transposed, and w as row d), R [in] (rows, kp) the
// responsibilities with row stride kp, St [in,out] (dp, kp). The reduction
// runs over the block's rows in 8 x 1 vector registers (the softmax
// accumulation, dense: a second register-blocked product).
// nz [in, nullable] (rows, kp / W): 0 marks an all-zero W-block of R, skipped.
template <index_t MB, typename T>
inline void accumulate_rt_x(const T* A, index_t lda, index_t dp, const T* R, index_t rows,
                            index_t kp, T* St, const std::uint8_t* nz = nullptr) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const index_t nb = kp / W;
  constexpr index_t kMaxRows = 1024;
  std::int32_t live[kMaxRows];  // rows whose W-block j is not all zero
  for (index_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const index_t rn = std::min(kMaxRows, rows - r0);
    for (index_t j = 0; j < kp; j += W) {
      index_t cnt = 0;
      for (index_t r = r0; r < r0 + rn; ++r)
        if (!nz || nz[r * nb + j / W]) live[cnt++] = static_cast<std::int32_t>(r);
      if (cnt == 0) continue;
      for (index_t l0 = 0; l0 < dp; l0 += MB) {
        V acc[MB];
#pragma GCC unroll 8
        for (index_t q = 0; q < MB; ++q) acc[q] = V{};
        for (index_t c = 0; c < cnt; ++c) {
          const index_t r = live[c];
          const V rv = vload(R + r * kp + j);
#pragma GCC unroll 8
          for (index_t q = 0; q < MB; ++q) acc[q] += vset<T>(A[(l0 + q) * lda + r]) * rv;
        }
#pragma GCC unroll 8
        for (index_t q = 0; q < MB; ++q)
          vstore(St + (l0 + q) * kp + j, vload(St + (l0 + q) * kp + j) + acc[q]);
      }
    }
  }
}

// The fused pass behind objective, centroid_step and gradients.
// grad_X [out, nullable] (n, d); N [out, nullable] (k,) and S [out, nullable]
// (k, d) (both or neither; S of the original, unshifted x); obj, J, mm [out].
template <typename T>
void stats(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind, double sigma,
           const double* w, double* Wsum, double* N, double* S, double* obj, double* J,
           double* mm, std::int64_t* labels, T* grad_X, int nt) {
  // Softmax accumulation streams its (d + 1, kp) tile partial once per row
  // block: larger blocks amortize it.
  const Engine<T> E(C, k, d, kind == Kind::softmax ? kSoftmaxBlockBytes : kDistBlockBytes);
  const index_t kp = E.kp;
  const bool need_s = (S != nullptr) || (grad_X != nullptr);
  // Softmax rows are dense: S and N are accumulated by the blocked product
  // accumulate_rt_x into a transposed tile partial (dp, kp), row d holding N.
  const bool dense = need_s && kind == Kind::softmax;
  const index_t mbl = (d + 1 <= 4) ? 4 : 8;  // rows of the accumulation micro-kernel
  const index_t dp = round_up(d + 1, mbl);
  // Hard and entmax15 on the direct path reduce rows in registers; entmax15
  // computes a row's distances only when its margin is below 4 sigma^2.
  const bool fused = E.small && kind != Kind::softmax;
  // Hard, direct path, k <= kLaneAccK: the whole row block in hard_rows (lanes = rows).
  const bool lanes = fused && kind == Kind::hard && k <= kLaneAccK && grad_X == nullptr;
  const index_t lane_acc = (k * (d + 1) + 2) * E.W;
  const index_t n_chunks = stats_chunks(n, k, d);
  std::vector<ChunkStats> cs(n_chunks);
  for (auto& c : cs) {
    if (need_s) {
      c.N.assign(k, 0.0);
      c.S.assign(k * d, 0.0);
    }
  }
  auto wss = make_workspaces(E, nt);
  for (auto& ws : wss) {
    ws.cval.assign(kp, 0.0);
    ws.cidx.assign(kp, 0);
    if (lanes) {
      ws.st.assign(lane_acc, T(0));
      std::fill(ws.st.end() - E.W, ws.st.end(), std::numeric_limits<T>::infinity());
    } else if (dense) {
      ws.st.assign(dp * kp, T(0));
      ws.xt.assign(dp * E.mb_pad(), T(0));
      ws.nz.assign(E.mb_pad() * (kp / E.W), 0);
    } else if (need_s) {
      ws.st.assign(k * d, T(0));
      ws.nt.assign(k, 0.0);
    }
  }
  std::vector<double> C64;
  if (grad_X) C64.assign(C, C + k * d);
  const double sigma2 = sigma * sigma;
  const T inv_t =
      static_cast<T>(std::min<double>(1.0 / (2.0 * sigma2), std::numeric_limits<T>::max()));
  const double two_s2 = 2.0 * sigma2;

  auto block = [&](index_t c, Workspace<T>& ws, index_t i0, index_t rows) {
    ChunkStats& st = cs[c];
    T* stile = need_s ? ws.st.data() : nullptr;
    double* Nt = ws.nt.data();
    const index_t lda = E.mb_pad();
    if (lanes) {
      for (index_t r = 0; r < rows; ++r) st.W += w[i0 + r];
      E.hard_rows_any(X + i0 * d, w + i0, rows, ws.st.data(), labels ? labels + i0 : nullptr);
      return;
    }
    if (fused) E.min2_rows(X + i0 * d, rows, ws.mins.data());
    for (index_t r = 0; r < rows; ++r) {
      const index_t i = i0 + r;
      const double wi = w[i];
      const T* x = X + i * d;
      T* row = ws.dbuf.data() + (fused ? 0 : r * kp);
      const RowMin<T> m = fused ? ws.mins[r] : row_min2(row, kp);
      const double m1 = static_cast<double>(m.m1);
      double oi = m1;
      st.W += wi;
      if (labels) labels[i] = m.a;
      if (wi > 0.0) st.mm = std::min(st.mm, static_cast<double>(m.m2 - m.m1));
      index_t supp = 0;
      double wrow = wi;
      if (kind == Kind::softmax) {
        // Unnormalized e_j; 1/sum is folded into the row's weight below.
        std::uint8_t* nzr = dense ? ws.nz.data() + r * (kp / E.W) : nullptr;
        const double sum = softmax_row(row, kp, m.m1, inv_t, grad_X != nullptr, nzr);
        oi = m1 - two_s2 * std::log(sum);
        wrow = grad_X ? wi : wi / sum;
      } else if (kind == Kind::entmax15) {
        const double margin = static_cast<double>(m.m2) - m1;
        if (margin > 0.0 && margin >= 4.0 * sigma2) {  // > 0: a tie is never one-hot
          // Margin >= 4 sigma^2: the argmin is the only candidate (z_j <= max z - 2
          // for all others), r is one-hot and G_i = m1 exactly (SPEC.md).
          supp = 1;
          ws.cval[0] = 1.0;
          ws.cidx[0] = m.a;
        } else {
          if (fused) E.distances(x, 1, ws);
          double extra;
          supp = entmax_row(row, kp, m.m1, sigma2, ws.cval.data(), ws.cidx.data(), &extra);
          oi = m1 + extra;
        }
      }
      st.obj += wi * oi;
      st.J += wi * m1;
      if (!need_s) continue;
      if (dense) {
        T* xt = ws.xt.data();
        const T wt = static_cast<T>(wrow);
        for (index_t l = 0; l < d; ++l) xt[l * lda + r] = wt * x[l];
        xt[d * lda + r] = wt;
      } else {
        auto axpy = [&](index_t j, double wr) {
          Nt[j] += wr;
          const T a = static_cast<T>(wr);
          T* sj = stile + j * d;
#pragma omp simd
          for (index_t l = 0; l < d; ++l) sj[l] += a * x[l];
        };
        if (wi != 0.0) {
          if (kind == Kind::hard) {
            axpy(m.a, wi);
          } else {
            for (index_t a = 0; a < supp; ++a) axpy(ws.cidx[a], wi * ws.cval[a]);
          }
        }
      }
      if (grad_X) {
        // 2 w_i (x_i - sum_j r_ij c_j), in double.
        T* g = grad_X + i * d;
        for (index_t l = 0; l < d; ++l) {
          double mix = 0.0;
          if (kind == Kind::hard) {
            mix = C64[m.a * d + l];
          } else if (kind == Kind::softmax) {
            for (index_t j = 0; j < k; ++j)
              if (row[j] != T(0)) mix += static_cast<double>(row[j]) * C64[j * d + l];
          } else {
            for (index_t a = 0; a < supp; ++a) mix += ws.cval[a] * C64[ws.cidx[a] * d + l];
          }
          g[l] = static_cast<T>(2.0 * wi * (static_cast<double>(x[l]) - mix));
        }
      }
    }
    if (dense) {
      if (mbl == 4)
        accumulate_rt_x<4>(ws.xt.data(), lda, dp, ws.dbuf.data(), rows, kp, ws.st.data(),
                           ws.nz.data());
      else
        accumulate_rt_x<8>(ws.xt.data(), lda, dp, ws.dbuf.data(), rows, kp, ws.st.data(),
                           ws.nz.data());
    }
  };
  // Per-tile float partials folded into the chunk's double totals.
  auto tile_end = [&](index_t c, Workspace<T>& ws) {
    if (lanes) {
      ChunkStats& cst = cs[c];
      const index_t W = E.W;
      T* a = ws.st.data();
      auto lane_sum = [&](T* v) {
        double t = 0.0;
        for (index_t q = 0; q < W; ++q) {
          t += static_cast<double>(v[q]);
          v[q] = T(0);
        }
        return t;
      };
      if (need_s) {
        for (index_t j = 0; j < k; ++j) cst.N[j] += lane_sum(a + j * W);
        for (index_t q = 0; q < k * d; ++q) cst.S[q] += lane_sum(a + (k + q) * W);
      } else {
        std::fill(a, a + k * (d + 1) * W, T(0));
      }
      const double jt = lane_sum(a + k * (d + 1) * W);
      cst.J += jt;
      cst.obj += jt;
      T* m = a + (k * (d + 1) + 1) * W;
      for (index_t q = 0; q < W; ++q) {
        cst.mm = std::min(cst.mm, static_cast<double>(m[q]));
        m[q] = std::numeric_limits<T>::infinity();
      }
      return;
    }
    if (!need_s) return;
    double* Sc = cs[c].S.data();
    double* Nc = cs[c].N.data();
    T* stile = ws.st.data();
    if (dense) {
      // The chunk keeps S transposed, (d, k): contiguous folds; transposed
      // once at the merge.
      for (index_t l = 0; l < d; ++l)
        for (index_t j = 0; j < k; ++j) Sc[l * k + j] += static_cast<double>(stile[l * kp + j]);
      for (index_t j = 0; j < k; ++j) Nc[j] += static_cast<double>(stile[d * kp + j]);
      std::fill(ws.st.begin(), ws.st.end(), T(0));
    } else {
      for (index_t q = 0; q < k * d; ++q) {
        Sc[q] += static_cast<double>(stile[q]);
        stile[q] = T(0);
      }
      for (index_t j = 0; j < k; ++j) {
        Nc[j] += ws.nt[j];
        ws.nt[j] = 0.0;
      }
    }
  };
  drive(E, X, n, n_chunks, nt, wss, block, tile_end, !fused);

  // Fixed-order merge of the chunk partials.
  double o = 0.0, jj = 0.0, wsum = 0.0, mmin = std::numeric_limits<double>::infinity();
  if (N) std::fill(N, N + k, 0.0);
  if (S) std::fill(S, S + k * d, 0.0);
  for (const ChunkStats& c : cs) {
    wsum += c.W;
    o += c.obj;
    jj += c.J;
    mmin = std::min(mmin, c.mm);
    if (N)
      for (index_t j = 0; j < k; ++j) N[j] += c.N[j];
    if (S && dense) {
      for (index_t j = 0; j < k; ++j)
        for (index_t l = 0; l < d; ++l) S[j * d + l] += c.S[l * k + j];
    } else if (S) {
      for (index_t q = 0; q < k * d; ++q) S[q] += c.S[q];
    }
  }
  *Wsum = wsum;
  *obj = o;
  *J = jj;
  *mm = (k >= 2) ? mmin : std::numeric_limits<double>::infinity();
}

template <typename T>
void weighted_covariance(const T* X, index_t n, index_t d, const double* w, double* mean,
                         double* cov, int nt) {
  const index_t n_tiles = n_tiles_of(n);
  const index_t n_chunks = std::min<index_t>(
      n_tiles, std::max<index_t>(4, std::min<index_t>(kMaxChunks, kChunkStatsBytes / (8 * (d + 8) * (d + 8) + 64))));
  std::vector<double> part(n_chunks * (d + 1), 0.0);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (index_t c = 0; c < n_chunks; ++c) {
    double* p = part.data() + c * (d + 1);
    const index_t i0 = c * n_tiles / n_chunks * kRowTile;
    const index_t i1 = std::min(n, (c + 1) * n_tiles / n_chunks * kRowTile);
    for (index_t i = i0; i < i1; ++i) {
      p[d] += w[i];
      for (index_t l = 0; l < d; ++l) p[l] += w[i] * static_cast<double>(X[i * d + l]);
    }
  }
  double W = 0.0;
  std::vector<double> sx(d, 0.0);
  for (index_t c = 0; c < n_chunks; ++c) {
    W += part[c * (d + 1) + d];
    for (index_t l = 0; l < d; ++l) sx[l] += part[c * (d + 1) + l];
  }
  for (index_t l = 0; l < d; ++l) mean[l] = sx[l] / W;
  // Second pass: per tile, the centered rows R (rows, dw) and their weighted
  // transpose A (dp, rows) in double; St += A R by the blocked product.
  constexpr index_t Wd = VT<double>::W;
  const index_t dp = round_up(d, 8), dw = round_up(d, Wd);
  std::vector<double> cp(n_chunks * dp * dw, 0.0);
  std::vector<std::vector<double>> As(nt, std::vector<double>(dp * kRowTile, 0.0));
  std::vector<std::vector<double>> Rs(nt, std::vector<double>(kRowTile * dw, 0.0));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (index_t c = 0; c < n_chunks; ++c) {
    double* A = As[omp_get_thread_num()].data();
    double* R = Rs[omp_get_thread_num()].data();
    double* p = cp.data() + c * dp * dw;
    const index_t t0 = c * n_tiles / n_chunks, t1 = (c + 1) * n_tiles / n_chunks;
    for (index_t t = t0; t < t1; ++t) {
      const index_t i0 = t * kRowTile, rows = std::min(n, (t + 1) * kRowTile) - i0;
      for (index_t r = 0; r < rows; ++r) {
        const double wi = w[i0 + r];
        for (index_t l = 0; l < d; ++l) {
          const double v = static_cast<double>(X[(i0 + r) * d + l]) - mean[l];
          R[r * dw + l] = v;
          A[l * kRowTile + r] = wi * v;
        }
      }
      accumulate_rt_x<8>(A, kRowTile, dp, R, rows, dw, p);
    }
  }
  std::fill(cov, cov + d * d, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < d; ++a)
      for (index_t b = a; b < d; ++b) cov[a * d + b] += cp[(c * dp + a) * dw + b];
  for (index_t a = 0; a < d; ++a)
    for (index_t b = a; b < d; ++b) {
      cov[a * d + b] /= W;
      cov[b * d + a] = cov[a * d + b];
    }
}

// Direct differences in T with the candidates in lanes (Ct (d, W) per group of W
// candidates, padded with zeros), kPPRows rows per step; no distance tile: for a
// handful of candidates the Engine's tile and its scalar reduction cost more than
// the distances. Accumulation: each chunk (fixed by n, not by the thread count)
// keeps per-candidate double partials over its rows in order.
template <typename T>
void kmeanspp_candidate_potentials(const T* X, index_t n, index_t d, const double* w,
                                   const double* closest, const std::int64_t* cand, index_t L,
                                   double* potentials, int nt) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  typedef double VD __attribute__((vector_size(W * 8)));
  typedef double VD_u __attribute__((vector_size(W * 8), aligned(8), may_alias));
  const index_t n_groups = (L + W - 1) / W;
  std::vector<T> Ct(n_groups * d * W, T(0));
  for (index_t a = 0; a < L; ++a)
    for (index_t l = 0; l < d; ++l) Ct[((a / W) * d + l) * W + a % W] = X[cand[a] * d + l];
  const index_t n_chunks = std::min(n_tiles_of(n), kMaxChunks);
  const index_t Lp = n_groups * W;
  std::vector<double> part(n_chunks * Lp, 0.0);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (index_t c = 0; c < n_chunks; ++c) {
    const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
    for (index_t g = 0; g < n_groups; ++g) {
      const T* Cg = Ct.data() + g * d * W;
      VD pacc = *reinterpret_cast<const VD_u*>(part.data() + c * Lp + g * W);
      index_t i = i0;
      for (; i + kPPRows <= i1; i += kPPRows) {
        V acc[kPPRows] = {};
        for (index_t l = 0; l < d; ++l) {
          const V cv = vload(Cg + l * W);
          for (index_t q = 0; q < kPPRows; ++q) {
            const V df = vset<T>(X[(i + q) * d + l]) - cv;
            acc[q] += df * df;
          }
        }
        for (index_t q = 0; q < kPPRows; ++q) {
          const VD dv = __builtin_convertvector(acc[q], VD);
          const VD cl = VD{} + closest[i + q];
          pacc += w[i + q] * (dv < cl ? dv : cl);
        }
      }
      for (; i < i1; ++i) {
        V acc = V{};
        for (index_t l = 0; l < d; ++l) {
          const V df = vset<T>(X[i * d + l]) - vload(Cg + l * W);
          acc += df * df;
        }
        const VD dv = __builtin_convertvector(acc, VD);
        const VD cl = VD{} + closest[i];
        pacc += w[i] * (dv < cl ? dv : cl);
      }
      *reinterpret_cast<VD_u*>(part.data() + c * Lp + g * W) = pacc;
    }
  }
  std::fill(potentials, potentials + L, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < L; ++a) potentials[a] += part[c * Lp + a];
}

template <typename T>
void kmeanspp_update_closest(const T* X, index_t n, index_t d, std::int64_t center,
                             double* closest, int nt) {
  std::vector<double> c(d);
  for (index_t l = 0; l < d; ++l) c[l] = static_cast<double>(X[center * d + l]);
#pragma omp parallel for schedule(static) num_threads(nt)
  for (index_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (index_t l = 0; l < d; ++l) {
      const double df = static_cast<double>(X[i * d + l]) - c[l];
      s += df * df;
    }
    closest[i] = std::min(closest[i], s);
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
