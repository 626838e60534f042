// The accumulators of the block-statistics kernel, one per assignment path.
// Each holds the per-call constants of its path and defines
//   Tile                      its per-thread float tile partial,
//   init(tile)                allocates it (outside the parallel region),
//   block(pass, chunk, ws, tile, i0, rows)   one row block,
//   fold(tile, chunk)         adds the tile partial into the chunk's double
//                             totals and clears it (at each tile end),
//   sums                      whether N and S are accumulated at all;
// the row-at-a-time ones (all but LaneAccumulator) also define
//   nonzero_blocks(tile, r), row(tile, r, x, wi, assignment, ws), block_end,
// called by stats_rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/engine.hpp"
#include "impl/product.hpp"
#include "impl/stats_pass.hpp"
#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Hard and entmax15, direct path (d <= kSmallDim), k <= kLaneAccK, no grad_X:
// W rows per vector, distances, argmin, margin and the accumulation of N, S
// and J by label masks, all in the lanes (one masked add per centroid and
// coordinate per W rows). The partials live in VW = 64 / sizeof(T) virtual
// lanes whatever the unit's W (16 floats, 8 doubles: AVX-512's), row i of a
// tile in lane i % VW (a tile is one block here, starting at a multiple of
// kRowTile), the W-row vectors of a narrower unit taking their VW / W slices
// in turn: each lane sums the same rows in the same order at every level, and
// the fold adds the VW lanes in order (SPEC.md, "Determinism across
// machines").
//
// entmax15 (K == Kind::entmax15) shares the hard code: a lane whose margin is
// >= 4 sigma^2 (> 0) is one-hot (StatsPass::assign_row's test, in double), and
// one-hot lanes take the masked adds of hard, so with every lane one-hot the
// step performs hard's operations on hard's values and returns its bits
// (SPEC.md, "Margins and temperatures"). The other lanes of positive weight
// (rare below the threshold) are taken row by row as in stats_rows: distance
// row, entmax_row, the support's w r x and w r into a separate row-wise tile
// partial (as SparseAccumulator), the row's objective extra (its Tsallis
// objective minus m1, whose w m1 is in J's lanes) into a double. Zero-weight
// lanes are masked adds of zero weight either way, as in hard.
template <typename T, Kind K>
struct LaneAccumulator {
  static_assert(K == Kind::hard || K == Kind::entmax15, "hard or entmax15");
  static constexpr bool kEntmax = K == Kind::entmax15;
  using V = typename VT<T>::v;
  using VI = typename VT<T>::i;
  using Int = typename Engine<T>::Int;
  static constexpr index_t W = VT<T>::W;
  static constexpr index_t VW = 64 / static_cast<index_t>(sizeof(T));
  static_assert(VW % W == 0, "virtual lanes");
  struct Tile {
    // lanes (k (d + 1) + 2, VW): N_j (k rows), S_jl (k d rows), J, min margin.
    std::vector<T> lanes;
    // entmax15 rows that are not one-hot: S (k, d) (with sums), N (k,) (with
    // sums), their sum of w_i extra_i, and whether anything was added.
    std::vector<T> S;
    std::vector<double> N;
    double extra = 0.0;
    bool any = false;
  };
  index_t k, d;
  bool sums;
  // entmax15: thr = 4 sigma^2 as StatsPass::assign_row has it, thr_up the
  // smallest T >= thr. A lane with gap > thr_up in T has, in double,
  // gap > thr_up >= thr (rounding is monotone and exact at thr_up): it is
  // one-hot. Lanes failing this T test (a superset of the not one-hot ones,
  // NaN included) get assign_row's test itself.
  double thr;
  T thr_up;

  LaneAccumulator(const StatsPass<T>& p, bool sums_)
      : k(p.E.k), d(p.E.d), sums(sums_), thr(4.0 * p.sigma2) {
    thr_up = static_cast<T>(std::min<double>(thr, std::numeric_limits<T>::max()));
    if (static_cast<double>(thr_up) < thr)
      thr_up = std::nextafter(thr_up, std::numeric_limits<T>::infinity());
  }

