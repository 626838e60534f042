// The hard step with group distance bounds (Yinyang's: Ding et al. 2015, with
// Hamerly's separation test): the statistics of block_stats(kind hard) at C,
// computing only the distances that may change a row's label since the
// previous step.
//
// The centroids are split once into t <= kMaxGroups (64) groups (the caller's; contiguous
// slot ranges of the lane panels, Engine::order_lanes). Each row carries its
// label a_i (at the previous step's C_prev) and, per group g, a lower bound
// lower_ig on its exact distance (not squared) to the group's centroids other
// than c_a; memory n (8 + 8 t) bytes. After the centroids moved by drift_j =
// ||c_j - c_prev_j||, lower_ig - max_{j in g, j != a} drift_j bounds the
// distances to g's centroids of C (triangle inequality), and so does
// 2 h_a - ||x - c_a||, h_a half the distance from c_a to its nearest other
// centroid (Hamerly's separation: it holds whatever the drift). A bound,
// turned into a lower bound on the *kernel's* squared distances (the rounding
// of the norm expansion accounted for, KernelSlack), that exceeds an upper
// bound on the kernel's distance to c_a rules the group out. The global test
// (the least bound over all groups) skips the row; else the groups not ruled
// out, and c_a's own group (its distance in the kernel's bits), are computed
// by Engine::lanes_min2 over their slots, rows in the lanes: the rows that need
// every group packed once, the others packed again per group. Each group
// gives the two smallest and the first argmin of its centroids; the row's
// label is the smallest over the computed groups, ties to the smallest
// centroid, which is the plain pass's argmin since every skipped centroid's
// kernel distance is above c_a's. The computed groups' minima give their new
// bounds; the others keep theirs.
//
// Labels, N and S are therefore bitwise those of block_stats (same labels, the
// same SparseAccumulator additions in the same row, tile and chunk order); so
// are J and the minimum margin when every distance is computed (no C_prev). A
// skipped row adds its exact distance to c_a (direct differences in double)
// to J, within the kernel's rounding of its own value, and no margin. With
// `exact` (a fit's final pass) every row computes at least its own group, so J
// has the kernel's bits, and a row's margin is exact when the second smallest
// of its computed groups is below the skipped groups' bounds; the rows where
// it is not, and whose bound on the margin is below the least margin found,
// are computed in full after the pass: the minimum margin is block_stats's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "impl/bounds.hpp"
#include "impl/drive.hpp"
#include "impl/drive_split.hpp"
#include "impl/engine.hpp"
#include "impl/stats.hpp"
#include "impl/stats_accumulators.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The state of one call that every thread reads: the inputs, the engine (its
// lanes in group order), and the bounds' ingredients (impl/bounds.hpp).
template <typename T>
struct BoundedStep {
  const T* X;  // (n, d)
  const T* C;  // (k, d)
  const std::int64_t* group;
  const double* w;
  index_t n, d, k, t;
  std::int64_t* labels;  // [in,out] (n,)
  double* lower;         // [in,out] (n, t)
  bool exact;
  const Engine<T>& E;
  // The direct path (d <= kSmallDim) has no shift to bound its rounding by,
  // and its rows cost little: every row is computed there, by min2_rows.
  bool grouped;
  bool bounded;  // C_prev given (and grouped): the bound tests skip rows and groups
  KernelSlack<T> slack;
  std::vector<double> half_sep;  // (k,) Hamerly's half separations, or none
  GroupSlots slots;
  std::vector<Drifts> drifts;  // (t,) when bounded
  // Rounds a squared distance by direct differences in double up.
  double up;

  BoundedStep(Engine<T>& engine, const T* X_, index_t n_, index_t d_, const T* C_, index_t k_,
              const T* C_prev, const std::int64_t* group_, index_t t_, const double* w_,
              std::int64_t* labels_, double* lower_, bool exact_, int n_threads)
      : X(X_),
        C(C_),
        group(group_),
        w(w_),
        n(n_),
        d(d_),
        k(k_),
        t(t_),
        labels(labels_),
        lower(lower_),
        exact(exact_),
        E(engine),
        grouped(!engine.small),
        bounded(C_prev != nullptr && grouped),
        slack(engine),
        // The separations cost k^2 d: taken when that is at most about a
        // sixteenth of a pass (before the lanes are put in group order).
        half_sep(bounded && k >= 2 && n >= 16 * k ? half_separations(engine, C, slack, n_threads)
                                                  : std::vector<double>{}),
        slots(group, k, t, Engine<T>::LC),
        drifts(bounded ? group_drifts(C, C_prev, k, d, group, t) : std::vector<Drifts>{}),
        up(sq_rounding_up(d_)) {
    if (grouped) engine.order_lanes(slots.centroid_of_slot);
  }
};

