// Exact assignment with whole groups of centroids pruned (issue 24, item 2):
// the labels and minimum squared distances of assign (impl/per_row.hpp), bit
// for bit, computing only the groups of centroids that may hold a row's
// nearest.
//
// The centroids are split into t <= kMaxGroups groups (the caller's; the slot
// ranges of the engine's lane panels, as hard_stats_bounded's). Each group g
// gets a centre m_g (the mean of its centroids, rounded to T) and a radius
// r_g, an upper bound on max_{j in g} ||c_j - m_g||. By the triangle
// inequality a row x is at least lo_g = ||x - m_g|| - r_g from every centroid
// of g; lo_g is computed as a lower bound on that exact value from the
// kernel's distance to m_g and its rounding slack (GroupBalls::lower). For
// each row, in tiles of kPrunedRows rows:
//   1. the group of least lo_g is computed in the kernel's bits
//      (packed_group_minima: Engine::lanes_min2 over the group's slots, the
//      plain pass's distances), giving its argmin a;
//   2. every other group that KernelSlack::keeps_label(da2u, lo_g) does not
//      rule out is computed too, da2u an upper bound on ||x - c_a||^2 (direct
//      differences in double, rounded up). A group ruled out has every kernel
//      distance strictly above the kernel's D_ia (KernelSlack's rounding
//      slack, SPEC.md "Group-pruned assignment"), so neither the minimum nor
//      the first argmin can lie in it.
// The label is the least over the computed groups, ties to the smallest
// centroid: assign's argmin; the minimum is its D_ia. Each row's result
// depends on that row only, so it is the same at every thread count.
// For a row's margin (a fit's final pass, with `second`): the second smallest
// over the computed groups, and `beyond`, a lower bound on the kernel's
// distances of the groups left out, (lo_g - e_lin)^2 - e_sq (KernelSlack at
// an upper bound on ||x - s||, as bounded.hpp's exact_margin): where second
// <= beyond, second is the row's D_i(2); elsewhere the caller computes the
// row in full if beyond - D_i(1) may be below the least margin.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "impl/bounds.hpp"
#include "impl/engine.hpp"
#include "impl/per_row.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Rows bucketed together by their groups: enough that each of 64 groups gets
// a few lane groups of rows (padding is computed for nothing).
constexpr index_t kPrunedRows = 8192;

// Each group's centre (the mean of its members, rounded to T: any point would
// do, the radius is taken about the stored one) and radius about it, rounded
// up (direct differences in double). The rows' distances to the centres are
// the kernel's (an Engine on the t centres: a small product, not t d
// double operations a row), turned into exact lower bounds by its slack.
template <typename T>
struct GroupBalls {
  std::vector<T> centre;       // (t, d)
  std::vector<double> radius;  // (t,)
  std::vector<index_t> empty;  // the groups without centroids
  index_t first_held = -1;     // the first group with centroids
  Engine<T> engine;            // on the centres: distances into a block
  KernelSlack<T> slack;        // of that engine

  GroupBalls(const T* C, index_t k, index_t d, const std::int64_t* group, index_t t,
             const GroupSlots& slots)
      : centre(means(C, k, d, group, t, slots)),
        radius(t, 0.0),
        engine(centre.data(), t, d),
        slack(engine) {
    const double up = sq_rounding_up(d);
    for (index_t j = 0; j < k; ++j) {
      const double r = std::sqrt(direct_sq_distance(C + j * d, centre.data() + group[j] * d, d) * up);
      radius[group[j]] = std::max(radius[group[j]], r * (1.0 + 0x1p-50));
    }
    for (index_t g = t - 1; g >= 0; --g)
      if (slots.count[g] == 0)
        empty.push_back(g);
      else
        first_held = g;
  }

  // A lower bound on ||x - c_j|| for every c_j of group g, from the engine's
  // D (x's squared distance to the centre m_g) and ax >= ||x - s|| (s the
  // engine's shift): ||x - m_g|| >= sqrt(D - e_sq) - e_lin (KernelSlack), less
  // r_g. The factor 1 - 2^-50 and the term 2^-50 (a + e_lin + r_g) cover the
  // roundings in double of the square root and of the two subtractions (each
  // within 2^-53 of its result, which is at most a + e_lin + r_g).
  // lo [out] (t,): for each group, from D (t,) and ax (a loop the compiler
  // vectorizes: no branch); +inf for the empty groups (never computed).
  void lower(const T* D, double ax, double* lo) const {
    const double e_lin = slack.lin(ax), e_sq = slack.sq(ax);
    const index_t t = static_cast<index_t>(radius.size());
    for (index_t g = 0; g < t; ++g) {
      const double a =
          std::sqrt(std::max(static_cast<double>(D[g]) - e_sq, 0.0)) * (1.0 - 0x1p-50);
      lo[g] = (a - e_lin - radius[g]) - 0x1p-50 * (a + e_lin + radius[g]);
    }
    for (index_t g : empty) lo[g] = std::numeric_limits<double>::infinity();
  }

