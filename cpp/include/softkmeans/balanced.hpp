// The balanced (size-constrained) assignment on a candidate graph (SPEC.md,
// "Balanced (size-constrained) assignments"): plain C++17, single-threaded,
// deterministic (rows bid in a fixed order). The Python layer
// (softkmeans.fit.balanced) finds the candidates with the distance kernels,
// runs the epsilon phases and derives the offsets.
#pragma once

#include <cstdint>
#include <memory>

namespace softkmeans {

// Status of balanced_auction.
enum class AuctionStatus : int {
  settled = 0,     // every row holds a place
  short_rows = 1,  // a row's best candidate is beaten by the bound beyond its candidates
  too_many_bids = 2,
};

// One epsilon phase of Bertsekas' forward auction for similar objects
// (Gauss-Seidel: one row bids at a time, first in first out, the rows without
// a cluster at the start in index order). A row handed in with a cluster keeps
// it, at the cluster's start price, while its value there is within eps of its
// best (eps-complementary slackness) and the cluster has room for it.
//
// Row i values cluster cand[i, s] at v = -cost[i, s] - price[cand[i, s]], and
// every other cluster at most -beyond[i] - min(price). It bids for its best
// candidate j: price[j] + (v1 - v2) + eps, v1, v2 its best and second values.
// A cluster keeps its highest bids while their weight fits caps[j] (1e-12
// relative slack; rows are not split): the lowest are evicted and bid again;
// once it has been full, price[j] is its lowest kept bid. Ties between equal
// bids evict the larger row index.
//
// cand    [in]  (n, m) int64 cluster indices in [0, k), distinct per row
// cost    [in]  (n, m) double, the rows' costs D_ij of those clusters
// beyond  [in]  (n,) double, a lower bound on the cost of any other cluster
//               (+inf when the candidates are all k clusters)
// w       [in]  (n,) double > 0, row weights
// caps    [in]  (k,) double > 0, cluster capacities; sum(caps) >= sum(w)
// prices  [in/out] (k,) double, the start prices in, the final prices out
// free_at_zero [in] capacities (one-sided): a cluster with room after the rows
//               handed in are kept starts at price 0, so that every cluster
//               with room at the end has price 0 (its offset g_j = 0)
// eps     [in]  > 0
// max_bids [in] the most bids before giving up (status too_many_bids)
// owner   [in/out] (n,) int64: in, each row's cluster to keep if it may (-1:
//               none); out, the cluster holding each row
// short_row [out] the first row whose candidates do not suffice (short_rows)
AuctionStatus balanced_auction(const int64_t* cand, const double* cost, const double* beyond,
                               const double* w, int64_t n, int64_t m, const double* caps, int64_t k,
                               double* prices, bool free_at_zero, double eps, int64_t max_bids,
                               int64_t* owner, int64_t* short_row);

// Status of balanced_counts.
enum class TransferStatus : int {
  settled = 0,  // every cluster holds its target count
  no_path = 1,  // a cluster short of rows is reached by no row's edge
  too_many_moves = 2,
  cancelled = 3,  // the thread's cancel flag (kernels.hpp) was set: outputs unspecified
};

// The hard balanced assignment of unit-weight rows with integer target counts
// from the last offsets g: the argmin of D - g (ties to the smaller j),
// corrected by successive shortest paths on the cluster graph (k nodes): edge
// j -> l costs the cheapest reduced cost of moving one row of j to l,
// min_i (D_il - g_l) - (D_ij - g_j) >= 0. Each step runs Dijkstra from every
// over-full cluster to the nearest short one, raises g by min(dist, dist to
// it) (reduced costs stay >= 0, the path's become 0) and moves one row along
// each edge of the path; the labels stay an argmin of D - g, and at the end
// the counts are the targets: the optimum (complementary slackness). Rows are
// kept per edge in min-heaps of (D_il - D_ij, i), removed lazily; ties take
// the smaller row: one fixed sequence of moves, whatever the thread count.
//
// Between Lloyd iterations g is nearly right: only the rows whose gap (second
// best minus best value of D - g) is below band, and at least the
// rows_per_move x (half the count error + k) of smallest gap, take part; the
// others keep their labels, and complementary slackness is then checked on
// every row (within slack). When it fails (the offsets moved by more than a
// left-out row's gap), again from g with a band 4 times wider, or twice the
// offsets' spread if wider, and 4 times the rows; every row at the last of
// max_tries (which needs no check) or when half the rows would take part. It
// starts from g = 0 instead when that misses the counts by less. At the first
// try a row enters only the edges to its edges_per_row (at most 8) best other
// clusters whose reduced cost is below a reach (2 x the largest gap of the
// rows that may move: fewer heap entries; the check covers the others and a
// failed check widens the reach), every edge after, and from the start when
// over n / 128 rows are to move.
//
// balanced_transfer from the offsets g alone, on every row's distances to all
// k clusters: labels the rows by the argmin of D - g (ties to the smaller j),
// then lets only the rows_per_move x (half the count error + k) rows of
// smallest gap (second best minus best value) move, and checks complementary
// slackness on every row (within slack); when it fails, again from g with 8
// times the rows (every row at last, which needs no check), at most max_tries
// times (too_many_moves).
//
// D       [in]  (n, k) double or float, D_ij
// targets [in]  (k,) int64 counts summing to n
// g       [in/out] (k,) double, the offsets
// owner   [in/out] (n,) int64: in, each row's last cluster (-1: none), which
//               it keeps where tied within slack with its argmin of D - g
//               (the slack rows of capacities tie everywhere); out, its cluster
// moves   [out] the rows moved; rows_used [out] the rows allowed to move
TransferStatus balanced_counts(const double* D, int64_t n, int64_t k, const int64_t* targets,
                               int64_t rows_per_move, double band, int64_t edges_per_row,
                               double slack, int64_t max_tries, double* g, int64_t* owner,
                               int64_t* moves, int64_t* rows_used);
// The same on float32 distances (each read as double: the same outputs as
// on the float64 copy of D, without that copy).
TransferStatus balanced_counts(const float* D, int64_t n, int64_t k, const int64_t* targets,
                               int64_t rows_per_move, double band, int64_t edges_per_row,
                               double slack, int64_t max_tries, double* g, int64_t* owner,
                               int64_t* moves, int64_t* rows_used);

// Offsets near the optimum's by damped Newton on the dual, on each row's m
// best candidates (the fused pass's, at the start offsets g): every step
// moves many rows, where a shortest path moves one. The dual is
// q(g) = sum_i min_j (D_ij - g_j) + t . g (concave; its supergradient is the
// residual r = t - N(g), hard counts among the candidates); its Hessian is
// taken as the graph Laplacian of the densities of rows on each boundary
// between two clusters (the rows whose candidates j and l are within a band
// of each other's value: a cluster's band is the max(|r_j|, 16)-th smallest
// gap of the rows it would lose, or, short of rows, gain first: a secant
// over the rows it must move). The step is halved until q rises enough
// (Armijo). It stops at a count error of `enough`, or after 4 steps without
// a lower one (the counts are discrete), and returns the offsets of the
// lowest. Rows whose gap at the start exceeds the offsets' spread since
// then keep their labels unread (bucketed by gap). Approximate by design:
// balanced_counts makes the counts exact.
//
// cand      [in]  (rows of cand, m) int32, each row's m best columns at the
//                 start offsets (-1 past the last: fewer)
// cand_dist [in]  (rows of cand, m) their D_ij
// rows      [in]  (n,) the rows of cand that Newton reads (nullptr: the first n)
// n_threads [in]  threads of its sweeps over the rows (chunks of fixed size,
//                 summed in order: the same outputs at every count; eight rows
//                 a vector at avx512 with m = 8: the same outputs at every
//                 SIMD level)
// targets   [in]  (k,) int64 counts summing to n
// max_steps [in]  the most Newton steps
// enough    [in]  a count error at which to stop
// g         [in/out] (k,) the start offsets in, the offsets out
// labels    [out] (n,) each read row's best candidate at g (ties to the smaller j)
// own       [out] (n,) its D_ij
// gap       [out] (n,) the second best candidate's value less the best's
//                 (inf when m = 1; not a bound on the columns outside);
//                 labels, own and gap all nullptr: not wanted (no sweep made)
// evals     [out] the count evaluations made
// scratch   [in]  memory kept between calls (NewtonScratch; nullptr: the
//                 call's own)
// Returns the count error sum_j |N_j - t_j| at g among the candidates.
//
// NewtonScratch: a fit's solves make dozens of calls on 10^6 rows, ~130 bytes
// a row each, and fresh memory costs a page fault a page (30-40 ms of a
// 130-220 ms call); it keeps that memory, grown when a call needs more, for
// one call at a time.
class NewtonScratch {
 public:
  NewtonScratch();
  ~NewtonScratch();
  NewtonScratch(const NewtonScratch&) = delete;
  NewtonScratch& operator=(const NewtonScratch&) = delete;
  struct Buffers;
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};
template <typename T>
int64_t balanced_newton(const int32_t* cand, const T* cand_dist, const int64_t* rows, int64_t n,
                        int64_t m, int64_t k, const int64_t* targets, int64_t max_steps,
                        int64_t enough, double* g, int64_t* labels, double* own, double* gap,
                        int64_t* evals, int n_threads, NewtonScratch* scratch = nullptr);

// Each row's best candidate at offsets g among its m (the fused pass's
// candidates, as balanced_newton reads them): labels (ties to the smaller
// column), own its D_ij, gap the second best candidate's value less the
// best's (inf when the row holds one): the values balanced_newton gives a row
// it reads, for every row, on n_threads (the same at every count).
//
// With a bound (not null), gap [out] is instead a lower bound on each row's
// gap over every column, less its rounding (the repair's margin): the fused
// pass's floor (at its offsets) bounds the columns outside the candidates,
// each fallen by at most the most an offset rose since. In double, in this
// order (the bits of the NumPy it replaces, softkmeans.fit.balanced_repair):
//   f = floor_i - floor_scale (|floor_i| + floor_shift) - (rise - g_a) - own_i
//   gap' = min(gap_i, f)                       (f only where floor is given)
//   margin = gap' - scale ((|own_i| + shift) + |gap'|) - tiny
//                                              (|gap'| taken as 0 where inf)
template <typename T>
struct MarginBound {
  const T* floor = nullptr;  // (n,) the pass's floor, or null: no columns outside
  double floor_scale = 0.0, floor_shift = 0.0, rise = 0.0;
  double scale = 0.0, shift = 0.0, tiny = 0.0;
};
template <typename T>
void biased_row_states(const int32_t* cand, const T* cand_dist, int64_t n, int64_t m, int64_t k,
                       const double* g, int64_t* labels, double* own, double* gap, int n_threads,
                       const MarginBound<T>* bound = nullptr);

// The balanced repair's rows: mask (n,) [out] 1 on the rows `rows` (n_rows
// indices in [0, n)) and, for each group j < k with counts[j] > 0, on the
// counts[j] rows i with keys[i] == j of least margin[i] (ties to the smaller
// i; NaN counted as +inf; every row of the group where it holds fewer).
// keys: (n,) each row's group (outside [0, k): none), or nullptr: every row
// in group 0 (k = 1). One thread: one pass with a bounded heap a group, or
// (keys nullptr) a sample's order statistics bracketing the cut, a pass, and a
// selection within the bracket.
void least_margin_rows(const int64_t* rows, int64_t n_rows, const int64_t* keys,
                       const double* margin, int64_t n, const int64_t* counts, int64_t k,
                       uint8_t* mask);

}  // namespace softkmeans