// The rows, per chunk, whose margin may be below the least margin found, with
// a lower bound on their margin (exact: computed in full after the pass).
using UnsureRows = std::vector<std::pair<index_t, double>>;

// Per thread: the rows of the current block and what is known of them.
template <typename T>
struct BoundedScratch : Workspace<T> {
  typename SparseAccumulator<T>::Tile tile;
  std::vector<GroupMask> want;  // (mb,) the groups a row needs computed (0: skipped)
  std::vector<GroupMask> got;   // (mb,) the groups computed for it
  std::vector<index_t> full;        // the rows (positions in the block) that need every group
  std::vector<T> gathered;          // (mb, d) rows for min2_rows (unsure_margins)
  std::vector<index_t> part;        // the other rows that need the current group
  std::vector<index_t> computed;    // the rows (positions in the block) that need any group
  Workspace<T> part_ws;
  std::vector<RowMin<T>> per_group;  // (mb, t) each computed group's minima (centroids)
  std::vector<double> label_sq;      // (mb,) each row's squared distance to its label: exact for
                                     // a skipped row (direct differences), the kernel's if computed
  index_t n_computed = 0;
  std::int64_t n_distances = 0;
  // What the thread's assignment of other chunks' tiles found (drive_split):
  // their least margin and unsure rows.
  double stolen_mm = std::numeric_limits<double>::infinity();
  UnsureRows stolen_unsure;

  // After Engine::init (per_thread).
  void init(const BoundedStep<T>& st, const SparseAccumulator<T>& acc) {
    const Engine<T>& E = st.E;
    const index_t mb = E.mb_pad();
    acc.init(tile);
    want.assign(mb, 0);
    got.assign(mb, 0);
    full.reserve(mb);
    computed.assign(mb, 0);
    gathered.assign(mb * st.d, T(0));
    part.reserve(mb);
    E.init(part_ws);
    per_group.assign(mb * st.t, RowMin<T>{});
    label_sq.assign(mb, 0.0);
  }
};

// The group test of row i (labelled a, da2u its squared distance to c_a
// rounded up, lower[i, :] its bounds after the drifts) once the global test
// failed: the groups whose centroids may be nearer than c_a, and c_a's own
// group always (its distance in the kernel's bits). A vector of groups at a
// time (group by group, its chain of compares was 4/10 of bound_tests).
template <typename T>
GroupMask group_test(const BoundedStep<T>& st, index_t i, index_t a, double da2u) {
  using VD = typename VT<double>::v;
  constexpr index_t B = VT<double>::W;
  const double* lbr = st.lower + i * st.t;
  GroupMask kept = 0;
  for (index_t g0 = 0; g0 < st.t; g0 += B) {
    alignas(64) double part[B];  // t < B: the row's groups, +inf (kept) past them
    const bool whole = g0 + B <= st.t;
    if (!whole)
      for (index_t q = 0; q < B; ++q)
        part[q] = g0 + q < st.t ? lbr[g0 + q] : std::numeric_limits<double>::infinity();
    const VD lo = vload(whole ? lbr + g0 : part);
    kept |= GroupMask{st.slack.keeps_labels(vset(da2u), lo)} << g0;
  }
  return (~kept | group_bit(st.group[a])) & st.slots.all_groups;
}

