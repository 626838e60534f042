// CSR rows against dense centroids: the typed view of a CsrMatrix, the
// distance block of a run of CSR rows (x.c from the stored entries only), and
// the per-thread scratch of the csr_* kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"
#include "impl/vec.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// A CsrMatrix with its index type I (int32 or int64) resolved.
template <typename T, typename I>
struct CsrRows {
  const T* val;
  const I* col;
  const I* ptr;
  index_t n, d;
  index_t begin(index_t i) const { return static_cast<index_t>(ptr[i]); }
  index_t end(index_t i) const { return static_cast<index_t>(ptr[i + 1]); }
};

// Calls f(CsrRows<T, I>) with I the index type of X.
template <typename T, typename F>
inline decltype(auto) with_csr_rows(const CsrMatrix<T>& X, F&& f) {
  if (X.index64)
    return f(CsrRows<T, std::int64_t>{X.data, static_cast<const std::int64_t*>(X.indices),
                                      static_cast<const std::int64_t*>(X.indptr), X.n, X.d});
  return f(CsrRows<T, std::int32_t>{X.data, static_cast<const std::int32_t*>(X.indices),
                                    static_cast<const std::int32_t*>(X.indptr), X.n, X.d});
}

// The distance blocks of CSR rows: the centroids transposed once to (d, kp),
// so that each stored entry (l, v) of a row is one axpy over the kp
// contiguous centroid lanes of x.c; then D = ||x||^2 + ||c||^2 - 2 x.c,
// clamped at 0, as the dense micro-kernel forms it. ||x||^2 is summed in
// double over the stored entries, ||c||^2 in double over d; x.c in T, in the
// order of the stored entries.
template <typename T>
struct CsrDistances {
  using V = typename VT<T>::v;
  static constexpr index_t W = VT<T>::W;
  index_t k, d, kp;
  std::vector<T> ct;  // (d, kp) C transposed, 0 in the padding columns
  std::vector<T> cn;  // (kp,) ||c_j||^2, +inf in the padding (never the argmin)

  // kp: the padded row stride of the distance block (a multiple of W).
  CsrDistances(const T* C, index_t k_, index_t d_, index_t kp_) : k(k_), d(d_), kp(kp_) {
    ct.assign(d * kp, T(0));
    cn.assign(kp, std::numeric_limits<T>::infinity());
    for (index_t j = 0; j < k; ++j) {
      double nrm = 0.0;
      for (index_t l = 0; l < d; ++l) {
        const T c = C[j * d + l];
        ct[l * kp + j] = c;
        nrm += static_cast<double>(c) * static_cast<double>(c);
      }
      cn[j] = static_cast<T>(nrm);
    }
  }

  // out [out] (rows, kp) with row stride kp: D of rows i0 .. i0 + rows of X,
  // +inf in the padding columns.
  template <typename I>
  void distances(const CsrRows<T, I>& X, index_t i0, index_t rows, T* out) const {
    for (index_t r = 0; r < rows; ++r) {
      const index_t i = i0 + r, e0 = X.begin(i), e1 = X.end(i);
      double xn = 0.0;
      for (index_t e = e0; e < e1; ++e)
        xn += static_cast<double>(X.val[e]) * static_cast<double>(X.val[e]);
      const V x = vset<T>(static_cast<T>(xn));
      T* o = out + r * kp;
      index_t j = 0;
      for (; j + kBlock * W <= kp; j += kBlock * W) centroid_block<kBlock>(X, e0, e1, j, x, o);
      for (; j < kp; j += W) centroid_block<1>(X, e0, e1, j, x, o);
    }
  }

 private:
  // Centroids per register block of x.c: the partial dot products stay in
  // registers across the row's stored entries.
  static constexpr int kBlock = 4;

  // o[j .. j + B W) <- D of the row (entries e0 .. e1) to those centroids.
  template <int B, typename I>
  void centroid_block(const CsrRows<T, I>& X, index_t e0, index_t e1, index_t j, V x, T* o) const {
    V acc[B];
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) acc[b] = V{};
    for (index_t e = e0; e < e1; ++e) {
      const V vv = vset<T>(X.val[e]);
      const T* c = ct.data() + static_cast<index_t>(X.col[e]) * kp + j;
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) acc[b] += vv * vload(c + b * W);
    }
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) {
      const V cnv = vload(cn.data() + j + b * W);
      vstore(o + j + b * W, vmax((x + cnv) - (acc[b] + acc[b]), V{}));
    }
  }
};

// The dense engine of the same centroids supplies the padded width kp and the
// rows per block mb, so that the csr_* kernels feed the dense row reductions
// (rows.hpp, StatsPass::assign_row) blocks of the very shape they expect.
// Per-thread scratch: the distance block and the entmax15 candidates only
// (none of the dense path's shifted copies of X).
template <typename T>
void init_csr_workspace(const Engine<T>& E, Workspace<T>& ws) {
  ws.dbuf.assign(E.mb_pad() * E.kp, T(0));
  ws.cval.assign(E.kp, 0.0);
  ws.cidx.assign(E.kp, 0);
}

// Stored entries of X.
template <typename T>
index_t csr_nnz(const CsrMatrix<T>& X) {
  return with_csr_rows(X, [](const auto& rows) { return rows.end(rows.n - 1); });
}

// The work of a pass of X against k centroids (resolve_threads): an axpy of
// k lanes per stored entry, a reduction of k per row.
template <typename T>
index_t csr_distance_work(const CsrMatrix<T>& X, index_t k) {
  return (csr_nnz(X) + X.n) * k;
}

// One scratch per thread of the team a pass of X runs on (one thread below
// kSerialWork), each set up by init.
template <typename Scratch, typename T, typename Init>
std::vector<Scratch> csr_per_thread(const Engine<T>& E, const CsrMatrix<T>& X, int n_threads,
                                    Init init) {
  std::vector<Scratch> scratch(resolve_threads(n_threads, csr_distance_work(X, E.k)));
  for (Scratch& s : scratch) {
    init_csr_workspace(E, s);
    init(s);
  }
  return scratch;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
