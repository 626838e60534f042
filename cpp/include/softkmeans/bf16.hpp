// The bf16 candidate pass (SPEC.md, "Reduced-precision candidates (exact)"):
// on a CPU with AVX512_BF16, at the avx512 level, the float row reductions of
// the micro-kernel path (hard statistics, assign, margins, entmax15's and the
// bounded step's full rows) find candidate centroids with bf16 products and
// compute only the candidates' distances in float: every output keeps the
// float path's bits. Whether it runs, and from which d, k and k d on, are
// kernel choices (softkmeans/choices.hpp: bf16, bf16_min_dim, bf16_min_k,
// bf16_min_work); SOFTKMEANS_BF16=0 in the environment (read once) or
// set_bf16_enabled(false) turns it off.
#pragma once

#include <cstdint>

#include "softkmeans/config.hpp"

namespace softkmeans {

// The CPU has AVX512_BF16 and this build compiled the pass.
bool bf16_available();

// The pass is in use: available, not turned off, and the avx512 level selected.
bool bf16_enabled();

// Turns the pass on or off. Returns false (and changes nothing) when turning
// it on where it is not available.
bool set_bf16_enabled(bool on);

// Test entry: the pass's bound, forced on whatever the shape (d > kSmallDim).
// approx [out] (n, k): D~_ij = xn_i + cn_j - 2 a~_ij, with a~ the bf16 dot
// product; eps [out] (n, k): its bound, |D~ - D| <= eps against the float
// path's D and the exact one; cand [out] (n, k): 1 where j is a candidate of
// row i. Returns false (outputs unspecified) where the pass is not available
// or declines (norms too large for its arithmetic).
bool bf16_distance_bounds(const float* X, index_t n, index_t d, const float* C, index_t k,
                          double* approx, double* eps, std::uint8_t* cand);

}  // namespace softkmeans