// Row r's bounds lower[r, :] (t of them) after the drifts, each at least
// sep (Hamerly's), in place: drift (t rounded up to B) the group's largest
// drift, the second at the row's label's group where the label moved most.
// Returns the least (the global test's bound). A vector of groups at a time,
// contiguous: by columns (a group over a vector of rows) each bound was a
// strided load and store, 1/10 of the k = 4096 steps' samples.
template <typename VD>
double shifted_bounds(double* lower_row, const double* drift, index_t t, double sep) {
  constexpr index_t B = sizeof(VD) / sizeof(double);
  const double inf = std::numeric_limits<double>::infinity();
  if (t < B) {  // a few groups (2 at (2e5, 64, 256), 1/9 of a step padded): one at a time,
    double lo = inf;  // with the vector path's operations (vmax: x > sep ? x : sep)
    for (index_t g = 0; g < t; ++g) {
      const double x = lower_row[g] - drift[g];
      const double bound = x > sep ? x : sep;
      lower_row[g] = bound;
      lo = bound < lo ? bound : lo;
    }
    return lo;
  }
  const VD sv = vset(sep);
  VD least = vset(inf);
  for (index_t g0 = 0; g0 < t; g0 += B) {
    alignas(64) double part[B];  // t < B: the row's groups, +inf past them
    const bool whole = g0 + B <= t;
    if (!whole)
      for (index_t q = 0; q < B; ++q) part[q] = g0 + q < t ? lower_row[g0 + q] : inf;
    double* at = whole ? lower_row + g0 : part;
    const VD bound = vmax(vload(at) - vload(drift + g0), sv);
    vstore(at, bound);
    least = vmin(least, bound);
    if (!whole)
      for (index_t q = 0; g0 + q < t; ++q) lower_row[g0 + q] = part[q];
  }
  alignas(64) double lanes[B];
  vstore(lanes, least);
  double lo = inf;
  for (index_t q = 0; q < B; ++q) lo = std::min(lo, lanes[q]);
  return lo;
}

// The bound tests of rows i0 .. i0 + rows (row i labelled a, previous bounds
// lower[i, :]): want [out] (rows,) the groups whose centroids may be nearer
// than c_a (0: the row keeps its label; exact: c_a's own group, its distance
// in the kernel's bits for J), da2 [out] (rows,) its squared distance to c_a;
// the bounds updated. A vector of rows at a time: row by row, each row's chain
// of latencies (its distance, a square root, the test) was most of a skipped
// row's time. The rows failing the global test (the least bound over all
// groups) take the group test one by one.
template <typename T>
void bound_tests(const BoundedStep<T>& st, index_t i0, index_t rows, GroupMask* want,
                 double* da2) {
  using VD = typename VT<double>::v;
  constexpr index_t B = VT<double>::W;
  const index_t d = st.d, t = st.t;
  const double inf = std::numeric_limits<double>::infinity();
  alignas(64) double dv[B], hs[B], sep[B], lo_rows[B];
  alignas(64) std::int64_t av[B];
  // The groups' largest drifts, padded to vectors; a row's own group is patched
  // (and restored) where its label moved most.
  alignas(64) double drift[kMaxGroups + B];
  for (index_t g = 0; g < round_up(t, B); ++g) drift[g] = g < t ? st.drifts[g].first : 0.0;
  for (index_t r0 = 0; r0 < rows; r0 += B) {
    const index_t rn = std::min(B, rows - r0);
    for (index_t q = 0; q < B; ++q) {  // lanes past rn repeat the last row
      const index_t i = i0 + r0 + std::min(q, rn - 1);
      const index_t a = static_cast<index_t>(st.labels[i]);
      av[q] = a;
      dv[q] = direct_sq_distance(st.X + i * d, st.C + a * d, d);
      hs[q] = st.half_sep.empty() ? 0.0 : st.half_sep[a];
    }
    const VD da2u = vload(dv) * st.up;
    // Hamerly's separation bounds every other centroid whatever the drift.
    vstore(sep, st.half_sep.empty() ? vset(-inf) : 2.0 * vload(hs) - vsqrt(da2u));
    for (index_t q = 0; q < rn; ++q) {
      const index_t ga = st.group[av[q]];
      const Drifts& own = st.drifts[ga];
      drift[ga] = own.j_first == av[q] ? own.second : own.first;
      lo_rows[q] = shifted_bounds<VD>(st.lower + (i0 + r0 + q) * t, drift, t, sep[q]);
      drift[ga] = own.first;
    }
    for (index_t q = rn; q < B; ++q) lo_rows[q] = lo_rows[rn - 1];
    const unsigned keep = st.slack.keeps_labels(da2u, vload(lo_rows));
    for (index_t q = 0; q < rn; ++q) da2[r0 + q] = dv[q];
    if (t == 1) {  // the group test is the global one: a select, not a branch
      for (index_t q = 0; q < rn; ++q) want[r0 + q] = keep >> q & 1 ? (st.exact ? 1u : 0u) : 1u;
      continue;
    }
    for (index_t q = 0; q < rn; ++q) {
      const index_t r = r0 + q;
      if (keep >> q & 1)
        want[r] = st.exact ? group_bit(st.group[av[q]]) : 0;
      else
        want[r] = group_test(st, i0 + r, av[q], dv[q] * st.up);
    }
  }
}