  void init(Tile& t) const {
    t.lanes.assign((k * (d + 1) + 2) * VW, T(0));
    std::fill(t.lanes.end() - VW, t.lanes.end(), std::numeric_limits<T>::infinity());
    if (kEntmax && sums) {
      t.S.assign(k * d, T(0));
      t.N.assign(k, 0.0);
    }
  }

  void block(const StatsPass<T>& p, ChunkStats& chunk, Workspace<T>& ws, Tile& t, index_t i0,
             index_t rows) const {
    for (index_t r = 0; r < rows; ++r) chunk.W += p.w[i0 + r];
    with_small_dim(d, [&](auto D) { lane_rows<D>(p, ws, t, i0, rows); });
  }

  // Rows i0 .. i0 + rows of p; p.labels [out, nullable] get the argmins.
  template <int D>
  void lane_rows(const StatsPass<T>& p, Workspace<T>& ws, Tile& t, index_t i0, index_t rows) const {
    const T inf = std::numeric_limits<T>::infinity();
    const T* X = p.X + i0 * D;
    const double* w = p.w + i0;
    std::int64_t* labels = p.labels ? p.labels + i0 : nullptr;
    for (index_t r0 = 0; r0 < rows; r0 += W) {
      // This vector's slice of the virtual lanes (i0 % VW == 0).
      T* acc = t.lanes.data() + r0 % VW;
      T* jacc = acc + k * (D + 1) * VW;
      T* macc = jacc + VW;
      const index_t rn = std::min<index_t>(W, rows - r0);
      alignas(64) T wt[W];
      for (index_t q = 0; q < W; ++q) wt[q] = q < rn ? static_cast<T>(w[r0 + q]) : T(0);
      V xv[D], v1, v2;
      VI i1;
      p.E.template load_row_lanes<D>(X, r0, rn, xv);
      p.E.template lane_min2<D>(xv, v1, v2, i1);
      const V wv = vload(wt);  // padding lanes weigh 0
      if (labels)
        for (index_t q = 0; q < rn; ++q) labels[r0 + q] = static_cast<std::int64_t>(i1[q]);
      vstore(jacc, vfma(wv, v1, vload(jacc)));
      const V gap = v2 - v1;
      vstore(macc, vmin(vload(macc), wv > V{} ? gap : vset<T>(inf)));
      unsigned rowwise = 0;  // lanes taken row by row (entmax15, not one-hot)
      if constexpr (kEntmax) {
        constexpr unsigned all = (1u << W) - 1;
        const unsigned sure = lane_bits<Cmp::lt>(vset<T>(thr_up), gap);
        if (sure != all)
          for (index_t q = 0; q < rn; ++q) {
            if (((sure >> q) & 1u) || !(w[r0 + q] > 0.0)) continue;
            const double g = static_cast<double>(v2[q]) - static_cast<double>(v1[q]);
            if (!(g > 0.0 && g >= thr)) rowwise |= 1u << q;
          }
      }
      if (rowwise == 0) {
        masked_adds<D, false>(acc, xv, wv, i1, VI{});
      } else {
        // With every row taken row by row only the padding lanes (weight 0)
        // are left: their +-0 adds cannot change a fold, which starts at +0.0.
        if (rowwise != (1u << rn) - 1) {
          VI keep;
          for (index_t q = 0; q < W; ++q) keep[q] = ((rowwise >> q) & 1u) ? Int(0) : Int(-1);
          masked_adds<D, true>(acc, xv, wv, i1, keep);
        }
        for (index_t q = 0; q < rn; ++q)
          if ((rowwise >> q) & 1u) entmax_lane_row(p, ws, t, i0 + r0 + q, v1[q]);
      }
    }
  }

