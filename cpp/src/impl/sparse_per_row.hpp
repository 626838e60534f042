// The per-row API kernels on CSR rows (csr_sq_distances, csr_assign,
// csr_margins, csr_responsibilities): the sparse distance block, then the
// dense path's row reductions.
#pragma once

#include <cstdint>
#include <cstring>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/per_row.hpp"
#include "impl/rows.hpp"
#include "impl/sparse_rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Calls f(ws, i0, rows, kp) on every row block of X with its distances in
// ws.dbuf (row stride kp), one chunk per tile.
template <typename T, typename F>
void csr_drive_rows(const CsrMatrix<T>& X, const T* C, index_t k, int n_threads, F f) {
  const Engine<T> E = csr_shape<T>(k, X.d);
  const CsrDistances<T> dist(C, k, X.d);
  auto wss = csr_per_thread<Workspace<T>>(E, X, n_threads, [](Workspace<T>&) {});
  with_csr_rows(X, [&](const auto& rows) {
    drive_rows(
        E, static_cast<const T*>(nullptr), X.n, wss,
        [&](index_t, Workspace<T>& ws, index_t i0, index_t nr) {
          dist.distances(rows, i0, nr, ws.dbuf.data());
          f(ws, i0, nr, E.kp);
        },
        false);
  });
}

template <typename T>
void csr_sq_distances(const CsrMatrix<T>& X, const T* C, index_t k, T* D, int n_threads) {
  csr_drive_rows(X, C, k, n_threads, [&](Workspace<T>& ws, index_t i0, index_t rows, index_t kp) {
    for (index_t r = 0; r < rows; ++r)
      std::memcpy(D + (i0 + r) * k, ws.dbuf.data() + r * kp, k * sizeof(T));
  });
}

template <typename T>
void csr_assign(const CsrMatrix<T>& X, const T* C, index_t k, std::int64_t* labels, T* min_sq_dist,
                int n_threads) {
  csr_drive_rows(X, C, k, n_threads, [&](Workspace<T>& ws, index_t i0, index_t rows, index_t kp) {
    for (index_t r = 0; r < rows; ++r) {
      const RowMin<T> m = row_min2(ws.dbuf.data() + r * kp, kp);
      labels[i0 + r] = m.a;
      min_sq_dist[i0 + r] = m.m1;
    }
  });
}

template <typename T>
void csr_margins(const CsrMatrix<T>& X, const T* C, index_t k, T* out, int n_threads) {
  csr_drive_rows(X, C, k, n_threads, [&](Workspace<T>& ws, index_t i0, index_t rows, index_t kp) {
    for (index_t r = 0; r < rows; ++r) {
      const RowMin<T> m = row_min2(ws.dbuf.data() + r * kp, kp);
      out[i0 + r] = m.m2 - m.m1;
    }
  });
}

template <typename T>
void csr_responsibilities(const CsrMatrix<T>& X, const T* C, index_t k, Kind kind, double sigma,
                          T* R, int n_threads) {
  csr_drive_rows(X, C, k, n_threads, [&](Workspace<T>& ws, index_t i0, index_t rows, index_t kp) {
    const ResponsibilityRow<T> resp(k, kp, kind, sigma);
    for (index_t r = 0; r < rows; ++r) resp(ws.dbuf.data() + r * kp, R + (i0 + r) * k, ws);
  });
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
