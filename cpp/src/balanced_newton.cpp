// Damped Newton on the balanced assignment's dual (balanced.hpp,
// balanced_newton): offsets near the optimum's, moving many rows a step, for
// the exact repair (balanced_counts) to finish on a thin boundary.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "softkmeans/balanced.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {

namespace {

// Buckets of rows by the binary exponent of their gap at the start offsets.
constexpr int kBuckets = 64;
// A cluster's Jacobian band holds at least this many of its rows.
constexpr int64_t kMinBandRows = 16;
// Step halvings tried before a Newton step is given up, and band doublings
// tried for a connected cluster graph.
constexpr int kHalvings = 8;
constexpr int kWidenings = 8;
// Sufficient ascent of the dual for a step (Armijo), and the steps without a
// lower count error after which Newton stops (the counts are discrete).
constexpr double kArmijo = 1e-4;
constexpr int kStall = 4;

// Each row's best and second candidate at offsets g (float64): label a,
// second column b (-1 when m = 1), the gap between their values, and D at a.
struct RowState {
  std::vector<int32_t> a, b;
  std::vector<double> gap, own;
  explicit RowState(int64_t n) : a(n), b(n), gap(n), own(n) {}
};

template <typename T>
class Newton {
 public:
  Newton(const int32_t* cand, const T* dist, int64_t n, int64_t m, int64_t k,
         const int64_t* targets)
      : cand_(cand), dist_(dist), n_(n), m_(m), k_(k), targets_(targets), cur_(n), trial_(n), bucket_(n) {}

  // Each row's bucket of its gap at g0, and the counts of the rows of each
  // bucket: a row whose gap at g0 exceeds the offsets' spread since then
  // keeps its label.
  void start(const double* g0) {
    g0_.assign(g0, g0 + k_);
    eval_rows(g0, kBuckets, &cur_);
    double top = 0.0;
    for (int64_t i = 0; i < n_; ++i)
      if (std::isfinite(cur_.gap[i])) top = std::max(top, cur_.gap[i]);
    top_exp_ = top > 0 ? std::ilogb(top) : 0;
    // fixed_[b * k + j]: rows of label j at g0 in the buckets >= b.
    // fixed_own_[b]: the sum of their D at the label.
    fixed_.assign(static_cast<size_t>((kBuckets + 1) * k_), 0);
    fixed_own_.assign(kBuckets + 1, 0.0);
    for (int64_t i = 0; i < n_; ++i) {
      bucket_[i] = static_cast<uint8_t>(bucket_of(cur_.gap[i]));
      ++fixed_[bucket_[i] * k_ + cur_.a[i]];
      fixed_own_[bucket_[i]] += cur_.own[i];
    }
    for (int b = kBuckets - 1; b >= 0; --b) {
      for (int64_t j = 0; j < k_; ++j) fixed_[b * k_ + j] += fixed_[(b + 1) * k_ + j];
      fixed_own_[b] += fixed_own_[b + 1];
    }
    active_ = kBuckets - 1;
  }

  // The count error sum_j |N_j - t_j| at g and the dual objective q (sum_i
  // min_j (D_ij - g_j) + t . g over the candidates), with the states of the
  // rows that may have moved (the buckets <= *active) in trial_.
  int64_t evaluate(const double* g, std::vector<int64_t>* counts, int* active, double* q) {
    double lo = 0.0, hi = 0.0;
    for (int64_t j = 0; j < k_; ++j) {
      const double change = g[j] - g0_[j];
      lo = j ? std::min(lo, change) : change;
      hi = j ? std::max(hi, change) : change;
    }
    const double spread = hi - lo;
    // the buckets <= b hold every row of gap <= spread
    int b = spread > 0 ? bucket_of(spread) : -1;
    if (!std::isfinite(spread)) b = kBuckets - 1;
    *active = b;
    eval_rows(g, b, &trial_);
    const int64_t* fixed = fixed_.data() + (b + 1) * k_;  // the buckets after b
    counts->assign(fixed, fixed + k_);
    double value = fixed_own_[b + 1];
    for (int64_t j = 0; j < k_; ++j) value += (targets_[j] - fixed[j]) * g[j];
    for (int64_t i = 0; i < n_; ++i)
      if (bucket_[i] <= b) {
        ++(*counts)[trial_.a[i]];
        value += trial_.own[i] - g[trial_.a[i]];
      }
    *q = value;
    int64_t err = 0;
    for (int64_t j = 0; j < k_; ++j) err += std::abs((*counts)[j] - targets_[j]);
    return err;
  }

