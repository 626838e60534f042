// Greedy k-means++ seeding on CSR rows: squared distances between two rows by
// direct differences over the union of their stored columns, walked in
// column order (the columns of a row are sorted), so the sum has the dense
// kernels' terms in the dense kernels' order less the shared zeros.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "impl/drive.hpp"
#include "impl/sparse_rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// ||x_a - x_b||^2 of rows a and b of X, differences and sum in U.
template <typename U, typename T, typename I>
inline U csr_row_sq_distance(const CsrRows<T, I>& X, index_t a, index_t b) {
  index_t p = X.begin(a), q = X.begin(b);
  const index_t pe = X.end(a), qe = X.end(b);
  U s = U(0);
  while (p < pe || q < qe) {
    U df;
    if (q == qe || (p < pe && X.col[p] < X.col[q])) {
      df = static_cast<U>(X.val[p++]);
    } else if (p == pe || X.col[q] < X.col[p]) {
      df = U(0) - static_cast<U>(X.val[q++]);
    } else {
      df = static_cast<U>(X.val[p++]) - static_cast<U>(X.val[q++]);
    }
    s += df * df;
  }
  return s;
}

// As kmeanspp_candidate_potentials: distances in T, sums in double, per-chunk
// partials over rows in order (chunks fixed by n), merged in chunk order.
template <typename T>
void csr_kmeanspp_candidate_potentials(const CsrMatrix<T>& Xm, const double* w,
                                       const double* closest, const std::int64_t* cand, index_t L,
                                       double* potentials, int n_threads) {
  const index_t n = Xm.n;
  const index_t n_chunks = std::min(n_tiles_of(n), kMaxChunks);
  std::vector<double> part(n_chunks * L, 0.0);
  const int nt = resolve_threads(n_threads, csr_distance_work(Xm, L));
  with_csr_rows(Xm, [&](const auto& X) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (index_t c = 0; c < n_chunks; ++c) {
      const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
      double* pc = part.data() + c * L;
      for (index_t i = i0; i < i1; ++i)
        for (index_t a = 0; a < L; ++a) {
          const double dv = static_cast<double>(csr_row_sq_distance<T>(X, i, cand[a]));
          pc[a] += w[i] * std::min(dv, closest[i]);
        }
    }
  });
  std::fill(potentials, potentials + L, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < L; ++a) potentials[a] += part[c * L + a];
}

// As kmeanspp_update_closest: the distance by direct differences in double.
template <typename T>
void csr_kmeanspp_update_closest(const CsrMatrix<T>& Xm, std::int64_t center, double* closest,
                                 int n_threads) {
  const int nt = resolve_threads(n_threads, csr_distance_work(Xm, 1));
  with_csr_rows(Xm, [&](const auto& X) {
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (index_t i = 0; i < X.n; ++i)
      closest[i] = std::min(closest[i], csr_row_sq_distance<double>(X, i, center));
  });
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
