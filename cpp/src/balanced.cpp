// The forward auction of balanced.hpp. Each cluster keeps its rows in a
// min-heap of (bid, row): the lowest bid is the cluster's price once full, and
// the first to be evicted. A bid costs O(m + log n).
#include "softkmeans/balanced.hpp"

#include "softkmeans/kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

namespace softkmeans {

namespace {

using Held = std::pair<double, int64_t>;  // (bid, row)

// Orders the heap so that its top is the lowest bid, and among equal bids the
// larger row (evicted first).
struct LowestFirst {
  bool operator()(const Held& a, const Held& b) const {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  }
};

// One auction phase (balanced_auction): its arguments (prices and owner
// updated in place) and its state: each cluster's held rows, their weight and
// whether it has been full, the rows waiting to bid, and the lowest price (the
// value of every cluster beyond a row's candidates).
struct Auction {
  Auction(const int64_t* cand, const double* cost, const double* beyond, const double* w, int64_t n,
          int64_t m, const double* caps, int64_t k, double* prices, double eps, int64_t* owner)
      : cand(cand),
        cost(cost),
        beyond(beyond),
        w(w),
        n(n),
        m(m),
        caps(caps),
        k(k),
        prices(prices),
        eps(eps),
        owner(owner),
        held(k),
        load(k, 0.0),
        full(k, 0),
        min_price(lowest_price()) {}

  double lowest_price() const { return *std::min_element(prices, prices + k); }

  // The best and second values of row i at the current prices; best = -1 when
  // its candidates do not suffice.
  void best_two(int64_t i, int64_t* best, double* v1, double* v2) const {
    const int64_t* ci = cand + i * m;
    const double* di = cost + i * m;
    *best = -1;
    *v1 = neg_inf;
    *v2 = neg_inf;
    for (int64_t s = 0; s < m; ++s) {
      const double v = -di[s] - prices[ci[s]];
      if (v > *v1) {
        *v2 = *v1;
        *v1 = v;
        *best = ci[s];
      } else if (v > *v2) {
        *v2 = v;
      }
    }
    const double outside = -beyond[i] - min_price;
    if (outside > *v1) *best = -1;
    *v2 = std::max(*v2, outside);
  }

  // Row i's value in cluster o (-inf when o is not a candidate) and its best
  // value elsewhere (at least the bound on the clusters beyond its candidates).
  void own_and_other(int64_t i, int64_t o, double* own, double* other) const {
    *own = neg_inf;
    *other = -beyond[i] - min_price;
    for (int64_t s = 0; s < m; ++s) {
      const double v = -cost[i * m + s] - prices[cand[i * m + s]];
      if (cand[i * m + s] == o)
        *own = v;
      else
        *other = std::max(*other, v);
    }
  }

  // Which rows handed in keep their cluster, at its price: those within eps of
  // their best value (eps-complementary slackness) and within its capacity;
  // load becomes the kept rows' weight. free_at_zero: a cluster left with room
  // starts at price 0 (and so ends at 0 if it never fills), which may release
  // more rows: repeat until stable.
  std::vector<char> rows_kept(bool free_at_zero) {
    std::vector<char> keep(n, 0);
    for (bool again = true; again;) {
      again = false;
      std::fill(load.begin(), load.end(), 0.0);
      min_price = lowest_price();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t o = owner[i];
        keep[i] = 0;
        if (o < 0 || o >= k) continue;
        double own, other;
        own_and_other(i, o, &own, &other);
        if (own >= other - eps && load[o] + w[i] <= caps[o] * (1 + 1e-12)) {
          keep[i] = 1;
          load[o] += w[i];
        }
      }
      if (!free_at_zero) break;
      for (int64_t j = 0; j < k; ++j) {
        if (load[j] < caps[j] * (1 - 1e-12) && prices[j] != 0.0) {
          prices[j] = 0.0;
          again = true;
        }
      }
    }
    return keep;
  }

