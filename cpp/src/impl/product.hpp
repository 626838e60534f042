// St += A R, a register-blocked product over rows: the dense accumulation of
// the softmax statistics.
#pragma once

#include <algorithm>
#include <cstdint>

#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The MB rows l0 .. l0 + MB of St over the columns j .. j + JB W, from the
// live rows of the block: per row, JB loads of R and MB broadcasts of A feed
// MB * JB multiply-adds held in registers. The registers start from St's
// entries and end in them: each entry of St is one running sum of its rows'
// products in row order, however the rows are cut into blocks (whose size
// depends on the unit's vector width; SPEC.md, "Determinism across machines").
template <index_t MB, index_t JB, typename T>
inline void rt_x_tile(const T* A, index_t lda, const T* R, index_t ldr, const std::int32_t* live,
                      index_t cnt, index_t kp, T* St, index_t l0, index_t j) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  V acc[MB][JB];
#pragma GCC unroll 8
  for (index_t q = 0; q < MB; ++q)
#pragma GCC unroll 4
    for (index_t b = 0; b < JB; ++b) acc[q][b] = vload(St + (l0 + q) * kp + j + b * W);
  for (index_t c = 0; c < cnt; ++c) {
    const index_t r = live[c];
    V rv[JB];
#pragma GCC unroll 4
    for (index_t b = 0; b < JB; ++b) rv[b] = vload(R + r * ldr + j + b * W);
#pragma GCC unroll 8
    for (index_t q = 0; q < MB; ++q) {
      const V a = vset<T>(A[r * lda + l0 + q]);
#pragma GCC unroll 4
      for (index_t b = 0; b < JB; ++b) acc[q][b] = vfma(a, rv[b], acc[q][b]);
    }
  }
#pragma GCC unroll 8
  for (index_t q = 0; q < MB; ++q)
#pragma GCC unroll 4
    for (index_t b = 0; b < JB; ++b) vstore(St + (l0 + q) * kp + j + b * W, acc[q][b]);
}

// The rows l0 .. l0 + rem of St (rem < MB) by a tile of rem rows.
template <index_t MB, index_t JB, typename T>
inline void rt_x_tile_rest(index_t rem, const T* A, index_t lda, const T* R, index_t ldr,
                           const std::int32_t* live, index_t cnt, index_t kp, T* St, index_t l0,
                           index_t j) {
  if constexpr (MB > 1) {
    if (rem == MB - 1) return rt_x_tile<MB - 1, JB>(A, lda, R, ldr, live, cnt, kp, St, l0, j);
    rt_x_tile_rest<MB - 1, JB>(rem, A, lda, R, ldr, live, cnt, kp, St, l0, j);
  }
}

// accumulate_rt_x (below) over the columns j_begin .. j_end of R and St
// (whole groups of JB W-blocks).
template <index_t MB, index_t JB, typename T>
inline void accumulate_rt_x_columns(const T* A, index_t lda, index_t dp, const T* R, index_t ldr,
                                    index_t rows, index_t kp, T* St, const std::uint8_t* nz,
                                    index_t j_begin, index_t j_end) {
  constexpr index_t W = VT<T>::W;
  const index_t nb = kp / W;
  constexpr index_t kMaxRows = 1024;
  std::int32_t live[kMaxRows];  // rows whose W-block group is not all zero
  for (index_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const index_t rn = std::min(kMaxRows, rows - r0);
    for (index_t j = j_begin; j < j_end; j += JB * W) {
      index_t cnt = 0;
      for (index_t r = r0; r < r0 + rn; ++r) {
        bool any = nz == nullptr;
        for (index_t b = 0; b < JB && !any; ++b) any = nz[r * nb + j / W + b] != 0;
        if (any) live[cnt++] = static_cast<std::int32_t>(r);
      }
      if (cnt == 0) continue;
      index_t l0 = 0;
      for (; l0 + MB <= dp; l0 += MB) rt_x_tile<MB, JB>(A, lda, R, ldr, live, cnt, kp, St, l0, j);
      if (l0 < dp) rt_x_tile_rest<MB, JB>(dp - l0, A, lda, R, ldr, live, cnt, kp, St, l0, j);
    }
  }
}

// S^T += A R for one row block: A [in] (rows, dp) with row stride lda (the
// weighted rows w_r x_r, and w_r in column d; a row's MB broadcasts come from
// one cache line), R [in] (rows, kp) the responsibilities with row stride ldr,
// St [in,out] (dp, kp), any dp (the last tile of rows may be shorter). The
// reduction over the block's rows runs in MB x JB vector registers: per row,
// JB loads of R and MB broadcasts of A feed MB * JB multiply-adds (a second
// register-blocked product). Each entry of St gets its rows' products in row
// order whatever MB and JB are.
// nz [in, nullable] (rows, kp / W): 0 marks an all-zero W-block of R; a row is
// skipped for a group of JB W-blocks when all of them are zero (the zeros are
// stored in R, so a partly zero group adds exact zeros).
template <index_t MB, index_t JB, typename T>
inline void accumulate_rt_x(const T* A, index_t lda, index_t dp, const T* R, index_t ldr,
                            index_t rows, index_t kp, T* St, const std::uint8_t* nz = nullptr) {
  constexpr index_t W = VT<T>::W;
  const index_t nb = kp / W;
  const index_t full = nb / JB * JB * W;  // columns covered by whole JB-groups
  accumulate_rt_x_columns<MB, JB>(A, lda, dp, R, ldr, rows, kp, St, nz, 0, full);
  if constexpr (JB > 1)
    if (full < kp) accumulate_rt_x_columns<MB, 1>(A, lda, dp, R, ldr, rows, kp, St, nz, full, kp);
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
