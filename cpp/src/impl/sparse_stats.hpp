// The block-statistics kernel on CSR rows (csr_block_stats): the sparse
// distance block, the dense path's row pass (StatsPass::assign_row: argmin,
// log-sum-exp, entmax15 threshold) and its chunking and fixed-order chunk
// merge, so the result does not depend on the thread count. The hard kind
// (without grad_X: every step of a hard fit) reduces each row in registers as
// its distances are formed (csr_hard_rows), the same bits without the block.
//
// Accumulation: N and S are summed in double straight into the chunk's
// statistics, one scatter per stored entry and support centroid, in row order.
// (The dense path sums float tile partials and folds them into the chunk at
// each tile end; on sparse rows that fold, k x d per tile, would cost more
// than the row pass itself.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/rows.hpp"
#include "impl/sparse_rows.hpp"
#include "impl/stats.hpp"
#include "impl/stats_pass.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Per-thread scratch: the workspace, and with grad_X one row of X densified
// (d,) for StatsPass::data_gradient (grad_X is a dense (n, d) output anyway).
template <typename T>
struct CsrStatsScratch : Workspace<T> {
  std::vector<T> xrow;
};

// Hard and entmax15 (a support of one or a few centroids): N_j += w r,
// S_j[l] += w r x_l over the stored entries (l, x_l), S (k, d).
struct CsrSupportAccumulator {
  index_t d;
  static constexpr bool sums = true;
  template <typename T, typename I>
  void row(ChunkStats& c, const CsrRows<T, I>& X, index_t i, double wi, const RowAssignment& a,
           const T*, Workspace<T>& ws) const {
    if (wi == 0.0) return;
    for (index_t s = 0; s < a.supp; ++s) {
      const double wr = wi * ws.cval[s];  // hard: wi * 1.0, exactly wi
      const index_t j = ws.cidx[s];
      c.N[j] += wr;
      double* sj = c.S.data() + j * d;
      for (index_t e = X.begin(i); e < X.end(i); ++e)
        sj[X.col[e]] += wr * static_cast<double>(X.val[e]);
    }
  }
  void finish(std::vector<ChunkStats>&) const {}
};

// Softmax (every centroid): S is summed transposed, (d, k), so that each
// stored entry (l, x_l) is one axpy St[l] += x_l g over the k contiguous
// g_j = w r_j; finish() transposes each chunk's S back to (k, d).
struct CsrSoftmaxAccumulator {
  index_t k, d;
  static constexpr bool sums = true;
  template <typename T, typename I>
  void row(ChunkStats& c, const CsrRows<T, I>& X, index_t i, double wi, const RowAssignment& a,
           const T* r, Workspace<T>& ws) const {
    if (wi == 0.0) return;
    double* g = ws.cval.data();  // (kp,) free on the softmax path
    // a.weight: wi for a normalized row, wi / sum(e) otherwise (StatsPass).
    for (index_t j = 0; j < k; ++j) {
      g[j] = a.weight * static_cast<double>(r[j]);
      c.N[j] += g[j];
    }
    for (index_t e = X.begin(i); e < X.end(i); ++e) {
      const double v = static_cast<double>(X.val[e]);
      double* st = c.S.data() + static_cast<index_t>(X.col[e]) * k;
#pragma omp simd
      for (index_t j = 0; j < k; ++j) st[j] = lane_mul_add(v, g[j], st[j]);
    }
  }
  void finish(std::vector<ChunkStats>& chunks) const {
    std::vector<double> st;
    for (ChunkStats& c : chunks) {
      st.swap(c.S);
      c.S.assign(k * d, 0.0);
      for (index_t l = 0; l < d; ++l)
        for (index_t j = 0; j < k; ++j) c.S[j * d + l] = st[l * k + j];
    }
  }
};

// No N and S (the objective, J, margins, labels and grad_X only).
struct CsrNoSums {
  static constexpr bool sums = false;
  template <typename T, typename I>
  void row(ChunkStats&, const CsrRows<T, I>&, index_t, double, const RowAssignment&, const T*,
           Workspace<T>&) const {}
  void finish(std::vector<ChunkStats>&) const {}
};

