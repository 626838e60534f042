// The engine's micro-kernel path (d > kSmallDim, impl/engine.hpp), rows in
// the lanes: when the caller only needs each row's two smallest distances and
// argmin (hard, entmax15, assign, margins), the micro-kernel's distances with
// rows in the lanes and centroids broadcast (cl, cnl), reduced in registers
// (min2_rows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The lane panels cl, cnl with centroid centroid_of_slot[j] in slot j (-1:
// padding, never an argmin), the slots a multiple of LC: lanes_min2 over a
// slot range then takes any set of centroids (hard_stats_bounded's groups)
// with each distance's bits unchanged; its argmins are slots.
template <typename T>
inline void Engine<T>::order_lanes(const std::vector<index_t>& centroid_of_slot) {
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
#ifdef SOFTKMEANS_BF16
  if (bf16) prepare_bf16();
#endif
}

// Micro-kernel path, rows reduced in the lanes: the distances of the LR W
// rows of xg (d, LR W) (shifted rows, transposed; xnv their norms) to
// centroids [j_begin, j_end) (multiples of LC), broadcast from the panels cl,
// each D the micro-kernel's bits (same products in the same order, same
// clamp), folded per lane into the running two smallest v1, v2 and first
// argmin i1 (strict <: ties keep the smallest j).
// Clamp false: the distances unclamped, for the caller that checks (see
// reduce_group) that they were all positive, when clamping changes nothing.
// The register blocking is a kernel choice (softkmeans/choices.hpp): all LR
// row vectors against LC centroids at a time, or half of them against 2 LC;
// so is, at d = LR LC (16 on AVX-512), the latter software-pipelined
// (lanes_piped). Each way each lane folds its centroids in increasing j:
// the same bits.
template <typename T>
template <bool Clamp>
inline void Engine<T>::lanes_min2(const T* xg, const V* xnv, index_t j_begin, index_t j_end, V* v1p,
                                  V* v2p, VI* i1p) const {
  if constexpr (LR % 2 == 0) {
    if (ch.lane_blocking == 1 || piped<Clamp, LR / 2, 2 * LC>()) {
      for (index_t q0 = 0; q0 < LR; q0 += LR / 2)
        lanes_min2_part<Clamp, LR / 2, 2 * LC>(xg, xnv, q0, j_begin, j_end, v1p, v2p, i1p);
      return;
    }
  }
  lanes_min2_part<Clamp, LR, LC>(xg, xnv, 0, j_begin, j_end, v1p, v2p, i1p);
}

// lanes_min2 for the row vectors q0 .. q0 + QR of the group, CB centroids at
// a time (a multiple of LC; the last centroids LC at a time).
template <typename T>
template <bool Clamp, index_t QR, index_t CB>
inline void Engine<T>::lanes_min2_part(const T* xg, const V* xnv, index_t q0, index_t j_begin,
                                       index_t j_end, V* v1p, V* v2p, VI* i1p) const {
  // The running state in locals: through the pointers (which may alias the
  // float panels) it would be stored and reloaded at every centroid.
  V v1[QR], v2[QR], xn[QR];
  VI i1[QR];
#pragma GCC unroll 16
  for (index_t q = 0; q < QR; ++q) {
    v1[q] = v1p[q0 + q];
    v2[q] = v2p[q0 + q];
    xn[q] = xnv[q0 + q];
    i1[q] = i1p[q0 + q];
  }
  index_t j0 = j_begin;
  if constexpr (!Clamp && QR * CB == LR * LC) {
    if (piped<Clamp, QR, CB>()) {
      j0 = j_end - (j_end - j_begin) % CB;
      lanes_piped<QR, CB>(xg, q0, j_begin, j0, xn, v1, v2, i1);
    }
  }
  for (; j0 + CB <= j_end; j0 += CB) lanes_step<Clamp, QR, CB>(xg, q0, j0, xn, v1, v2, i1);
  if constexpr (CB > LC)
    for (; j0 < j_end; j0 += LC) lanes_step<Clamp, QR, LC>(xg, q0, j0, xn, v1, v2, i1);
#pragma GCC unroll 16
  for (index_t q = 0; q < QR; ++q) {
    v1p[q0 + q] = v1[q];
    v2p[q0 + q] = v2[q];
    i1p[q0 + q] = i1[q];
  }
}

