// The softmax accumulation for few centroids at wide d (the kernel choice
// narrow_softmax_min_dim): S^T += (w x)^T R with the features in the vector
// lanes and the centroids broadcast, reading the block's rows of X where they
// are. DenseSoftmaxAccumulator puts the centroids in the lanes: at k = 8 the
// padded kp = 32 lanes are three quarters zeros, and its A = w x copy of the
// block is a second pass over rows that no longer fit in any cache (the
// softmax step at d = 8000, k = 8 reached 17 GFLOP/s).
//
// The same bits: every entry S_jl (and N_j) gets fma(w_r x_rl, r_rj, S_jl)
// with w_r x_rl rounded to T first (A's entry), over the same rows (those
// whose responsibilities are not all zero in the product's one group of JB = 2
// W-blocks, kp = NR) in row order, and each tile's partial is added once to
// the chunk's double totals.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "impl/engine.hpp"
#include "impl/stats_pass.hpp"
#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// LB W features of S's rows j0 .. j0 + JN (S: their first, row stride lds)
// from the live rows (X: row r's first of those features at X + r ldx, its
// weight wt[r], its responsibilities at R + r ldr): per row LB loads of x
// scaled by w, JN broadcasts of r, LB JN multiply-adds.
template <index_t JN, index_t LB, typename T>
inline void narrow_tile(const T* X, index_t ldx, const T* wt, const T* R, index_t ldr,
                        const std::int32_t* live, index_t cnt, T* S, index_t lds, index_t j0,
                        bool prefetch) {
  constexpr index_t kAhead = 4;
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  V acc[JN][LB];
#pragma GCC unroll 8
  for (index_t j = 0; j < JN; ++j)
#pragma GCC unroll 4
    for (index_t b = 0; b < LB; ++b) acc[j][b] = vload(S + j * lds + b * W);
  for (index_t c = 0; c < cnt; ++c) {
    const index_t r = live[c];
    const V w = vset<T>(wt[r]);
    // The row's features kAhead tiles on: the rows are a stride of d apart,
    // more streams than the hardware prefetcher follows (no fault past the end).
    if (prefetch)
      for (index_t q = 0; q < LB * W * index_t(sizeof(T)); q += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(X + r * ldx + kAhead * LB * W) + q);
    V a[LB];
#pragma GCC unroll 4
    for (index_t b = 0; b < LB; ++b) a[b] = w * vload(X + r * ldx + b * W);
#pragma GCC unroll 8
    for (index_t j = 0; j < JN; ++j) {
      const V rj = vset<T>(R[r * ldr + j0 + j]);
#pragma GCC unroll 4
      for (index_t b = 0; b < LB; ++b) acc[j][b] = vfma(a[b], rj, acc[j][b]);
    }
  }
#pragma GCC unroll 8
  for (index_t j = 0; j < JN; ++j)
#pragma GCC unroll 4
    for (index_t b = 0; b < LB; ++b) vstore(S + j * lds + b * W, acc[j][b]);
}

template <typename T>
struct NarrowSoftmaxAccumulator {
  static constexpr index_t W = VT<T>::W;
  static constexpr index_t LB = 2;  // vectors of features per register tile
  static constexpr index_t JG = 8;  // centroids per register tile: LB JG accumulators
  static constexpr index_t LW = LB * W;
  struct Tile {
    std::vector<T> S;              // (k, dl): S_j^T in row j, dl = d rounded up to LW
    std::vector<T> N;              // (kp,)
    std::vector<T> wt;             // (mb,) the rows' weights in T (A's last column)
    std::vector<T> tail;           // (mb, LW) the rows' last d % LW features, then zeros
    std::vector<std::uint8_t> nz;  // (mb, kp / W) nonzero W-blocks of the rows
    std::vector<std::int32_t> live;
    const T* x0 = nullptr;  // the block's first row of X
  };
  index_t k, d, kp, mb, ld, dl;
  static constexpr bool sums = true;

  // Whether the shape takes this accumulator: kp = NR (DenseSoftmaxAccumulator's
  // one group of JB = 2 W-blocks, whose row skipping this repeats) from the
  // choice's d.
  static bool engages(index_t k_, index_t d_, const KernelChoices& ch) {
    return d_ > kSmallDim && d_ >= ch.narrow_softmax_min_dim && k_ <= Engine<T>::NR;
  }
  // The softmax block (rows x kp bytes, Engine's block_bytes) for rows of X
  // of about softmax_rows_bytes.
  static index_t block_bytes(index_t d_, const KernelChoices& ch) {
    // Whole groups of 24 rows (8 and MR divide 24): shift_rows takes rows 8 at a
    // time, alone a row is a chain of d dependent multiply-adds (its norm).
    constexpr index_t kGroup = 24;
    const index_t rows =
        round_up(std::max<index_t>(1, ch.softmax_rows_bytes / (d_ * index_t(sizeof(T)))), kGroup);
    return std::min(ch.softmax_block_bytes, rows * Engine<T>::NR * index_t(sizeof(T)));
  }

