// The weighted mean and population covariance (the critical temperature of
// SPEC.md): two passes over chunks of whole tiles, double partials per chunk
// merged in chunk order.
#pragma once

#include <omp.h>

#include <algorithm>
#include <vector>

#include "impl/drive.hpp"
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

// The register block of the symmetric rank-k update: kCovMR coordinates a
// (broadcast) by kCovNR coordinates b (kCovNV vectors), 12 accumulators.
inline constexpr index_t kCovMR = 6;
inline constexpr index_t kCovNV = 2;
inline constexpr index_t kCovNR = kCovNV * VT<double>::W;

// One tile's centred rows, packed for the rank-k update (all in double):
// B as column panels of kCovNR coordinates, (rows, kCovNR) each, and A = the
// weighted rows as panels of kCovMR coordinates, (rows, kCovMR) each, so that
// both operands of a register block are read contiguously (a row-major tile
// of power-of-two stride would map a panel onto a few cache sets). Columns
// past d stay zero.
struct CovariancePanels {
  index_t na, nb;  // panels of A and of B
  std::vector<double> A, B, row;
  explicit CovariancePanels(index_t d)
      : na((d + kCovMR - 1) / kCovMR),
        nb((d + kCovNR - 1) / kCovNR),
        A(na * kRowTile * kCovMR, 0.0),
        B(nb * kRowTile * kCovNR, 0.0),
        row(std::max(na * kCovMR, nb * kCovNR), 0.0) {}

  // Rows [i0, i0 + rows) of X, minus mean; A also times w.
  template <typename T>
  void pack(const T* X, index_t d, const double* w, const double* mean, index_t i0, index_t rows) {
    for (index_t r = 0; r < rows; ++r) {
      const T* x = X + (i0 + r) * d;
      for (index_t l = 0; l < d; ++l) row[l] = static_cast<double>(x[l]) - mean[l];
      const double wi = w[i0 + r];
      for (index_t p = 0; p < nb; ++p)
        for (index_t j = 0; j < kCovNR; ++j)
          B[(p * kRowTile + r) * kCovNR + j] = row[p * kCovNR + j];
      for (index_t q = 0; q < na; ++q)
        for (index_t i = 0; i < kCovMR; ++i)
          A[(q * kRowTile + r) * kCovMR + i] = wi * row[q * kCovMR + i];
    }
  }
};