  // N_j += w, S_j += w x on the lanes labelled j (and in keep, with Keep).
  template <int D, bool Keep>
  void masked_adds(T* acc, const V* xv, V wv, VI i1, VI keep) const {
    T* nacc = acc;
    T* sacc = acc + k * VW;
    V wx[D];
    for (int l = 0; l < D; ++l) wx[l] = wv * xv[l];
    for (index_t j = 0; j < k; ++j) {
      VI hit = i1 == (VI{} + static_cast<Int>(j));
      if constexpr (Keep) hit &= keep;
      vstore(nacc + j * VW, vload(nacc + j * VW) + (hit ? wv : V{}));
      for (int l = 0; l < D; ++l) {
        T* sp = sacc + (j * D + l) * VW;
        vstore(sp, vload(sp) + (hit ? wx[l] : V{}));
      }
    }
  }

  // entmax15 row i (weight > 0, not one-hot, min distance m1) as stats_rows
  // takes it: its responsibilities into the row-wise partial.
  void entmax_lane_row(const StatsPass<T>& p, Workspace<T>& ws, Tile& t, index_t i, T m1) const {
    const T* x = p.X + i * d;
    const double wi = p.w[i];
    p.E.distances(x, 1, ws);
    double extra;
    const index_t supp =
        entmax_row(ws.dbuf.data(), p.E.kp, m1, p.sigma2, ws.cval.data(), ws.cidx.data(), &extra);
    t.extra += rounded_product(wi, extra);
    t.any = true;
    if (!sums) return;
    for (index_t s = 0; s < supp; ++s) {
      const double wr = wi * ws.cval[s];
      const index_t j = ws.cidx[s];
      t.N[j] += wr;
      const T f = static_cast<T>(wr);
      T* sj = t.S.data() + j * d;
      for (index_t l = 0; l < d; ++l) sj[l] += f * x[l];
    }
  }

  void fold(Tile& t, ChunkStats& chunk) const {
    T* a = t.lanes.data();
    auto lane_sum = [&](T* v) {
      double s = 0.0;
      for (index_t q = 0; q < VW; ++q) {
        s += static_cast<double>(v[q]);
        v[q] = T(0);
      }
      return s;
    };
    if (sums) {
      for (index_t j = 0; j < k; ++j) chunk.N[j] += lane_sum(a + j * VW);
      for (index_t q = 0; q < k * d; ++q) chunk.S[q] += lane_sum(a + (k + q) * VW);
    } else {
      std::fill(a, a + k * (d + 1) * VW, T(0));
    }
    const double jt = lane_sum(a + k * (d + 1) * VW);
    chunk.J += jt;
    chunk.obj += jt;
    T* m = a + (k * (d + 1) + 1) * VW;
    for (index_t q = 0; q < VW; ++q) {
      chunk.mm = std::min(chunk.mm, static_cast<double>(m[q]));
      m[q] = std::numeric_limits<T>::infinity();
    }
    // Only when something was added: + 0.0 would turn a -0.0 into +0.0.
    if (kEntmax && t.any) {
      if (sums) {
        for (index_t q = 0; q < k * d; ++q) {
          chunk.S[q] += static_cast<double>(t.S[q]);
          t.S[q] = T(0);
        }
        for (index_t j = 0; j < k; ++j) {
          chunk.N[j] += t.N[j];
          t.N[j] = 0.0;
        }
      }
      chunk.obj += t.extra;
      t.extra = 0.0;
      t.any = false;
    }
  }
};

// Hard and entmax15 rows (a support of one or a few centroids): w r x added
// by axpy into a (k, d) float tile partial of S, w r into a (k,) double
// partial of N. With more than kRowTile / 2 centroids the fold takes only
// the centroids a tile touched: the others' partials are +0.0, and
// adding +0.0 leaves a chunk total unchanged (a total that starts at +0.0 is
// never -0.0), so the sums keep their bits while a tile of 256 rows no longer
// sweeps all k (d + 1) partials (1 MB of floats and 2 MB of doubles at
// k = 1024, d = 256). With few (k = 64: a tile touches almost all of them) the
// fold sweeps all k, by the same argument, and a row pays no bookkeeping.
template <typename T>
struct SparseAccumulator {
  using V = typename VT<T>::v;
  static constexpr index_t W = VT<T>::W;
  struct Tile {
    std::vector<T> S;                   // (k, d)
    std::vector<double> N;              // (k,)
    std::vector<std::uint8_t> touched;  // (k,) whether centroid j is in `list`
    std::vector<index_t> list;          // (k,) the touched centroids, `count` of them
    index_t count = 0;
  };
  index_t k, d;
  bool sweep;  // the fold takes all k centroids (no touched list)
  static constexpr bool sums = true;