// One step of lanes_min2_part: the row vectors q0 .. q0 + QR against the CB
// centroids from slot j0 (CB / LC panels of cl), in QR x CB accumulators.
template <typename T>
template <bool Clamp, index_t QR, index_t CB>
[[gnu::always_inline]] inline void Engine<T>::lanes_step(const T* xg, index_t q0, index_t j0,
                                                         const V* xn, V* v1, V* v2,
                                                         VI* i1) const {
  const T* cb = cl.data() + j0 * d;
  const index_t panel = d * LC;
  V a[QR][CB];
#pragma GCC unroll 16
  for (index_t q = 0; q < QR; ++q)
#pragma GCC unroll 16
    for (index_t c = 0; c < CB; ++c) a[q][c] = V{};
  for (index_t l = 0; l < d; ++l) {
    V xv[QR];
#pragma GCC unroll 16
    for (index_t q = 0; q < QR; ++q) xv[q] = vload(xg + (l * LR + q0 + q) * W);
#pragma GCC unroll 16
    for (index_t c = 0; c < CB; ++c) {
      const V cv = vset<T>(cb[(c / LC) * panel + l * LC + c % LC]);
#pragma GCC unroll 16
      for (index_t q = 0; q < QR; ++q) a[q][c] = vfma(xv[q], cv, a[q][c]);
    }
  }
  VI jv = VI{} + static_cast<Int>(j0);
#pragma GCC unroll 16
  for (index_t c = 0; c < CB; ++c, jv += 1) {
    const V cnv = vset<T>(cnl[j0 + c]);
#pragma GCC unroll 16
    for (index_t q = 0; q < QR; ++q) {
      // (xn + cn) - 2 a: 2 a is exact, so one fused multiply-add gives the
      // micro-kernel's (xn + cn) - (a + a) bit for bit.
      const V u = vfma(a[q][c], vset<T>(T(-2)), xn[q] + cnv);
      const V dist = Clamp ? vmax(u, V{}) : u;
      const VI lt = dist < v1[q];
      v2[q] = vmin(v2[q], vmax(v1[q], dist));
      i1[q] = lt ? jv : i1[q];
      v1[q] = vmin(v1[q], dist);
    }
  }
}

// Whether lanes_min2_part<Clamp, QR, CB> takes lanes_piped: unclamped, the
// kernel choice lane_pipeline, half the row vectors against 2 LC centroids
// (4 x 4 pipelined spilled: 1.4x the time at d = 16), d = QR CB.
template <typename T>
template <bool Clamp, index_t QR, index_t CB>
inline bool Engine<T>::piped() const {
  return !Clamp && ch.lane_pipeline && QR * 2 == LR && CB == 2 * LC && d == QR * CB;
}

