// CSR rows against dense centroids: the typed view of a CsrMatrix, the
// distance block of a run of CSR rows (x.c from the stored entries only), and
// the per-thread scratch of the csr_* kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"
#include "impl/rows.hpp"
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

// The distances of CSR rows: the centroids transposed once to (d, kp), so
// that each stored entry (l, v) of a row is one axpy over the kp contiguous
// centroid lanes of x.c; then D = ||x||^2 + ||c||^2 - 2 x.c, clamped at 0, as
// the dense micro-kernel forms it. ||x||^2 is summed in double over the stored
// entries, ||c||^2 in double over d; x.c in T, in the order of the stored
// entries. kp is k rounded up to the vector width W (as csr_shape's engine
// has it), not to the dense micro-kernel's panels: a padding lane costs a load
// and an FMA per stored entry.
template <typename T>
struct CsrDistances {
  using V = typename VT<T>::v;
  static constexpr index_t W = VT<T>::W;
  index_t k, d, kp;
  std::vector<T> ct;  // (d, kp) C transposed, 0 in the padding columns
  std::vector<T> cn;  // (kp,) ||c_j||^2, +inf in the padding (never the argmin)

  CsrDistances(const T* C, index_t k_, index_t d_) : k(k_), d(d_), kp(round_up(k_, W)) {
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

  // Calls f(j, D_j..j+W) on row i's distances W centroids at a time, j = 0,
  // W, ... kp - W in order (+inf in the padding lanes).
  template <typename I, typename F>
  void row(const CsrRows<T, I>& X, index_t i, F&& f) const {
    const index_t e0 = X.begin(i), e1 = X.end(i);
    const V x = vset<T>(static_cast<T>(row_sq_norm(X, e0, e1)));
    index_t j = 0;
    for (; j + kBlock * W <= kp; j += kBlock * W) centroid_block<kBlock>(X, e0, e1, j, x, f);
    switch ((kp - j) / W) {  // the last, partial block: its vectors all in registers
      case 1:
        return centroid_block<1>(X, e0, e1, j, x, f);
      case 2:
        return centroid_block<2>(X, e0, e1, j, x, f);
      case 3:
        return centroid_block<3>(X, e0, e1, j, x, f);
      case 4:
        return centroid_block<4>(X, e0, e1, j, x, f);
      case 5:
        return centroid_block<5>(X, e0, e1, j, x, f);
      default:
        return;
    }
  }

  // The two smallest distances of row i and the first argmin, as row_min2 has
  // them from the row's distance block (the same vectors pushed in the same
  // order), without writing the block.
  template <typename I>
  RowMin<T> row_min2(const CsrRows<T, I>& X, index_t i) const {
    Min2<T> m;
    row(X, i, [&](index_t, V D) { m.push(D); });
    return m.finish();
  }

  // Whether row_min2_pair applies: a row pair's partial dot products (2 kp / W
  // vectors) fit in registers beside the broadcasts and the reductions.
  bool pairs_in_registers() const { return kp <= kPairBlock * W; }

  // row_min2 of rows i and i + 1 (pairs_in_registers()), their stored entries
  // interleaved: each row's x.c summed in its own entries' order, as row()
  // sums it (the same bits), with two independent chains of FMAs in flight
  // where one row alone leaves the FMA units waiting on its chain's latency.
  template <typename I>
  void row_min2_pair(const CsrRows<T, I>& X, index_t i, RowMin<T>& first, RowMin<T>& second) const {
    Min2<T> ma, mb;
    auto fa = [&](index_t, V D) { ma.push(D); };
    auto fb = [&](index_t, V D) { mb.push(D); };
    switch (kp / W) {
      case 1:
        centroid_block_pair<1>(X, i, fa, fb);
        break;
      case 2:
        centroid_block_pair<2>(X, i, fa, fb);
        break;
      default:
        centroid_block_pair<kPairBlock>(X, i, fa, fb);
        break;
    }
    first = ma.finish();
    second = mb.finish();
  }

  // out [out] (rows, kp) with row stride kp: D of rows i0 .. i0 + rows of X,
  // +inf in the padding columns.
  template <typename I>
  void distances(const CsrRows<T, I>& X, index_t i0, index_t rows, T* out) const {
    for (index_t r = 0; r < rows; ++r) {
      T* o = out + r * kp;
      row(X, i0 + r, [&](index_t j, V D) { vstore(o + j, D); });
    }
  }

 private:
  // Centroid vectors per register block of x.c (the last block of a row may
  // be smaller): the partial dot products stay in registers across the row's
  // stored entries, each stored entry broadcast once per block. 6 leaves room
  // in 16 AVX2 registers for the broadcast and a row reduction's state.
  static constexpr int kBlock = 6;
  // Centroid vectors per row of a row pair (row_min2_pair): 2 x 3 accumulators.
  static constexpr int kPairBlock = 3;

  // ||x||^2 in double over the stored entries e0 .. e1, in their order.
  template <typename I>
  static double row_sq_norm(const CsrRows<T, I>& X, index_t e0, index_t e1) {
    double xn = 0.0;
    for (index_t e = e0; e < e1; ++e)
      xn += static_cast<double>(X.val[e]) * static_cast<double>(X.val[e]);
    return xn;
  }

  // f(j + b W, D) for b < B: the row's (entries e0 .. e1) distances to
  // centroids j .. j + B W.
  template <int B, typename I, typename F>
  void centroid_block(const CsrRows<T, I>& X, index_t e0, index_t e1, index_t j, V x, F& f) const {
    V acc[B];
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) acc[b] = V{};
    for (index_t e = e0; e < e1; ++e) {
      const V vv = vset<T>(X.val[e]);
      const T* c = ct.data() + static_cast<index_t>(X.col[e]) * kp + j;
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[b] = vfma(vv, vload(c + b * W), acc[b]);
    }
    finish_block<B>(j, x, acc, f);
  }

