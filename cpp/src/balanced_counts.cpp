// The successive shortest paths of balanced.hpp (balanced_counts): the
// exact repair of integer counts on the k-node cluster graph, each edge a
// lazily built heap of the rows that may move along it.
#include "softkmeans/balanced.hpp"

#include "impl/lazy_edges.hpp"
#include "softkmeans/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

namespace softkmeans {

namespace {

using transfer::CheaperOnTop;
using transfer::Edge;
using transfer::LazyEdges;

// Most edges a row may be limited to (balanced_counts' edges_per_row).
constexpr int64_t kMaxEdgesPerRow = 8;

// The scans over a row's clusters take kWays at a time: their arrays hold
// padded(k) values, inf past k (no remainder to handle apart).
constexpr int kWays = 4;
constexpr int64_t padded(int64_t k) { return (k + kWays - 1) / kWays * kWays; }

// The successive shortest paths of balanced_counts over the rows `rows` of
// D (n, k). Each row enters the edges to its edges_per_row best other
// clusters (by D_il - g_l when it enters), all of them when edges_per_row >=
// k - 1. An edge j -> l costs the cheapest move of a row of j to l (a heap
// per pair); each path found moves one row along each of its edges. With
// few edges a row, only those of reduced cost below edge_reach when it
// enters. rest (indexed as D's rows): each entered row's least D_il - g_l
// outside its edges when it entered, -inf once it moved (push_row).
template <typename T>
class TransferGraph {
 public:
  TransferGraph(const T* D, int64_t k, const int64_t* rows, int64_t n_rows,
                int64_t edges_per_row, double edge_reach, const double* g, int64_t* owner,
                double* rest)
      : D_(D), k_(k), g_(g), owner_(owner), rest_(rest), edge_reach_(edge_reach),
        edges_(static_cast<size_t>(k * k)),
        every_edge_(edges_per_row >= k - 1), few_(std::min(edges_per_row, kMaxEdgesPerRow)),
        built_(static_cast<size_t>(k * k), 0), entered_(static_cast<size_t>(k)),
        g_entered_(g, g + k), cheapest_(static_cast<size_t>(k * k), kInf),
        top_row_(static_cast<size_t>(k * k), -1), values_(static_cast<size_t>(padded(k)), kInf) {
    reserve(rows, n_rows);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t i = rows ? rows[r] : r;
      rest_[i] = push_row(i, false);
    }
  }

  // Dense Dijkstra (k is small) from the clusters over their targets (excess
  // > 0) to the nearest one under it, on the reduced costs; fills dist and
  // prev. Returns that cluster, or -1 where none is reachable. open: dist of
  // the clusters not yet taken, inf once taken (and where unreached).
  //
  // Both loops are branch-free (their compares follow no pattern: at k = 128
  // the mispredicted branches were a sixth of a repair). The relaxation needs
  // no test for a taken cluster l: dist[u] >= dist[l] for every u taken after
  // l and the reduced costs are >= 0, so dist[u] + reduced < dist[l] is false;
  // an edge with no row (inf), and u itself (no edge j -> j), give inf.
  int64_t nearest_short(const int64_t* excess, std::vector<double>& dist,
                        std::vector<int64_t>& prev, std::vector<double>& open) const {
    for (;;) {
      const int64_t u = first_least(open.data());
      if (u < 0) return -1;
      open[u] = kInf;
      if (excess[u] < 0) return u;
      const double* from_u = cheapest_.data() + u * k_;
      const double du = dist[u], gu = g_[u];
      for (int64_t l = 0; l < k_; ++l) {
        // >= 0 but for rounding in g: clamped so that Dijkstra stays exact.
        const double reduced = std::max(0.0, from_u[l] - g_[l] + gu);
        const double through_u = du + reduced;
        const bool closer = through_u < dist[l];
        dist[l] = closer ? through_u : dist[l];
        open[l] = closer ? through_u : open[l];
        prev[l] = closer ? u : prev[l];
      }
    }
  }

  // The first index of the least value of v (padded(k_) of them, inf past
  // k_) below inf, -1 where none: four independent running minima (no chain
  // of k_ dependent compares), merged by value, then index.
  int64_t first_least(const double* v) const {
    double least[kWays];
    int64_t at[kWays];
    for (int q = 0; q < kWays; ++q) least[q] = kInf, at[q] = -1;
    for (int64_t j = 0; j < padded(k_); j += kWays)
      for (int q = 0; q < kWays; ++q) {
        const bool less = v[j + q] < least[q];
        least[q] = less ? v[j + q] : least[q];
        at[q] = less ? j + q : at[q];
      }
    int64_t u = -1;
    double best = kInf;
    for (int q = 0; q < kWays; ++q)
      if (least[q] < best || (least[q] == best && at[q] >= 0 && at[q] < u)) {
        best = least[q];
        u = at[q];
      }
    return u;
  }

