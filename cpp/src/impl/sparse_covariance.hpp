// The weighted second moment of CSR rows applied to a vector (the product
// behind lambda_max of a sparse X: softkmeans._sparse.SparseCovariance runs
// Lanczos on it): out = X^T diag(w) X v = sum_i w_i (x_i . v) x_i, one pass
// over the stored entries, nothing of size d x d formed.
#pragma once

#include <omp.h>

#include <algorithm>
#include <vector>

#include "impl/drive.hpp"
#include "impl/sparse_rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Rows per chunk of csr_second_moment_matvec: a function of the shape and nnz
// only (never of the thread count), at most kMaxChunks, each chunk's (d,)
// partial (zeroed and merged once) at most an eighth of its rows' work, and
// all of them within kChunkStatsBytes.
template <typename T>
index_t csr_matvec_chunks(const CsrMatrix<T>& X) {
  const index_t by_work = csr_nnz(X) / (8 * X.d);
  const index_t by_bytes = kChunkStatsBytes / (8 * X.d);
  return std::max<index_t>(1, std::min({n_tiles_of(X.n), kMaxChunks, by_work, by_bytes}));
}

// w [in] (n,), v [in] (d,); out [out] (d,). In double: per row s_i = x_i . v
// over its stored entries (four interleaved partial sums), then
// out_l += (w_i s_i) x_il; per-chunk
// partials over rows in order, merged in chunk order (the result does not
// depend on the thread count).
template <typename T>
void csr_second_moment_matvec(const CsrMatrix<T>& Xm, const double* w, const double* v, double* out,
                              int n_threads) {
  const index_t n = Xm.n, d = Xm.d;
  const index_t n_chunks = csr_matvec_chunks(Xm);
  std::vector<double> part(n_chunks * d);
  // Two multiply-adds per stored entry (the dot product, the axpy).
  const int nt = resolve_threads(n_threads, csr_distance_work(Xm, 2));
  with_csr_rows(Xm, [&](const auto& X) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (index_t c = 0; c < n_chunks; ++c) {
      const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
      double* pc = part.data() + c * d;
      std::fill(pc, pc + d, 0.0);
      for (index_t i = i0; i < i1; ++i) {
        const index_t e0 = X.begin(i), e1 = X.end(i);
        // Four partial sums: one would be a chain of FMA latencies per row.
        double s[4] = {0.0, 0.0, 0.0, 0.0};
        index_t e = e0;
        for (; e + 4 <= e1; e += 4)
          for (int q = 0; q < 4; ++q)
            s[q] += static_cast<double>(X.val[e + q]) * v[static_cast<index_t>(X.col[e + q])];
        for (; e < e1; ++e)
          s[0] += static_cast<double>(X.val[e]) * v[static_cast<index_t>(X.col[e])];
        const double ws = w[i] * ((s[0] + s[1]) + (s[2] + s[3]));
        for (index_t e = e0; e < e1; ++e)
          pc[static_cast<index_t>(X.col[e])] += ws * static_cast<double>(X.val[e]);
      }
    }
  });
  std::copy(part.begin(), part.begin() + d, out);
  for (index_t c = 1; c < n_chunks; ++c)
    for (index_t l = 0; l < d; ++l) out[l] += part[c * d + l];
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
