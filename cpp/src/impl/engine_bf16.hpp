// The engine's bf16 candidate pass (SOFTKMEANS_BF16 units only): min2_rows on
// the micro-kernel path, float, finds each row's candidates with bf16 products
// accumulated in float (vdpbf16ps) under the bound of impl/bf16_bound.hpp, then
// computes the candidates' distances with the float path's own operations, so
// v1, v2 and the argmin are lane_rows_min2's bits (the derivation is there).
#pragma once

#include <algorithm>
#include <limits>
#include <type_traits>

#include "impl/bf16_bound.hpp"
#include "impl/engine.hpp"
#include "impl/transpose.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Turns the pass on whatever the shape (the tests' bound entry); float only.
template <typename T>
inline void Engine<T>::enable_bf16() {
  bf16 = std::is_same<T, float>::value && !small && dbuf_rows < mb_pad();
  if (bf16) prepare_bf16();
}

// cbf, cn_lo, cn_hi from the lane panels cl, cnl (order_lanes calls it: the
// pass's slots are the lanes' slots). Centroids too far out for the bound's
// arithmetic turn the pass off.
template <typename T>
inline void Engine<T>::prepare_bf16() {
  const index_t dh = (d + 1) / 2;
  const float inf = std::numeric_limits<float>::infinity();
  cbf.assign(kl * dh, 0u);
  crow.assign(kl * d, 0.0f);
  cn_lo.assign(kl, inf);
  cn_hi.assign(kl, inf);
  for (index_t j = 0; j < kl; ++j) {
    if (!(cnl[j] < inf)) continue;  // padding: lo = hi = inf, never a candidate
    if (static_cast<double>(cnl[j]) >= kBf16MaxSquaredNorm) {
      bf16 = false;
      return;
    }
    const T* c = cl.data() + j / LC * d * LC + j % LC;  // coordinate l at c[l LC]
    for (index_t l = 0; l < d; ++l) crow[j * d + l] = static_cast<float>(c[l * LC]);
    for (index_t p = 0; p < dh; ++p) {
      const std::uint32_t even = to_bf16(static_cast<float>(c[2 * p * LC]));
      const std::uint32_t odd = 2 * p + 1 < d ? to_bf16(static_cast<float>(c[(2 * p + 1) * LC])) : 0u;
      cbf[(j / LC * dh + p) * LC + j % LC] = even | odd << 16;
    }
    const double cn = static_cast<double>(cnl[j]), f = bf16_share(cn, d);
    cn_lo[j] = float_down(cn - f);
    cn_hi[j] = float_up(cn + f);
  }
}

template <typename T>
inline void Engine<T>::init_bf16(Workspace<T>& ws) const {
  constexpr index_t G = LR * W;
  ws.bf16.xbf.assign((d + 1) / 2 * G, 0u);
  ws.bf16.lo.assign(kl * G, 0.0f);
  ws.bf16.thr.assign(G, 0.0f);
  ws.bf16.cand.assign(G * kl, 0);
  ws.bf16.n_cand.assign(G, 0);
  ws.bf16.pairs.assign(G * kl, 0);
  ws.bf16.dots.assign(G * kl, 0.0f);
  ws.bf16.xr.assign(G * d, 0.0f);
  ws.bf16.seen = ws.bf16.tried = ws.bf16.declined = 0;
}

// The pass for one packed group (xg (d, G) shifted rows, xnv their norms; rn
// real rows): the rows' bf16 pairs, lo of every centroid, each row's threshold
// and its candidates (ws.bf16). Returns false, with nothing decided, where the
// float path is the better (or the only sound) way: norms too large for the
// bound's arithmetic, or more candidates than pay for their recomputation.
// dot [out, nullable] (kl, G): a~ of every centroid and row (the tests' entry).
template <typename T>
inline bool Engine<T>::bf16_group(const T* xg, const V* xnv, index_t rn, Workspace<T>& ws,
                                  float* dot) const {
  if constexpr (!std::is_same<T, float>::value) {
    return false;
  } else {
    constexpr index_t G = LR * W;
    for (index_t q = 0; q < LR; ++q)
      if (!all_less(xnv[q], vset<T>(static_cast<T>(kBf16MaxSquaredNorm)))) return false;
    Bf16Scratch& s = ws.bf16;
    bf16_pack_rows(xg, s);
    __m512 h2[LR];  // each row's second smallest hi over all centroids
    bf16_bounds(s, h2, dot);
    bf16_thresholds(xnv, h2, s);
    const index_t total = bf16_candidates(s);
    (void)rn;
    // The recomputation costs about d / 2 cycles a candidate, the float
    // path about d / 32 a centroid and row, and the bf16 products already paid
    // about half of that: past kl / 32 candidates a row the float path is
    // cheaper. (With kl / 16, 5e4 descriptors x 128 at k = 4096, which keep many
    // candidates, took 1.28x the float pass's time; with kl / 32 1.08x; rows
    // with ~3 candidates, bench/bf16.py, are unchanged.)
    return dot != nullptr || total * 32 <= G * kl;
  }
}