  // The Newton direction at the current state (residual r = t - N): the
  // graph Laplacian of the densities of rows at each pair's boundary, each
  // pair's band the wider of its clusters' bands (a cluster's: the
  // max(|r_j|, kMinBandRows)-th smallest gap of the rows it would lose, or,
  // short of rows, gain first: a secant over the rows it must move), solved
  // on the Laplacian plus a small ridge, each band doubled while the
  // clusters with a residual are disconnected (then false).
  bool direction(const double* g, const std::vector<int64_t>& counts, std::vector<double>* delta) {
    std::vector<double> r(k_), h(k_, 0.0);
    for (int64_t j = 0; j < k_; ++j) r[j] = static_cast<double>(targets_[j] - counts[j]);
    std::vector<std::vector<double>> mine(k_);
    for (int64_t p = 0; p < n_; ++p)
      if (bucket_[p] <= active_) add_gaps(p, g, r, &mine);
    for (int64_t j = 0; j < k_; ++j) {
      auto& v = mine[j];
      if (v.empty()) continue;
      const int64_t q = std::min<int64_t>(v.size(), std::max<int64_t>(std::llabs(
                                                         targets_[j] - counts[j]), kMinBandRows));
      std::nth_element(v.begin(), v.begin() + (q - 1), v.end());
      h[j] = v[q - 1];
    }
    for (int widen = 0; widen < kWidenings; ++widen) {
      std::vector<double> L(static_cast<size_t>(k_ * k_), 0.0);
      const double widest = *std::max_element(h.begin(), h.end());
      for (int64_t p = 0; p < n_; ++p)  // a row's gap is to its nearest other candidate
        if (bucket_[p] <= active_ && cur_.gap[p] < widest) add_row(p, g, h, &L);
      if (connected(L, r)) return solve(L, r, delta);
      for (double& x : h) x = x > 0 ? 2 * x : x;
    }
    return false;
  }

  // Row p's gaps for the bands at g: to its second candidate, for its own
  // cluster a when a has rows to spare (r_a <= 0); to each other candidate c
  // short of rows (r_c > 0), for c (the rows c would gain first).
  void add_gaps(int64_t p, const double* g, const std::vector<double>& r,
                std::vector<std::vector<double>>* gaps) const {
    const int32_t a = cur_.a[p];
    if (r[a] <= 0) (*gaps)[a].push_back(cur_.gap[p]);
    const int32_t* ci = cand_ + p * m_;
    const T* di = dist_ + p * m_;
    const double best = cur_.own[p] - g[a];
    for (int64_t s = 0; s < m_ && ci[s] >= 0; ++s)
      if (ci[s] != a && r[ci[s]] > 0)
        (*gaps)[ci[s]].push_back(static_cast<double>(di[s]) - g[ci[s]] - best);
  }

  // Row p's share of the Laplacian at g: for each other candidate c within the
  // band of (a, c) of its best a, the density 1 / (2 band) on that pair.
  void add_row(int64_t p, const double* g, const std::vector<double>& h,
               std::vector<double>* L) const {
    const int32_t a = cur_.a[p];
    const int32_t* ci = cand_ + p * m_;
    const T* di = dist_ + p * m_;
    const double best = cur_.own[p] - g[a];
    for (int64_t s = 0; s < m_ && ci[s] >= 0; ++s) {
      const int32_t c = ci[s];
      if (c == a) continue;
      const double band = std::max(h[a], h[c]);
      if (static_cast<double>(di[s]) - g[c] - best < band) {
        const double w = 0.5 / band;
        (*L)[a * k_ + c] -= w, (*L)[c * k_ + a] -= w;
        (*L)[a * k_ + a] += w, (*L)[c * k_ + c] += w;
      }
    }
  }

