// The validation pass's read of a dense block: per chunk of rows, the
// features' weighted moments, and the checks every value needs (finite, not
// too large).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// One chunk, rows [i0, i1): W = sum_i w_i, mean_j = sum_i w_i x_ij / W and
// M2_j = sum_i w_i ((x_ij - mean_j)^2), every sum in double and sequential
// over the rows (its bits independent of threads and of the chunks around
// it), mean and M2 left 0 where W = 0; max_abs = max |x_ij| (meant for a
// finite chunk), finite = 0 where some value is NaN or infinite (x * 0 is NaN
// exactly there, and a NaN stays in a sum).
template <typename T>
void chunk_moments(const T* X, index_t i0, index_t i1, index_t d, const double* w, double* W,
                   double* mean, double* M2, double* max_abs, std::uint8_t* finite) {
  std::vector<double> largest(static_cast<size_t>(d), 0.0), poison(static_cast<size_t>(d), 0.0);
  double total = 0.0;
  std::fill(mean, mean + d, 0.0);
  std::fill(M2, M2 + d, 0.0);
  for (index_t i = i0; i < i1; ++i) {
    const T* x = X + i * d;
    const double wi = w[i];
    total += wi;
    for (index_t j = 0; j < d; ++j) {
      const double v = static_cast<double>(x[j]);
      mean[j] += wi * v;
      poison[j] += v * 0.0;
      const double a = std::fabs(v);
      largest[j] = largest[j] < a ? a : largest[j];
    }
  }
  *W = total;
  double big = 0.0, poisoned = 0.0;
  for (index_t j = 0; j < d; ++j) big = std::max(big, largest[j]), poisoned += poison[j];
  *max_abs = big;
  *finite = poisoned == 0.0;
  if (!(total > 0.0) || !*finite) return;
  for (index_t j = 0; j < d; ++j) mean[j] /= total;
  for (index_t i = i0; i < i1; ++i) {
    const T* x = X + i * d;
    const double wi = w[i];
    for (index_t j = 0; j < d; ++j) {
      const double t = static_cast<double>(x[j]) - mean[j];
      M2[j] += wi * (t * t);
    }
  }
}

// chunk_moments of every chunk of chunk_rows rows of X (n, d) (the last one
// shorter), in parallel over the chunks: W (c,), mean and M2 (c, d), max_abs
// and finite (c,), c = ceil(n / chunk_rows).
template <typename T>
void feature_moments(const T* X, index_t n, index_t d, const double* w, index_t chunk_rows,
                     double* W, double* mean, double* M2, double* max_abs, std::uint8_t* finite,
                     int n_threads) {
  const index_t chunks = (n + chunk_rows - 1) / chunk_rows;
  const int nt = resolve_threads(n_threads, 2 * n * d);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < chunks; ++c) {
    const index_t i0 = c * chunk_rows, i1 = std::min(n, i0 + chunk_rows);
    chunk_moments(X, i0, i1, d, w, W + c, mean + c * d, M2 + c * d, max_abs + c, finite + c);
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