// bf16_group's steps, float only (T = float wherever they are instantiated).
// Always inlined: bf16_bounds' h2 stays in registers, as in one function.

// The rows' pairs (s.xbf, (ceil(d / 2), G)): coordinate 2p in the low half of
// lane q, 2p + 1 in the high (0 past d).
template <typename T>
[[gnu::always_inline]] inline void Engine<T>::bf16_pack_rows(const T* xg, Bf16Scratch& s) const {
  constexpr index_t G = LR * W;
  const index_t dh = (d + 1) / 2;
  for (index_t p = 0; p < dh; ++p)
    for (index_t q = 0; q < LR; ++q) {
      const __m512 even = (__m512)vload(xg + 2 * p * G + q * W);
      const __m512 odd =
          2 * p + 1 < d ? (__m512)vload(xg + (2 * p + 1) * G + q * W) : _mm512_setzero_ps();
      const __m512i lo16 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(even));
      const __m512i hi16 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(odd));
      _mm512_storeu_si512(s.xbf.data() + p * G + q * W,
                          _mm512_or_si512(lo16, _mm512_slli_epi32(hi16, 16)));
    }
}

// a~ of LR W rows x LC centroids in registers (vdpbf16ps over s.xbf and cbf):
// lo of every centroid and row stored (s.lo), hi's two smallest kept per row,
// the second returned in h2 [out] (LR,). dot [out, nullable] (kl, G): a~.
template <typename T>
[[gnu::always_inline]] inline void Engine<T>::bf16_bounds(Bf16Scratch& s, __m512* h2,
                                                          float* dot) const {
  constexpr index_t G = LR * W;
  const index_t dh = (d + 1) / 2;
  const float inf = std::numeric_limits<float>::infinity();
  __m512 h1[LR];
  for (index_t q = 0; q < LR; ++q) h1[q] = h2[q] = _mm512_set1_ps(inf);
  const __m512 minus2 = _mm512_set1_ps(-2.0f);
  for (index_t j0 = 0; j0 < kl; j0 += LC) {
    const std::uint32_t* cb = cbf.data() + j0 / LC * dh * LC;
    __m512 acc[LR][LC];
#pragma GCC unroll 16
    for (index_t q = 0; q < LR; ++q)
#pragma GCC unroll 16
      for (index_t c = 0; c < LC; ++c) acc[q][c] = _mm512_setzero_ps();
    for (index_t p = 0; p < dh; ++p) {
      __m512bh xv[LR];
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q)
        xv[q] = (__m512bh)_mm512_loadu_si512(s.xbf.data() + p * G + q * W);
#pragma GCC unroll 16
      for (index_t c = 0; c < LC; ++c) {
        const __m512bh cv = (__m512bh)_mm512_set1_epi32(static_cast<int>(cb[p * LC + c]));
#pragma GCC unroll 16
        for (index_t q = 0; q < LR; ++q) acc[q][c] = _mm512_dpbf16_ps(acc[q][c], xv[q], cv);
      }
    }
#pragma GCC unroll 16
    for (index_t c = 0; c < LC; ++c) {
      const __m512 lo_c = _mm512_set1_ps(cn_lo[j0 + c]), hi_c = _mm512_set1_ps(cn_hi[j0 + c]);
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q) {
        const __m512 hi = _mm512_fmadd_ps(acc[q][c], minus2, hi_c);
        _mm512_storeu_ps(s.lo.data() + (j0 + c) * G + q * W,
                         _mm512_fmadd_ps(acc[q][c], minus2, lo_c));
        h2[q] = _mm512_min_ps(h2[q], _mm512_max_ps(h1[q], hi));
        h1[q] = _mm512_min_ps(h1[q], hi);
        if (dot != nullptr) _mm512_storeu_ps(dot + (j0 + c) * G + q * W, acc[q][c]);
      }
    }
  }
}

// Each row's threshold max(-xn, hi_(2)) + 2 e, rounded up (bf16_bound.hpp),
// into s.thr. xnv [in] (LR,) the rows' norms; h2 [in] (LR,) from bf16_bounds.
template <typename T>
[[gnu::always_inline]] inline void Engine<T>::bf16_thresholds(const V* xnv, const __m512* h2,
                                                              Bf16Scratch& s) const {
  for (index_t q = 0; q < LR; ++q)
    for (index_t l = 0; l < W; ++l) {
      const double xn = static_cast<double>(xnv[q][l]);
      const double h = static_cast<double>(h2[q][l]);
      s.thr[q * W + l] = float_up(std::max(-xn, h) + 2 * bf16_share(xn, d));
    }
}