  explicit SparseAccumulator(const Engine<T>& E) : k(E.k), d(E.d), sweep(2 * E.k <= kRowTile) {}

  void init(Tile& t) const {
    t.S.assign(k * d, T(0));
    t.N.assign(k, 0.0);
    t.touched.assign(k, 0);
    t.list.assign(k, 0);
    t.count = 0;
    if (sweep) {
      for (index_t j = 0; j < k; ++j) t.list[j] = j;
      t.count = k;
    }
  }
  void block(const StatsPass<T>& p, ChunkStats& chunk, Workspace<T>& ws, Tile& t, index_t i0,
             index_t rows) const {
    if (p.kind == Kind::hard && !p.grad_X)
      stats_rows_hard(p, *this, chunk, ws, t, i0, rows);
    else
      stats_rows(p, *this, chunk, ws, t, i0, rows);
  }
  std::uint8_t* nonzero_blocks(Tile&, index_t) const { return nullptr; }
  void row(Tile& t, index_t, const T* x, double wi, const RowAssignment& a,
           const Workspace<T>& ws) const {
    if (wi == 0.0) return;
    for (index_t s = 0; s < a.supp; ++s) add(t, x, wi * ws.cval[s], ws.cidx[s]);
  }
  // A hard row: responsibility 1 (wi * 1.0 is exactly wi in row()).
  void one_hot(Tile& t, const T* x, double wi, index_t j) const {
    if (wi != 0.0) add(t, x, wi, j);
  }
  // one_hot of the rows of a block in row order: row r (X + r d) with
  // weight w[r] and label mins[r].a. The same adds; where d is 1-4 vectors
  // a loop of its own, with the tile's pointers in registers and no loop
  // over d (the generic loop reloaded d and the pointers at every row: its
  // stores may alias them; 2 ns a row of 17 at d = 16, k = 64).
  void one_hot_rows(Tile& t, const T* X, const double* w, const RowMin<T>* mins,
                    index_t rows) const {
    one_hot_by(t, X, w, [mins](index_t r) { return mins[r].a; }, rows);
  }
  // The same with the labels as an array (the fused biased pass's, biased.hpp).
  void one_hot_labels(Tile& t, const T* X, const double* w, const std::int64_t* labels,
                      index_t rows) const {
    one_hot_by(t, X, w, [labels](index_t r) { return static_cast<index_t>(labels[r]); }, rows);
  }
  // one_hot_rows with row r's label label_of(r).
  template <typename LabelOf>
  void one_hot_by(Tile& t, const T* X, const double* w, LabelOf label_of, index_t rows) const {
    const auto fixed = [&](auto DV) {
      if (sweep)
        one_hot_fixed<decltype(DV)::value, true>(t, X, w, label_of, rows);
      else
        one_hot_fixed<decltype(DV)::value, false>(t, X, w, label_of, rows);
    };
    if (d == W) return fixed(std::integral_constant<int, 1>{});
    if (d == 2 * W) return fixed(std::integral_constant<int, 2>{});
    if (d == 3 * W) return fixed(std::integral_constant<int, 3>{});
    if (d == 4 * W) return fixed(std::integral_constant<int, 4>{});
    for (index_t r = 0; r < rows; ++r) one_hot(t, X + r * d, w[r], label_of(r));
  }
  // one_hot_by at d = DV W (Sweep: this->sweep): add()'s operations.
  template <int DV, bool Sweep, typename LabelOf>
  void one_hot_fixed(Tile& t, const T* X, const double* w, LabelOf label_of, index_t rows) const {
    T* S = t.S.data();
    double* N = t.N.data();
    std::uint8_t* touched = t.touched.data();
    index_t* list = t.list.data();
    index_t count = t.count;
    for (index_t r = 0; r < rows; ++r) {
      const double wi = w[r];
      if (wi == 0.0) continue;
      const index_t j = label_of(r);
      if (!Sweep) {
        list[count] = j;  // kept only if j is new
        count += touched[j] == 0;
        touched[j] = 1;
      }
      N[j] += wi;
      const V fv = vset<T>(static_cast<T>(wi));
      T* sj = S + j * (DV * W);
      const T* x = X + r * (DV * W);
#pragma GCC unroll 4
      for (int v = 0; v < DV; ++v)
        vstore(sj + v * W, vfma(fv, vload(x + v * W), vload(sj + v * W)));
    }
    t.count = count;
  }
  // N_j += wr, S_j += wr x (wr rounded to T). Inlined: a call per row was
  // 15-20% of a bounded step that skips most rows (d = 16, k = 64).
  [[gnu::always_inline]] void add(Tile& t, const T* x, double wr, index_t j) const {
    if (!sweep && !t.touched[j]) {
      t.touched[j] = 1;
      t.list[t.count++] = j;
    }
    t.N[j] += wr;
    const T f = static_cast<T>(wr);
    const V fv = vset<T>(f);
    T* sj = t.S.data() + j * d;
    index_t l = 0;
    for (; l + W <= d; l += W) vstore(sj + l, vfma(fv, vload(x + l), vload(sj + l)));
    for (; l < d; ++l) sj[l] = lane_mul_add(f, x[l], sj[l]);  // the lanes' bits
  }
  void block_end(Tile&, const Workspace<T>&, index_t) const {}
  // Each total gets one add per tile whichever order the centroids take, so
  // where a tile touched a quarter of them or more they are taken in
  // increasing j (the partials read in memory order, which the prefetchers
  // follow; in the list's order, at k = 256, d = 64, every centroid's rows
  // were a new L2 miss), else in the list's.
  void fold(Tile& t, ChunkStats& chunk) const {
    const auto fold_one = [&](index_t j) {
      T* sj = t.S.data() + j * d;
      double* cj = chunk.S.data() + j * d;
      for (index_t l = 0; l < d; ++l) {
        cj[l] += static_cast<double>(sj[l]);
        sj[l] = T(0);
      }
      chunk.N[j] += t.N[j];
      t.N[j] = 0.0;
      t.touched[j] = 0;
    };
    if (!sweep && 4 * t.count >= k) {
      for (index_t j = 0; j < k; ++j)
        if (t.touched[j]) fold_one(j);
    } else {
      for (index_t s = 0; s < t.count; ++s) fold_one(t.list[s]);
    }
    if (!sweep) t.count = 0;
  }
};