// lanes_min2_part's steps from j_begin to j_end (multiples of CB) at d = QR
// CB, unclamped, software-pipelined: the FMAs of a step are interleaved with
// the fold of the previous step's distances, one distance per coordinate, in
// the fold's order (each lane's centroids in increasing j): the same
// operations on the same values, the same bits. Where the fold follows all
// of a step's FMAs (lanes_step), its 16 distances wait on the step's last
// multiply-adds, fill the scheduler and hold the next step's back: on Zen 5,
// one thread, about 50 cycles a step at d = 16 beyond its 136 FMA cycles.
template <typename T>
template <index_t QR, index_t CB>
inline void Engine<T>::lanes_piped(const T* xg, index_t q0, index_t j_begin, index_t j_end,
                                   const V* xn, V* v1, V* v2, VI* i1) const {
  constexpr index_t D = QR * CB;
  alignas(64) V prev[QR * CB];
  const V m2 = vset<T>(T(-2));
  const index_t panel = D * LC;
  const auto fold = [&](index_t i, index_t jp) {
    const index_t c = i / QR, q = i % QR;
    const V u = vfma(prev[q * CB + c], m2, xn[q] + vset<T>(cnl[jp + c]));
    const VI lt = u < v1[q];
    v2[q] = vmin(v2[q], vmax(v1[q], u));
    i1[q] = lt ? VI{} + static_cast<Int>(jp + c) : i1[q];
    v1[q] = vmin(v1[q], u);
  };
  const auto step = [&](index_t j0, index_t jp, auto with_fold) {
    const T* cb = cl.data() + j0 * D;
    // The rows' loads stay in each step: seen invariant, GCC hoisted them
    // out of the centroid loop and spilled them.
    const T* xs = xg;
    asm("" : "+r"(xs));
    V a[QR][CB];
#pragma GCC unroll 16
    for (index_t q = 0; q < QR; ++q)
#pragma GCC unroll 16
      for (index_t c = 0; c < CB; ++c) a[q][c] = V{};
#pragma GCC unroll 16
    for (index_t l = 0; l < D; ++l) {
      V xv[QR];
#pragma GCC unroll 16
      for (index_t q = 0; q < QR; ++q) xv[q] = vload(xs + (l * LR + q0 + q) * W);
#pragma GCC unroll 16
      for (index_t c = 0; c < CB; ++c) {
        const V cv = vset<T>(cb[(c / LC) * panel + l * LC + c % LC]);
#pragma GCC unroll 16
        for (index_t q = 0; q < QR; ++q) a[q][c] = vfma(xv[q], cv, a[q][c]);
      }
      if constexpr (decltype(with_fold)::value) fold(l, jp);
    }
#pragma GCC unroll 16
    for (index_t q = 0; q < QR; ++q)
#pragma GCC unroll 16
      for (index_t c = 0; c < CB; ++c) prev[q * CB + c] = a[q][c];
  };
  if (j_begin >= j_end) return;
  step(j_begin, 0, std::false_type{});
  for (index_t j0 = j_begin + CB; j0 < j_end; j0 += CB) step(j0, j0 - CB, std::true_type{});
#pragma GCC unroll 16
  for (index_t i = 0; i < D; ++i) fold(i, j_end - CB);
}

// xg [out] (d, LR W): rows X[r0 .. r0 + rn) minus the shift, transposed
// (coordinate l of the group's row q at xg[l LR W + q]); lanes past rn
// repeat the last row. Each x - s is the same subtraction either way.
// xn [out] (LR,): the rows' squared norms, summed in the lanes in
// shifted_row's order (the same bits), as each coordinate is packed.
// which [nullable]: the group's rows are X + which[r0 + q] d instead (rows
// gathered by the packing itself: no copy of them first).
template <typename T>
inline void Engine<T>::pack_group(const T* X, index_t r0, index_t rn, T* xg, V* xn,
                                  const index_t* which) const {
  constexpr index_t G = LR * W;
  const T* xr[G];
  for (index_t q = 0; q < G; ++q) {
    const index_t r = r0 + std::min<index_t>(q, rn - 1);
    xr[q] = X + (which != nullptr ? which[r] : r) * d;
  }
  if constexpr (W % 8 == 0) {
    // Row q of a full group at X + (r0 + q) d: GCC computed the table xr
    // in vector registers and moved each pointer out lane by lane (a
    // tenth of AVX-512's packing); a partial or gathered group reads the table.
    const T* x0 = X + r0 * d;
    const bool full = rn == G && which == nullptr;
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
          nrm[b] = vfma(r[c], r[c], nrm[b]);
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
          nrm[b] = vfma(v, v, nrm[b]);
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
        nrm[b] = vfma(v, v, nrm[b]);
      }
#pragma GCC unroll 16
    for (index_t b = 0; b < LR; ++b) xn[b] = nrm[b];
  }
}