// The minima of group g's centroids for the rows `which` (positions in the
// block) packed, in that order, in ws: into s.per_group and s.got.
template <typename T>
void group_minima(const BoundedStep<T>& st, index_t g, const std::vector<index_t>& which,
                  Workspace<T>& ws, BoundedScratch<T>& s) {
  const index_t m = static_cast<index_t>(which.size());
  packed_group_minima(st.E, st.slots, g, m, ws, [&](index_t q, const RowMin<T>& mn) {
    s.per_group[which[q] * st.t + g] = mn;
    s.got[which[q]] |= group_bit(g);
  });
  s.n_distances += m * st.slots.count[g];
}

// The lane groups (of G rows, padded) that computing counts[g] rows of each
// group g takes.
inline index_t lane_groups(const index_t* counts, index_t t, index_t G) {
  index_t sum = 0;
  for (index_t g = 0; g < t; ++g) sum += (counts[g] + G - 1) / G;
  return sum;
}

// A group's rows are computed G at a time, padded: rows that need only some
// groups join those that need all (s.full: packed once, every group computed)
// where that fills the full rows' padding or saves lane groups overall.
template <typename T>
void promote_to_full(const BoundedStep<T>& st, BoundedScratch<T>& s, index_t rows) {
  constexpr index_t G = Engine<T>::LR * Engine<T>::W;
  const index_t t = st.t;
  const GroupMask all_groups = st.slots.all_groups;
  s.part.clear();
  for (index_t r = 0; r < rows; ++r)
    if (s.want[r] != 0 && s.want[r] != all_groups) s.part.push_back(r);
  if (s.part.empty()) return;
  std::stable_sort(s.part.begin(), s.part.end(), [&](index_t p, index_t q) {
    return __builtin_popcountll(s.want[p]) > __builtin_popcountll(s.want[q]);
  });
  index_t per_group[kMaxGroups] = {}, after[kMaxGroups];
  for (index_t r : s.part)
    for (index_t g = 0; g < t; ++g) per_group[g] += s.want[r] >> g & 1;
  const index_t np = static_cast<index_t>(s.part.size());
  index_t q = 0, free = (G - static_cast<index_t>(s.full.size()) % G) % G;
  while (q < np) {
    const index_t b = free > 0 ? std::min(free, np - q) : std::min(G, np - q);
    std::copy(per_group, per_group + t, after);
    for (index_t p = q; p < q + b; ++p)
      for (index_t g = 0; g < t; ++g) after[g] -= s.want[s.part[p]] >> g & 1;
    // Filling padding is free; a new lane group of full rows costs n_groups.
    if (free == 0 && lane_groups(per_group, t, G) - lane_groups(after, t, G) <= st.slots.n_groups)
      break;
    for (index_t p = q; p < q + b; ++p) {
      s.want[s.part[p]] = all_groups;
      s.full.push_back(s.part[p]);
    }
    std::copy(after, after + t, per_group);
    q += b;
    free = 0;
  }
  std::sort(s.full.begin(), s.full.end());  // in place when every row is full
}

// The rows of the block to compute, in order: s.computed (returns their
// number) and s.full, those that need every group; appended without a branch
// (in a block of both kinds it mispredicted).
template <typename T>
index_t list_rows(const BoundedStep<T>& st, BoundedScratch<T>& s, index_t rows) {
  s.full.resize(rows);
  index_t m = 0, n_all = 0;
  for (index_t r = 0; r < rows; ++r) {
    s.got[r] = 0;
    s.computed[m] = r;
    m += s.want[r] != 0;
    s.full[n_all] = r;
    n_all += s.want[r] == st.slots.all_groups;
  }
  s.full.resize(n_all);
  return m;
}