  // Moves the cheapest row of each edge on the path to `target` (prev) and
  // counts the path's source one row lighter.
  void move_along(int64_t target, const std::vector<int64_t>& prev, int64_t* excess) {
    for (int64_t l = target; prev[l] >= 0; l = prev[l]) {
      const int64_t from = prev[l], i = top_row_[from * k_ + l];
      owner_[i] = l;
      rest_[i] = -kInf;
      for (int64_t m = 0; m < k_; ++m)  // the tops it held in its old cluster
        if (top_row_[from * k_ + m] == i) set_top(from, m);
      push_row(i, true);
      if (prev[prev[l]] < 0) --excess[prev[l]];
    }
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  // std::min by value (its reference kept a running minimum in memory).
  static double lower(double a, double b) { return b < a ? b : a; }

  // Room for the entered rows of each cluster (every edge: the rows; else
  // their (row, column) entries, at most few_ a row).
  void reserve(const int64_t* rows, int64_t n_rows) {
    std::vector<int64_t> held(k_, 0);
    for (int64_t r = 0; r < n_rows; ++r) ++held[owner_[rows ? rows[r] : r]];
    for (int64_t j = 0; j < k_; ++j)
      entered_[j].reserve(static_cast<size_t>(held[j] * (every_edge_ ? 1 : few_)));
  }

  // Enters row i's edges from its cluster (heapify: into the heaps, their
  // tops kept current; else into the reserves, before the first tops).
  // Returns the least D_il - g_l of the clusters l it has no edge to (inf:
  // none), the bound that spares its row a full check (`balanced_counts`).
  double push_row(int64_t i, bool heapify) {
    const T* di = D_ + i * k_;
    const int64_t j = owner_[i];
    const double cut = di[j] - g_[j] + edge_reach_;
    // D_il - g_l of every cluster, inf at j, in one pass with no branch; the
    // row's rest is then the least of those it enters no edge to (not a
    // running minimum beside the choices: a chain of dependent compares).
    double* v = values_.data();
    for (int64_t l = 0; l < k_; ++l) v[l] = di[l] - g_[l];
    v[j] = kInf;
    if (every_edge_) {
      if (!heapify) entered_[j].push_back(Entered{i, -1});
      for (int64_t l = 0; l < k_; ++l)
        if (v[l] < cut) {
          push(i, j, l, static_cast<double>(di[l]) - di[j], heapify);
          v[l] = kInf;
        }
      return least(v, k_);
    }
    // The best clusters by D_il - g_l (ties: the smaller l first), their
    // values alongside: a column not below the last of a full list (or the
    // cut) is passed over at one comparison (reading the list's values back
    // from D was most of a repair's time).
    int64_t best[kMaxEdgesPerRow], held = 0;
    double value[kMaxEdgesPerRow], bar = cut;
    for (int64_t l = 0; l < k_; ++l) {
      const double x = v[l];
      if (!(x < bar)) continue;
      int64_t at = held < few_ ? held++ : few_ - 1;
      for (; at > 0 && x < value[at - 1]; --at) {
        best[at] = best[at - 1];
        value[at] = value[at - 1];
      }
      best[at] = l;
      value[at] = x;
      if (held == few_) bar = value[few_ - 1];
    }
    for (int64_t t = 0; t < held; ++t) v[best[t]] = kInf;
    const double rest = least(v, k_);
    for (int64_t t = 0; t < held; ++t)
      push(i, j, best[t], static_cast<double>(di[best[t]]) - di[j], heapify);
    return rest;
  }

  // The least of v's padded(k_) values (inf past k_), four running minima.
  static double least(const double* v, int64_t k) {
    double m[kWays] = {kInf, kInf, kInf, kInf};
    for (int64_t l = 0; l < padded(k); l += kWays)
      for (int q = 0; q < kWays; ++q) m[q] = lower(m[q], v[l + q]);
    return lower(lower(m[0], m[1]), lower(m[2], m[3]));
  }

  // Before its edge is built (set_top), an entry only updates the edge's
  // top: one entered with its row (heapify false) is kept in entered_, one
  // pushed after in the edge's reserve.
  void push(int64_t i, int64_t j, int64_t l, double cost, bool heapify) {
    const int64_t at = j * k_ + l;
    if (!built_[at]) {
      if (!heapify && !every_edge_) entered_[j].push_back(Entered{i, l});
      if (heapify) edges_[at].push(Edge(cost, i), false);
      if (top_row_[at] < 0 || CheaperOnTop()(Edge(cheapest_[at], top_row_[at]), Edge(cost, i))) {
        cheapest_[at] = cost;
        top_row_[at] = i;
      }
      return;
    }
    auto& heap = edges_[at];
    heap.push(Edge(cost, i), heapify);
    const Edge& e = *heap.top();
    cheapest_[at] = e.first;
    top_row_[at] = e.second;
  }

  // Builds edge j -> l's heap when its top first leaves: the entries its
  // rows made when they entered (every edge: those of reduced cost below
  // the cut at the offsets then), with those pushed since; every edge's
  // entries at the start cost a scattered write each, most never read.
  void build(int64_t j, int64_t l) {
    auto& heap = edges_[j * k_ + l];
    const auto& entered = entered_[j];
    heap.reserve(heap.size() + entered.size());
    for (const Entered& e : entered) {
      if (e.column != (every_edge_ ? -1 : l)) continue;
      const T* di = D_ + e.row * k_;
      if (every_edge_ && !(di[l] - g_entered_[l] < di[j] - g_entered_[j] + edge_reach_)) continue;
      heap.push(Edge(static_cast<double>(di[l]) - di[j], e.row), false);
    }
    built_[j * k_ + l] = 1;
  }

  // The cheapest row of j that may move to l (rows that left j dropped here)
  // into the dense (k, k) tops (inf, -1: none).
  void set_top(int64_t j, int64_t l) {
    if (!built_[j * k_ + l]) build(j, l);
    auto& heap = edges_[j * k_ + l];
    const Edge* e = heap.top();
    for (; e && owner_[e->second] != j; e = heap.top()) heap.pop();
    cheapest_[j * k_ + l] = e ? e->first : kInf;
    top_row_[j * k_ + l] = e ? e->second : -1;
  }

  const T* D_;
  int64_t k_;
  const double* g_;
  int64_t* owner_;
  double* rest_;
  double edge_reach_;
  std::vector<LazyEdges> edges_;  // [j * k + l]
  bool every_edge_;
  int64_t few_;
  // A row's entry on edge (row's cluster) -> column when it entered (every
  // edge: column -1, all columns under the cut).
  struct Entered {
    int64_t row, column;
  };
  std::vector<char> built_;                   // [j * k + l]: edges_ holds its entries
  std::vector<std::vector<Entered>> entered_;  // [j]: the entries of j's rows at the start
  std::vector<double> g_entered_;             // g when the rows entered
  // Each heap's top in dense (k, k) matrices, (cost, row), kept current as
  // rows move: Dijkstra reads k^2 contiguous doubles, and a move touches only
  // the heaps whose top it changes (touching all k heaps of a cluster, a cache
  // miss each, was most of a move's time at k = 64).
  std::vector<double> cheapest_;
  std::vector<int64_t> top_row_;
  std::vector<double> values_;  // (padded(k),) push_row's D_il - g_l of a row, inf past k
};

template <typename T>
TransferStatus shortest_paths(const T* D, int64_t k, const int64_t* rows, int64_t n_rows,
                              int64_t edges_per_row, double edge_reach, int64_t* excess, double* g,
                              int64_t max_moves, int64_t* owner, int64_t* moves, double* rest) {
  const double inf = std::numeric_limits<double>::infinity();
  TransferGraph<T> graph(D, k, rows, n_rows, edges_per_row, edge_reach, g, owner, rest);
  const std::atomic<int>* cancel = thread_cancel_flag();
  std::vector<double> dist(k);
  std::vector<int64_t> prev(k);
  std::vector<double> open(static_cast<size_t>(padded(k)), inf);
  *moves = 0;
  for (;;) {
    if (cancel && cancel->load(std::memory_order_relaxed)) return TransferStatus::cancelled;
    std::fill(dist.begin(), dist.end(), inf);
    std::fill(prev.begin(), prev.end(), -1);
    bool any = false;
    for (int64_t j = 0; j < k; ++j)
      if (excess[j] > 0) dist[j] = 0.0, any = true;
    std::copy(dist.begin(), dist.end(), open.begin());
    if (!any) return TransferStatus::settled;
    if (*moves >= max_moves) return TransferStatus::too_many_moves;
    const int64_t target = graph.nearest_short(excess, dist, prev, open);
    if (target < 0) return TransferStatus::no_path;
    const double reach = dist[target];
    for (int64_t j = 0; j < k; ++j) g[j] += std::min(dist[j], reach);
    graph.move_along(target, prev, excess);
    ++excess[target];
    ++*moves;
  }
}

// The running argmin of a row's values and the next value (ties to the
// smaller j), its cluster `last` kept where tied within slack (the slack rows
// of capacities all tie): row_argmin's and row_argmins' one fold.
struct RunningArgmin {
  double v1, v2 = std::numeric_limits<double>::infinity();
  int64_t best = 0;
  explicit RunningArgmin(double v0) : v1(v0) {}
  void add(double v, int64_t j) {
    if (v < v1) {
      v2 = v1;
      v1 = v;
      best = j;
    } else if (v < v2) {
      v2 = v;
    }
  }
  // last (a cluster) of value v_last
  void keep(int64_t last, double v_last, double slack) {
    if (last != best && v_last <= v1 + slack) {
      best = last;
      v2 = v1;
      v1 = v_last;
    }
  }
};

}  // namespace

// Row i's argmin of D_i - g and the next value (v1, v2), RunningArgmin's ties.
template <typename T>
static int64_t row_argmin(const T* di, int64_t k, const double* g, int64_t last, double slack,
                          double* v1_out, double* v2_out) {
  RunningArgmin at_g(di[0] - g[0]);
  for (int64_t j = 1; j < k; ++j) at_g.add(di[j] - g[j], j);
  if (last >= 0 && last < k) at_g.keep(last, di[last] - g[last], slack);
  *v1_out = at_g.v1, *v2_out = at_g.v2;
  return at_g.best;
}

// row_argmin at g and at g = 0 from one read of the row: (best at g, best
// at 0); v1, v2 at g.
template <typename T>
static std::pair<int64_t, int64_t> row_argmins(const T* di, int64_t k, const double* g,
                                               int64_t last, double slack, double* v1_out,
                                               double* v2_out) {
  RunningArgmin at_g(di[0] - g[0]), at_zero(di[0]);
  for (int64_t j = 1; j < k; ++j) {
    const double d = di[j];
    at_g.add(d - g[j], j);
    at_zero.add(d, j);
  }
  if (last >= 0 && last < k) {
    at_g.keep(last, di[last] - g[last], slack);
    at_zero.keep(last, di[last], slack);
  }
  *v1_out = at_g.v1, *v2_out = at_g.v2;
  return {at_g.best, at_zero.best};
}

static int64_t count_error(const std::vector<int64_t>& excess) {
  int64_t off = 0;
  for (const int64_t e : excess) off += std::abs(e);
  return off;
}

// The argmin of D - g of every row (row_argmin), its gap to the next value,
// and each cluster's count minus its target; returns the total count error
// sum_j |excess_j|. off_at_zero (unless null): the count error of the argmins
// at g = 0, from the same read of D.
template <typename T>
static int64_t label_rows(const T* D, int64_t n, int64_t k, const int64_t* targets,
                          const double* g, const int64_t* keep, double slack, int64_t* owner,
                          double* gap, std::vector<int64_t>& excess, int64_t* off_at_zero) {
  std::vector<int64_t> excess_zero(off_at_zero ? k : 0);
  const std::vector<double> zero(k, 0.0);
  for (int64_t j = 0; j < k; ++j) excess[j] = -targets[j];
  for (int64_t j = 0; j < static_cast<int64_t>(excess_zero.size()); ++j) excess_zero[j] = -targets[j];
  for (int64_t i = 0; i < n; ++i) {
    const T* di = D + i * k;
    double v1, v2;
    int64_t best;
    if (off_at_zero) {
      const auto both = row_argmins(di, k, g, keep[i], slack, &v1, &v2);
      best = both.first;
      ++excess_zero[both.second];
    } else {
      best = row_argmin(di, k, g, keep[i], slack, &v1, &v2);
    }
    owner[i] = best;
    gap[i] = std::max(0.0, v2 - v1);
    ++excess[best];
  }
  if (off_at_zero) *off_at_zero = count_error(excess_zero);
  return count_error(excess);
}

// A try's edges: those of reduced cost (at the start offsets) below
// kEdgeReach x the largest finite gap of the rows near, the first time (the
// offsets move by about that much relative to each other: a dearer edge is
// rarely on a path; the rows whose edges it leaves out are checked after,
// and a failed check widens it). Measured at 1e6 x 16, k = 64 (the repairs
// of a fit): most rows then enter 1-2 edges, not 8, and the shortest paths
// took 240 ns a row, not 700; inf: every edge (no positive gap).
constexpr double kEdgeReach = 2.0, kReachWiden = 4.0;
constexpr int64_t kReachTries = 3;

static double edge_reach(const std::vector<double>& gap, const std::vector<int64_t>& near) {
  double widest = 0.0;
  for (const int64_t i : near)
    if (std::isfinite(gap[i])) widest = std::max(widest, gap[i]);
  return widest > 0 ? kEdgeReach * widest : std::numeric_limits<double>::infinity();
}

// Complementary slackness for every row (after shortest paths from g_start):
// its label an argmin of D - g within slack. A row that kept its cluster
// since it entered the paths' graph (rest[i] > -inf) is spared the read of
// its D when the least value outside its edges then (rest) less the most
// any offset rose since still clears its own value now: its edges keep
// reduced costs >= 0 (the shortest paths' potentials); -inf: read.
template <typename T>
static bool slackness_holds(const T* D, int64_t n, int64_t k, const double* g,
                            const double* g_start, const int64_t* owner, const double* rest,
                            double slack) {
  double rise = -std::numeric_limits<double>::infinity(), scale = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    rise = std::max(rise, g[j] - g_start[j]);
    scale = std::max(scale, std::max(std::abs(g[j]), std::abs(g_start[j])));
  }
  for (int64_t i = 0; i < n; ++i) {
    const T* di = D + i * k;
    const int64_t o = owner[i];
    if (rest[i] == std::numeric_limits<double>::infinity()) continue;  // every column an edge
    if (rest[i] > -std::numeric_limits<double>::infinity()) {
      const double own_start = di[o] - g_start[o];
      // (a bound on the rounding of these few operations, far above it)
      const double tol = 1e-12 * (std::abs(own_start) + std::abs(rest[i]) + 4.0 * scale);
      if (rest[i] - rise - tol >= own_start - (g[o] - g_start[o]) - slack) continue;
    }
    const double own = di[o] - g[o];
    for (int64_t j = 0; j < k; ++j)
      if (di[j] - g[j] < own - slack) return false;
  }
  return true;
}

