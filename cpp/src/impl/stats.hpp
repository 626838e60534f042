// The fused block-statistics kernel (SPEC.md, "Block statistics"): one pass
// over the rows of X gives W, N, S, the objective, J and the min margin (and
// optionally labels and grad_X), with no (n, k) array.
//
// Structure: the row pass (StatsPass) reduces each row to its assignment of
// the kind (one-hot, softmax, entmax15) and adds the scalar statistics to its
// chunk; one accumulator type per assignment path, chosen once per call, adds
// the row's w r x and w r into a per-thread float tile partial and folds it
// into the chunk's double totals at each tile end (the units of deterministic
// reduction, config.hpp); chunks merge in chunk order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "impl/rows.hpp"
#include "impl/stats_accumulators.hpp"
#include "impl/stats_narrow.hpp"
#include "impl/stats_pass.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

inline index_t stats_chunks(index_t n, index_t k, index_t d) {
  const index_t per = (k * d + k) * 8 + 64;
  const index_t cap = std::max<index_t>(4, std::min<index_t>(kMaxChunks, kChunkStatsBytes / per));
  return std::min(n_tiles_of(n), cap);
}

// The outputs of block_stats (kernels.hpp); N and S nullable.
struct BlockStatsOut {
  double *W, *N, *S, *objective, *distortion, *min_margin;
};

// The statistics of disjoint chunks merged in chunk order: sums added, margins
// minimized. The result does not depend on which thread computed which chunk.
// S's spans on up to n_threads threads (each entry's sum is its own, in chunk
// order: the same bits; at k d = 262144 and 15 chunks, 31 MB read, serial
// after every pass).
inline void merge_in_chunk_order(const std::vector<ChunkStats>& chunks, index_t k, index_t d,
                                 const BlockStatsOut& out, int n_threads = 1) {
  double obj = 0.0, J = 0.0, W = 0.0, mm = std::numeric_limits<double>::infinity();
  if (out.N) std::fill(out.N, out.N + k, 0.0);
  for (const ChunkStats& c : chunks) {
    W += c.W;
    obj += c.obj;
    J += c.J;
    mm = std::min(mm, c.mm);
    if (out.N)
      for (index_t j = 0; j < k; ++j) out.N[j] += c.N[j];
  }
  // S a span at a time, every chunk added into the span while it is in L1:
  // the same additions in the same order as chunk by chunk over all of S, but
  // S (k d, 480 KB at k = 20, d = 3000) is not read and written once per chunk.
  constexpr index_t kSpan = 1024;
  const index_t n_spans = (k * d + kSpan - 1) / kSpan;
  const int nt = static_cast<int>(std::min<index_t>(
      resolve_threads(n_threads, k * d * static_cast<index_t>(chunks.size())), n_spans));
  if (out.S) {
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (index_t span = 0; span < n_spans; ++span) {
      const index_t q0 = span * kSpan, q1 = std::min(k * d, q0 + kSpan);
      std::fill(out.S + q0, out.S + q1, 0.0);
      for (const ChunkStats& c : chunks)
        for (index_t q = q0; q < q1; ++q) out.S[q] += c.S[q];
    }
  }
  *out.W = W;
  *out.objective = obj;
  *out.distortion = J;
  *out.min_margin = (k >= 2) ? mm : std::numeric_limits<double>::infinity();
}

// Per-thread scratch of the pass: the engine's workspace and the
// accumulator's tile partial.
template <typename T, typename Tile>
struct StatsScratch : Workspace<T> {
  Tile tile;
};

// Runs the pass with accumulator acc and merges the chunks into out.
template <typename T, typename Acc>
void run_block_stats(const StatsPass<T>& p, const Acc& acc, index_t n, int n_threads,
                     const BlockStatsOut& out) {
  const index_t k = p.E.k, d = p.E.d;
  std::vector<ChunkStats> chunks(stats_chunks(n, k, d));
  if (acc.sums)
    for (ChunkStats& c : chunks) {
      c.N.assign(k, 0.0);
      c.S.assign(k * d, 0.0);
    }
  using Scratch = StatsScratch<T, typename Acc::Tile>;
  auto scratch = per_thread<Scratch>(p.E, n, n_threads, [&](Scratch& s) { acc.init(s.tile); });
  drive(
      p.E, p.X, n, static_cast<index_t>(chunks.size()), scratch,
      [&](index_t c, Scratch& s, index_t i0, index_t rows) {
        acc.block(p, chunks[c], s, s.tile, i0, rows);
      },
      [&](index_t c, Scratch& s) { acc.fold(s.tile, chunks[c]); }, !p.in_registers);
  merge_in_chunk_order(chunks, k, d, out, static_cast<int>(scratch.size()));
}

template <typename T>
void block_stats(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind, double sigma,
                 const double* w, double* W, double* N, double* S, double* objective,
                 double* distortion, double* min_margin, std::int64_t* labels, T* grad_X,
                 int n_threads) {
  // Softmax accumulation streams its (d + 1, kp) tile partial once per row
  // block: larger blocks amortize it; it reads the block's columns down its
  // rows (odd_stride). NOTE: odd_stride only for d <= 16, where it was
  // measured faster (k = 1024: 0.84-0.93x float32, 0.90-0.92x float64); at
  // d = 256, k = 1024 float64 the padded block made the step 1.12-1.17x slower
  // (1 thread, twice; cause not found), and at d = 64, k = 256 it was noise.
  const bool softmax = kind == Kind::softmax;
  const KernelChoices ch = kernel_choices();
  // Few centroids at wide d: the narrow accumulation, its blocks rows of X
  // that stay in L2 (impl/stats_narrow.hpp).
  const bool narrow = softmax && NarrowSoftmaxAccumulator<T>::engages(k, d, ch);
  const index_t block_bytes = !softmax ? 0
                              : narrow ? NarrowSoftmaxAccumulator<T>::block_bytes(d, ch)
                                       : ch.softmax_block_bytes;
  const Engine<T> E(C, k, d, block_bytes, !softmax, softmax && d <= 16);
  const StatsPass<T> p(E, X, C, w, kind, sigma, labels, grad_X);
  const BlockStatsOut out{W, N, S, objective, distortion, min_margin};
  const bool sums = N != nullptr || S != nullptr;
  // Hard and entmax15 take the same lane accumulator on its path, so that
  // below the threshold their sums agree bit for bit (SPEC.md).
  const bool lanes = E.small && p.in_registers && k <= kLaneAccK && grad_X == nullptr;
  if (lanes && kind == Kind::hard)
    run_block_stats(p, LaneAccumulator<T, Kind::hard>(p, sums), n, n_threads, out);
  else if (lanes && kind == Kind::entmax15)
    run_block_stats(p, LaneAccumulator<T, Kind::entmax15>(p, sums), n, n_threads, out);
  else if (!sums)
    run_block_stats(p, ObjectiveOnly<T>{}, n, n_threads, out);
  else if (narrow)
    run_block_stats(p, NarrowSoftmaxAccumulator<T>(E), n, n_threads, out);
  else if (kind == Kind::softmax)
    run_block_stats(p, DenseSoftmaxAccumulator<T>(E), n, n_threads, out);
  else
    run_block_stats(p, SparseAccumulator<T>(E), n, n_threads, out);
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