// The groups each row of rows i0 .. i0 + rows wants (grouped): the rows that
// need every group packed once (in place when all rows do: the first step);
// the others packed again for each group they need, gathered by the packing
// (a copy of them first was 4% of the k = 4096 steps' samples).
template <typename T>
void compute_groups(const BoundedStep<T>& st, BoundedScratch<T>& s, index_t i0, index_t rows) {
  const GroupMask all_groups = st.slots.all_groups;
  const T* src = st.X + i0 * st.d;
  const index_t n_full = static_cast<index_t>(s.full.size());
  if (n_full > 0) st.E.pack_lanes(src, n_full, s, n_full < rows ? s.full.data() : nullptr);
  for (index_t g = 0; g < st.t; ++g) {
    if (!(all_groups >> g & 1)) continue;
    group_minima(st, g, s.full, s, s);
    s.part.clear();
    for (index_t r = 0; r < rows; ++r)
      if (s.want[r] != all_groups && (s.want[r] >> g & 1)) s.part.push_back(r);
    if (s.part.empty()) continue;
    st.E.pack_lanes(src, static_cast<index_t>(s.part.size()), s.part_ws, s.part.data());
    group_minima(st, g, s.part, s.part_ws, s);
  }
}

// The two smallest over the computed groups of row r (s.got[r] != 0) and the
// first argmin, ties to the smallest centroid: the plain pass's argmin (the
// other groups' are larger).
template <typename T>
RowMin<T> min_over_groups(const BoundedStep<T>& st, const BoundedScratch<T>& s, index_t r) {
  T m1 = std::numeric_limits<T>::infinity(), m2 = m1;
  index_t a = -1;
  for (index_t g = 0; g < st.t; ++g) {
    if (!(s.got[r] >> g & 1)) continue;
    const RowMin<T>& pg = s.per_group[r * st.t + g];
    if (a < 0 || pg.m1 < m1 || (pg.m1 == m1 && pg.a < a)) {
      m2 = std::min(m1, pg.m2);
      m1 = pg.m1;
      a = pg.a;
    } else {
      m2 = std::min(m2, pg.m1);
    }
  }
  return {m1, m2, a};
}

// exact, row i (row r of the block) not computed in full, weighted, ax an
// upper bound on ||x - s||: the skipped groups' kernel distances are above
// (lo - e_lin)^2 - e_sq (KernelSlack). When m2 is not above that, it is the
// row's second smallest and its margin is exact (into mm); else the margin is
// at least that bound less m1, and the row is computed in full after the pass
// if that may be below the least margin (into unsure).
template <typename T>
void exact_margin(const BoundedStep<T>& st, const BoundedScratch<T>& s, index_t r, index_t i,
                  const RowMin<T>& mn, double ax, double& mm, UnsureRows& unsure) {
  const double e_lin = st.slack.lin(ax), e_sq = st.slack.sq(ax);
  double others = std::numeric_limits<double>::infinity();
  for (index_t g = 0; g < st.t; ++g) {
    if (s.got[r] >> g & 1 || !(st.slots.all_groups >> g & 1)) continue;
    const double lo = st.lower[i * st.t + g] - e_lin;
    others = std::min(others, lo > 0.0 ? lo * lo - e_sq : 0.0);
  }
  if (static_cast<double>(mn.m2) <= others) {
    mm = std::min(mm, static_cast<double>(mn.m2 - mn.m1));
  } else {
    const double least = others - static_cast<double>(mn.m1);
    if (least * (1.0 - 1e-6) <= mm) unsure.emplace_back(i, least);
  }
}