// The rows that may move: those within band of a tie, and at least want,
// of smallest gap (ties: the smaller row), sorted; every row when asked.
static void near_rows(const std::vector<double>& gap, double band, int64_t want, bool every,
                      std::vector<int64_t>& near) {
  const int64_t n = static_cast<int64_t>(gap.size());
  near.clear();
  for (int64_t i = 0; i < n; ++i)
    if (gap[i] < band) near.push_back(i);
  if (every || static_cast<int64_t>(near.size()) * 2 > n || want * 2 > n) {
    near.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) near[i] = i;
  } else if (static_cast<int64_t>(near.size()) < want) {
    near.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) near[i] = i;
    auto closer = [&](int64_t a, int64_t b) {
      return gap[a] < gap[b] || (gap[a] == gap[b] && a < b);
    };
    std::nth_element(near.begin(), near.begin() + want, near.end(), closer);
    near.resize(static_cast<size_t>(want));
    std::sort(near.begin(), near.end());
  }
}

// The spread of g - g_start (how far the offsets moved relative to each other).
static double spread(const double* g, const std::vector<double>& g_start) {
  double lo = g[0] - g_start[0], hi = lo;
  for (size_t j = 1; j < g_start.size(); ++j) {
    lo = std::min(lo, g[j] - g_start[j]);
    hi = std::max(hi, g[j] - g_start[j]);
  }
  return hi - lo;
}

