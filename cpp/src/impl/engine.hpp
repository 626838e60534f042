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
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "impl/rows.hpp"
#include "impl/vec.hpp"

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
};

// The shift of the micro-kernel path: the mean of C rounded to a multiple of a
// power of two no larger than the centroids' spread. Distances are invariant
// under it; it removes the cancellation of the norm expansion far from the
// origin (points at 100 with spread 0.1), and on integer data with spread >= 1
// it is an integer, so integer-valued distances stay exact.
template <typename T>
std::vector<T> centroid_shift(const T* C, index_t k, index_t d) {
  std::vector<double> mu(d, 0.0);
  for (index_t j = 0; j < k; ++j)
    for (index_t l = 0; l < d; ++l) mu[l] += static_cast<double>(C[j * d + l]);
  for (index_t l = 0; l < d; ++l) mu[l] /= static_cast<double>(k);
  double spread = 0.0;
  for (index_t j = 0; j < k; ++j)
    for (index_t l = 0; l < d; ++l)
      spread = std::max(spread, std::fabs(static_cast<double>(C[j * d + l]) - mu[l]));
  std::vector<T> shift(d, T(0));
  for (index_t l = 0; l < d; ++l) {
    if (spread > 0.0) {
      const double q = std::ldexp(1.0, std::ilogb(spread));
      shift[l] = static_cast<T>(std::nearbyint(mu[l] / q) * q);
    } else {
      shift[l] = C[l];  // all centroids equal: shift by them exactly
    }
  }
  return shift;
}

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
  // multiply-adds (2 x 4 and 2 x 8 were 7-15% and 1-3% slower, one thread,
  // d = 16 to 256).
  static constexpr index_t LR = SOFTKMEANS_VEC_BYTES == 64 ? 4 : 2;
  static constexpr index_t LC = 4;

  index_t d = 0, k = 0, kp = 0, mb = 0;
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

  // block_bytes: size of the distance block (rows x kp) a row block fills.
  // in_registers: the caller reduces rows by min2_rows (no distance block; a
  // one-row buffer for the rows it still needs whole, row blocks of a tile).
  // odd_stride: rows of 2 KiB or more are an odd number of cache lines apart
  // (ld > kp), for a caller that reads a column panel down many rows (the
  // softmax accumulation): at a stride of 4 KiB every row of a panel falls in
  // the same L1 set, and the panel was re-read from L2 (accumulate_rt_x alone,
  // k = 1024: 1.4x the time per multiply-add float64, 1.1-1.2x float32).
  // Shorter rows keep ld = kp: there the padding cost more than it saved (the
  // softmax step 3-5% slower at k = 64).
  Engine(const T* C, index_t k_, index_t d_, index_t block_bytes = kDistBlockBytes,
         bool in_registers = false, bool odd_stride = false)
      : d(d_), k(k_) {
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
      ct.assign(d * kp, T(0));
      for (index_t j = 0; j < k; ++j)
        for (index_t l = 0; l < d; ++l) ct[l * kp + j] = C[j * d + l];
      cpad.assign(kp, T(0));
      for (index_t j = k; j < kp; ++j) cpad[j] = std::numeric_limits<T>::infinity();
      craw.assign(C, C + k * d);
      return;
    }
    shift = centroid_shift(C, k, d);
    cp.assign((kp / NR) * d * NR, T(0));
    cn.assign(kp, std::numeric_limits<T>::infinity());
    for (index_t j = 0; j < k; ++j) {
      const index_t p = j / NR, jj = j % NR;
      double nrm = 0.0;
      for (index_t l = 0; l < d; ++l) {
        const T c = C[j * d + l] - shift[l];
        cp[(p * d + l) * NR + jj] = c;
        nrm += static_cast<double>(c) * static_cast<double>(c);
      }
      cn[j] = static_cast<T>(nrm);
    }
    if (dbuf_rows < mb_pad()) {
      std::vector<index_t> identity(round_up(k, LC), -1);
      for (index_t j = 0; j < k; ++j) identity[j] = j;
      order_lanes(identity);
    }
  }

  // The lane panels cl, cnl with centroid centroid_of_slot[j] in slot j (-1:
  // padding, never an argmin), the slots a multiple of LC: lanes_min2 over a
  // slot range then takes any set of centroids (hard_stats_bounded's groups)
  // with each distance's bits unchanged; its argmins are slots.
  void order_lanes(const std::vector<index_t>& centroid_of_slot) {
    kl = static_cast<index_t>(centroid_of_slot.size());
    cl.assign(kl * d, T(0));
    cnl.assign(kl, std::numeric_limits<T>::infinity());
    T cn_max = T(0);
    for (index_t j = 0; j < kl; ++j) {
      const index_t c = centroid_of_slot[j];
      if (c < 0) continue;
      for (index_t l = 0; l < d; ++l)
        cl[(j / LC * d + l) * LC + j % LC] = cp[(c / NR * d + l) * NR + c % NR];
      cnl[j] = cn[c];
      cn_max = std::max(cn_max, cn[c]);
    }
    // ||x - s||^2 + ||c - s||^2 < max / 4 bounds |x.c| and every sum of the
    // distance well below the largest T: no inf, so no NaN (inf - inf).
    // An inf cn_max makes it -inf: every row clamped.
    xn_unclamped = std::numeric_limits<T>::max() / T(4) - cn_max;
  }

  // The shape alone (kp = k rounded up to W, mb rows per distance block of
  // block_bytes), no centroid panels: for the kernels that form their own
  // distance blocks (the csr_* kernels, CsrDistances) and use the engine for
  // its row blocks and the row reductions' strides. distances() and
  // min2_rows() must not be called on it.
  struct ShapeOnly {};
  Engine(ShapeOnly, index_t k_, index_t d_, index_t block_bytes = kDistBlockBytes) : d(d_), k(k_) {
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
      }
    }
    ws.cval.assign(kp, 0.0);
    ws.cidx.assign(kp, 0);
  }

  // dbuf [out] (rows, kp) with row stride ld: D of rows X[0..rows), +inf in
  // the padding columns k..kp.
  void distances(const T* X, index_t rows, Workspace<T>& ws) const {
    T* out = ws.dbuf.data();
    if (small) {
      with_small_dim(d, [&](auto D) { direct<D>(X, rows, out); });
      return;
    }
    T* xb = ws.xb.data();
    T* xn = ws.xn.data();
    const index_t rows_pad = round_up(rows, MR);
    shift_rows(X, rows, xb, xn);
    for (index_t r = rows; r < rows_pad; ++r) {
      for (index_t l = 0; l < d; ++l) xb[r * d + l] = T(0);
      xn[r] = T(0);
    }
    for (index_t p = 0; p < kp / NR; ++p)
      for (index_t r0 = 0; r0 < rows_pad; r0 += MR)
        micro(xb + r0 * d, cp.data() + p * d * NR, xn + r0, cn.data() + p * NR,
              out + r0 * ld + p * NR);
  }

  // out [out] (d,) with stride `stride`: x - s; returns ||x - s||^2, summed in
  // coordinate order by the lanes' multiply-add (pack_group's bits: both
  // reductions of the micro-kernel path see the same distances).
  T shifted_row(const T* x, T* out, index_t stride) const {
    T nrm = 0;
    for (index_t l = 0; l < d; ++l) {
      const T v = x[l] - shift[l];
      out[l * stride] = v;
      nrm = lane_mul_add(v, v, nrm);
    }
    return nrm;
  }

  // xb [out] (rows, d): rows X[0..rows) minus the shift; xn [out] (rows,)
  // their squared norms with shifted_row's bits. Where a vector holds a
  // multiple of 8 lanes, 8 rows at a time: each 8 x 8 block is transposed in
  // registers and the norms summed in the lanes, as pack_group does (row by
  // row, shifted_row's multiply-adds are a chain of d dependent operations;
  // this costs what the unfused vectorized loop it replaced did).
  void shift_rows(const T* X, index_t rows, T* xb, T* xn) const {
    index_t r = 0;
    if constexpr (W % 8 == 0) {
      using O = typename Oct<T>::v;
      using OU = typename Oct<T>::u;
      for (; r + 8 <= rows; r += 8) {
        O nrm{};
        index_t l0 = 0;
        for (; l0 + 8 <= d; l0 += 8) {
          const O s = *reinterpret_cast<const OU*>(shift.data() + l0);
          O v[8];
#pragma GCC unroll 8
          for (index_t q = 0; q < 8; ++q) {
            v[q] = *reinterpret_cast<const OU*>(X + (r + q) * d + l0) - s;
            *reinterpret_cast<OU*>(xb + (r + q) * d + l0) = v[q];
          }
          transpose8(v);
#pragma GCC unroll 8
          for (index_t c = 0; c < 8; ++c) nrm += v[c] * v[c];
        }
        for (index_t l = l0; l < d; ++l)
          for (index_t q = 0; q < 8; ++q) {
            const T v = X[(r + q) * d + l] - shift[l];
            xb[(r + q) * d + l] = v;
            nrm[q] = lane_mul_add(v, v, nrm[q]);
          }
        *reinterpret_cast<OU*>(xn + r) = nrm;
      }
    }
    for (; r < rows; ++r) xn[r] = shifted_row(X + r * d, xb + r * d, 1);
  }

  // Micro-kernel path, rows reduced in the lanes: the distances of the LR W
  // rows of xg (d, LR W) (shifted rows, transposed; xnv their norms) to
  // centroids [j_begin, j_end) (multiples of LC), LC centroids broadcast from
  // the panels cl at a time, each D the micro-kernel's bits (same products in
  // the same order, same clamp), folded per lane into the running two smallest
  // v1, v2 and first argmin i1 (strict <: ties keep the smallest j).
  // Clamp false: the distances unclamped, for the caller that checks (see
  // reduce_group) that they were all positive, when clamping changes nothing.
  template <bool Clamp = true>
  void lanes_min2(const T* xg, const V* xnv, index_t j_begin, index_t j_end, V* v1p, V* v2p,
                  VI* i1p) const {
    // The running state in locals: through the pointers (which may alias the
    // float panels) it would be stored and reloaded at every centroid.
    V v1[LR], v2[LR], xn[LR];
    VI i1[LR];
#pragma GCC unroll 16
    for (index_t q = 0; q < LR; ++q) {
      v1[q] = v1p[q];
      v2[q] = v2p[q];
      xn[q] = xnv[q];
      i1[q] = i1p[q];
    }
    for (index_t j0 = j_begin; j0 < j_end; j0 += LC) {
      const T* cb = cl.data() + j0 * d;
      V a[LR][LC];
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q)
#pragma GCC unroll 16
        for (index_t c = 0; c < LC; ++c) a[q][c] = V{};
      for (index_t l = 0; l < d; ++l) {
        V xv[LR];
#pragma GCC unroll 16
        for (index_t q = 0; q < LR; ++q) xv[q] = vload(xg + (l * LR + q) * W);
#pragma GCC unroll 16
        for (index_t c = 0; c < LC; ++c) {
          const V cv = vset<T>(cb[l * LC + c]);
#pragma GCC unroll 16
          for (index_t q = 0; q < LR; ++q) a[q][c] += xv[q] * cv;
        }
      }
      VI jv = VI{} + static_cast<Int>(j0);
#pragma GCC unroll 16
      for (index_t c = 0; c < LC; ++c, jv += 1) {
        const V cnv = vset<T>(cnl[j0 + c]);
#pragma GCC unroll 16
        for (index_t q = 0; q < LR; ++q) {
          // (xn + cn) - 2 a: 2 a is exact, so one fused multiply-add gives the
          // micro-kernel's (xn + cn) - (a + a) bit for bit.
          const V u = (xn[q] + cnv) - a[q][c] * T(2);
          const V dist = Clamp ? vmax(u, V{}) : u;
          const VI lt = dist < v1[q];
          v2[q] = vmin(v2[q], vmax(v1[q], dist));
          i1[q] = lt ? jv : i1[q];
          v1[q] = vmin(v1[q], dist);
        }
      }
    }