// A computed row r of the block (row i, grouped): its label, its squared
// distance to it (label_sq[r]), its margin where known (mm, unsure) and the
// computed groups' new bounds.
template <typename T>
void finish_grouped_row(const BoundedStep<T>& st, BoundedScratch<T>& s, index_t r, index_t i,
                        double* label_sq, double& mm, UnsureRows& unsure) {
  const index_t t = st.t;
  const double wi = st.w[i];
  const RowMin<T> mn = min_over_groups(st, s, r);
  st.labels[i] = mn.a;
  label_sq[r] = static_cast<double>(mn.m1);
  // The computed groups' new bounds: an upper bound on ||x - s||, then the
  // exact distance to the group's nearest other than c_a bounded below.
  const double ax = std::sqrt(direct_sq_distance(st.X + i * st.d, st.E.shift.data(), st.d) * st.up);
  if (wi > 0.0 && s.got[r] == st.slots.all_groups)
    mm = std::min(mm, static_cast<double>(mn.m2 - mn.m1));
  else if (wi > 0.0 && st.exact)
    exact_margin(st, s, r, i, mn, ax, mm, unsure);
  if (!st.bounded)  // the first call: no bounds yet (+inf over an empty group)
    for (index_t g = 0; g < t; ++g) st.lower[i * t + g] = std::numeric_limits<double>::infinity();
  for (index_t g = 0; g < t; ++g) {
    if (!(s.got[r] >> g & 1)) continue;
    const RowMin<T>& pg = s.per_group[r * t + g];
    const double other = static_cast<double>(st.group[mn.a] == g ? pg.m2 : pg.m1);
    st.lower[i * t + g] = std::sqrt(std::max(other - st.slack.sq(ax), 0.0)) - st.slack.lin(ax);
  }
}

// Row r of the block (row i) on the direct path, computed in full by min2_rows.
template <typename T>
void finish_direct_row(const BoundedStep<T>& st, const BoundedScratch<T>& s, index_t r, index_t i,
                       double* label_sq, double& mm) {
  const RowMin<T>& mn = s.mins[r];
  st.labels[i] = mn.a;
  if (st.w[i] > 0.0) mm = std::min(mm, static_cast<double>(mn.m2 - mn.m1));
  label_sq[r] = static_cast<double>(mn.m1);
  for (index_t g = 0; g < st.t; ++g)
    st.lower[i * st.t + g] = -std::numeric_limits<double>::infinity();
}

// Rows i0 .. i0 + rows: the bound tests, the groups wanted, the computed rows'
// labels, margins (into mm, unsure) and bounds, and every row's squared
// distance to its label (label_sq [out] (rows,): the kernel's for a computed
// row, direct differences for a skipped one). Nothing here is summed in row
// order: a tile's assignment may run on another thread than its sums.
template <typename T>
void bounded_assign(const BoundedStep<T>& st, BoundedScratch<T>& s, index_t i0, index_t rows,
                    double* label_sq, double& mm, UnsureRows& unsure) {
  if (st.bounded)
    bound_tests(st, i0, rows, s.want.data(), label_sq);
  else
    std::fill(s.want.begin(), s.want.begin() + rows, st.slots.all_groups);
  const index_t m = list_rows(st, s, rows);
  if (st.bounded) promote_to_full(st, s, rows);
  if (!st.grouped)
    st.E.min2_rows(st.X + i0 * st.d, rows, s.mins.data(), s);
  else if (m > 0)
    compute_groups(st, s, i0, rows);
  s.n_computed += m;
  for (index_t p = 0; p < (st.grouped ? m : rows); ++p) {
    if (st.grouped)
      finish_grouped_row(st, s, s.computed[p], i0 + s.computed[p], label_sq, mm, unsure);
    else
      finish_direct_row(st, s, p, i0 + p, label_sq, mm);
  }
}

// The row pass of stats_rows over rows i0 .. i0 + rows of chunk `chunk` in row
// order (their labels and label_sq set by bounded_assign), without a branch on
// the kind of row.
template <typename T>
void bounded_sums(const BoundedStep<T>& st, const SparseAccumulator<T>& acc, ChunkStats& chunk,
                  typename SparseAccumulator<T>::Tile& tile, const double* label_sq, index_t i0,
                  index_t rows) {
  double Wc = chunk.W, J = chunk.J;
  for (index_t r = 0; r < rows; ++r) {
    const index_t i = i0 + r;
    const double wi = st.w[i];
    Wc += wi;
    J += rounded_product(wi, label_sq[r]);
    acc.one_hot(tile, st.X + i * st.d, wi, static_cast<index_t>(st.labels[i]));
  }
  chunk.set_sums(Wc, J, J, chunk.mm);  // hard: the objective is J
}