  // The kept rows enter their clusters' heaps, the others wait to bid (in
  // index order); a full cluster's price is its lowest kept bid.
  void seat(const std::vector<char>& keep) {
    min_price = lowest_price();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t o = owner[i];
      if (keep[i]) {
        // As if it bid now: what it would pay (at least the price).
        double own, other;
        own_and_other(i, o, &own, &other);
        const double gain = std::isfinite(other) ? own - other : 0.0;
        held[o].push(Held(prices[o] + gain + eps, i));
      } else {
        owner[i] = -1;
        bidders.push_back(i);
      }
    }
    for (int64_t j = 0; j < k; ++j) {
      full[j] = load[j] >= caps[j] * (1 - 1e-12);
      if (full[j]) prices[j] = held[j].top().first;
    }
    min_price = lowest_price();
  }

  // The waiting rows bid, first in first out, until none waits.
  AuctionStatus bid_until_settled(int64_t max_bids, int64_t* short_row) {
    for (int64_t bids = 0; !bidders.empty(); ++bids) {
      if (bids >= max_bids) return AuctionStatus::too_many_bids;
      const int64_t i = bidders.front();
      bidders.pop_front();
      int64_t best;
      double v1, v2;
      best_two(i, &best, &v1, &v2);
      if (best < 0) {
        *short_row = i;
        return AuctionStatus::short_rows;
      }
      // v2 = -inf only with one cluster in all: any bid above the price will do.
      place_bid(i, best, prices[best] + (std::isfinite(v2) ? v1 - v2 : 0.0) + eps);
    }
    return AuctionStatus::settled;
  }

  // Row i bids `bid` for cluster j: it is held there, and the cluster's lowest
  // bids are evicted (to bid again) while its weight exceeds its capacity;
  // once full, its price is its lowest held bid.
  void place_bid(int64_t i, int64_t j, double bid) {
    const double slack = 1e-12 * caps[j];
    held[j].push(Held(bid, i));
    owner[i] = j;
    load[j] += w[i];
    while (load[j] > caps[j] + slack) {
      const int64_t out = held[j].top().second;
      held[j].pop();
      owner[out] = -1;
      load[j] -= w[out];
      bidders.push_back(out);
      full[j] = 1;
    }
    if (load[j] >= caps[j] - slack) full[j] = 1;
    if (full[j] && !held[j].empty()) {
      const bool was_min = prices[j] == min_price;
      prices[j] = held[j].top().first;
      if (was_min) min_price = lowest_price();
    }
  }

  static constexpr double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t* cand;
  const double *cost, *beyond, *w;
  int64_t n, m;
  const double* caps;
  int64_t k;
  double* prices;
  double eps;
  int64_t* owner;
  std::vector<std::priority_queue<Held, std::vector<Held>, LowestFirst>> held;
  std::vector<double> load;
  std::vector<char> full;
  std::deque<int64_t> bidders;
  double min_price;
};

}  // namespace

AuctionStatus balanced_auction(const int64_t* cand, const double* cost, const double* beyond,
                               const double* w, int64_t n, int64_t m, const double* caps, int64_t k,
                               double* prices, bool free_at_zero, double eps, int64_t max_bids,
                               int64_t* owner, int64_t* short_row) {
  Auction auction(cand, cost, beyond, w, n, m, caps, k, prices, eps, owner);
  auction.seat(auction.rows_kept(free_at_zero));
  return auction.bid_until_settled(max_bids, short_row);
}

}  // namespace softkmeans