  // f(j + b W, D) for b < B from the block's dot products acc.
  template <int B, typename F>
  void finish_block(index_t j, V x, const V* acc, F& f) const {
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      const V cnv = vload(cn.data() + j + b * W);
      f(j + b * W, vmax((x + cnv) - (acc[b] + acc[b]), V{}));
    }
  }

  // One row's entries e .. e1 added into acc (centroids 0 .. B W), in order.
  template <int B, typename I>
  void add_entries(const CsrRows<T, I>& X, index_t e, index_t e1, V* acc) const {
    for (; e < e1; ++e) {
      const V vv = vset<T>(X.val[e]);
      const T* c = ct.data() + static_cast<index_t>(X.col[e]) * kp;
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[b] = vfma(vv, vload(c + b * W), acc[b]);
    }
  }

  // centroid_block<B> at j = 0 (B W == kp) of rows i and i + 1 at once: their
  // first min(nnz) entries in lockstep, then the rest of the longer row.
  template <int B, typename I, typename F, typename G>
  void centroid_block_pair(const CsrRows<T, I>& X, index_t i, F& fa, G& fb) const {
    V a[B], b[B];
#pragma GCC unroll 8
    for (int q = 0; q < B; ++q) a[q] = b[q] = V{};
    index_t ea = X.begin(i), eb = X.begin(i + 1);
    const index_t ea1 = X.end(i), eb1 = X.end(i + 1);
    const index_t both = std::min(ea1 - ea, eb1 - eb);
    for (index_t t = 0; t < both; ++t, ++ea, ++eb) {
      const V va = vset<T>(X.val[ea]), vb = vset<T>(X.val[eb]);
      const T* ca = ct.data() + static_cast<index_t>(X.col[ea]) * kp;
      const T* cb = ct.data() + static_cast<index_t>(X.col[eb]) * kp;
#pragma GCC unroll 8
      for (int q = 0; q < B; ++q) {
        a[q] = vfma(va, vload(ca + q * W), a[q]);
        b[q] = vfma(vb, vload(cb + q * W), b[q]);
      }
    }
    add_entries<B>(X, ea, ea1, a);
    add_entries<B>(X, eb, eb1, b);
    finish_block<B>(0, vset<T>(static_cast<T>(row_sq_norm(X, X.begin(i), ea1))), a, fa);
    finish_block<B>(0, vset<T>(static_cast<T>(row_sq_norm(X, X.begin(i + 1), eb1))), b, fb);
  }
};

// The shape of the csr_* kernels' row blocks: the dense engine's rows per
// block, kp as CsrDistances has it, no centroid panels (Engine::ShapeOnly),
// so that they feed the dense row reductions (rows.hpp, StatsPass) blocks of
// the shape they expect.
template <typename T>
Engine<T> csr_shape(index_t k, index_t d, index_t block_bytes = 0) {
  return Engine<T>(typename Engine<T>::ShapeOnly{}, k, d, block_bytes);
}

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
