// The row pass of the block-statistics kernel (stats.hpp): the per-call
// constants, the assignment of one row of the kind, its data gradient, and the
// loop over a row block shared by the row-at-a-time accumulators.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"
#include "impl/rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The double statistics of one chunk: W, N (k,), S (k, d) (N and S empty
// without sums), objective, J, min margin. Cache-line aligned: neighbouring
// chunks are written by different threads (their sums at every row block end).
struct alignas(64) ChunkStats {
  std::vector<double> N, S;
  double W = 0.0, obj = 0.0, J = 0.0, mm = std::numeric_limits<double>::infinity();
  // The scalar sums back from a row loop, which keeps them in locals (in the
  // chunk they would be memory round trips the loop waits on).
  void set_sums(double W_, double obj_, double J_, double mm_) {
    W = W_;
    obj = obj_;
    J = J_;
    mm = mm_;
  }
};

// The assignment of one row. Its support (hard, entmax15) is in the
// workspace: cidx[0 .. supp) the centroids, cval their responsibilities;
// softmax responsibilities are in the row's distance buffer.
struct RowAssignment {
  double objective;  // o_i: m1, m1 - 2 sigma^2 lse shifted, or the Tsallis term
  double weight;     // the weight of the row in a dense accumulation (softmax)
  index_t supp;      // support size (0 for softmax)
};

template <typename T>
struct StatsPass {
  const Engine<T>& E;
  const T* X;       // (n, d)
  const double* w;  // (n,)
  Kind kind;
  double sigma2, two_s2;
  T inv_t;                  // 1 / (2 sigma^2), capped at the largest T
  bool in_registers;        // hard/entmax15: rows reduced in registers (min2_rows), no block
  std::int64_t* labels;     // (n,) nullable
  T* grad_X;                // (n, d) nullable
  std::vector<double> C64;  // (k, d) the centroids in double (with grad_X)

  StatsPass(const Engine<T>& E_, const T* X_, const T* C, const double* w_, Kind kind_,
            double sigma, std::int64_t* labels_, T* grad_X_)
      : E(E_), X(X_), w(w_), kind(kind_), labels(labels_), grad_X(grad_X_) {
    sigma2 = sigma * sigma;
    two_s2 = 2.0 * sigma2;
    inv_t = static_cast<T>(std::min<double>(1.0 / (2.0 * sigma2), std::numeric_limits<T>::max()));
    in_registers = kind != Kind::softmax;
    if (grad_X) C64.assign(C, C + E.k * E.d);
  }

  // The kind's responsibilities of row x (distance row `row`, RowMin m, weight
  // wi). Softmax: row <- e_j, normalized with grad_X (else 1 / sum is folded
  // into the weight); nz [out, nullable] its nonzero W-blocks.
  RowAssignment assign_row(const T* x, T* row, const RowMin<T>& m, double wi, Workspace<T>& ws,
                           std::uint8_t* nz) const {
    const double m1 = static_cast<double>(m.m1);
    if (kind == Kind::softmax) {
      const double sum = softmax_row(row, E.kp, m.m1, inv_t, grad_X != nullptr, nz);
      // NOTE: vlog, not std::log: libm's log differs in the last bit between
      // glibc versions and between its FMA and SSE2 variants (one machine's
      // dispatch), and the dense softmax rows take vlog's bits.
      return softmax_assignment(m1, sum, vlog(vset<double>(sum))[0], wi);
    }
    const double margin = static_cast<double>(m.m2) - m1;
    // Margin >= 4 sigma^2 (> 0: a tie is never one-hot): the argmin is the only
    // entmax15 candidate (z_j <= max z - 2 for all others), r is one-hot and
    // G_i = m1 exactly (SPEC.md), the bits of the hard step.
    if (kind == Kind::hard || (margin > 0.0 && margin >= 4.0 * sigma2)) {
      ws.cval[0] = 1.0;
      ws.cidx[0] = m.a;
      return {m1, wi, 1};
    }
    if (in_registers) E.distances(x, 1, ws);
    double extra;
    const index_t supp =
        entmax_row(row, E.kp, m.m1, sigma2, ws.cval.data(), ws.cidx.data(), &extra);
    return {m1 + extra, wi, supp};
  }

  // A softmax row's assignment from its min distance m1, sum of e_j (softmax_row)
  // and log of that sum: o_i = m1 - 2 sigma^2 log sum = -2 sigma^2 lse_i.
  RowAssignment softmax_assignment(double m1, double sum, double log_sum, double wi) const {
    return {m1 - two_s2 * log_sum, grad_X ? wi : wi / sum, 0};
  }