 private:
  static std::vector<T> means(const T* C, index_t k, index_t d, const std::int64_t* group,
                              index_t t, const GroupSlots& slots) {
    std::vector<double> sum(t * d, 0.0);
    for (index_t j = 0; j < k; ++j)
      for (index_t l = 0; l < d; ++l) sum[group[j] * d + l] += static_cast<double>(C[j * d + l]);
    std::vector<T> out(t * d);
    for (index_t g = 0; g < t; ++g)
      for (index_t l = 0; l < d; ++l)
        out[g * d + l] = static_cast<T>(sum[g * d + l] / std::max<index_t>(slots.count[g], 1));
    return out;
  }
};

// Per thread: one tile of rows and what is known of them.
template <typename T>
struct PrunedScratch : Workspace<T> {
  std::vector<double> lo;         // (kPrunedRows, tp) each row's lower bound per group
  std::vector<index_t> first;     // (kPrunedRows,) the group of least bound
  std::vector<GroupMask> want;    // (kPrunedRows,) the groups left after the first
  std::vector<RowMin<T>> best;    // (kPrunedRows,) the least over the computed groups
  std::vector<index_t> which;     // the tile's rows of the current group, up to mb
  std::vector<T> gathered;        // (mb, d) those rows
  Workspace<T> centre_ws;         // GroupBalls::engine's
  std::int64_t n_distances = 0;
};

// The two smallest of two groups' minima and the first argmin, ties to the
// smallest centroid (assign's; m2 is m1 again when both hold it).
template <typename T>
inline void keep_least(RowMin<T>& best, const RowMin<T>& mn) {
  if (best.a < 0) {
    best = mn;
  } else if (mn.m1 < best.m1 || (mn.m1 == best.m1 && mn.a < best.a)) {
    best.m2 = std::min(best.m1, mn.m2);
    best.m1 = mn.m1;
    best.a = mn.a;
  } else {
    best.m2 = std::min(best.m2, mn.m1);
  }
}

// A lower bound on the kernel's distances of row x to the centroids of the
// groups in `left` (inf when none), from the rows' bounds lo (t,).
template <typename T>
double left_out_bound(const Engine<T>& E, const KernelSlack<T>& slack, const T* x,
                      const double* lo, GroupMask left, index_t t) {
  double out = std::numeric_limits<double>::infinity();
  if (left == 0) return out;
  const double ax = std::sqrt(direct_sq_distance(x, E.shift.data(), E.d) * sq_rounding_up(E.d));
  const double e_lin = slack.lin(ax), e_sq = slack.sq(ax);
  for (index_t g = 0; g < t; ++g) {
    if (!(left >> g & 1)) continue;
    const double l = lo[g] - e_lin;
    out = std::min(out, l > 0.0 ? l * l - e_sq : 0.0);
  }
  return out;
}

// Computes group g for the tile's rows r with pick(r) (rows i0 + r, m of
// them), mb at a time: into s.best.
template <typename T, typename Pick>
void compute_group(const Engine<T>& E, const GroupSlots& slots, const T* X, index_t i0,
                   index_t rows, index_t g, PrunedScratch<T>& s, Pick pick) {
  const index_t d = E.d;
  index_t r = 0;
  while (r < rows) {
    s.which.clear();
    for (; r < rows && static_cast<index_t>(s.which.size()) < E.mb; ++r)
      if (pick(r)) s.which.push_back(r);
    const index_t m = static_cast<index_t>(s.which.size());
    if (m == 0) continue;
    for (index_t q = 0; q < m; ++q)
      std::copy(X + (i0 + s.which[q]) * d, X + (i0 + s.which[q] + 1) * d,
                s.gathered.data() + q * d);
    E.pack_lanes(s.gathered.data(), m, s);
    packed_group_minima(E, slots, g, m, s,
                        [&](index_t q, const RowMin<T>& mn) { keep_least(s.best[s.which[q]], mn); });
    s.n_distances += m * slots.count[g];
  }
}

