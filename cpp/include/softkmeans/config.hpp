// Tile sizes shared by every kernel. Tests may override them at configure
// time (-DSOFTKMEANS_ROW_TILE=...) to exercise remainder paths.
#pragma once

#include <cstdint>

namespace softkmeans {

using index_t = std::int64_t;

#ifndef SOFTKMEANS_ROW_TILE
#define SOFTKMEANS_ROW_TILE 256
#endif

// Rows of X processed together. Row tiles are also the unit of parallel work
// and of deterministic reduction: partial results are formed per tile and
// merged in tile order, so they never depend on the thread count.
inline constexpr index_t kRowTile = SOFTKMEANS_ROW_TILE;

}  // namespace softkmeans