// Each row's candidates, the centroids whose lo is at most its threshold, in
// increasing slot order (s.cand, s.n_cand). Returns their number over all rows.
template <typename T>
[[gnu::always_inline]] inline index_t Engine<T>::bf16_candidates(Bf16Scratch& s) const {
  constexpr index_t G = LR * W;
  std::fill(s.n_cand.begin(), s.n_cand.end(), 0);
  index_t total = 0;
  __m512 thr[LR];
  for (index_t q = 0; q < LR; ++q) thr[q] = _mm512_loadu_ps(s.thr.data() + q * W);
  for (index_t j = 0; j < kl; ++j)
    for (index_t q = 0; q < LR; ++q) {
      unsigned mask =
          _mm512_cmp_ps_mask(_mm512_loadu_ps(s.lo.data() + j * G + q * W), thr[q], _CMP_LE_OQ);
      for (; mask != 0; mask &= mask - 1) {
        const index_t r = q * W + __builtin_ctz(mask);
        s.cand[r * kl + s.n_cand[r]++] = static_cast<std::int32_t>(j);
        ++total;
      }
    }
  return total;
}

// v1, v2 and the first argmin of rows 0 .. rn of the group from their
// candidates' distances, each computed as lanes_min2 computes it: a chain of
// d fused multiply-adds in coordinate order from 0, (xn + cn) - 2 a by one
// fused multiply-add, clamped at 0; folded in increasing slot order with its
// strict <. X [in] (rn, d) the group's rows; out [out] (rn,). The chains of
// 16 candidates (of any rows) run in the lanes of one vector, fed 16
// coordinates at a time by two 16 x 16 transposes of their rows and
// centroids (s.xr, crow: row-major). Six scalar chains took 11.6% of a
// (20000, 256, 1024) hard step's samples, these 9.5% (one thread, perf).
template <typename T>
inline void Engine<T>::bf16_exact(const T* X, const V* xnv, index_t rn, Workspace<T>& ws,
                                  RowMin<T>* out) const {
  constexpr index_t P = 16;
  Bf16Scratch& s = ws.bf16;
  // The candidates of all rows as positions r kl + c of s.cand, row by row.
  index_t m = 0;
  for (index_t r = 0; r < rn; ++r)
    for (index_t c = 0; c < s.n_cand[r]; ++c) s.pairs[m++] = static_cast<std::int32_t>(r * kl + c);
  // The rows minus the shift: pack_group's subtractions, row-major.
  for (index_t r = 0; r < rn; ++r)
    for (index_t l = 0; l < d; ++l)
      s.xr[r * d + l] = static_cast<float>(X[r * d + l] - shift[l]);
  for (index_t p0 = 0; p0 < m; p0 += P) {
    const float* xp[P];
    const float* cp_[P];
    for (index_t b = 0; b < P; ++b) {
      const index_t pos = s.pairs[std::min(p0 + b, m - 1)];
      xp[b] = s.xr.data() + pos / kl * d;
      cp_[b] = crow.data() + s.cand[pos] * d;
    }
    __m512 acc = _mm512_setzero_ps();
    for (index_t l0 = 0; l0 < d; l0 += 16) {
      const index_t len = std::min<index_t>(16, d - l0);
      const __mmask16 mask = static_cast<__mmask16>((1u << len) - 1u);
      __m512 xv[16], cv[16];
#pragma GCC unroll 16
      for (index_t b = 0; b < P; ++b) {
        xv[b] = _mm512_maskz_loadu_ps(mask, xp[b] + l0);
        cv[b] = _mm512_maskz_loadu_ps(mask, cp_[b] + l0);
      }
      transpose16(xv);
      transpose16(cv);
      if (len == 16) {
#pragma GCC unroll 16
        for (index_t t = 0; t < 16; ++t) acc = _mm512_fmadd_ps(xv[t], cv[t], acc);
      } else {
        for (index_t t = 0; t < len; ++t) acc = _mm512_fmadd_ps(xv[t], cv[t], acc);
      }
    }
    alignas(64) float a[P];
    _mm512_store_ps(a, acc);
    for (index_t b = 0; b < P && p0 + b < m; ++b) s.dots[s.pairs[p0 + b]] = a[b];
  }
  for (index_t r = 0; r < rn; ++r) {
    const T xn = xnv[r / W][r % W];
    T v1 = std::numeric_limits<T>::infinity(), v2 = v1;
    index_t i1 = 0;
    for (index_t c = 0; c < s.n_cand[r]; ++c) {
      const index_t j = s.cand[r * kl + c];
      const T u = lane_mul_add(static_cast<T>(s.dots[r * kl + c]), T(-2), xn + cnl[j]);
      const T dist = u > T(0) ? u : T(0);
      v2 = std::min(v2, std::max(v1, dist));
      if (dist < v1) {
        v1 = dist;
        i1 = j;
      }
    }
    out[r] = {v1, v2, i1};
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
