// Split-bf16 products on matrix units (SPEC.md, "Split-bf16 candidates on
// matrix units (exact)"): approximate squared distances whose error is
// bounded (amx_sq_slack), for a pass that only picks candidates and then
// computes their distances with the float path's own operations. Nothing
// here decides a bit of any output.
//
// Each float32 operand a (minus a shift s, in double) is split into two bf16
// parts, a_hi = bf16(a) and a_lo = bf16(a - a_hi), and x.c is taken as
// x_hi.c_hi + x_hi.c_lo + x_lo.c_hi on AMX-BF16 tiles (bf16 products exact in
// float32, sums rounded to nearest, denormals read as zero and flushed).
#pragma once

#include <cstdint>
#include <vector>

#include "softkmeans/config.hpp"

namespace softkmeans {

// The build compiled the tile kernels, the CPU has AMX-BF16 and Linux granted
// this process the tile data permission (arch_prctl(ARCH_REQ_XCOMP_PERM),
// asked once). False where any is missing: the callers take the float path.
bool amx_available();

// The most rows of one amx_distances call.
inline constexpr index_t kAmxRows = 128;

// The centroid side: v_j = c_j - s split and packed as the tiles' B operands.
struct AmxPanels {
  index_t k = 0, dim = 0;
  index_t chunks = 0;  // dim rounded up to 32 (a tile's depth), / 32
  index_t tiles = 0;   // centroids / 16, rounded up to even (2 tiles a step)
  std::vector<std::uint16_t> b;  // (tiles, chunks, hi/lo, 16 pairs, 16 centroids, 2)
  std::vector<float> vn;         // (16 tiles,) ||v_j||^2 (double, rounded to float)
  std::vector<float> shift;      // (dim,) s
  bool usable = false;           // every |v| within the products' range
};

// C (k, dim) row-major, shift (dim,).
AmxPanels amx_panels(const float* C, index_t k, index_t dim, const float* shift);

// out [out] (rows, ld), rows <= kAmxRows, ld >= 16 tiles: the approximate
// squared distances fl(fl(xn + vn_j) - 2 a~_ij) of rows X (rows, dim) and the
// centroids (+inf from k on); parts: scratch of amx_parts_size(P). Returns
// false, out unspecified, where a row or a centroid is beyond the products'
// range (|x_l - s_l| >= 2^50, or not finite): the caller takes the float path.
bool amx_distances(const AmxPanels& P, const float* X, index_t rows, float* out, index_t ld,
                   std::uint16_t* parts);

inline index_t amx_parts_size(const AmxPanels& P) { return 2 * kAmxRows * P.chunks * 32; }

// A bound on |D~ - ||x - c||^2| for D~ of amx_distances, where ||x - s|| <= xu,
// ||c - s|| <= cu and ||x - c||^2 <= dist_sq (x, c the float32 vectors, the
// distance exact). Derivation, with u = x - s and v = c - s (in double: exact
// but for a relative 2^-53 a coordinate), RNE to bf16 of unit 2^-8:
//  - the split: |u - u_hi| <= 2^-8 |u| (rounding through float adds 2^-24),
//    |u_lo| <= 2^-8 (1 + 2^-7) |u|, e_u = u - u_hi - u_lo with |e_u| <=
//    2^-16 (1 + 2^-7) |u| a coordinate, and likewise v; a part below 2^-126
//    set to 0 (the unit reads denormals as zero) adds 2^-126 a coordinate;
//  - the dropped terms: u.v - (hh + hl + lh) = u_lo.v_lo + (u_hi + u_lo).e_v +
//    e_u.(v_hi + v_lo) + e_u.e_v, coordinate by coordinate at most 3.1 2^-16
//    |u_l v_l|: by Cauchy-Schwarz at most 3.1 2^-16 ||u|| ||v||;
//  - the unit's sums: 3 dim' products exact in float32 (8-bit significands),
//    summed in an order it does not specify: at most gamma_N (N = 3 dim',
//    gamma_N = N 2^-24 / (1 - N 2^-24)) times the sum of their magnitudes,
//    at most 1.03 ||u|| ||v||; a flushed product or sum adds 2^-126 each;
//  - D~ = fl(fl(xn + vn) - 2 a~), xn, vn the norms in double rounded to
//    float: at most 2^-22 (||u||^2 + ||v||^2) + 2^-24 |D~| beside 2 |a~ - u.v|.
// The bound takes twice the dot product's error (any rounding the unit's
// documentation leaves open) and 2^-100 (3 dim' + ||u|| + ||v||) for the
// flushes.
inline double amx_sq_slack(double xu, double cu, double dist_sq, index_t dim) {
  const double n = 3.0 * static_cast<double>((dim + 31) / 32 * 32);
  const double gamma = n * 0x1p-24 / (1.0 - n * 0x1p-24);
  const double e_dot = 2.0 * (3.1 * 0x1p-16 + 1.03 * gamma + 0x1p-50);
  const double flushes = 0x1p-100 * (n + xu + cu);
  return 2.0 * (e_dot * xu * cu + flushes) + 0x1p-21 * (xu * xu + cu * cu) +
         0x1p-22 * dist_sq;
}

}  // namespace softkmeans