// P[a0 + i, b0 + j] += sum_r A[r, i] B[r, j] over a tile's rows: A [in]
// (rows, kCovMR) and B [in] (rows, kCovNR) panels, P [in,out] with row stride
// ldp. Each entry sums its rows in row order.
inline void covariance_block(const double* A, const double* B, index_t rows, double* P,
                             index_t ldp) {
  using V = typename VT<double>::v;
  constexpr index_t W = VT<double>::W;
  V acc[kCovMR][kCovNV];
#pragma GCC unroll 8
  for (index_t i = 0; i < kCovMR; ++i)
#pragma GCC unroll 4
    for (index_t v = 0; v < kCovNV; ++v) acc[i][v] = V{};
  for (index_t r = 0; r < rows; ++r) {
    V b[kCovNV];
#pragma GCC unroll 4
    for (index_t v = 0; v < kCovNV; ++v) b[v] = vload(B + r * kCovNR + v * W);
#pragma GCC unroll 8
    for (index_t i = 0; i < kCovMR; ++i) {
      const V a = vset<double>(A[r * kCovMR + i]);
#pragma GCC unroll 4
      for (index_t v = 0; v < kCovNV; ++v) acc[i][v] = vfma(a, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (index_t i = 0; i < kCovMR; ++i)
#pragma GCC unroll 4
    for (index_t v = 0; v < kCovNV; ++v)
      vstore(P + i * ldp + v * W, vload(P + i * ldp + v * W) + acc[i][v]);
}

// mean [out] (d,), cov [out] (d, d): sum_i w_i (x_i - mean)(x_i - mean)^T / W,
// the second pass a symmetric rank-k update: per tile, the register blocks
// that reach the upper triangle (b >= a) add the tile's products, summed in
// row order, to the chunk's double partial (tiles in order); chunk partials
// merge in chunk order, so the result does not depend on the thread count.
template <typename T>
void weighted_covariance(const T* X, index_t n, index_t d, const double* w, double* mean,
                         double* cov, int n_threads) {
  const int nt = resolve_threads(n_threads, n * d * d);
  const index_t n_chunks = covariance_chunks(n, d);
  const double W = weighted_mean(X, n, d, w, n_chunks, nt, mean);
  std::vector<CovariancePanels> panels(nt, CovariancePanels(d));
  const index_t na = panels[0].na, nb = panels[0].nb;
  const index_t lda = na * kCovMR, ldp = nb * kCovNR;  // partial (lda, ldp) per chunk
  std::vector<double> cp(n_chunks * lda * ldp, 0.0);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    CovariancePanels& s = panels[omp_get_thread_num()];
    double* part = cp.data() + c * lda * ldp;
    const ChunkRows chunk(c, n_chunks, n);
    for (index_t t = chunk.tile_begin; t < chunk.tile_end; ++t) {
      const index_t i0 = t * kRowTile, rows = std::min(n, (t + 1) * kRowTile) - i0;
      s.pack(X, d, w, mean, i0, rows);
      // One B panel stays in L1 while the A panels of its rows a <= b pass.
      for (index_t p = 0; p < nb; ++p)
        for (index_t q = 0; q < na && q * kCovMR < (p + 1) * kCovNR; ++q)
          covariance_block(s.A.data() + q * kRowTile * kCovMR, s.B.data() + p * kRowTile * kCovNR,
                           rows, part + q * kCovMR * ldp + p * kCovNR, ldp);
    }
  }
  std::fill(cov, cov + d * d, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < d; ++a)
      for (index_t b = a; b < d; ++b) cov[a * d + b] += cp[(c * lda + a) * ldp + b];
  for (index_t a = 0; a < d; ++a)
    for (index_t b = a; b < d; ++b) {
      cov[a * d + b] /= W;
      cov[b * d + a] = cov[a * d + b];
    }
}

// Rows per chunk of second_moment_matvec: a function of the shape only (never
// of the thread count), whole tiles, each chunk's (d,) partial at most an
// eighth of its rows' entries and all of them within kChunkStatsBytes.
inline index_t matvec_chunks(index_t n, index_t d) {
  const index_t by_bytes = kChunkStatsBytes / (8 * (d + 1));
  return std::max<index_t>(1, std::min({n_tiles_of(n), kMaxChunks, n / 8, by_bytes}));
}

// Rows a group of second_moment_matvec reads together: each load of v and each
// update of a chunk's (d,) partial serves this many rows (d doubles each, an
// L2-resident vector at large d: one row at a time spends its time on them).
inline constexpr index_t kMatvecRows = 4;

// w [in] (n,), mean [in, nullable] (d,), v [in] (d,); out [out] (d,):
// sum_i w_i ((x_i - mean) . v) (x_i - mean) (mean null: 0), one pass over X,
// nothing of size d x d. In double: y_i = x_i . v - mean . v (8 interleaved
// partial sums per row; y_i loses the digits of |x_i| / |x_i - mean| of
// double's, far below the float32 inputs' own), then out = sum_i w_i y_i x_i -
// mean sum_i w_i y_i. Rows in groups of kMatvecRows from each chunk's start;
// per-chunk partials over the groups in order, merged in chunk order (the
// result does not depend on the thread count).
template <typename T>
void second_moment_matvec(const T* X, index_t n, index_t d, const double* w, const double* mean,
                          const double* v, double* out, int n_threads) {
  const index_t n_chunks = matvec_chunks(n, d);
  std::vector<double> part(n_chunks * (d + 1), 0.0);  // (d,) partial and sum_i w_i y_i
  double mv = 0.0;
  if (mean != nullptr)
    for (index_t l = 0; l < d; ++l) mv += mean[l] * v[l];
  const int nt = resolve_threads(n_threads, 2 * n * d);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    double* pc = part.data() + c * (d + 1);
    const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
    for (index_t g = i0; g < i1; g += kMatvecRows) {
      const index_t rows = std::min(kMatvecRows, i1 - g);
      const T* x[kMatvecRows];
      double s[kMatvecRows][8] = {};
      for (index_t r = 0; r < kMatvecRows; ++r) x[r] = X + (g + std::min(r, rows - 1)) * d;
      index_t l = 0;
      for (; l + 8 <= d; l += 8)
        for (index_t r = 0; r < kMatvecRows; ++r)
          for (int q = 0; q < 8; ++q) s[r][q] += static_cast<double>(x[r][l + q]) * v[l + q];
      for (; l < d; ++l)
        for (index_t r = 0; r < kMatvecRows; ++r) s[r][0] += static_cast<double>(x[r][l]) * v[l];
      double a[kMatvecRows];
      for (index_t r = 0; r < kMatvecRows; ++r) {
        const double* t = s[r];
        const double y = (((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))) - mv;
        a[r] = r < rows ? w[g + r] * y : 0.0;  // a short last group's copies weigh 0
        pc[d] += a[r];
      }
      for (index_t l = 0; l < d; ++l) {
        double acc = pc[l];
        for (index_t r = 0; r < kMatvecRows; ++r) acc += a[r] * static_cast<double>(x[r][l]);
        pc[l] = acc;
      }
    }
  }
  double wy = 0.0;
  std::fill(out, out + d, 0.0);
  for (index_t c = 0; c < n_chunks; ++c) {
    const double* pc = part.data() + c * (d + 1);
    for (index_t l = 0; l < d; ++l) out[l] += pc[l];
    wy += pc[d];
  }
  if (mean != nullptr)
    for (index_t l = 0; l < d; ++l) out[l] -= mean[l] * wy;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