// The row pass over a row block whose distances are in ws.dbuf: per row its
// RowMin, the kind's assignment, the scalar statistics (in row order, as
// stats_rows sums them), acc.row and grad_X.
template <typename T, typename I, typename Acc>
void csr_stats_rows(const StatsPass<T>& p, const CsrRows<T, I>& X, const Acc& acc,
                    ChunkStats& chunk, CsrStatsScratch<T>& ws, index_t i0, index_t rows) {
  const index_t kp = p.E.kp;
  for (index_t r = 0; r < rows; ++r) {
    const index_t i = i0 + r;
    const double wi = p.w[i];
    T* row = ws.dbuf.data() + r * kp;
    const RowMin<T> m = row_min2(row, kp);
    chunk.W += wi;
    if (p.labels) p.labels[i] = m.a;
    if (wi > 0.0) chunk.mm = std::min(chunk.mm, static_cast<double>(m.m2 - m.m1));
    const RowAssignment a = p.assign_row(nullptr, row, m, wi, ws, nullptr);
    chunk.obj += rounded_product(wi, a.objective);
    chunk.J += rounded_product(wi, static_cast<double>(m.m1));
    acc.row(chunk, X, i, wi, a, row, ws);
    if (p.grad_X) {
      for (index_t e = X.begin(i); e < X.end(i); ++e) ws.xrow[X.col[e]] = X.val[e];
      p.data_gradient(i, ws.xrow.data(), wi, m, row, a, ws);
      for (index_t e = X.begin(i); e < X.end(i); ++e) ws.xrow[X.col[e]] = T(0);
    }
  }
}

// The hard pass without grad_X over rows i0 .. i0 + rows: each row's
// distances reduced in registers as they are formed (CsrDistances::row_min2,
// two rows at a time by row_min2_pair where their accumulators fit, no
// distance block), then the statistics csr_stats_rows sums, by the same
// additions in the same order (RowAssignment {m1, wi, 1}, N_a += w,
// S_a[l] += w x_l as CsrSupportAccumulator adds them). The chunk's scalar
// sums are kept in locals across the rows.
template <typename T, typename I>
void csr_hard_rows(const CsrDistances<T>& dist, const CsrRows<T, I>& X, const double* w,
                   std::int64_t* labels, bool sums, ChunkStats& chunk, index_t i0, index_t rows) {
  const index_t d = X.d;
  double W = chunk.W, obj = chunk.obj, J = chunk.J, mm = chunk.mm;
  const auto add_row = [&](index_t i, const RowMin<T>& m) {
    const double wi = w[i];
    W += wi;
    if (labels) labels[i] = m.a;
    if (wi > 0.0) mm = std::min(mm, static_cast<double>(m.m2 - m.m1));
    const double m1 = static_cast<double>(m.m1);
    obj += rounded_product(wi, m1);
    J += rounded_product(wi, m1);
    if (!sums || wi == 0.0) return;
    chunk.N[m.a] += wi;
    double* sa = chunk.S.data() + m.a * d;
    for (index_t e = X.begin(i); e < X.end(i); ++e)
      sa[X.col[e]] += wi * static_cast<double>(X.val[e]);
  };
  index_t i = i0;
  if (dist.pairs_in_registers())
    for (RowMin<T> first, second; i + 1 < i0 + rows; i += 2) {
      dist.row_min2_pair(X, i, first, second);
      add_row(i, first);
      add_row(i + 1, second);
    }
  for (; i < i0 + rows; ++i) add_row(i, dist.row_min2(X, i));
  chunk.set_sums(W, obj, J, mm);
}