namespace softkmeans {

namespace {

using Edge = std::pair<double, int64_t>;  // (cost[i, l] - cost[i, j], row i)

// std::push_heap / pop_heap keep the largest on top: this order puts the
// cheapest move on top, and among equal ones the smaller row.
struct CheaperOnTop {
  bool operator()(const Edge& a, const Edge& b) const {
    if (a.first != b.first) return a.first > b.first;
    return a.second > b.second;
  }
};

// A LazyEdges heap takes about this many entries of its reserve at a time.
constexpr size_t kHeapBatch = 64;

// A min-heap of edges (CheaperOnTop) built lazily: entries enter an unordered
// reserve, and the heap takes those of the reserve below a floor (about the
// kHeapBatch cheapest, the floor estimated on a strided sample) whenever its
// top may not be the cheapest of all. The top is that of one heap of every
// entry, the same (cost, row) whatever the batches; a repair that moves few of
// many rows orders few (make_heap over every row's edges was a third of a
// 20,000-row repair).
class LazyEdges {
 public:
  void reserve(size_t n) { v_.reserve(n); }
  // Adds e to the reserve (before the first top) or to the heap.
  void push(const Edge& e, bool to_heap) {
    if (!to_heap) {
      v_.push_back(e);
      return;
    }
    if (heap_ < v_.size()) {  // the reserve's first entry moves to the back
      v_.push_back(v_[heap_]);
      v_[heap_] = e;
    } else {
      v_.push_back(e);
    }
    std::push_heap(v_.begin(), v_.begin() + (++heap_), CheaperOnTop());
  }
  // The cheapest entry (nullptr: none).
  const Edge* top() {
    while (heap_ < v_.size() && (heap_ == 0 || !floor_known_ || CheaperOnTop()(v_.front(), floor_)))
      refill();
    return heap_ ? &v_.front() : nullptr;
  }
  void pop() {
    std::pop_heap(v_.begin(), v_.begin() + heap_, CheaperOnTop());
    --heap_;
    std::swap(v_[heap_], v_.back());  // (a reserve entry fills the hole)
    v_.pop_back();
  }

 private:
  static bool cheaper(const Edge& a, const Edge& b) { return CheaperOnTop()(b, a); }
  // Moves the reserve's entries not dearer than a floor into the heap: the
  // floor is the kHeapBatch / 16-th cheapest of every 16th entry (all of the
  // reserve when it is small), and every entry left is dearer than it.
  void refill() {
    const size_t size = v_.size() - heap_;
    Edge floor;
    if (size <= 2 * kHeapBatch) {
      floor = *std::max_element(v_.begin() + heap_, v_.end(), cheaper);
    } else {
      sample_.clear();
      for (size_t i = heap_; i < v_.size(); i += 16) sample_.push_back(v_[i]);
      const size_t at = std::min(sample_.size() - 1, kHeapBatch / 16);
      std::nth_element(sample_.begin(), sample_.begin() + at, sample_.end(), cheaper);
      floor = sample_[at];
    }
    for (size_t i = heap_; i < v_.size(); ++i)
      if (!cheaper(floor, v_[i])) {
        std::swap(v_[i], v_[heap_]);
        std::push_heap(v_.begin(), v_.begin() + (++heap_), CheaperOnTop());
      }
    floor_ = floor, floor_known_ = true;
  }

  std::vector<Edge> v_;  // [0, heap_): the heap; [heap_, size): the reserve
  size_t heap_ = 0;
  Edge floor_;  // every reserve entry is dearer (when floor_known_)
  bool floor_known_ = false;
  std::vector<Edge> sample_;
};

// Most edges a row may be limited to (balanced_counts' edges_per_row).
constexpr int64_t kMaxEdgesPerRow = 8;

// The successive shortest paths of balanced_counts over the rows `rows` of
// D (n, k). Each row enters the edges to its edges_per_row best other
// clusters (by D_il - g_l when it enters), all of them when edges_per_row >=
// k - 1. An edge j -> l costs the cheapest move of a row of j to l (a heap
// per pair); each path found moves one row along each of its edges.
class TransferGraph {
 public:
  TransferGraph(const double* D, int64_t k, const int64_t* rows, int64_t n_rows,
                int64_t edges_per_row, const double* g, int64_t* owner)
      : D_(D), k_(k), g_(g), owner_(owner), edges_(static_cast<size_t>(k * k)),
        every_edge_(edges_per_row >= k - 1), few_(std::min(edges_per_row, kMaxEdgesPerRow)),
        cheapest_(static_cast<size_t>(k * k), kInf), top_row_(static_cast<size_t>(k * k), -1) {
    reserve(rows, n_rows);
    for (int64_t r = 0; r < n_rows; ++r) push_row(rows ? rows[r] : r, false);
    for (int64_t j = 0; j < k; ++j)
      for (int64_t l = 0; l < k; ++l)
        if (l != j) set_top(j, l);
  }