// Softmax rows (dense): the weighted rows are collected per row block and
// St += A R by the blocked product accumulate_rt_x, into a
// transposed (d + 1, kp) float tile partial whose row d is N.
template <typename T>
struct DenseSoftmaxAccumulator {
  static constexpr index_t W = VT<T>::W;
  struct Tile {
    std::vector<T> St;             // (dp, kp): S^T in rows 0..d-1, N in row d
    std::vector<T> A;              // (mb, dp) the block's rows w x and w (0 beyond)
    std::vector<std::uint8_t> nz;  // (mb, kp / W) nonzero W-blocks of the rows
    std::vector<T> Sw;             // (W, d) W columns of St transposed (fold)
  };
  index_t k, d, kp, mb;  // mb: rows of a block (padded)
  index_t ld;            // row stride of the block's responsibilities
  index_t mbl;           // rows of the accumulation micro-kernel
  index_t dp;            // d + 1 rounded up to mbl
  static constexpr bool sums = true;

  explicit DenseSoftmaxAccumulator(const Engine<T>& E)
      : k(E.k), d(E.d), kp(E.kp), mb(E.mb_pad()), ld(E.ld) {
    // MB x 2 accumulators: 12 (+ 2 rows of R + 1 broadcast) fit the 16
    // vector registers of SSE/AVX2 (6 x 4 on AVX-512 was no faster). The
    // product takes the d + 1 rows of A, its last tile shorter (17 = 6 + 6 +
    // 5: 18 rows, the padding's zeros included, cost 6% more at d = 16).
    mbl = (d + 1 <= 4) ? 4 : 6;
    dp = round_up(d + 1, mbl);
  }