  void accept(int active) {
    for (int64_t i = 0; i < n_; ++i)
      if (bucket_[i] <= active) {
        cur_.a[i] = trial_.a[i], cur_.b[i] = trial_.b[i];
        cur_.gap[i] = trial_.gap[i], cur_.own[i] = trial_.own[i];
      }
    active_ = active;
  }

  // Every row's label at g among its candidates, D there, and its gap (the
  // second candidate's value less the best's; inf when m = 1).
  void finish(const double* g, int64_t* labels, double* own, double* gap) {
    RowState all(n_);
    eval_rows(g, kBuckets, &all);
    for (int64_t i = 0; i < n_; ++i) labels[i] = all.a[i], own[i] = all.own[i], gap[i] = all.gap[i];
  }

 private:
  int bucket_of(double gap) const {
    if (!(gap > 0)) return 0;
    if (!std::isfinite(gap)) return kBuckets - 1;
    const int e = std::ilogb(gap) - (top_exp_ - (kBuckets - 2));
    return std::min(kBuckets - 1, std::max(0, e));
  }

  // The states at g of the rows in the buckets <= up_to (in row order).
  void eval_rows(const double* g, int up_to, RowState* out) const {
    const double inf = std::numeric_limits<double>::infinity();
    const bool every = up_to >= kBuckets - 1;
    for (int64_t i = 0; i < n_; ++i) {
      if (!every && bucket_[i] > up_to) continue;
      const int64_t p = i;
      const int32_t* ci = cand_ + i * m_;
      const T* di = dist_ + i * m_;
      double v1 = inf, v2 = inf, own = 0.0;
      int32_t a = ci[0], b = -1;
      for (int64_t s = 0; s < m_ && ci[s] >= 0; ++s) {
        const double v = static_cast<double>(di[s]) - g[ci[s]];
        if (v < v1 || (v == v1 && ci[s] < a)) {
          if (s > 0) v2 = v1, b = a;
          v1 = v, a = ci[s], own = static_cast<double>(di[s]);
        } else if (v < v2) {
          v2 = v, b = ci[s];
        }
      }
      out->a[p] = a, out->b[p] = b, out->gap[p] = v2 - v1, out->own[p] = own;
    }
  }

  // Whether every cluster with a residual shares a component of L's graph
  // with clusters whose residuals sum to zero.
  bool connected(const std::vector<double>& L, const std::vector<double>& r) const {
    std::vector<int64_t> comp(k_, -1);
    for (int64_t s = 0; s < k_; ++s) {
      if (comp[s] >= 0) continue;
      std::vector<int64_t> stack{s};
      comp[s] = s;
      double total = 0.0;
      while (!stack.empty()) {
        const int64_t u = stack.back();
        stack.pop_back();
        total += r[u];
        for (int64_t v = 0; v < k_; ++v)
          if (comp[v] < 0 && L[u * k_ + v] != 0.0) comp[v] = s, stack.push_back(v);
      }
      if (total != 0.0) return false;
    }
    return true;
  }

