// The weighted mean and population covariance (the critical temperature of
// SPEC.md): two passes over chunks of whole tiles, double partials per chunk
// merged in chunk order.
#pragma once

#include <omp.h>

#include <algorithm>
#include <vector>

#include "impl/drive.hpp"
#include "impl/product.hpp"
#include "impl/vec.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

inline index_t covariance_chunks(index_t n, index_t d) {
  const index_t per = 8 * (d + 8) * (d + 8) + 64;
  return std::min<index_t>(
      n_tiles_of(n), std::max<index_t>(4, std::min<index_t>(kMaxChunks, kChunkStatsBytes / per)));
}

// mean [out] (d,), returns W: per chunk, sum_i w_i and sum_i w_i x_i in row
// order; chunks merged in order.
template <typename T>
double weighted_mean(const T* X, index_t n, index_t d, const double* w, index_t n_chunks, int nt,
                     double* mean) {
  std::vector<double> part(n_chunks * (d + 1), 0.0);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    double* p = part.data() + c * (d + 1);
    const ChunkRows chunk(c, n_chunks, n);
    const index_t i0 = chunk.tile_begin * kRowTile;
    const index_t i1 = std::min(n, chunk.tile_end * kRowTile);
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
  return W;
}

template <typename T>
void weighted_covariance(const T* X, index_t n, index_t d, const double* w, double* mean,
                         double* cov, int n_threads) {
  const int nt = resolve_threads(n_threads, n * d * d);
  const index_t n_chunks = covariance_chunks(n, d);
  const double W = weighted_mean(X, n, d, w, n_chunks, nt, mean);
  // Second pass: per tile, the centered rows R (rows, dw) and their weighted
  // transpose A (dp, rows) in double; St += A R by the blocked product.
  constexpr index_t Wd = VT<double>::W;
  const index_t dp = round_up(d, 8), dw = round_up(d, Wd);
  std::vector<double> cp(n_chunks * dp * dw, 0.0);
  std::vector<std::vector<double>> As(nt, std::vector<double>(dp * kRowTile, 0.0));
  std::vector<std::vector<double>> Rs(nt, std::vector<double>(kRowTile * dw, 0.0));
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    double* A = As[omp_get_thread_num()].data();
    double* R = Rs[omp_get_thread_num()].data();
    double* p = cp.data() + c * dp * dw;
    const ChunkRows chunk(c, n_chunks, n);
    for (index_t t = chunk.tile_begin; t < chunk.tile_end; ++t) {
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

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