// exact: the rows whose margin may be the least, in full, into *min_margin
// (a minimum: the order does not matter). (1 - 1e-6): the bound is rounded in
// double and the margin in T; a row kept out has margin >= the least.
template <typename T>
void unsure_margins(const BoundedStep<T>& st, const std::vector<UnsureRows>& unsure,
                    BoundedScratch<T>& s, double* min_margin) {
  const Engine<T>& E = st.E;
  std::vector<T>& rows_buf = s.gathered;
  index_t m = 0;
  auto flush = [&] {
    E.min2_rows(rows_buf.data(), m, s.mins.data(), s);
    for (index_t q = 0; q < m; ++q) {
      const RowMin<T>& mn = s.mins[q];
      *min_margin = std::min(*min_margin, static_cast<double>(mn.m2 - mn.m1));
    }
    s.n_distances += m * st.k;
    m = 0;
  };
  const double least_known = *min_margin;
  for (const UnsureRows& chunk_rows : unsure)
    for (const auto& [i, least] : chunk_rows) {
      if (least * (1.0 - 1e-6) > least_known) continue;
      std::copy(st.X + i * st.d, st.X + (i + 1) * st.d, rows_buf.data() + m * st.d);
      if (++m == E.mb) flush();
    }
  if (m > 0) flush();
}

template <typename T>
void hard_stats_bounded(const T* X, index_t n, index_t d, const T* C, index_t k, const T* C_prev,
                        const std::int64_t* group, index_t t, const double* w, double* W, double* N,
                        double* S, double* distortion, double* min_margin, std::int64_t* labels,
                        double* lower, bool exact, index_t* n_computed, std::int64_t* n_distances,
                        int n_threads) {
  Engine<T> engine(C, k, d, 0, true);
  const BoundedStep<T> st(engine, X, n, d, C, k, C_prev, group, t, w, labels, lower, exact,
                          n_threads);
  const SparseAccumulator<T> acc(st.E);
  double objective;  // hard: J again
  const BlockStatsOut out{W, N, S, &objective, distortion, min_margin};
  std::vector<ChunkStats> chunks(stats_chunks(n, k, d));
  std::vector<UnsureRows> unsure(chunks.size());  // stays empty unless exact
  // A chunk's sums are zeroed by the thread that computes it, at its first
  // block (on the calling thread they were a serial k d per chunk, 31 MB at
  // (k, d) = (1024, 256)); a chunk a cancelled call never reached, after.
  auto zero_sums = [k, d](ChunkStats& c) {
    if (!c.S.empty()) return;
    c.N.assign(k, 0.0);
    c.S.assign(k * d, 0.0);
  };
  using Scratch = BoundedScratch<T>;
  auto scratch = per_thread<Scratch>(st.E, n, n_threads, [&](Scratch& s) { s.init(st, acc); });
  drive_split(
      st.E, n, static_cast<index_t>(chunks.size()), scratch,
      [&](index_t c, Scratch& s, index_t i0, index_t rows, double* dist) {
        if (c >= 0)
          bounded_assign(st, s, i0, rows, dist, chunks[c].mm, unsure[c]);
        else
          bounded_assign(st, s, i0, rows, dist, s.stolen_mm, s.stolen_unsure);
      },
      [&](index_t c, Scratch& s, index_t i0, index_t rows, const double* dist) {
        zero_sums(chunks[c]);
        bounded_sums(st, acc, chunks[c], s.tile, dist, i0, rows);
      },
      [&](index_t c, Scratch& s) { acc.fold(s.tile, chunks[c]); },
      [](Scratch& s) { return s.label_sq.data(); });
  for (ChunkStats& c : chunks) zero_sums(c);
  merge_in_chunk_order(chunks, k, d, out, static_cast<int>(scratch.size()));
  for (Scratch& s : scratch) {
    if (k >= 2) *min_margin = std::min(*min_margin, s.stolen_mm);
    unsure.push_back(std::move(s.stolen_unsure));
  }
  if (exact && k >= 2) unsure_margins(st, unsure, scratch[0], min_margin);
  index_t total = 0;
  std::int64_t distances = 0;
  for (const Scratch& s : scratch) {
    total += s.n_computed;
    distances += s.n_distances;
  }
  *n_computed = total;
  *n_distances = st.grouped ? distances : static_cast<std::int64_t>(n) * k;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
