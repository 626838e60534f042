// drive() (impl/drive.hpp) for a pass whose work on a row block splits in two:
// an assignment of each row (labels, distances: any thread, any order) and the
// sums of the chunk (in row order, tile partials folded in tile order). The
// chunks run as drive() runs them; a thread left without a chunk then takes
// the tiles of the others' chunks that their threads have not reached, from
// the last tile down, and assigns their rows; the chunk's thread, reaching
// such a tile, waits for it if need be and only sums it. So the sums keep
// their order (the same bits at every thread count) while the chunks' last
// work is shared: with 15 chunks (k d = 262144: stats_chunks) on 2 threads,
// one thread took 8 chunks while the other waited for about a chunk's time.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "impl/drive.hpp"
#include "impl/engine.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// A tile's state: not started, its chunk's thread's, taken by another thread
// (assigning it), assigned by another thread (its rows' distances in the
// stolen buffer).
enum TileState : int { kTileFree = 0, kTileOwned = 1, kTileTaken = 2, kTileAssigned = 3 };

// assign(c, scratch, i0, rows, dist): the assignment of rows i0 .. i0 + rows,
// each row's distance into dist[0 .. rows); c the chunk when its own thread
// runs it, -1 when another thread does (whatever the assignment gathers over
// rows besides then goes to that thread's scratch). sums(c, scratch, i0,
// rows, dist): the chunk's sums over the rows, in row order. tile_end(c,
// scratch): after each tile's sums. dist_of(scratch): the scratch's own
// buffer of mb distances. A cancelled call stops between tiles (results
// discarded); a tile taken is always finished, so no thread waits forever.
template <typename T, typename Scratch, typename AssignFn, typename SumsFn, typename TileEndFn,
          typename DistOf>
void drive_split(const Engine<T>& E, index_t n, index_t n_chunks, std::vector<Scratch>& scratch,
                 AssignFn assign, SumsFn sums, TileEndFn tile_end, DistOf dist_of) {
  const int nt = static_cast<int>(scratch.size());
  const index_t n_tiles = n_tiles_of(n);
  const std::atomic<int>* cancel = thread_cancel_flag();
  auto cancelled = [cancel] { return cancel && cancel->load(std::memory_order_relaxed); };
  // Written only for the tiles another thread assigns (no page touched else).
  std::unique_ptr<double[]> stolen(nt > 1 ? new double[n] : nullptr);
  std::unique_ptr<std::atomic<int>[]> state(new std::atomic<int>[n_tiles]);
  for (index_t t = 0; t < n_tiles; ++t) state[t].store(kTileFree, std::memory_order_relaxed);
  auto claim = [&](index_t t, int as) {
    int expected = kTileFree;
    return state[t].compare_exchange_strong(expected, as, std::memory_order_acq_rel);
  };
  std::atomic<index_t> next_chunk{0};
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    Scratch& s = scratch[omp_get_thread_num()];
    for (index_t c = next_chunk.fetch_add(1); c < n_chunks; c = next_chunk.fetch_add(1)) {
      const ChunkRows chunk(c, n_chunks, n);
      for (index_t t = chunk.tile_begin; t < chunk.tile_end && !cancelled(); ++t) {
        const bool mine = claim(t, kTileOwned);
        while (!mine && state[t].load(std::memory_order_acquire) != kTileAssigned)
          std::this_thread::yield();
        const index_t i_end = std::min(n, (t + 1) * kRowTile);
        for (index_t i0 = t * kRowTile; i0 < i_end; i0 += E.mb) {
          const index_t rows = std::min(E.mb, i_end - i0);
          double* dist = mine ? dist_of(s) : stolen.get() + i0;
          if (mine) assign(c, s, i0, rows, dist);
          sums(c, s, i0, rows, dist);
        }
        tile_end(c, s);
      }
    }
    for (index_t t = n_tiles - 1; nt > 1 && t >= 0 && !cancelled(); --t) {
      if (state[t].load(std::memory_order_relaxed) != kTileFree || !claim(t, kTileTaken)) continue;
      const index_t i_end = std::min(n, (t + 1) * kRowTile);
      for (index_t i0 = t * kRowTile; i0 < i_end; i0 += E.mb)
        assign(index_t(-1), s, i0, std::min(E.mb, i_end - i0), stolen.get() + i0);
      state[t].store(kTileAssigned, std::memory_order_release);
    }
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
