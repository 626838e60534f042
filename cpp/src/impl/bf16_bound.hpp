// The error bound of the bf16 candidate pass (SPEC.md, "Reduced-precision
// candidates (exact)"), its shares per row and per centroid, and the pass's
// per-thread scratch. Compiled only in the unit built with AVX512_BF16
// (kernels_avx512bf16.cpp, SOFTKMEANS_BF16); impl/engine_bf16.hpp uses it.
//
// What is bounded. The float path's distance of row x to centroid c (every
// reduction of the micro-kernel path gives these bits: engine_lanes.hpp) is
//   P = fl(fl(xn + cn) - 2 a),  D_f = max(P, 0),
// x' = fl(x - s), c' = fl(c - s) the shifted float vectors, a = fl(x'.c') as a
// chain of d fused multiply-adds in coordinate order, xn = fl(||x'||^2) the
// same way, cn = fl(||c'||^2) summed in double. The bf16 pass computes
//   a~ = x_b . c_b,  x_b = bf16(x'), c_b = bf16(c')  (vdpbf16ps, float sums)
// and D~ = xn + cn - 2 a~ (exact reals of the float values). With
// u = 2^-24 (float), b = 2^-8 (bf16, round to nearest), t = 2^-126 (the
// smallest normal: vdpbf16ps treats denormal inputs as zero and flushes
// denormal results), X2 = ||x'||^2, C2 = ||c'||^2, S = sum_l |x'_l c'_l|
// <= ||x'|| ||c'|| <= (X2 + C2) / 2, and g(d) = 2.04 d u (d sums, each
// rounded with relative error below 2u, i.e. faithfully: an implementation
// that rounds the two products of an instruction once or twice, to nearest or
// not, is covered; products of two bf16 are exact in float):
//  1. |x_b,l - x'_l| <= b |x'_l| + t (and the same for c), so
//     |x_b.c_b - x'.c'| <= (2b + b^2) S + (1 + b) t (||x'||_1 + ||c'||_1) + d t^2,
//     and the float sums add <= g(d) sum_l |x_b,l c_b,l| <= g(d) (1 + b)^2 S
//     plus 2 d t of flushed denormals: 2 |a~ - x'.c'| <= (2b + b^2 + 1.03 g(d))
//     (X2 + C2) + 2^-120 (sqrt(d) (||x'|| + ||c'||) + d)   (||x'||_1 <= sqrt(d) ||x'||).
//  2. 2 |a - x'.c'| <= d u (1.01) 2 S <= 1.01 d u (X2 + C2).
//  3. |P - (xn + cn - 2 a)| <= u (xn + cn) + u |fl(xn + cn) - 2 a| <= 3.1 u (X2 + C2).
//  So |D~ - P| <= 1 + 2 + 3. Against the exact distance D = ||x - c||^2 of the
//  unshifted inputs: |D~ - D| <= 1 + |xn - X2| + |cn - C2| + |X2 + C2 - 2 x'.c'
//  - D| <= 1 + (1.01 d u + 1.01 u + 4.02 u) (X2 + C2) (the shift's two
//  roundings move each coordinate of x' - c' by <= u (|x'_l| + |c'_l|)), also
//  below 1 + 2 + 3.
//  4. The pass compares lo = fl(cn_lo - 2 a~) and hi = fl(cn_hi - 2 a~)
//     (cn_lo, cn_hi: cn -/+ the centroid's share rounded outwards), each one
//     rounding of a value below 2.2 (X2 + C2) in magnitude: 4.4 u (X2 + C2)
//     covers both.
// Hence, with K = 1.01 (2b + b^2 + (3.3 d + 8) u) (the 1.01 covers the double
// arithmetic of the shares and X2 <= xn (1 + 2 g(d)), C2 <= cn (1 + 2u)):
//   eps = e(x) + f(c),  e(x) = K X2 + 2^-120 (sqrt(d X2) + d / 2),
//                       f(c) = K C2 + 2^-120 (sqrt(d C2) + d / 2),
// bounds |D~ - P|, |D~ - D| and the rounding of lo and hi.
//
// The candidates. lo - e + xn <= P <= hi + e + xn for every centroid (4.). The
// float path's outputs are v1 <= v2, its two smallest D_f, and i1, the first j
// with D_f = v1. D_f = max(P, 0) is non-decreasing in P, so the second smallest
// P is at most the second smallest upper bound: P_(2) <= hi_(2) + e + xn, and
// every j with D_f,j <= v2 has P_j <= max(0, P_(2)) <= max(0, hi_(2) + e + xn):
//   lo_j <= max(-xn, hi_(2)) + 2 e   (the threshold, rounded upwards).
// Every centroid that passes is a candidate; one that does not has D_f > v2
// and changes none of v1, v2, i1. The candidates' D_f are then computed with
// the float path's own operations in its order (engine_bf16.hpp) and folded in
// increasing j with its strict <: v1, v2 and i1 are the float path's bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "softkmeans/choices.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Whether the engine takes the bf16 pass on its own (the thresholds are kernel
// choices, softkmeans/choices.hpp): float only (float64 keeps
// its path: the bound would be in terms of a double D, and bf16 products are
// 2^-45 of its precision, so nearly every centroid would stay a candidate).
template <typename T>
inline bool bf16_worthwhile(index_t k, index_t d, const KernelChoices& ch) {
  return std::is_same<T, float>::value && d >= ch.bf16_min_dim && k >= ch.bf16_min_k &&
         k * d >= ch.bf16_min_work;
}