  // delta = (L + ridge I)^-1 r by Cholesky (k <= a few hundred).
  bool solve(std::vector<double> L, const std::vector<double>& r, std::vector<double>* delta) {
    const int64_t k = k_;
    double top = 0.0;
    for (int64_t j = 0; j < k; ++j) top = std::max(top, L[j * k + j]);
    if (!(top > 0)) return false;
    for (int64_t j = 0; j < k; ++j) L[j * k + j] += 1e-9 * top;
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t t = 0; t < j; ++t) {
        double s = L[j * k + t];
        for (int64_t u = 0; u < t; ++u) s -= L[j * k + u] * L[t * k + u];
        L[j * k + t] = s / L[t * k + t];
      }
      double s = L[j * k + j];
      for (int64_t u = 0; u < j; ++u) s -= L[j * k + u] * L[j * k + u];
      if (!(s > 0)) return false;
      L[j * k + j] = std::sqrt(s);
    }
    std::vector<double>& x = *delta;
    x = r;
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t u = 0; u < j; ++u) x[j] -= L[j * k + u] * x[u];
      x[j] /= L[j * k + j];
    }
    for (int64_t j = k - 1; j >= 0; --j) {
      for (int64_t u = j + 1; u < k; ++u) x[j] -= L[u * k + j] * x[u];
      x[j] /= L[j * k + j];
    }
    return true;
  }

  const int32_t* cand_;
  const T* dist_;
  int64_t n_, m_, k_;
  const int64_t* targets_;
  std::vector<double> g0_;
  RowState cur_, trial_;
  int top_exp_ = 0;
  std::vector<uint8_t> bucket_;
  std::vector<int64_t> fixed_;
  std::vector<double> fixed_own_;
  int active_ = kBuckets - 1;
};

}  // namespace

template <typename T>
int64_t balanced_newton(const int32_t* cand, const T* cand_dist, int64_t n, int64_t m, int64_t k,
                        const int64_t* targets, int64_t max_steps, int64_t enough, double* g,
                        int64_t* labels, double* own, double* gap, int64_t* evals) {
  Newton<T> newton(cand, cand_dist, n, m, k, targets);
  newton.start(g);
  std::vector<int64_t> counts, trial_counts;
  int active = 0;
  double q = 0.0, trial_q = 0.0;
  int64_t err = newton.evaluate(g, &counts, &active, &q);  // at g0: the start's states
  *evals = 1;
  const std::atomic<int>* cancel = thread_cancel_flag();
  std::vector<double> delta, trial(k), best_g(g, g + k);
  int64_t best_err = err, stalled = 0;
  for (int64_t step = 0; step < max_steps && best_err > enough && stalled < kStall; ++step) {
    if (cancel && cancel->load(std::memory_order_relaxed)) break;
    if (!newton.direction(g, counts, &delta)) break;
    double slope = 0.0;  // q's derivative along delta: (t - N) . delta >= 0
    for (int64_t j = 0; j < k; ++j) slope += (targets[j] - counts[j]) * delta[j];
    bool rose = false;
    double alpha = 1.0;
    for (int half = 0; half < kHalvings && !rose; ++half, alpha *= 0.5) {
      for (int64_t j = 0; j < k; ++j) trial[j] = g[j] + alpha * delta[j];
      const int64_t e = newton.evaluate(trial.data(), &trial_counts, &active, &trial_q);
      ++*evals;
      // Armijo on the concave dual: a step that raises q enough
      if (trial_q >= q + kArmijo * alpha * slope) {
        rose = true;
        err = e, q = trial_q;
        counts = trial_counts;
        std::copy(trial.begin(), trial.end(), g);
        newton.accept(active);
      }
    }
    if (!rose) break;
    if (err < best_err) {
      best_err = err, stalled = 0;
      std::copy(g, g + k, best_g.begin());
    } else {
      ++stalled;
    }
  }
  std::copy(best_g.begin(), best_g.end(), g);
  err = best_err;
  newton.finish(g, labels, own, gap);
  return err;
}

template int64_t balanced_newton<float>(const int32_t*, const float*, int64_t, int64_t, int64_t,
                                        const int64_t*, int64_t, int64_t, double*, int64_t*,
                                        double*, double*, int64_t*);
template int64_t balanced_newton<double>(const int32_t*, const double*, int64_t, int64_t, int64_t,
                                         const int64_t*, int64_t, int64_t, double*, int64_t*,
                                         double*, double*, int64_t*);

}  // namespace softkmeans