// One try of balanced_counts over the rows near, from (g_start, owner_start,
// excess_start): shortest paths over the edges of reduced cost below a reach
// (edge_reach), widened to kReachWiden x the offsets' spread (at least
// kReachWiden x itself) while complementary slackness fails on a row, at
// most kReachTries times, then every edge (at once where no path is found). Returns the status; *holds:
// complementary slackness checked on every row (unless every_edge: the last
// try, as before).
template <typename T>
static TransferStatus one_try(const T* D, int64_t n, int64_t k, const std::vector<int64_t>& near,
                              int64_t edges_per_row, bool last, double slack, int64_t max_moves,
                              const std::vector<double>& gap, const std::vector<double>& g_start,
                              const std::vector<int64_t>& owner_start,
                              const std::vector<int64_t>& excess_start, double* g, int64_t* owner,
                              int64_t* moves, bool* holds) {
  std::vector<double> rest(static_cast<size_t>(n));
  std::vector<int64_t> excess;
  double reach = last ? std::numeric_limits<double>::infinity() : edge_reach(gap, near);
  for (int64_t widen = 0;; ++widen) {
    std::copy(g_start.begin(), g_start.end(), g);
    std::copy(owner_start.begin(), owner_start.end(), owner);
    excess = excess_start;
    std::fill(rest.begin(), rest.end(), -std::numeric_limits<double>::infinity());
    const TransferStatus status =
        shortest_paths(D, k, near.data(), static_cast<int64_t>(near.size()), edges_per_row, reach,
                       excess.data(), g, max_moves, owner, moves, rest.data());
    *holds = false;
    if (last || status == TransferStatus::too_many_moves || status == TransferStatus::cancelled)
      return status;
    // no_path: a short cluster is reached by none of these rows' edges.
    *holds = status == TransferStatus::settled &&
             slackness_holds(D, n, k, g, g_start.data(), owner, rest.data(), slack);
    if (*holds || !std::isfinite(reach)) return status;
    // No path: a short cluster needs a row from beyond every reach so far.
    reach = status == TransferStatus::settled && widen + 1 < kReachTries
                ? std::max(kReachWiden * reach, kReachWiden * spread(g, g_start))
                : std::numeric_limits<double>::infinity();
  }
}