// Packs rows X[0..rows) (rows <= mb; which [nullable]: rows X + which[q] d)
// in groups of LR W for lanes_min2: ws.xt (groups, d, LR W) and their norms
// in ws.lanes, summed in the lanes in shifted_row's order (the same bits).
// Returns the number of groups.
template <typename T>
inline index_t Engine<T>::pack_lanes(const T* X, index_t rows, Workspace<T>& ws,
                                     const index_t* which) const {
  constexpr index_t G = LR * W;
  const index_t groups = (rows + G - 1) / G;
  for (index_t g = 0; g < groups; ++g)
    pack_group(X, g * G, std::min<index_t>(G, rows - g * G), ws.xt.data() + g * d * G,
               ws.lanes.data() + (3 * g + 2) * LR, which);
  return groups;
}

// The running minima of packed group g back to none (v1 = v2 = +inf).
template <typename T>
inline void Engine<T>::reset_lanes(index_t g, Workspace<T>& ws) const {
  const T inf = std::numeric_limits<T>::infinity();
  for (index_t q = 0; q < LR; ++q) {
    ws.lanes[(3 * g) * LR + q] = ws.lanes[(3 * g + 1) * LR + q] = vset<T>(inf);
    ws.lane_idx[g * LR + q] = VI{};
  }
}

// Centroids per block of lanes_min2 calls (about lane_block_bytes, kept in L1/L2).
template <typename T>
inline index_t Engine<T>::lane_block() const {
  return std::max<index_t>(LC,
                           ch.lane_block_bytes / (d * static_cast<index_t>(sizeof(T))) / LC * LC);
}

