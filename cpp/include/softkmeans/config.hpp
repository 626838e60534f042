// The constants shared by every kernel that no CPU chooses. Tests may override
// the row tile at configure time (-DSOFTKMEANS_ROW_TILE=...) to exercise
// remainder paths.
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

// The sizes and thresholds chosen for speed per CPU (tile bytes, the lane
// paths, register blocking, prefetch, the bf16 pass) are runtime choices:
// softkmeans/choices.hpp. What stays here either is no choice of speed or
// decides bits (each side of it gives different bits: part of the contract).

// Dimensions up to this use the direct-difference distance path (vectorized
// over centroids); above it, the ||x||^2 + ||c||^2 - 2 x.c micro-kernel. Not
// a choice: the two paths round differently.
inline constexpr index_t kSmallDim = 4;

// On the direct path, up to this many centroids the hard step also
// accumulates N, S and J in the lanes (one masked add per centroid and
// coordinate per W rows). Not a choice: the lanes sum rows in another order
// than the row-wise accumulation (SPEC.md, "Determinism across machines").
inline constexpr index_t kLaneAccK = 16;

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