  void init(Tile& t) const {
    t.St.assign(dp * kp, T(0));
    t.A.assign(mb * dp, T(0));
    t.nz.assign(mb * (kp / W), 0);
    t.Sw.assign(W * d, T(0));
  }
  void block(const StatsPass<T>& p, ChunkStats& chunk, Workspace<T>& ws, Tile& t, index_t i0,
             index_t rows) const {
    stats_rows_softmax(p, *this, chunk, ws, t, i0, rows);
  }
  std::uint8_t* nonzero_blocks(Tile& t, index_t r) const { return t.nz.data() + r * (kp / W); }
  void row(Tile& t, index_t r, const T* x, double, const RowAssignment& a,
           const Workspace<T>&) const {
    const T wt = static_cast<T>(a.weight);
    T* ar = t.A.data() + r * dp;
    for (index_t l = 0; l < d; ++l) ar[l] = wt * x[l];
    ar[d] = wt;
  }
  void block_end(Tile& t, const Workspace<T>& ws, index_t rows) const {
    // The d + 1 rows of A only (its padding column would add zeros).
    if (mbl == 4)
      accumulate_rt_x<4, 2>(t.A.data(), dp, d + 1, ws.dbuf.data(), ld, rows, kp, t.St.data(),
                            t.nz.data());
    else
      accumulate_rt_x<6, 2>(t.A.data(), dp, d + 1, ws.dbuf.data(), ld, rows, kp, t.St.data(),
                            t.nz.data());
  }
  // Each total gets its one add, as before, through a transposed copy of W
  // columns of St (t.Sw, (W, d)): St's rows are read a vector at a time and
  // S's rows written contiguously. Read down its columns (rows kp apart: 4 KiB
  // at k = 1024, all in one L1 set) St missed L1 on every entry; written down
  // its columns, S (2 MiB at k = 1024, d = 256) did.
  void fold(Tile& t, ChunkStats& chunk) const {
    T* sw = t.Sw.data();
    for (index_t j0 = 0; j0 < kp; j0 += W) {
      for (index_t l = 0; l < d; ++l) {
        const typename VT<T>::v v = vload(t.St.data() + l * kp + j0);
        for (index_t q = 0; q < W; ++q) sw[q * d + l] = v[q];
      }
      const index_t jn = std::min(W, k - j0);
      for (index_t q = 0; q < jn; ++q) {
        double* s = chunk.S.data() + (j0 + q) * d;
        const T* c = sw + q * d;
        for (index_t l = 0; l < d; ++l) s[l] += static_cast<double>(c[l]);
      }
    }
    for (index_t j = 0; j < k; ++j) chunk.N[j] += static_cast<double>(t.St[d * kp + j]);
    std::fill(t.St.begin(), t.St.end(), T(0));
  }
};

// No N and S (the objective, J, margins, labels and grad_X only).
template <typename T>
struct ObjectiveOnly {
  struct Tile {};
  static constexpr bool sums = false;

  void init(Tile&) const {}
  void block(const StatsPass<T>& p, ChunkStats& chunk, Workspace<T>& ws, Tile& t, index_t i0,
             index_t rows) const {
    if (p.kind == Kind::hard && !p.grad_X)
      stats_rows_hard(p, *this, chunk, ws, t, i0, rows);
    else if (p.kind == Kind::softmax)
      stats_rows_softmax(p, *this, chunk, ws, t, i0, rows);
    else
      stats_rows(p, *this, chunk, ws, t, i0, rows);
  }
  std::uint8_t* nonzero_blocks(Tile&, index_t) const { return nullptr; }
  void row(Tile&, index_t, const T*, double, const RowAssignment&, const Workspace<T>&) const {}
  void one_hot(Tile&, const T*, double, index_t) const {}
  void one_hot_rows(Tile&, const T*, const double*, const RowMin<T>*, index_t) const {}
  void block_end(Tile&, const Workspace<T>&, index_t) const {}
  void fold(Tile&, ChunkStats&) const {}
};

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