// Squared norms (xn, cn) at or above this take the float path: the shares and
// lo, hi stay far from overflow (and bf16 from its own, at float's maximum).
inline constexpr double kBf16MaxSquaredNorm = 0x1p100;

// K of the derivation above.
inline double bf16_bound_scale(index_t d) {
  const double u = 0x1p-24, b = 0x1p-8;
  return 1.01 * (2 * b + b * b + (3.3 * static_cast<double>(d) + 8) * u);
}

// e(x) (or f(c)) of a row (or centroid) of squared norm sq as the float path
// computed it (xn, cn): its share of eps.
inline double bf16_share(double sq, index_t d) {
  const double gd = 2.04 * static_cast<double>(d) * 0x1p-24;
  const double exact_sq = sq * (1 + 2 * gd);  // X2 <= xn (1 + 2 g(d)); covers C2 <= cn (1 + 2u)
  const double dd = static_cast<double>(d);
  return bf16_bound_scale(d) * exact_sq + 0x1p-120 * (std::sqrt(dd * exact_sq) + dd / 2);
}

// v rounded to float towards -inf (down) or +inf (up).
inline float float_down(double v) {
  float r = static_cast<float>(v);
  if (static_cast<double>(r) > v) r = std::nextafter(r, -std::numeric_limits<float>::infinity());
  return r;
}
inline float float_up(double v) {
  float r = static_cast<float>(v);
  if (static_cast<double>(r) < v) r = std::nextafter(r, std::numeric_limits<float>::infinity());
  return r;
}

// bf16 of a finite float, rounded to nearest even (a denormal stays one:
// vdpbf16ps reads it as zero, the t of the bound).
inline std::uint16_t to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// Per-thread scratch of the pass, for one packed group of G rows.
struct Bf16Scratch {
  std::vector<std::uint32_t> xbf;  // (ceil(d / 2), G) the rows' bf16 pairs
  std::vector<float> lo;           // (kl, G) lo of every centroid and row
  std::vector<float> thr;          // (G,) each row's threshold
  std::vector<std::int32_t> cand;  // (G, kl) each row's candidates, increasing
  std::vector<std::int32_t> n_cand;  // (G,)
  std::vector<std::int32_t> pairs;   // (G kl) positions in cand of the candidates to compute
  std::vector<float> dots;           // (G, kl) the candidates' float dot products
  std::vector<float> xr;             // (G, d) the shifted rows, row-major
  // Lane groups of this workspace's call: seen, those that tried the pass, and those
  // where it declined (too many candidates: the bf16 products were paid for nothing).
  index_t seen = 0, tried = 0, declined = 0;
  // Whether the next lane group tries the pass: on data whose rows keep many
  // candidates (high-dimensional descriptors at k = 4096 kept 24% of a 64-centroid
  // group, 6.6% of the whole k) nearly every group declines, and trying cost the
  // plain pass twice its float time; every 64th group tries again in case the
  // rows change. Either path gives the same bits: only time depends on it.
  bool worth_trying() const {
    return tried < 4 || 2 * declined < tried || seen % 64 == 0;
  }
};

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