  // Dense Dijkstra (k is small) from the clusters over their targets (excess
  // > 0) to the nearest one under it, on the reduced costs; fills dist and
  // prev. Returns that cluster, or -1 where none is reachable.
  int64_t nearest_short(const int64_t* excess, std::vector<double>& dist,
                        std::vector<int64_t>& prev, std::vector<char>& done) const {
    for (;;) {
      int64_t u = -1;
      for (int64_t j = 0; j < k_; ++j)
        if (!done[j] && dist[j] < kInf && (u < 0 || dist[j] < dist[u])) u = j;
      if (u < 0) return -1;
      done[u] = 1;
      if (excess[u] < 0) return u;
      const double* from_u = cheapest_.data() + u * k_;
      for (int64_t l = 0; l < k_; ++l) {
        if (done[l] || l == u || from_u[l] == kInf) continue;
        // >= 0 but for rounding in g: clamped so that Dijkstra stays exact.
        const double reduced = std::max(0.0, from_u[l] - g_[l] + g_[u]);
        if (dist[u] + reduced < dist[l]) {
          dist[l] = dist[u] + reduced;
          prev[l] = u;
        }
      }
    }
  }

  // Moves the cheapest row of each edge on the path to `target` (prev) and
  // counts the path's source one row lighter.
  void move_along(int64_t target, const std::vector<int64_t>& prev, int64_t* excess) {
    for (int64_t l = target; prev[l] >= 0; l = prev[l]) {
      const int64_t from = prev[l], i = top_row_[from * k_ + l];
      owner_[i] = l;
      for (int64_t m = 0; m < k_; ++m)  // the tops it held in its old cluster
        if (top_row_[from * k_ + m] == i) set_top(from, m);
      push_row(i, true);
      if (prev[prev[l]] < 0) --excess[prev[l]];
    }
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  // Room for the rows' entries (every edge: the rows of each cluster).
  void reserve(const int64_t* rows, int64_t n_rows) {
    std::vector<int64_t> held(k_, 0);
    for (int64_t r = 0; r < n_rows; ++r) ++held[owner_[rows ? rows[r] : r]];
    const int64_t per_row = every_edge_ ? 1 : few_, share = every_edge_ ? 1 : k_ - 1;
    for (int64_t j = 0; j < k_; ++j)
      for (int64_t l = 0; l < k_; ++l)
        if (l != j) edges_[j * k_ + l].reserve(static_cast<size_t>(held[j] * per_row / share + 16));
  }

  // Enters row i's edges from its cluster (heapify: into the heaps, their
  // tops kept current; else into the reserves, before the first tops).
  void push_row(int64_t i, bool heapify) {
    const double* di = D_ + i * k_;
    const int64_t j = owner_[i];
    if (every_edge_) {
      for (int64_t l = 0; l < k_; ++l)
        if (l != j) push(i, j, l, di[l] - di[j], heapify);
      return;
    }
    int64_t best[kMaxEdgesPerRow], held = 0;  // the best clusters so far, by D_il - g_l
    for (int64_t l = 0; l < k_; ++l) {
      if (l == j) continue;
      const double v = di[l] - g_[l];
      int64_t at = held < few_ ? held++ : few_;
      while (at > 0 && v < di[best[at - 1]] - g_[best[at - 1]]) {
        if (at < few_) best[at] = best[at - 1];
        --at;
      }
      if (at < few_) best[at] = l;
    }
    for (int64_t t = 0; t < held; ++t) push(i, j, best[t], di[best[t]] - di[j], heapify);
  }

  void push(int64_t i, int64_t j, int64_t l, double cost, bool heapify) {
    auto& heap = edges_[j * k_ + l];
    heap.push(Edge(cost, i), heapify);
    if (!heapify) return;
    const Edge& e = *heap.top();
    cheapest_[j * k_ + l] = e.first;
    top_row_[j * k_ + l] = e.second;
  }

  // The cheapest row of j that may move to l (rows that left j dropped here)
  // into the dense (k, k) tops (inf, -1: none).
  void set_top(int64_t j, int64_t l) {
    auto& heap = edges_[j * k_ + l];
    const Edge* e = heap.top();
    for (; e && owner_[e->second] != j; e = heap.top()) heap.pop();
    cheapest_[j * k_ + l] = e ? e->first : kInf;
    top_row_[j * k_ + l] = e ? e->second : -1;
  }

  const double* D_;
  int64_t k_;
  const double* g_;
  int64_t* owner_;
  std::vector<LazyEdges> edges_;  // [j * k + l]
  bool every_edge_;
  int64_t few_;
  // Each heap's top in dense (k, k) matrices, (cost, row), kept current as
  // rows move: Dijkstra reads k^2 contiguous doubles, and a move touches only
  // the heaps whose top it changes (touching all k heaps of a cluster, a cache
  // miss each, was most of a move's time at k = 64).
  std::vector<double> cheapest_;
  std::vector<int64_t> top_row_;
};

TransferStatus shortest_paths(const double* D, int64_t k, const int64_t* rows, int64_t n_rows,
                              int64_t edges_per_row, int64_t* excess, double* g, int64_t max_moves,
                              int64_t* owner, int64_t* moves) {
  const double inf = std::numeric_limits<double>::infinity();
  TransferGraph graph(D, k, rows, n_rows, edges_per_row, g, owner);
  const std::atomic<int>* cancel = thread_cancel_flag();
  std::vector<double> dist(k);
  std::vector<int64_t> prev(k);
  std::vector<char> done(k);
  *moves = 0;
  for (;;) {
    if (cancel && cancel->load(std::memory_order_relaxed)) return TransferStatus::cancelled;
    std::fill(dist.begin(), dist.end(), inf);
    std::fill(prev.begin(), prev.end(), -1);
    std::fill(done.begin(), done.end(), 0);
    bool any = false;
    for (int64_t j = 0; j < k; ++j)
      if (excess[j] > 0) dist[j] = 0.0, any = true;
    if (!any) return TransferStatus::settled;
    if (*moves >= max_moves) return TransferStatus::too_many_moves;
    const int64_t target = graph.nearest_short(excess, dist, prev, done);
    if (target < 0) return TransferStatus::no_path;
    const double reach = dist[target];
    for (int64_t j = 0; j < k; ++j) g[j] += std::min(dist[j], reach);
    graph.move_along(target, prev, excess);
    ++excess[target];
    ++*moves;
  }
}

}  // namespace

// The argmin of D - g of every row (ties to the smaller j), its gap to the
// next value, and each cluster's count minus its target; returns the total
// count error sum_j |excess_j|.
static int64_t label_rows(const double* D, int64_t n, int64_t k, const int64_t* targets,
                          const double* g, const int64_t* keep, double slack, int64_t* owner,
                          double* gap, int64_t* excess) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < k; ++j) excess[j] = -targets[j];
  for (int64_t i = 0; i < n; ++i) {
    const double* di = D + i * k;
    int64_t best = 0;
    double v1 = di[0] - g[0], v2 = inf;
    for (int64_t j = 1; j < k; ++j) {
      const double v = di[j] - g[j];
      if (v < v1) {
        v2 = v1;
        v1 = v;
        best = j;
      } else if (v < v2) {
        v2 = v;
      }
    }
    const int64_t last = keep[i];
    if (last >= 0 && last < k && last != best && di[last] - g[last] <= v1 + slack) {
      best = last;  // tied: it stays (the slack rows of capacities all tie)
      v2 = v1;
      v1 = di[last] - g[last];
    }
    owner[i] = best;
    if (gap) gap[i] = std::max(0.0, v2 - v1);
    ++excess[best];
  }
  int64_t off = 0;
  for (int64_t j = 0; j < k; ++j) off += std::abs(excess[j]);
  return off;
}