#pragma GCC unroll 16
    for (index_t q = 0; q < LR; ++q) {
      v1p[q] = v1[q];
      v2p[q] = v2[q];
      i1p[q] = i1[q];
    }
  }

  // xg [out] (d, LR W): rows X[r0 .. r0 + rn) minus the shift, transposed
  // (coordinate l of the group's row q at xg[l LR W + q]); lanes past rn
  // repeat the last row. Each x - s is the same subtraction either way.
  // xn [out] (LR,): the rows' squared norms, summed in the lanes in
  // shifted_row's order (the same bits), as each coordinate is packed.
  void pack_group(const T* X, index_t r0, index_t rn, T* xg, V* xn) const {
    constexpr index_t G = LR * W;
    const T* xr[G];
    for (index_t q = 0; q < G; ++q) xr[q] = X + (r0 + std::min<index_t>(q, rn - 1)) * d;
    if constexpr (W % 8 == 0) {
      // Row q of a full group at X + (r0 + q) d: GCC computed the table xr
      // in vector registers and moved each pointer out lane by lane (a
      // tenth of AVX-512's packing); a partial group reads the table.
      const T* x0 = X + r0 * d;
      const bool full = rn == G;
      const auto row = [&](index_t q) { return full ? x0 + q * d : xr[q]; };
      // 8 rows x 8 coordinates per transpose (float AVX2 and AVX-512, double
      // AVX-512): a load and six shuffles per row of 8 where the element-wise
      // stores took 8 extracts. The norms are summed in the same 8-lane
      // pieces (a W-lane load of two 8-lane stores just made would wait for
      // both to retire: no store forwarding; AVX-512's packing took twice
      // AVX2's time that way), then joined.
      using O = typename Oct<T>::v;
      using OU = typename Oct<T>::u;
      constexpr index_t P = G / 8;
      O nrm[P];
#pragma GCC unroll 16
      for (index_t b = 0; b < P; ++b) nrm[b] = O{};
      index_t l0 = 0;
      for (; l0 + 8 <= d; l0 += 8) {
        const O s = *reinterpret_cast<const OU*>(shift.data() + l0);
#pragma GCC unroll 16
        for (index_t b = 0; b < P; ++b) {
          O r[8];
#pragma GCC unroll 8
          for (index_t q = 0; q < 8; ++q)
            r[q] = *reinterpret_cast<const OU*>(row(b * 8 + q) + l0) - s;
          transpose8(r);
#pragma GCC unroll 8
          for (index_t c = 0; c < 8; ++c) {
            *reinterpret_cast<OU*>(xg + (l0 + c) * G + b * 8) = r[c];
            nrm[b] += r[c] * r[c];
          }
        }
      }
      if (l0 < d) {
        for (index_t q = 0; q < G; ++q)
          for (index_t l = l0; l < d; ++l) xg[l * G + q] = xr[q][l] - shift[l];
        for (index_t l = l0; l < d; ++l)
#pragma GCC unroll 16
          for (index_t b = 0; b < P; ++b) {
            const O v = *reinterpret_cast<const OU*>(xg + l * G + b * 8);
            nrm[b] += v * v;
          }
      }
#pragma GCC unroll 16
      for (index_t b = 0; b < LR; ++b) {
        if constexpr (W == 8)
          xn[b] = nrm[b];
        else
          xn[b] = __builtin_shufflevector(nrm[2 * b], nrm[2 * b + 1], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                          10, 11, 12, 13, 14, 15);
      }
    } else {
      for (index_t q = 0; q < G; ++q)
        for (index_t l = 0; l < d; ++l) xg[l * G + q] = xr[q][l] - shift[l];
      V nrm[LR];
#pragma GCC unroll 16
      for (index_t b = 0; b < LR; ++b) nrm[b] = V{};
      for (index_t l = 0; l < d; ++l)
#pragma GCC unroll 16
        for (index_t b = 0; b < LR; ++b) {
          const V v = vload(xg + l * G + b * W);
          nrm[b] += v * v;
        }
#pragma GCC unroll 16
      for (index_t b = 0; b < LR; ++b) xn[b] = nrm[b];
    }
  }

  // Packs rows X[0..rows) (rows <= mb) in groups of LR W for lanes_min2: ws.xt
  // (groups, d, LR W) and their norms in ws.lanes, summed in the lanes in
  // shifted_row's order (the same bits). Returns the number of groups.
  index_t pack_lanes(const T* X, index_t rows, Workspace<T>& ws) const {
    constexpr index_t G = LR * W;
    const index_t groups = (rows + G - 1) / G;
    for (index_t g = 0; g < groups; ++g)
      pack_group(X, g * G, std::min<index_t>(G, rows - g * G), ws.xt.data() + g * d * G,
                 ws.lanes.data() + (3 * g + 2) * LR);
    return groups;
  }

  // The running minima of packed group g back to none (v1 = v2 = +inf).
  void reset_lanes(index_t g, Workspace<T>& ws) const {
    const T inf = std::numeric_limits<T>::infinity();
    for (index_t q = 0; q < LR; ++q) {
      ws.lanes[(3 * g) * LR + q] = ws.lanes[(3 * g + 1) * LR + q] = vset<T>(inf);
      ws.lane_idx[g * LR + q] = VI{};
    }
  }

  // Centroids per block of lanes_min2 calls (about kLaneBlockBytes, kept in L1/L2).
  index_t lane_block() const {
    return std::max<index_t>(LC, kLaneBlockBytes / (d * static_cast<index_t>(sizeof(T))) / LC * LC);
  }

  // min2_rows on the micro-kernel path. The rows are packed in groups of LR W
  // (each (d, LR W), contiguous: a group's loads stay in L1) with their norms;
  // then centroid blocks of about kLaneBlockBytes (kept in L1/L2) are taken
  // against every group, the running minima of a group kept in ws between
  // blocks. With one block (k d of at most kLaneBlockBytes) each group is
  // reduced and written out as soon as it is packed.
  void lane_rows_min2(const T* X, index_t rows, RowMin<T>* out, Workspace<T>& ws) const {
    constexpr index_t G = LR * W;
    const index_t groups = (rows + G - 1) / G;
    T* xt = ws.xt.data();
    V* st = ws.lanes.data();      // (groups, 3, LR): v1, v2, xn
    VI* si = ws.lane_idx.data();  // (groups, LR): i1
    const index_t kc = lane_block();
    const bool one_block = kl <= kc;
    const auto emit = [&](index_t g) {
      const V* sg = st + 3 * g * LR;
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q) {
        const index_t r0 = g * G + q * W, rn = std::min<index_t>(W, rows - r0);
        for (index_t ln = 0; ln < rn; ++ln)
          out[r0 + ln] = {sg[q][ln], sg[LR + q][ln], static_cast<index_t>(si[g * LR + q][ln])};
      }
    };
    const char* x_end = reinterpret_cast<const char*>(X + rows * d);
    for (index_t g = 0; g < groups; ++g) {
      // The next group's rows, requested while this one is reduced: X streams
      // from memory, and the packing's loads would otherwise wait for it.
      const char* next = reinterpret_cast<const char*>(X + (g + 1) * G * d);
      const char* next_end = std::min(x_end, next + G * d * static_cast<index_t>(sizeof(T)));
      for (const char* c = next; c < next_end; c += 64) __builtin_prefetch(c);
      T* xg = xt + g * d * G;
      V* sg = st + 3 * g * LR;
      pack_group(X, g * G, std::min<index_t>(G, rows - g * G), xg, sg + 2 * LR);
      reset_lanes(g, ws);
      if (one_block) {
        reduce_group(xg, sg, si + g * LR);
        emit(g);
      }
    }
    if (one_block) return;
    for (index_t j0 = 0; j0 < kl; j0 += kc) {
      const index_t j1 = std::min(kl, j0 + kc);
      for (index_t g = 0; g < groups; ++g)
        lanes_min2(xt + g * d * G, st + (3 * g + 2) * LR, j0, j1, st + 3 * g * LR,
                   st + (3 * g + 1) * LR, si + g * LR);
    }
    for (index_t g = 0; g < groups; ++g) emit(g);
  }

  // lanes_min2 of a packed group (xg, norms s[2 LR ..)) against all kl
  // centroids into s[0 .. 2 LR) (v1, v2, +inf on entry) and i1 (0 on entry).
  // The clamp at 0 is one of the eight operations a distance costs in the
  // reduction; when the norms rule out inf and NaN (xn_unclamped) the group
  // is reduced without it, and if every lane's smallest distance then came
  // out positive, every distance was (the running minimum is the minimum of
  // all of them), so clamping would have changed none: the bits of the
  // clamped reduction. Otherwise (a row on a centroid, within rounding) the
  // group is reduced again, clamped.
  void reduce_group(const T* xg, V* s, VI* i1) const {
    bool unclamped = true;
#pragma GCC unroll 16
    for (index_t q = 0; q < LR; ++q) unclamped &= all_less(s[2 * LR + q], vset<T>(xn_unclamped));
    if (unclamped) {
      lanes_min2<false>(xg, s + 2 * LR, 0, kl, s, s + LR, i1);
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q) unclamped &= all_less(V{}, s[q]);
      if (unclamped) return;
#pragma GCC unroll 16
      for (index_t q = 0; q < LR; ++q) {
        s[q] = s[LR + q] = vset<T>(std::numeric_limits<T>::infinity());
        i1[q] = VI{};
      }
    }
    lanes_min2(xg, s + 2 * LR, 0, kl, s, s + LR, i1);
  }

  // Direct differences, vectorized over centroids with broadcasts of x.
  template <int D>
  void direct(const T* X, index_t rows, T* out) const {
    for (index_t r = 0; r < rows; ++r) {
      V xs[D];
      for (int l = 0; l < D; ++l) xs[l] = vset<T>(X[r * D + l]);
      T* o = out + r * ld;
      for (index_t j = 0; j < kp; j += W) {
        V s = V{};
        for (int l = 0; l < D; ++l) {
          const V df = xs[l] - vload(ct.data() + l * kp + j);
          s += df * df;
        }
        vstore(o + j, s + vload(cpad.data() + j));
      }
    }
  }

  // Direct path fused with the reduction: the two smallest distances of row x
  // and the first argmin, in registers (no distance row is stored).
  template <int D>
  RowMin<T> direct_min2(const T* x) const {
    V xs[D];
    for (int l = 0; l < D; ++l) xs[l] = vset<T>(x[l]);
    Min2<T> m;
    for (index_t j = 0; j < kp; j += W) {
      V s = vload(cpad.data() + j);
      for (int l = 0; l < D; ++l) {
        const V df = xs[l] - vload(ct.data() + l * kp + j);
        s += df * df;
      }
      m.push(s);
    }
    return m.finish();
  }

  // xv [out] (D,): rows X[r0 .. r0 + rn) in the lanes, coordinate by
  // coordinate; lanes past rn repeat the last row.
  template <int D>
  static void load_row_lanes(const T* X, index_t r0, index_t rn, V* xv) {
    alignas(64) T xt[D][W];
    for (index_t q = 0; q < W; ++q) {
      const index_t r = r0 + std::min<index_t>(q, rn - 1);
      for (int l = 0; l < D; ++l) xt[l][q] = X[r * D + l];
    }
    for (int l = 0; l < D; ++l) xv[l] = vload(&xt[l][0]);
  }

  // Rows in the lanes (xv (D,), from load_row_lanes), centroids broadcast: per
  // lane the running min v1, second min v2 and first argmin i1 (strict <: ties
  // keep the smallest j).
  template <int D>
  void lane_min2(const V* xv, V& v1, V& v2, VI& i1) const {
    const T inf = std::numeric_limits<T>::infinity();
    v1 = vset<T>(inf);
    v2 = vset<T>(inf);
    i1 = VI{};
    const T* c = craw.data();
    for (index_t j = 0; j < k; ++j) {
      V sv = V{};
      for (int l = 0; l < D; ++l) {
        const V df = xv[l] - c[j * D + l];
        sv += df * df;
      }
      const VI lt = sv < v1;
      v2 = vmin(v2, vmax(v1, sv));
      i1 = lt ? (VI{} + static_cast<Int>(j)) : i1;
      v1 = vmin(v1, sv);
    }
  }

  // Small k: W rows at a time in the lanes. out [out] (rows,).
  template <int D>
  void direct_min2_rows(const T* X, index_t rows, RowMin<T>* out) const {
    for (index_t r0 = 0; r0 < rows; r0 += W) {
      const index_t rn = std::min<index_t>(W, rows - r0);
      V xv[D], v1, v2;
      VI i1;
      load_row_lanes<D>(X, r0, rn, xv);
      lane_min2<D>(xv, v1, v2, i1);
      for (index_t q = 0; q < rn; ++q) out[r0 + q] = {v1[q], v2[q], static_cast<index_t>(i1[q])};
    }
  }

  // Reduces rows X[0..rows) (rows <= mb) to RowMin, out [out] (rows,), with
  // no distance block. ws: the rows' scratch on the micro-kernel path.
  void min2_rows(const T* X, index_t rows, RowMin<T>* out, Workspace<T>& ws) const {
    if (!small) {
      lane_rows_min2(X, rows, out, ws);
      return;
    }
    if (k <= kSmallK) {
      with_small_dim(d, [&](auto D) { direct_min2_rows<D>(X, rows, out); });
      return;
    }
    for (index_t r = 0; r < rows; ++r)
      out[r] = with_small_dim(d, [&](auto D) { return direct_min2<D>(X + r * d); });
  }

  // The register-blocked micro-kernel: MR rows x NR centroids of x.c
  // accumulated over d in MR x 2 vector registers, then
  // D = ||x||^2 + ||c||^2 - 2 x.c clamped at 0, stored with row stride kp.
  void micro(const T* xb, const T* cpan, const T* xn, const T* cnp, T* out) const {
    V a0[MR], a1[MR];
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) a0[r] = a1[r] = V{};
    for (index_t l = 0; l < d; ++l) {
      const V c0 = vload(cpan + l * NR);
      const V c1 = vload(cpan + l * NR + W);
#pragma GCC unroll 16
      for (index_t r = 0; r < MR; ++r) {
        const V xv = vset<T>(xb[r * d + l]);
        a0[r] += xv * c0;
        a1[r] += xv * c1;
      }
    }
    const V cn0 = vload(cnp), cn1 = vload(cnp + W);
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) {
      const V x = vset<T>(xn[r]);
      V d0 = (x + cn0) - (a0[r] + a0[r]);
      V d1 = (x + cn1) - (a1[r] + a1[r]);
      d0 = vmax(d0, V{});
      d1 = vmax(d1, V{});
      vstore(out + r * ld, d0);
      vstore(out + r * ld + W, d1);
    }
  }
};

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