// The chunk count of csr_block_stats: as the dense kernel's (stats_chunks), but
// with the chunks' k x d sums (allocated, zeroed and merged once per chunk per
// call) kept within a quarter of the row pass's scatter work, since a sparse
// row adds few of them (measured: on 4e4 x 3e3 rows with 12 stored entries and
// k = 20, 8 chunks cost 30% more per pass than 4). A function of the data's
// shape and nnz only, never of the thread count.
template <typename T>
index_t csr_stats_chunks(const CsrMatrix<T>& X, index_t k, Kind kind) {
  const index_t work = csr_distance_work(X, kind == Kind::softmax ? k : 1);
  const index_t by_work = std::max<index_t>(4, work / std::max<index_t>(1, 4 * k * X.d));
  return std::min(stats_chunks(X.n, k, X.d), by_work);
}

template <typename T>
void csr_block_stats(const CsrMatrix<T>& X, const T* C, index_t k, Kind kind, double sigma,
                     const double* w, double* W, double* N, double* S, double* objective,
                     double* distortion, double* min_margin, std::int64_t* labels, T* grad_X,
                     int n_threads) {
  const index_t n = X.n, d = X.d;
  const Engine<T> E =
      csr_shape<T>(k, d, kind == Kind::softmax ? kernel_choices().softmax_block_bytes : 0);
  const CsrDistances<T> dist(C, k, d);
  const bool sums = N != nullptr || S != nullptr;
  // The chunks' sums are allocated here (nothing may throw in the parallel
  // region) and zeroed by the thread that fills them, before its first row,
  // so that they are in that core's cache beside the transposed centroids
  // (zeroed all at once up front, 4 chunks of 480 KB on 4e4 x 3e3 rows and
  // k = 20, the later chunks pass through the cache over the earlier ones).
  std::vector<ChunkStats> chunks(csr_stats_chunks(X, k, kind));
  if (sums)
    for (ChunkStats& c : chunks) {
      c.N.reserve(k);
      c.S.reserve(k * d);
    }
  const auto zero_sums = [&](ChunkStats& c) {
    if (sums && c.S.empty()) {  // within capacity: no allocation
      c.N.assign(k, 0.0);
      c.S.assign(k * d, 0.0);
    }
  };
  const auto merge = [&] {
    for (ChunkStats& c : chunks) zero_sums(c);
    merge_in_chunk_order(chunks, k, d, BlockStatsOut{W, N, S, objective, distortion, min_margin});
  };
  if (kind == Kind::hard && grad_X == nullptr) {
    // No per-thread scratch: the rows are reduced in registers.
    std::vector<Workspace<T>> team(resolve_threads(n_threads, csr_distance_work(X, k)));
    with_csr_rows(X, [&](const auto& rows) {
      drive(
          E, static_cast<const T*>(nullptr), n, static_cast<index_t>(chunks.size()), team,
          [&](index_t c, Workspace<T>&, index_t i0, index_t nr) {
            zero_sums(chunks[c]);
            csr_hard_rows(dist, rows, w, labels, sums, chunks[c], i0, nr);
          },
          [](index_t, Workspace<T>&) {}, false);
    });
    merge();
    return;
  }
  StatsPass<T> p(E, nullptr, C, w, kind, sigma, labels, grad_X);
  p.in_registers = false;  // CSR rows are reduced from their distance block
  using Scratch = CsrStatsScratch<T>;
  auto scratch = csr_per_thread<Scratch>(E, X, n_threads, [&](Scratch& s) {
    if (grad_X) s.xrow.assign(d, T(0));
  });
  auto run = [&](const auto& acc) {
    with_csr_rows(X, [&](const auto& rows) {
      drive(
          E, static_cast<const T*>(nullptr), n, static_cast<index_t>(chunks.size()), scratch,
          [&](index_t c, Scratch& s, index_t i0, index_t nr) {
            zero_sums(chunks[c]);
            dist.distances(rows, i0, nr, s.dbuf.data());
            csr_stats_rows(p, rows, acc, chunks[c], s, i0, nr);
          },
          [](index_t, Scratch&) {}, false);
    });
    for (ChunkStats& c : chunks) zero_sums(c);  // a chunk without rows (a cancelled call)
    acc.finish(chunks);
  };
  if (!sums)
    run(CsrNoSums{});
  else if (kind == Kind::softmax)
    run(CsrSoftmaxAccumulator{k, d});
  else
    run(CsrSupportAccumulator{d});
  merge();
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