template <typename T>
static TransferStatus counts_of(const T* D, int64_t n, int64_t k, const int64_t* targets,
                                int64_t rows_per_move, double band, int64_t edges_per_row,
                                double slack, int64_t max_tries, double* g, int64_t* owner,
                                int64_t* moves, int64_t* rows_used) {
  std::vector<double> gap(static_cast<size_t>(n));
  std::vector<int64_t> excess(k), near;
  const std::vector<int64_t> keep(owner, owner + n);
  // Far from the optimum (the first iterations: the centroids move far), the
  // last offsets can miss the counts by more than none at all: the better.
  int64_t off_at_zero = 0;
  int64_t off = label_rows(D, n, k, targets, g, keep.data(), slack, owner, gap.data(), excess,
                           &off_at_zero);
  if (off_at_zero < off) {
    std::fill(g, g + k, 0.0);
    off = label_rows(D, n, k, targets, g, keep.data(), slack, owner, gap.data(), excess, nullptr);
  }
  const std::vector<double> g_start(g, g + k);
  const std::vector<int64_t> owner_start(owner, owner + n), excess_start = excess;
  int64_t want = rows_per_move * (off / 2 + k);
  if (off * 64 > n) edges_per_row = k;  // far off: the few edges would not do
  for (int64_t tries = 0; tries < max_tries; ++tries) {
    // The rows near a tie may move; the others keep their labels, which stay
    // argmins while the offsets move by less than their gaps (checked).
    const bool last = tries + 1 == max_tries;
    near_rows(gap, band, want, last, near);
    *rows_used = static_cast<int64_t>(near.size());
    bool holds = false;
    const TransferStatus status =
        one_try(D, n, k, near, last ? k : edges_per_row, last, slack, off + k, gap, g_start,
                owner_start, excess_start, g, owner, moves, &holds);
    if (last || holds || status == TransferStatus::too_many_moves ||
        status == TransferStatus::cancelled)
      return status;
    // The offsets moved by their spread: a band that wide is what the rows
    // left out needed.
    band = std::max(4 * band, 2 * spread(g, g_start));
    want *= 4;
    edges_per_row = k;
  }
  return TransferStatus::too_many_moves;
}

TransferStatus balanced_counts(const double* D, int64_t n, int64_t k, const int64_t* targets,
                               int64_t rows_per_move, double band, int64_t edges_per_row,
                               double slack, int64_t max_tries, double* g, int64_t* owner,
                               int64_t* moves, int64_t* rows_used) {
  return counts_of(D, n, k, targets, rows_per_move, band, edges_per_row, slack, max_tries, g, owner,
                   moves, rows_used);
}

TransferStatus balanced_counts(const float* D, int64_t n, int64_t k, const int64_t* targets,
                               int64_t rows_per_move, double band, int64_t edges_per_row,
                               double slack, int64_t max_tries, double* g, int64_t* owner,
                               int64_t* moves, int64_t* rows_used) {
  return counts_of(D, n, k, targets, rows_per_move, band, edges_per_row, slack, max_tries, g, owner,
                   moves, rows_used);
}

}  // namespace softkmeans