  // grad_X row i: 2 w_i (x_i - sum_j r_ij c_j), in double.
  // The mixture sum_j r_ij c_j is accumulated centroid by centroid into a
  // per-thread row of d doubles: rows of C64 are read contiguously (a
  // vectorizable axpy per centroid), not one column of C64 per coordinate.
  void data_gradient(index_t i, const T* x, double wi, const RowMin<T>& m, const T* row,
                     const RowAssignment& a, const Workspace<T>& ws) const {
    const index_t d = E.d, k = E.k;
    T* g = grad_X + i * d;
    thread_local std::vector<double> mix;
    mix.assign(d, 0.0);
    double* mx = mix.data();
    const auto add = [&](index_t j, double r) {
      const double* c = C64.data() + j * d;
      for (index_t l = 0; l < d; ++l) mx[l] += r * c[l];
    };
    if (kind == Kind::hard) {
      add(m.a, 1.0);
    } else if (kind == Kind::softmax) {
      for (index_t j = 0; j < k; ++j)
        if (row[j] != T(0)) add(j, static_cast<double>(row[j]));
    } else {
      for (index_t s = 0; s < a.supp; ++s) add(ws.cidx[s], ws.cval[s]);
    }
    for (index_t l = 0; l < d; ++l)
      g[l] = static_cast<T>(2.0 * wi * (static_cast<double>(x[l]) - mx[l]));
  }
};

// a * b rounded to double and never fused into the add that consumes it.
// NOTE: the chunk sums of the objective and of J are sum += w_i o_i with the
// product rounded first, as the core has always computed them. The units are
// compiled with -ffp-contract=off now (vec.hpp, vfma), so nothing is fused
// unasked; the barrier stays for a build that passes -ffp-contract=fast.
inline double rounded_product(double a, double b) {
  double p = a * b;
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(p));
#else
  asm("" : "+m"(p));
#endif
  return p;
}

// The row pass over a row block of the hard and entmax15 kinds (rows reduced
// in registers; softmax: stats_rows_softmax), for the accumulators that take
// one row at a time: per row its RowMin, the kind's assignment, the scalar
// statistics (in row order), acc.row and grad_X; then acc.block_end.
template <typename T, typename Acc>
void stats_rows(const StatsPass<T>& p, const Acc& acc, ChunkStats& chunk, Workspace<T>& ws,
                typename Acc::Tile& tile, index_t i0, index_t rows) {
  const index_t d = p.E.d;
  p.E.min2_rows(p.X + i0 * d, rows, ws.mins.data(), ws);
  // The chunk's scalar sums in locals (the same additions in the same order):
  // in the chunk they would be memory round trips the row loop waits on.
  double W = chunk.W, obj = chunk.obj, J = chunk.J, mm = chunk.mm;
  for (index_t r = 0; r < rows; ++r) {
    const index_t i = i0 + r;
    const double wi = p.w[i];
    const T* x = p.X + i * d;
    T* row = ws.dbuf.data();  // entmax15 rows not one-hot: assign_row's distances
    const RowMin<T> m = ws.mins[r];
    W += wi;
    if (p.labels) p.labels[i] = m.a;
    if (wi > 0.0) mm = std::min(mm, static_cast<double>(m.m2 - m.m1));
    const RowAssignment a = p.assign_row(x, row, m, wi, ws, acc.nonzero_blocks(tile, r));
    obj += rounded_product(wi, a.objective);
    J += rounded_product(wi, static_cast<double>(m.m1));
    acc.row(tile, r, x, wi, a, ws);
    if (p.grad_X) p.data_gradient(i, x, wi, m, row, a, ws);
  }
  chunk.set_sums(W, obj, J, mm);
  acc.block_end(tile, ws, rows);
}

