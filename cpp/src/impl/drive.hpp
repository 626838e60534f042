// The chunked parallel driver: tiles of kRowTile rows grouped into n_chunks
// chunks (independent of the thread count), chunks processed in parallel, the
// tiles of a chunk in order, row blocks of engine.mb rows within a tile. Any
// result a kernel sums per chunk and merges in chunk order is therefore
// independent of the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "impl/engine.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

inline index_t n_tiles_of(index_t n) { return (n + kRowTile - 1) / kRowTile; }

// Rows [begin, end) of chunk c of n_chunks (whole tiles).
struct ChunkRows {
  index_t tile_begin, tile_end;
  ChunkRows(index_t c, index_t n_chunks, index_t n) {
    const index_t n_tiles = n_tiles_of(n);
    tile_begin = c * n_tiles / n_chunks;
    tile_end = (c + 1) * n_tiles / n_chunks;
  }
};

// The multiply-adds of a distance pass over n rows (resolve_threads).
template <typename T>
index_t distance_work(const Engine<T>& E, index_t n) {
  return n * E.k * E.d;
}

// One scratch per thread of the team a kernel over n rows runs on (n_threads
// <= 0: the OpenMP default; one thread below kSerialWork; resolved here, once
// per call), each set up by init. Scratch is a Workspace<T> or derives from one.
template <typename Scratch, typename T, typename Init>
std::vector<Scratch> per_thread(const Engine<T>& E, index_t n, int n_threads, Init init) {
  std::vector<Scratch> scratch(resolve_threads(n_threads, distance_work(E, n)));
  for (Scratch& s : scratch) {
    E.init(s);
    init(s);
  }
  return scratch;
}
template <typename T>
std::vector<Workspace<T>> per_thread(const Engine<T>& E, index_t n, int n_threads) {
  return per_thread<Workspace<T>>(E, n, n_threads, [](Workspace<T>&) {});
}

// Runs block_fn(c, scratch, i0, rows) on every row block of every tile of
// every chunk c, then tile_end(c, scratch) after each tile, on as many threads
// as there are scratches. With need_dbuf the block's distances are in
// scratch.dbuf first; without, block_fn reduces rows itself (e.g. by
// Engine::min2_rows). A cancelled call stops between tiles (results discarded).
template <typename T, typename Scratch, typename BlockFn, typename TileEndFn>
void drive(const Engine<T>& E, const T* X, index_t n, index_t n_chunks,
           std::vector<Scratch>& scratch, BlockFn block_fn, TileEndFn tile_end,
           bool need_dbuf = true) {
  const index_t d = E.d;
  const int nt = static_cast<int>(scratch.size());
  // Read on the calling thread: the flag is installed per thread.
  const std::atomic<int>* cancel = thread_cancel_flag();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    Scratch& s = scratch[omp_get_thread_num()];
    const ChunkRows chunk(c, n_chunks, n);
    for (index_t t = chunk.tile_begin; t < chunk.tile_end; ++t) {
      if (cancel && cancel->load(std::memory_order_relaxed)) break;
      const index_t i_end = std::min(n, (t + 1) * kRowTile);
      for (index_t i0 = t * kRowTile; i0 < i_end; i0 += E.mb) {
        const index_t rows = std::min(E.mb, i_end - i0);
        if (need_dbuf) E.distances(X + i0 * d, rows, s);
        block_fn(c, s, i0, rows);
      }
      tile_end(c, s);
    }
  }
}

// One chunk per tile, nothing folded at tile ends: the per-row kernels.
template <typename T, typename BlockFn>
void drive_rows(const Engine<T>& E, const T* X, index_t n, std::vector<Workspace<T>>& wss,
                BlockFn block_fn, bool need_dbuf = true) {
  drive(
      E, X, n, n_tiles_of(n), wss, block_fn, [](index_t, Workspace<T>&) {}, need_dbuf);
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
