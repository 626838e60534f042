// Tile sizes shared by every kernel. Tests may override them at configure
// time (-DSOFTKMEANS_ROW_TILE=...) to exercise remainder paths.
#pragma once

#include <cstdint>

namespace softkmeans {

using index_t = std::int64_t;

#ifndef SOFTKMEANS_ROW_TILE
#define SOFTKMEANS_ROW_TILE 256
#endif

// Rows of X processed together. Row tiles are also the unit of deterministic
// reduction: float partial sums are formed per tile and folded into double
// totals, tiles are grouped into chunks independently of the thread count, and
// chunk partials are merged in chunk order, so no result depends on the
// thread count.
inline constexpr index_t kRowTile = SOFTKMEANS_ROW_TILE;

// Bytes of the per-thread distance block (rows x padded k) that a row block's
// reduction consumes while it is still in L1/L2.
inline constexpr index_t kDistBlockBytes = 96 * 1024;
// The same for the softmax step, whose R^T X accumulation wants more rows per
// block (its (d + 1, k) partial is read and written once per block).
inline constexpr index_t kSoftmaxBlockBytes = 384 * 1024;

// Bytes of the group of distance rows whose minima the softmax step takes
// before their exps (the group stays in L1 between the two).
inline constexpr index_t kSoftmaxGroupBytes = 16 * 1024;

// Bytes of the centroid block the micro-kernel path's row reduction takes
// against every row group of a row block before the next (kept in L1/L2).
inline constexpr index_t kLaneBlockBytes = 32 * 1024;

// Dimensions up to this use the direct-difference distance path (vectorized
// over centroids); above it, the ||x||^2 + ||c||^2 - 2 x.c micro-kernel.
inline constexpr index_t kSmallDim = 4;

// On the direct path, up to this many centroids the hard reduction puts rows
// in the vector lanes (centroids broadcast) instead of centroids.
inline constexpr index_t kSmallK = 64;
// Up to this many centroids the hard step also accumulates N, S and J in the
// lanes (one masked add per centroid and coordinate per W rows).
inline constexpr index_t kLaneAccK = 16;

// From these d, k and k d on, float row reductions (min2_rows) on a CPU with
// AVX512_BF16 find candidates with bf16 products first (impl/bf16_bound.hpp).
// Below them a row's fixed costs (packing, thresholds, the candidate scan and
// the recomputation of its 2-4 candidates) outweigh the halved products: hard
// step with / without the pass, one thread, blobs (bench/bf16.py's data),
// 0.7-0.8 at (d, k) = (64, 256) and (128, 256), 0.96 at (64, 512), 1.05 at
// (128, 512), 1.13 at (64, 1024), 1.3-1.4 at (256, 1024).
inline constexpr index_t kBf16MinDim = 64;
inline constexpr index_t kBf16MinK = 512;
inline constexpr index_t kBf16MinWork = 65536;

// Rows per step of the direct k-means++ candidate potentials (candidates in the
// lanes, one independent accumulator per row to hide the FMA latency).
inline constexpr index_t kPPRows = 8;

// Below this much work (multiply-adds, n k d for the distance kernels) a call
// runs on the calling thread whatever n_threads says: waking an OpenMP team
// costs about as much as the work (and far more on a busy machine), and no
// result depends on the thread count. About a tenth of a millisecond of one core.
inline constexpr index_t kSerialWork = index_t(1) << 20;

// Upper bound on the number of chunks (units of parallel work holding their own
// double statistics) and on the bytes those statistics may take in total.
inline constexpr index_t kMaxChunks = 64;
inline constexpr index_t kChunkStatsBytes = 32 * 1024 * 1024;

}  // namespace softkmeans