  explicit NarrowSoftmaxAccumulator(const Engine<T>& E)
      : k(E.k), d(E.d), kp(E.kp), mb(E.mb_pad()), ld(E.ld), dl(round_up(E.d, LW)) {}

  void init(Tile& t) const {
    t.S.assign(k * dl, T(0));
    t.N.assign(kp, T(0));
    t.wt.assign(mb, T(0));
    t.tail.assign(mb * LW, T(0));
    t.nz.assign(mb * (kp / W), 0);
    t.live.assign(mb, 0);
  }
  void block(const StatsPass<T>& p, ChunkStats& chunk, Workspace<T>& ws, Tile& t, index_t i0,
             index_t rows) const {
    t.x0 = p.X + i0 * d;
    stats_rows_softmax(p, *this, chunk, ws, t, i0, rows);
  }
  std::uint8_t* nonzero_blocks(Tile& t, index_t r) const { return t.nz.data() + r * (kp / W); }
  void row(Tile& t, index_t r, const T*, double, const RowAssignment& a,
           const Workspace<T>&) const {
    t.wt[r] = static_cast<T>(a.weight);
  }

  void block_end(Tile& t, const Workspace<T>& ws, index_t rows) const {
    using V = typename VT<T>::v;
    const T* R = ws.dbuf.data();
    const index_t nb = kp / W, full = d / LW * LW;
    index_t cnt = 0;
    for (index_t r = 0; r < rows; ++r) {
      bool any = false;
      for (index_t b = 0; b < nb && !any; ++b) any = t.nz[r * nb + b] != 0;
      if (any) t.live[cnt++] = static_cast<std::int32_t>(r);
    }
    for (index_t c = 0; c < cnt; ++c) {
      const index_t r = t.live[c];
      const V w = vset<T>(t.wt[r]);
      for (index_t b = 0; b < nb; ++b)
        vstore(t.N.data() + b * W, vfma(w, vload(R + r * ld + b * W), vload(t.N.data() + b * W)));
      if (full < d) std::copy(t.x0 + r * d + full, t.x0 + (r + 1) * d, t.tail.data() + r * LW);
    }
    for (index_t j0 = 0; j0 < k; j0 += JG)
      with_group(std::min(JG, k - j0), [&](auto JN) {
        T* S = t.S.data() + j0 * dl;
        for (index_t l0 = 0; l0 < full; l0 += LW)
          narrow_tile<JN, LB>(t.x0 + l0, d, t.wt.data(), R, ld, t.live.data(), cnt, S + l0, dl,
                              j0, l0 + 5 * LW <= d);
        if (full < d)  // the tail's rows at stride LW, into S's columns full .. dl
          narrow_tile<JN, LB>(t.tail.data(), LW, t.wt.data(), R, ld, t.live.data(), cnt,
                              S + full, dl, j0, false);
      });
  }

  void fold(Tile& t, ChunkStats& chunk) const {
    for (index_t j = 0; j < k; ++j) {
      double* s = chunk.S.data() + j * d;
      const T* c = t.S.data() + j * dl;
      for (index_t l = 0; l < d; ++l) s[l] += static_cast<double>(c[l]);
      chunk.N[j] += static_cast<double>(t.N[j]);
    }
    std::fill(t.S.begin(), t.S.end(), T(0));
    std::fill(t.N.begin(), t.N.end(), T(0));
  }

 private:
  // fn(std::integral_constant<index_t, jn>) for jn in 1 .. JG.
  template <typename Fn>
  static void with_group(index_t jn, Fn fn) {
    switch (jn) {
      case 1: return fn(std::integral_constant<index_t, 1>{});
      case 2: return fn(std::integral_constant<index_t, 2>{});
      case 3: return fn(std::integral_constant<index_t, 3>{});
      case 4: return fn(std::integral_constant<index_t, 4>{});
      case 5: return fn(std::integral_constant<index_t, 5>{});
      case 6: return fn(std::integral_constant<index_t, 6>{});
      case 7: return fn(std::integral_constant<index_t, 7>{});
      default: return fn(std::integral_constant<index_t, 8>{});
    }
  }
};

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
