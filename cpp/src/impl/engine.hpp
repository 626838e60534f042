// The distance engine: centroids prepared once per call, then distance blocks
// (or register-held row reductions, on the direct path) per row block.
//
// Two paths, chosen by d:
// - direct (d <= kSmallDim): differences x - c vectorized over centroids
//   (ct, cpad), or over rows with centroids broadcast (craw);
// - micro-kernel (d > kSmallDim): ||x - s||^2 + ||c - s||^2 - 2 (x - s).(c - s)
//   with a shift s near the centroids, MR x NR register blocks (cp, cn) into a
//   distance block; or, when the caller only needs each row's two smallest and
//   argmin (hard, entmax15, assign, margins), the same distances with rows in
//   the lanes and centroids broadcast (cl, cnl), reduced in registers (min2_rows).
//
// This header holds the engine's shape, its per-thread workspace and the
// dispatch between the paths; each path is in its own header, included at the
// end: impl/engine_direct.hpp (direct), impl/engine_blocks.hpp (micro-kernel
// distance blocks), impl/engine_lanes.hpp (micro-kernel, rows in the lanes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "impl/rows.hpp"
#include "impl/vec.hpp"
#include "softkmeans/choices.hpp"
#ifdef SOFTKMEANS_BF16
#include "impl/bf16_bound.hpp"
#endif

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Calls f(std::integral_constant<int, D>{}) for the direct path's d in 1..4.
template <typename F>
inline decltype(auto) with_small_dim(index_t d, F&& f) {
  switch (d) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// Per-thread scratch of the engine and of the row reductions that consume its
// blocks. Kernels with more per-thread state derive from it. Cache-line
// aligned: the scratches of a team sit side by side in one vector, and a
// thread writing its own (a tile's counters) must not evict its neighbour's.
template <typename T>
struct alignas(64) Workspace {
  std::vector<T> xb;                        // (mb_pad, d) shifted rows (micro-kernel path)
  std::vector<T> xn;                        // (mb_pad,) their squared norms
  std::vector<T> xt;                        // (groups, d, LR W) shifted rows, transposed per group
  std::vector<typename VT<T>::v> lanes;     // (groups, 3, LR) v1, v2, xn (min2_rows)
  std::vector<typename VT<T>::i> lane_idx;  // (groups, LR) their first argmins
  std::vector<T> dbuf;             // (mb_pad, kp), row stride ld: distances, then responsibilities
  std::vector<RowMin<T>> mins;     // (mb_pad,) row reductions of the direct path
  std::vector<double> row_sums;    // (2 mb_pad rounded up to vectors) softmax: sums, their logs
  std::vector<std::int64_t> cidx;  // (kp,) entmax15 candidates, then the support
  std::vector<double> cval;        // (kp,) their values, then their responsibilities
#ifdef SOFTKMEANS_BF16
  Bf16Scratch bf16;  // the bf16 candidate pass (impl/engine_bf16.hpp)
#endif
};

template <typename T>
struct Engine {
  using V = typename VT<T>::v;
  using VI = typename VT<T>::i;
  using Int = typename std::remove_reference<decltype(VI{}[0])>::type;
  static constexpr index_t W = VT<T>::W;
  static constexpr index_t NR = 2 * W;
  static constexpr index_t MR = SOFTKMEANS_MR;

  // The micro-kernel path's row reduction (min2_rows): LR W rows in the lanes
  // against LC centroids at a time, LR * LC accumulators. AVX-512 (32
  // registers) takes 4 x 4: per coordinate 4 loads and 4 broadcasts feed 16
  // multiply-adds (on Zen 5, 2 x 4 and 2 x 8 were 7-15% and 1-3% slower, one
  // thread, d = 16 to 256). 2 x 8 (LR / 2 x 2 LC) is the kernel choice
  // lane_blocking = 2x8 (softkmeans/choices.hpp).
  static constexpr index_t LR = SOFTKMEANS_VEC_BYTES == 64 ? 4 : 2;
  static constexpr index_t LC = 4;

  index_t d = 0, k = 0, kp = 0, mb = 0;
  KernelChoices ch;       // the choices made for speed (the call's, read once)
  index_t ld = 0;         // row stride of the distance block (kp, or padded: odd_stride)
  index_t dbuf_rows = 0;  // rows of the distance block (MR when rows are reduced in registers)
  bool small = false;     // the direct path
  std::vector<T> shift;   // (d,)
  std::vector<T> cp;      // micro-kernel path: (kp / NR) panels of (d, NR)
  std::vector<T> cn;      // (kp,) ||c_j - s||^2, +inf in the padding
  index_t kl = 0;         // k rounded up to LC
  std::vector<T> cl;      // lane reduction: (kl / LC) panels of (d, LC), 0 in the padding
  std::vector<T> cnl;     // (kl,) ||c_j - s||^2, +inf in the padding
  T xn_unclamped = T(0);  // lane reduction: row norms below this take lanes_min2<false>
  std::vector<T> ct;      // direct path: (d, kp) transposed centroids
  std::vector<T> cpad;    // direct path: (kp,) 0, then +inf in the padding
  std::vector<T> craw;    // direct path: (k, d) the centroids (across-rows reduction)
#ifdef SOFTKMEANS_BF16
  // The bf16 candidate pass of min2_rows (impl/engine_bf16.hpp; float only).
  bool bf16 = false;
  std::vector<std::uint32_t> cbf;  // (kl / LC) panels of (ceil(d / 2), LC) bf16 pairs of cl
  std::vector<float> cn_lo, cn_hi;  // (kl,) cnl -/+ the centroid's share of the bound
  std::vector<float> crow;          // (kl, d) the shifted centroids of cl, row-major
#endif

  // block_bytes: size of the distance block (rows x kp) a row block fills
  // (0: the choice dist_block_bytes).
  // in_registers: the caller reduces rows by min2_rows (no distance block; a
  // one-row buffer for the rows it still needs whole, row blocks of a tile).
  // odd_stride: rows of 2 KiB or more are an odd number of cache lines apart
  // (ld > kp), for a caller that reads a column panel down many rows (the
  // softmax accumulation): at a stride of 4 KiB every row of a panel falls in
  // the same L1 set, and the panel was re-read from L2 (accumulate_rt_x alone,
  // k = 1024: 1.4x the time per multiply-add float64, 1.1-1.2x float32).
  // Shorter rows keep ld = kp: there the padding cost more than it saved (the
  // softmax step 3-5% slower at k = 64).
  Engine(const T* C, index_t k_, index_t d_, index_t block_bytes = 0, bool in_registers = false,
         bool odd_stride = false)
      : d(d_), k(k_), ch(kernel_choices()) {
    small = d <= kSmallDim;
    set_blocks(round_up(k, small ? W : NR), block_bytes);
    if (odd_stride && kp * static_cast<index_t>(sizeof(T)) >= 2048) {
      constexpr index_t line = 64 / static_cast<index_t>(sizeof(T));
      ld = round_up(kp, line);
      if ((ld / line) % 2 == 0) ld += line;
    }
    if (in_registers) mb = round_up(kRowTile, MR);
    dbuf_rows = in_registers ? MR : mb_pad();  // distances() writes MR rows
    if (small) {
      prepare_direct(C);
      return;
    }
    prepare_blocks(C);
    if (dbuf_rows < mb_pad()) {
#ifdef SOFTKMEANS_BF16
      bf16 = bf16_worthwhile<T>(k, d, ch);
#endif
      std::vector<index_t> identity(round_up(k, LC), -1);
      for (index_t j = 0; j < k; ++j) identity[j] = j;
      order_lanes(identity);
    }
  }

  // The shape alone (kp = k rounded up to W, mb rows per distance block of
  // block_bytes), no centroid panels: for the kernels that form their own
  // distance blocks (the csr_* kernels, CsrDistances) and use the engine for
  // its row blocks and the row reductions' strides. distances() and
  // min2_rows() must not be called on it.
  struct ShapeOnly {};
  Engine(ShapeOnly, index_t k_, index_t d_, index_t block_bytes = 0)
      : d(d_), k(k_), ch(kernel_choices()) {
    set_blocks(round_up(k, W), block_bytes);
    dbuf_rows = mb_pad();
  }

  index_t mb_pad() const { return round_up(mb, MR); }

  // kp (and the row stride ld = kp), and mb: the rows of a distance block
  // (rows x kp) of block_bytes, at least MR, at most a row tile.
  void set_blocks(index_t kp_, index_t block_bytes) {
    kp = kp_;
    ld = kp;
    const index_t by_bytes = block_bytes / (kp * static_cast<index_t>(sizeof(T)));
    mb = std::max<index_t>(MR, std::min<index_t>(round_up(kRowTile, MR), by_bytes / MR * MR));
  }

  void init(Workspace<T>& ws) const {
    ws.dbuf.assign(dbuf_rows * ld, T(0));
    ws.mins.assign(mb_pad(), RowMin<T>{});
    if (dbuf_rows == mb_pad()) ws.row_sums.assign(2 * round_up(mb_pad(), VT<double>::W), 1.0);
    if (!small) {
      ws.xb.assign(mb_pad() * d, T(0));
      ws.xn.assign(mb_pad(), T(0));
      if (dbuf_rows < mb_pad()) {
        const index_t groups = round_up(mb, LR * W) / (LR * W);
        ws.xt.assign(groups * LR * W * d, T(0));
        ws.lanes.assign(groups * 3 * LR, V{});
        ws.lane_idx.assign(groups * LR, VI{});
#ifdef SOFTKMEANS_BF16
        if (bf16) init_bf16(ws);
#endif
      }
    }
    ws.cval.assign(kp, 0.0);
    ws.cidx.assign(kp, 0);
  }

  // dbuf [out] (rows, kp) with row stride ld: D of rows X[0..rows), +inf in
  // the padding columns k..kp.
  void distances(const T* X, index_t rows, Workspace<T>& ws) const {
    if (small) {
      with_small_dim(d, [&](auto D) { direct<D>(X, rows, ws.dbuf.data()); });
      return;
    }
    block_distances(X, rows, ws);
  }

  // Reduces rows X[0..rows) (rows <= mb) to RowMin, out [out] (rows,), with
  // no distance block. ws: the rows' scratch on the micro-kernel path.
  void min2_rows(const T* X, index_t rows, RowMin<T>* out, Workspace<T>& ws) const {
    if (!small) {
      lane_rows_min2(X, rows, out, ws);
      return;
    }
    if (k <= ch.small_k) {
      with_small_dim(d, [&](auto D) { direct_min2_rows<D>(X, rows, out); });
      return;
    }
    for (index_t r = 0; r < rows; ++r)
      out[r] = with_small_dim(d, [&](auto D) { return direct_min2<D>(X + r * d); });
  }

  // ---- the direct path (impl/engine_direct.hpp) ----
  void prepare_direct(const T* C);
  template <int D>
  void direct(const T* X, index_t rows, T* out) const;
  template <int D>
  RowMin<T> direct_min2(const T* x) const;
  template <int D>
  static void load_row_lanes(const T* X, index_t r0, index_t rn, V* xv);
  template <int D>
  void lane_min2(const V* xv, V& v1, V& v2, VI& i1) const;
  template <int D>
  void direct_min2_rows(const T* X, index_t rows, RowMin<T>* out) const;

  // ---- the micro-kernel path's distance blocks (impl/engine_blocks.hpp) ----
  void prepare_blocks(const T* C);
  void block_distances(const T* X, index_t rows, Workspace<T>& ws) const;
  T shifted_row(const T* x, T* out, index_t stride) const;
  void shift_rows(const T* X, index_t rows, T* xb, T* xn) const;
  void micro(const T* xb, const T* cpan, const T* xn, const T* cnp, T* out, index_t l0,
             index_t l1) const;

  // ---- the micro-kernel path, rows in the lanes (impl/engine_lanes.hpp) ----
  void order_lanes(const std::vector<index_t>& centroid_of_slot);
  template <bool Clamp = true>
  void lanes_min2(const T* xg, const V* xnv, index_t j_begin, index_t j_end, V* v1p, V* v2p,
                  VI* i1p) const;
  template <bool Clamp, index_t QR, index_t CB>
  void lanes_min2_part(const T* xg, const V* xnv, index_t q0, index_t j_begin, index_t j_end,
                       V* v1p, V* v2p, VI* i1p) const;
  template <bool Clamp, index_t QR, index_t CB>
  bool piped() const;
  template <index_t QR, index_t CB>
  void lanes_piped(const T* xg, index_t q0, index_t j_begin, index_t j_end, const V* xn, V* v1,
                   V* v2, VI* i1) const;
  template <bool Clamp, index_t QR, index_t CB>
  void lanes_step(const T* xg, index_t q0, index_t j0, const V* xn, V* v1, V* v2, VI* i1) const;
  void pack_group(const T* X, index_t r0, index_t rn, T* xg, V* xn,
                  const index_t* which = nullptr) const;
  index_t pack_lanes(const T* X, index_t rows, Workspace<T>& ws,
                     const index_t* which = nullptr) const;
  void reset_lanes(index_t g, Workspace<T>& ws) const;
  index_t lane_block() const;
  void lane_rows_min2(const T* X, index_t rows, RowMin<T>* out, Workspace<T>& ws) const;
  void reduce_blocks(index_t groups, index_t kc, Workspace<T>& ws) const;
  void reduce_group(const T* xg, V* s, VI* i1) const;
  void redo_clamped(const T* xg, V* s, VI* i1) const;

#ifdef SOFTKMEANS_BF16
  // ---- the bf16 candidate pass of min2_rows (impl/engine_bf16.hpp) ----
  void enable_bf16();
  void prepare_bf16();
  void init_bf16(Workspace<T>& ws) const;
  bool bf16_group(const T* xg, const V* xnv, index_t rn, Workspace<T>& ws, float* dot) const;
  void bf16_pack_rows(const T* xg, Bf16Scratch& s) const;
  void bf16_bounds(Bf16Scratch& s, __m512* h2, float* dot) const;
  void bf16_thresholds(const V* xnv, const __m512* h2, Bf16Scratch& s) const;
  index_t bf16_candidates(Bf16Scratch& s) const;
  void bf16_exact(const T* X, const V* xnv, index_t rn, Workspace<T>& ws,
                  RowMin<T>* out) const;
#endif
};

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans

#include "impl/engine_blocks.hpp"
#include "impl/engine_direct.hpp"
#include "impl/engine_lanes.hpp"
#ifdef SOFTKMEANS_BF16
#include "impl/engine_bf16.hpp"
#endif