TransferStatus balanced_counts(const double* D, int64_t n, int64_t k, const int64_t* targets,
                               int64_t rows_per_move, double band, int64_t edges_per_row,
                               double slack, int64_t max_tries, double* g, int64_t* owner,
                               int64_t* moves, int64_t* rows_used) {
  std::vector<double> gap(static_cast<size_t>(n));
  std::vector<int64_t> excess(k), near;
  const std::vector<int64_t> keep(owner, owner + n);
  // Far from the optimum (the first iterations: the centroids move far), the
  // last offsets can miss the counts by more than none at all: the better.
  int64_t off = label_rows(D, n, k, targets, g, keep.data(), slack, owner, nullptr, excess.data());
  const std::vector<double> zero(k, 0.0);
  if (label_rows(D, n, k, targets, zero.data(), keep.data(), slack, owner, nullptr, excess.data()) <
      off)
    std::fill(g, g + k, 0.0);
  const std::vector<double> g_start(g, g + k);
  off = label_rows(D, n, k, targets, g, keep.data(), slack, owner, gap.data(), excess.data());
  const std::vector<int64_t> owner_start(owner, owner + n), excess_start = excess;
  int64_t want = rows_per_move * (off / 2 + k);
  if (off * 64 > n) edges_per_row = k;  // far off: the few edges would not do
  for (int64_t tries = 0; tries < max_tries; ++tries) {
    // The rows within `band` of a tie, and at least `want`, of smallest gap
    // (ties: smaller row) may move; the others keep their labels, which stay
    // argmins while the offsets move by less than their gaps (checked below).
    // Every row at the last try.
    near.clear();
    for (int64_t i = 0; i < n; ++i)
      if (gap[i] < band) near.push_back(i);
    if (tries + 1 == max_tries || static_cast<int64_t>(near.size()) * 2 > n || want * 2 > n) {
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
    const int64_t used = static_cast<int64_t>(near.size());
    *rows_used = used;
    std::copy(g_start.begin(), g_start.end(), g);
    std::copy(owner_start.begin(), owner_start.end(), owner);
    excess = excess_start;
    const bool last = tries + 1 == max_tries;
    const TransferStatus status = shortest_paths(D, k, near.data(), used, last ? k : edges_per_row,
                                                 excess.data(), g, off + k, owner, moves);
    if (last || status == TransferStatus::too_many_moves || status == TransferStatus::cancelled)
      return status;
    // no_path: a short cluster is reached by none of these rows' edges.
    // Complementary slackness for every row: its label an argmin of D - g.
    bool holds = status == TransferStatus::settled;
    for (int64_t i = 0; i < n && holds; ++i) {
      const double* di = D + i * k;
      const double own = di[owner[i]] - g[owner[i]];
      for (int64_t j = 0; j < k; ++j)
        if (di[j] - g[j] < own - slack) {
          holds = false;
          break;
        }
    }
    if (holds) return status;
    // The offsets moved by `spread` (relative to each other): a band that wide
    // is what the rows left out needed.
    double lo = g[0] - g_start[0], hi = lo;
    for (int64_t j = 1; j < k; ++j) {
      lo = std::min(lo, g[j] - g_start[j]);
      hi = std::max(hi, g[j] - g_start[j]);
    }
    band = std::max(4 * band, 2 * (hi - lo));
    want *= 4;
    edges_per_row = k;
  }
  return TransferStatus::too_many_moves;
}

}  // namespace softkmeans