// stats_rows for the softmax kind on a dense block (ws.dbuf (rows, kp), row
// stride ld, the block's distances): the same statistics in the same row order, in stages
// over the block: per row its two smallest (and argmin with labels) and its
// exp, in place (the row still in L1), its sum kept; then the logs of the sums
// W_double rows at a time (vlog: a libm log per row was 8% of the step);
// then per row the scalar sums, acc.row and grad_X. A row's chain of
// latencies (lane sum, log, objective) no longer ends each row of the loop.
template <typename T, typename Acc>
void stats_rows_softmax(const StatsPass<T>& p, const Acc& acc, ChunkStats& chunk, Workspace<T>& ws,
                        typename Acc::Tile& tile, index_t i0, index_t rows) {
  constexpr index_t WD = VT<double>::W;
  const index_t d = p.E.d, kp = p.E.kp, ld = p.E.ld;
  T* block = ws.dbuf.data();
  RowMin<T>* mins = ws.mins.data();
  double* sums = ws.row_sums.data();
  double* logs = sums + ws.row_sums.size() / 2;
  // Rows in groups of about softmax_group_bytes (a kernel choice): the minima of a group, then
  // its exps (the rows still in L1). Row by row, a row's minimum (a chain of
  // min/max and shuffles) and its exps (which wait for it) are more work than
  // the reorder window holds, and the next row could not start early.
  const index_t group =
      std::max<index_t>(1, p.E.ch.softmax_group_bytes / (ld * static_cast<index_t>(sizeof(T))));
  for (index_t g0 = 0; g0 < rows; g0 += group) {
    const index_t g1 = std::min(rows, g0 + group);
    // Softmax needs the argmin only for labels.
    for (index_t r = g0; r < g1; ++r)
      mins[r] = p.labels ? row_min2(block + r * ld, kp) : row_min2_values(block + r * ld, kp);
    for (index_t r = g0; r < g1; ++r)
      sums[r] = softmax_row(block + r * ld, kp, mins[r].m1, p.inv_t, p.grad_X != nullptr,
                            acc.nonzero_blocks(tile, r));
  }
  // Past `rows`, sums of earlier blocks (or 1.0): finite and >= 1, logs unused.
  for (index_t r = 0; r < rows; r += WD) vstore(logs + r, vlog(vload(sums + r)));
  double W = chunk.W, obj = chunk.obj, J = chunk.J, mm = chunk.mm;
  for (index_t r = 0; r < rows; ++r) {
    const index_t i = i0 + r;
    const double wi = p.w[i];
    const T* x = p.X + i * d;
    const RowMin<T> m = mins[r];
    const double m1 = static_cast<double>(m.m1);
    W += wi;
    if (p.labels) p.labels[i] = m.a;
    if (wi > 0.0) mm = std::min(mm, static_cast<double>(m.m2 - m.m1));
    const RowAssignment a = p.softmax_assignment(m1, sums[r], logs[r], wi);
    obj += rounded_product(wi, a.objective);
    J += rounded_product(wi, m1);
    acc.row(tile, r, x, wi, a, ws);
    if (p.grad_X) p.data_gradient(i, x, wi, m, block + r * ld, a, ws);
  }
  chunk.set_sums(W, obj, J, mm);
  acc.block_end(tile, ws, rows);
}

// stats_rows for the hard kind without grad_X: the same statistics by the
// same additions in the same order, the row's one-hot w x and w added by
// acc.one_hot. No call in the row loop (stats_rows' assign_row may call the
// entmax15 path): around a call every vector register is caller-saved, and
// the chunk sums would stay in memory, one store-to-load round trip per row.
// The one-hot adds take a second loop over the block (about 1 ns a row less
// at d = 16, k = 64 than in the first, measured; each sum still sees its
// rows in order, so the bits are the same).
template <typename T, typename Acc>
void stats_rows_hard(const StatsPass<T>& p, const Acc& acc, ChunkStats& chunk, Workspace<T>& ws,
                     typename Acc::Tile& tile, index_t i0, index_t rows) {
  const index_t d = p.E.d;
  const T* X = p.X + i0 * d;
  const double* w = p.w + i0;
  const RowMin<T>* mins = ws.mins.data();
  // The block's weights requested now, read after the reduction: a stream of
  // their own (8 MB at n = 1e6) that the reduction's traffic hid from the
  // prefetchers, and the first load of each row waited on memory (about a
  // tenth of the step at d = 16, k = 64).
  for (index_t r = 0; r < rows; r += 64 / static_cast<index_t>(sizeof(double)))
    __builtin_prefetch(w + r);
  p.E.min2_rows(X, rows, ws.mins.data(), ws);
  double W = chunk.W, obj = chunk.obj, J = chunk.J, mm = chunk.mm;
  for (index_t r = 0; r < rows; ++r) {
    const RowMin<T> m = mins[r];
    const double wi = w[r];
    W += wi;
    if (p.labels) p.labels[i0 + r] = m.a;
    if (wi > 0.0) mm = std::min(mm, static_cast<double>(m.m2 - m.m1));
    const double m1 = static_cast<double>(m.m1);
    obj += rounded_product(wi, m1);
    J += rounded_product(wi, m1);
  }
  acc.one_hot_rows(tile, X, w, mins, rows);
  chunk.set_sums(W, obj, J, mm);
  acc.block_end(tile, ws, rows);
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
