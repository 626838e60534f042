// Exact assignment with whole groups of centroids pruned (issue 24, item 2):
// the labels and minimum squared distances of assign (impl/per_row.hpp), bit
// for bit, computing only the groups of centroids that may hold a row's
// nearest.
//
// The centroids are split into t <= kMaxGroups groups (the caller's; the slot
// ranges of the engine's lane panels, as hard_stats_bounded's). Each group g
// gets a centre m_g (the mean of its centroids, in double) and a radius r_g,
// an upper bound on max_{j in g} ||c_j - m_g||. By the triangle inequality a
// row x is at least lo_g = ||x - m_g|| - r_g from every centroid of g; lo_g
// is computed as a lower bound on that exact value (group_lower). For each
// row, in tiles of kPrunedRows rows:
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

// Each group's centre (the mean of its members, in double: any point would
// do, the radius is taken about the stored one) and radius, rounded up.
struct GroupBalls {
  std::vector<double> centre;  // (t, d)
  std::vector<double> radius;  // (t,)
  template <typename T>
  GroupBalls(const T* C, index_t k, index_t d, const std::int64_t* group, index_t t,
             const GroupSlots& slots)
      : centre(t * d, 0.0), radius(t, 0.0) {
    for (index_t j = 0; j < k; ++j)
      for (index_t l = 0; l < d; ++l) centre[group[j] * d + l] += static_cast<double>(C[j * d + l]);
    for (index_t g = 0; g < t; ++g)
      for (index_t l = 0; l < d; ++l) centre[g * d + l] /= std::max<index_t>(slots.count[g], 1);
    const double up = sq_rounding_up(d);
    for (index_t j = 0; j < k; ++j) {
      const double r = std::sqrt(direct_sq_distance(C + j * d, centre.data() + group[j] * d, d) * up);
      radius[group[j]] = std::max(radius[group[j]], r * (1.0 + 0x1p-50));
    }
  }
  // A lower bound on ||x - c_j||, c_j in g: ||x - m_g|| bounded below, less
  // r_g, the difference rounded down. Each factor 1 - 2^-50 covers the one
  // or two roundings (2^-53 each) of the square root and the products.
  template <typename T>
  double lower(const T* x, index_t g, index_t d, double down) const {
    const double a = std::sqrt(direct_sq_distance(x, centre.data() + g * d, d) * down) *
                     (1.0 - 0x1p-50);
    const double lo = a - radius[g];
    return lo > 0.0 ? lo * (1.0 - 0x1p-50) : lo;
  }
};

// Per thread: one tile of rows and what is known of them.
template <typename T>
struct PrunedScratch : Workspace<T> {
  std::vector<double> lo;         // (kPrunedRows, t) each row's lower bound per group
  std::vector<index_t> first;     // (kPrunedRows,) the group of least bound
  std::vector<GroupMask> want;    // (kPrunedRows,) the groups left after the first
  std::vector<RowMin<T>> best;    // (kPrunedRows,) the least over the computed groups
  std::vector<index_t> which;     // the tile's rows of the current group, up to mb
  std::vector<T> gathered;        // (mb, d) those rows
  std::int64_t n_distances = 0;
};

// The least of two groups' minima, ties to the smallest centroid (assign's).
template <typename T>
inline void keep_least(RowMin<T>& best, const RowMin<T>& mn) {
  if (best.a < 0 || mn.m1 < best.m1 || (mn.m1 == best.m1 && mn.a < best.a)) best = mn;
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

// Rows i0 .. i0 + rows of X: labels and min_sq_dist.
template <typename T>
void pruned_tile(const Engine<T>& E, const GroupSlots& slots, const GroupBalls& balls,
                 const KernelSlack<T>& slack, const T* X, const T* C, index_t i0, index_t rows,
                 std::int64_t* labels, T* min_sq_dist, PrunedScratch<T>& s) {
  const index_t d = E.d, t = slots.t;
  const double up = sq_rounding_up(d), down = 2.0 - up;
  for (index_t r = 0; r < rows; ++r) {
    const T* x = X + (i0 + r) * d;
    double least = std::numeric_limits<double>::infinity();
    index_t f = -1;
    for (index_t g = 0; g < t; ++g) {
      if (slots.count[g] == 0) continue;
      const double lo = balls.lower(x, g, d, down);
      s.lo[r * t + g] = lo;
      if (f < 0 || lo < least) least = lo, f = g;
    }
    s.first[r] = f;
    s.best[r] = RowMin<T>{T(0), T(0), -1};
  }
  for (index_t g = 0; g < t; ++g)
    if (slots.count[g] > 0)
      compute_group(E, slots, X, i0, rows, g, s, [&](index_t r) { return s.first[r] == g; });
  GroupMask any = 0;
  for (index_t r = 0; r < rows; ++r) {
    const index_t a = s.best[r].a;
    const double da2u = direct_sq_distance(X + (i0 + r) * d, C + a * d, d) * up;
    GroupMask want = 0;
    for (index_t g = 0; g < t; ++g)
      if (slots.count[g] > 0 && g != s.first[r] && !slack.keeps_label(da2u, s.lo[r * t + g]))
        want |= group_bit(g);
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
}

template <typename T>
void assign_grouped(const T* X, index_t n, index_t d, const T* C, index_t k,
                    const std::int64_t* group, index_t t, std::int64_t* labels, T* min_sq_dist,
                    std::int64_t* n_distances, int n_threads) {
  Engine<T> E(C, k, d, kDistBlockBytes, true);  // assign's engine: its shift, its bits
  if (E.small) {  // no lane panels to order: the plain pass
    assign(X, n, d, C, k, labels, min_sq_dist, n_threads);
    *n_distances = static_cast<std::int64_t>(n) * k;
    return;
  }
  const GroupSlots slots(group, k, t, Engine<T>::LC);
  E.order_lanes(slots.centroid_of_slot);
  const GroupBalls balls(C, k, d, group, t, slots);
  const KernelSlack<T> slack(E);
  const index_t n_tiles = (n + kPrunedRows - 1) / kPrunedRows;
  std::vector<PrunedScratch<T>> scratch(
      std::min<index_t>(resolve_threads(n_threads, distance_work(E, n)), n_tiles));
  for (PrunedScratch<T>& s : scratch) {
    E.init(s);
    const index_t rows = std::min(n, kPrunedRows);
    s.lo.assign(rows * t, 0.0);
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
                min_sq_dist, scratch[omp_get_thread_num()]);
  }
  std::int64_t total = 0;
  for (const PrunedScratch<T>& s : scratch) total += s.n_distances;
  *n_distances = total;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