// min2_rows on the micro-kernel path. The rows are packed in groups of LR W
// (each (d, LR W), contiguous: a group's loads stay in L1) with their norms;
// then centroid blocks of about lane_block_bytes (kept in L1/L2) are taken
// against every group, the running minima of a group kept in ws between
// blocks. With one block (k d of at most lane_block_bytes) each group is
// reduced and written out as soon as it is packed.
template <typename T>
inline void Engine<T>::lane_rows_min2(const T* X, index_t rows, RowMin<T>* out,
                                      Workspace<T>& ws) const {
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
#ifdef SOFTKMEANS_BF16
  if (bf16) {
    // Group by group: the bf16 candidates and their exact distances, or the
    // float path where bf16_group declines.
    for (index_t g = 0; g < groups; ++g) {
      const index_t rn = std::min<index_t>(G, rows - g * G);
      T* xg = xt + g * d * G;
      V* sg = st + 3 * g * LR;
      pack_group(X, g * G, rn, xg, sg + 2 * LR);
      Bf16Scratch& tally = ws.bf16;
      const bool trying = tally.worth_trying();
      ++tally.seen;
      if (trying) {
        ++tally.tried;
        if (bf16_group(xg, sg + 2 * LR, rn, ws, nullptr)) {
          bf16_exact(X + g * G * d, sg + 2 * LR, rn, ws, out + g * G);
          continue;
        }
        ++tally.declined;
      }
      reset_lanes(g, ws);
      reduce_group(xg, sg, si + g * LR);
      emit(g);
    }
    return;
  }
#endif
  // The rows prefetch_groups groups ahead (a kernel choice), requested while
  // this group is reduced: X streams from memory, and the packing's loads
  // would otherwise wait for it. Past the block's end too (the next block's
  // first groups; a prefetch never faults), in integers: no pointer is formed
  // outside X.
  const std::uintptr_t x0 = reinterpret_cast<std::uintptr_t>(X);
  const std::uintptr_t group_bytes = static_cast<std::uintptr_t>(G * d) * sizeof(T);
  const auto ahead = static_cast<std::uintptr_t>(ch.prefetch_groups);
  for (index_t g = 0; g < groups; ++g) {
    if (ahead > 0) {
      const std::uintptr_t from = x0 + (static_cast<std::uintptr_t>(g) + ahead) * group_bytes;
      for (std::uintptr_t c = from; c < from + group_bytes; c += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(c));
    }
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
  reduce_blocks(groups, kc, ws);
  for (index_t g = 0; g < groups; ++g) emit(g);
}

// lane_rows_min2's reduction of the packed groups (ws.xt, norms in ws.lanes)
// against centroid blocks of kc, each block against every group, into the
// groups' running minima (+inf and 0 on entry).
// As reduce_group, over the centroid blocks: unclamped where every row's
// norm rules out inf and NaN; then a group whose smallest distances all
// came out positive is done, and in any other the row vectors that did not
// are reduced again, clamped, over all centroids at once (redo_clamped).
template <typename T>
inline void Engine<T>::reduce_blocks(index_t groups, index_t kc, Workspace<T>& ws) const {
  constexpr index_t G = LR * W;
  const T* xt = ws.xt.data();
  V* st = ws.lanes.data();      // (groups, 3, LR): v1, v2, xn
  VI* si = ws.lane_idx.data();  // (groups, LR): i1
  bool unclamped = true;
  for (index_t g = 0; g < groups; ++g)
#pragma GCC unroll 16
    for (index_t q = 0; q < LR; ++q)
      unclamped &= all_less(st[(3 * g + 2) * LR + q], vset<T>(xn_unclamped));
  for (index_t j0 = 0; j0 < kl; j0 += kc) {
    const index_t j1 = std::min(kl, j0 + kc);
    for (index_t g = 0; g < groups; ++g) {
      const V* xn = st + (3 * g + 2) * LR;
      V *v1 = st + 3 * g * LR, *v2 = v1 + LR;
      if (unclamped)
        lanes_min2<false>(xt + g * d * G, xn, j0, j1, v1, v2, si + g * LR);
      else
        lanes_min2(xt + g * d * G, xn, j0, j1, v1, v2, si + g * LR);
    }
  }
  for (index_t g = 0; g < groups && unclamped; ++g)
    redo_clamped(xt + g * d * G, st + 3 * g * LR, si + g * LR);
}

// After an unclamped lanes_min2 of a packed group against all kl centroids
// (s, i1 as reduce_group's): each row vector whose smallest distances did
// not all come out positive (a row on a centroid, within rounding) reduced
// again, clamped, alone (its lanes fold the centroids in increasing j as
// before: the same bits); the others are done (see reduce_group). On Zen 5
// 1.6% of the groups at (1e6, 64, 256) blobs.
template <typename T>
inline void Engine<T>::redo_clamped(const T* xg, V* s, VI* i1) const {
  for (index_t q = 0; q < LR; ++q) {
    if (all_less(V{}, s[q])) continue;
    s[q] = s[LR + q] = vset<T>(std::numeric_limits<T>::infinity());
    i1[q] = VI{};
    lanes_min2_part<true, 1, LR * LC>(xg, s + 2 * LR, q, 0, kl, s, s + LR, i1);
  }
}

// lanes_min2 of a packed group (xg, norms s[2 LR ..)) against all kl
// centroids into s[0 .. 2 LR) (v1, v2, +inf on entry) and i1 (0 on entry).
// The clamp at 0 is one of the eight operations a distance costs in the
// reduction; when the norms rule out inf and NaN (xn_unclamped) the group
// is reduced without it, and if every lane's smallest distance then came
// out positive, every distance was (the running minimum is the minimum of
// all of them), so clamping would have changed none: the bits of the
// clamped reduction. Otherwise (a row on a centroid, within rounding) that
// row vector is reduced again, clamped (redo_clamped).
template <typename T>
inline void Engine<T>::reduce_group(const T* xg, V* s, VI* i1) const {
  bool unclamped = true;
#pragma GCC unroll 16
  for (index_t q = 0; q < LR; ++q) unclamped &= all_less(s[2 * LR + q], vset<T>(xn_unclamped));
  if (unclamped) {
    lanes_min2<false>(xg, s + 2 * LR, 0, kl, s, s + LR, i1);
    redo_clamped(xg, s, i1);
    return;
  }
  lanes_min2(xg, s + 2 * LR, 0, kl, s, s + LR, i1);
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
