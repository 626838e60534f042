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