// Rows i0 .. i0 + rows of X: labels and min_sq_dist (second, beyond: when
// not null).
template <typename T>
void pruned_tile(const Engine<T>& E, const GroupSlots& slots, const GroupBalls<T>& balls,
                 const KernelSlack<T>& slack, const T* X, const T* C, index_t i0, index_t rows,
                 std::int64_t* labels, T* min_sq_dist, T* second, double* beyond,
                 PrunedScratch<T>& s) {
  constexpr index_t B = VT<double>::W;
  const index_t d = E.d, t = slots.t, tp = round_up(t, B);
  const double up = sq_rounding_up(d);
  const Engine<T>& Eb = balls.engine;
  for (index_t r0 = 0; r0 < rows; r0 += Eb.mb) {
    const index_t rn = std::min(Eb.mb, rows - r0);
    Eb.distances(X + (i0 + r0) * d, rn, s.centre_ws);
    for (index_t r = r0; r < r0 + rn; ++r) {
      const T* D = s.centre_ws.dbuf.data() + (r - r0) * Eb.ld;
      const double ax = std::sqrt(direct_sq_distance(X + (i0 + r) * d, Eb.shift.data(), d) * up);
      double* lo = s.lo.data() + r * tp;
      balls.lower(D, ax, lo);
      // The first least: a group with centroids (the others are +inf; from one,
      // even when every bound is NaN).
      index_t f = balls.first_held;
      for (index_t g = 0; g < t; ++g) f = lo[g] < lo[f] ? g : f;
      s.first[r] = f;
      s.best[r] = RowMin<T>{T(0), T(0), -1};
    }
  }
  for (index_t g = 0; g < t; ++g)
    if (slots.count[g] > 0)
      compute_group(E, slots, X, i0, rows, g, s, [&](index_t r) { return s.first[r] == g; });
  GroupMask any = 0;
  for (index_t r = 0; r < rows; ++r) {
    const index_t a = s.best[r].a;
    const double da2u = direct_sq_distance(X + (i0 + r) * d, C + a * d, d) * up;
    GroupMask kept = 0;  // B groups at a time (the padding's +inf is kept)
    for (index_t g0 = 0; g0 < tp; g0 += B)
      kept |= GroupMask{slack.keeps_labels(vset(da2u), vload(s.lo.data() + r * tp + g0))} << g0;
    const GroupMask want = ~kept & slots.all_groups & ~group_bit(s.first[r]);
    s.want[r] = want;
    any |= want;
  }
  for (index_t g = 0; g < t; ++g)
    if (any >> g & 1)
      compute_group(E, slots, X, i0, rows, g, s, [&](index_t r) { return s.want[r] >> g & 1; });
  for (index_t r = 0; r < rows; ++r) {
    labels[i0 + r] = s.best[r].a;
    min_sq_dist[i0 + r] = s.best[r].m1;
  }
  if (second == nullptr) return;
  for (index_t r = 0; r < rows; ++r) {
    second[i0 + r] = s.best[r].m2;
    const GroupMask left = slots.all_groups & ~s.want[r] & ~group_bit(s.first[r]);
    beyond[i0 + r] = left_out_bound(E, slack, X + (i0 + r) * d, s.lo.data() + r * tp, left, t);
  }
}

template <typename T>
void assign_grouped(const T* X, index_t n, index_t d, const T* C, index_t k,
                    const std::int64_t* group, index_t t, std::int64_t* labels, T* min_sq_dist,
                    T* second, double* beyond, std::int64_t* n_distances, int n_threads) {
  Engine<T> E(C, k, d, 0, true);  // assign's engine: its shift, its bits
  if (E.small) {  // no lane panels to order: the plain pass
    for_each_row_min(X, n, d, C, k, n_threads, [&](index_t i, const RowMin<T>& m) {
      labels[i] = m.a;
      min_sq_dist[i] = m.m1;
      if (second != nullptr) {
        second[i] = m.m2;
        beyond[i] = std::numeric_limits<double>::infinity();
      }
    });
    *n_distances = static_cast<std::int64_t>(n) * k;
    return;
  }
  const GroupSlots slots(group, k, t, Engine<T>::LC);
  E.order_lanes(slots.centroid_of_slot);
  const GroupBalls<T> balls(C, k, d, group, t, slots);
  const KernelSlack<T> slack(E);
  const index_t n_tiles = (n + kPrunedRows - 1) / kPrunedRows;
  std::vector<PrunedScratch<T>> scratch(
      std::min<index_t>(resolve_threads(n_threads, distance_work(E, n)), n_tiles));
  for (PrunedScratch<T>& s : scratch) {
    E.init(s);
    balls.engine.init(s.centre_ws);
    const index_t rows = std::min(n, kPrunedRows);
    // (rows, t rounded up to double vectors), the padding +inf: kept.
    s.lo.assign(rows * round_up(t, VT<double>::W), std::numeric_limits<double>::infinity());
    s.first.assign(rows, 0);
    s.want.assign(rows, 0);
    s.best.assign(rows, RowMin<T>{});
    s.which.reserve(E.mb);
    s.gathered.assign(E.mb_pad() * d, T(0));
  }
  const int nt = static_cast<int>(scratch.size());
  const std::atomic<int>* cancel = thread_cancel_flag();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t tile = 0; tile < n_tiles; ++tile) {
    if (cancel && cancel->load(std::memory_order_relaxed)) continue;
    const index_t i0 = tile * kPrunedRows;
    pruned_tile(E, slots, balls, slack, X, C, i0, std::min(kPrunedRows, n - i0), labels,
                min_sq_dist, second, beyond, scratch[omp_get_thread_num()]);
  }
  std::int64_t total = 0;
  for (const PrunedScratch<T>& s : scratch) total += s.n_distances;
  *n_distances = total;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
