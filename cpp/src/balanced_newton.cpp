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

#include <omp.h>

#include "softkmeans/balanced.hpp"
#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"

#if defined(SOFTKMEANS_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
#include <immintrin.h>
#define SOFTKMEANS_NEWTON_AVX512 1
#endif

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
// Rows a chunk of a sweep: the chunks run in parallel and their sums are
// added in chunk order, so every output is the same at every thread count.
constexpr int64_t kChunkRows = 1 << 14;

int64_t chunks_of(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

// f(c, begin, end) for each chunk c of rows [0, rows), on up to n_threads.
template <typename F>
void for_chunks(int64_t rows, int n_threads, const F& f) {
  const int64_t chunks = chunks_of(rows);
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(n_threads, chunks)));
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t c = 0; c < chunks; ++c)
    f(c, c * kChunkRows, std::min(rows, (c + 1) * kChunkRows));
}

// Each row's best candidate at offsets g (float64): label a, the gap to the
// second candidate's value, and D at a.
struct RowState {
  std::vector<int32_t> a;
  std::vector<double> gap, own;
  explicit RowState(int64_t n) : a(n), gap(n), own(n) {}
};

// Row state at g of one row's m candidates (ci, di), without branches on the
// values: label the smallest value (ties to the smaller column), gap the
// second smallest less it (inf with one candidate), own D at the label. A
// column -1 (past the last held) counts as +inf, which never wins.
template <typename T>
inline void row_state(const int32_t* ci, const T* di, int64_t m, const double* g, int32_t* label,
                      double* gap, double* own) {
  const double inf = std::numeric_limits<double>::infinity();
  double v1 = inf, v2 = inf, d1 = 0.0;
  int32_t a = ci[0];
  for (int64_t s = 0; s < m; ++s) {
    const int32_t c = ci[s];
    const double d = static_cast<double>(di[s]);
    const double v = c >= 0 ? d - g[c >= 0 ? c : 0] : inf;
    const bool take = v < v1 || (v == v1 && c < a && c >= 0);
    v2 = take ? v1 : (v < v2 ? v : v2);
    v1 = take ? v : v1;
    a = take ? c : a;
    d1 = take ? d : d1;
  }
  *label = a, *gap = v2 - v1, *own = d1;
}

// row_state of rows [0, rows) (m candidates each), into label, gap, own.
template <typename T>
void row_states_scalar(const int32_t* cand, const T* dist, int64_t rows, int64_t m,
                       const double* g, int32_t* label, double* gap, double* own) {
  for (int64_t p = 0; p < rows; ++p)
    row_state(cand + p * m, dist + p * m, m, g, label + p, gap + p, own + p);
}

#ifdef SOFTKMEANS_NEWTON_AVX512
// row_states_scalar for m = 8, one row a vector (the same values: each v is
// the one subtraction d - g_c, and min and compare are exact).
template <typename T>
__attribute__((target("avx512f,avx512vl,avx512dq"))) void row_states_8(
    const int32_t* cand, const T* dist, int64_t rows, const double* g, int32_t* label,
    double* gap, double* own) {
  const __m512d inf = _mm512_set1_pd(std::numeric_limits<double>::infinity());
  const __m256i none = _mm256_set1_epi32(-1);
  for (int64_t p = 0; p < rows; ++p) {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cand + p * 8));
    const __mmask8 held = _mm256_cmpgt_epi32_mask(c, none);
    __m512d d;
    if constexpr (sizeof(T) == 4)
      d = _mm512_cvtps_pd(_mm256_loadu_ps(reinterpret_cast<const float*>(dist + p * 8)));
    else
      d = _mm512_loadu_pd(reinterpret_cast<const double*>(dist + p * 8));
    const __m512d gc = _mm512_mask_i32gather_pd(inf, held, c, g, 8);
    const __m512d v = _mm512_mask_sub_pd(inf, held, d, gc);
    const double v1 = _mm512_reduce_min_pd(v);
    const __mmask8 tied = _mm512_cmp_pd_mask(v, _mm512_set1_pd(v1), _CMP_EQ_OQ) & held;
    const int32_t a = _mm512_mask_reduce_min_epi32(tied, _mm512_castsi256_si512(c));
    const __mmask8 at = _mm256_mask_cmpeq_epi32_mask(tied, c, _mm256_set1_epi32(a));
    const int lane = __builtin_ctz(at);
    const double v2 = _mm512_mask_reduce_min_pd(static_cast<__mmask8>(~at), v);
    label[p] = a, gap[p] = v2 - v1, own[p] = static_cast<double>(dist[p * 8 + lane]);
  }
}
#endif

// row_state of rows [0, rows): one row a vector where the CPU's selected
// level allows and m = 8 (the pass's CANDIDATES), else one at a time.
template <typename T>
void row_states(const int32_t* cand, const T* dist, int64_t rows, int64_t m, const double* g,
                int32_t* label, double* gap, double* own) {
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (m == 8 && selected_simd_level() == SimdLevel::avx512)
    return row_states_8(cand, dist, rows, g, label, gap, own);
#endif
  row_states_scalar(cand, dist, rows, m, g, label, gap, own);
}

// The q smallest values pushed (a bounded max-heap): top() is the q-th
// smallest, or the largest when fewer came; bar() the value a push must be
// below to change anything (+inf until q came).
class Smallest {
 public:
  void reset(int64_t q) { q_ = q, heap_.clear(); }
  void push(double x) {
    if (static_cast<int64_t>(heap_.size()) < q_) {
      heap_.push_back(x);
      std::push_heap(heap_.begin(), heap_.end());
    } else {
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.back() = x;
      std::push_heap(heap_.begin(), heap_.end());
    }
  }
  void drain_into(Smallest* other) const {
    for (double x : heap_)
      if (x < other->bar()) other->push(x);
  }
  bool empty() const { return heap_.empty(); }
  double top() const { return heap_.front(); }
  double bar() const {
    return static_cast<int64_t>(heap_.size()) < q_ ? std::numeric_limits<double>::infinity()
                                                   : heap_.front();
  }

 private:
  int64_t q_ = 0;
  std::vector<double> heap_;
};

template <typename T>
class Newton {
 public:
  // rows (n,): the rows of cand / dist read (nullptr: 0 .. n - 1).
  Newton(const int32_t* cand, const T* dist, const int64_t* rows, int64_t n, int64_t m, int64_t k,
         const int64_t* targets, int n_threads)
      : cand_(cand), dist_(dist), rows_(rows), n_(n), m_(m), k_(k), targets_(targets),
        threads_(std::max(1, n_threads)), cur_(n), trial_(n) {}

  // Each row's bucket of its gap at g0, and the rows copied in bucket order
  // (stable), so that the rows of the buckets <= b are a prefix: a row whose
  // gap at g0 exceeds the offsets' spread since then keeps its label.
  void start(const double* g0) {
    g0_.assign(g0, g0 + k_);
    RowState at0(n_);
    for_chunks(n_, threads_, [&](int64_t, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = row(i);
        row_state(cand_ + r * m_, dist_ + r * m_, m_, g0, &at0.a[i], &at0.gap[i], &at0.own[i]);
      }
    });
    double top = 0.0;
    for (int64_t i = 0; i < n_; ++i)
      if (std::isfinite(at0.gap[i])) top = std::max(top, at0.gap[i]);
    top_exp_ = top > 0 ? std::ilogb(top) : 0;
    std::vector<uint8_t> bucket(n_);
    std::vector<int64_t> count(kBuckets + 1, 0);
    for (int64_t i = 0; i < n_; ++i) {
      bucket[i] = static_cast<uint8_t>(bucket_of(at0.gap[i]));
      ++count[bucket[i] + 1];
    }
    for (int b = 0; b < kBuckets; ++b) count[b + 1] += count[b];
    prefix_.assign(count.begin() + 1, count.end());  // rows in the buckets <= b
    order_.resize(n_);
    std::vector<int64_t> place(n_);  // each row's place in the bucket order
    for (int64_t i = 0; i < n_; ++i) place[i] = count[bucket[i]]++, order_[place[i]] = i;
    cand_p_.resize(n_ * m_), dist_p_.resize(n_ * m_);
    // in row order: the reads in sequence, the writes scattered (not waited on)
    for_chunks(n_, threads_, [&](int64_t, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t p = place[i], r = row(i);
        std::copy(cand_ + r * m_, cand_ + (r + 1) * m_, &cand_p_[p * m_]);
        std::copy(dist_ + r * m_, dist_ + (r + 1) * m_, &dist_p_[p * m_]);
        cur_.a[p] = at0.a[i], cur_.gap[p] = at0.gap[i], cur_.own[p] = at0.own[i];
      }
    });
    // fixed_[b * k + j]: rows of label j at g0 in the buckets >= b.
    // fixed_own_[b]: the sum of their D at the label.
    fixed_.assign(static_cast<size_t>((kBuckets + 1) * k_), 0);
    fixed_own_.assign(kBuckets + 1, 0.0);
    for (int64_t i = 0; i < n_; ++i) {
      ++fixed_[bucket[i] * k_ + at0.a[i]];
      fixed_own_[bucket[i]] += at0.own[i];
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
    const int64_t* fixed = fixed_.data() + (b + 1) * k_;  // the buckets after b
    counts->assign(fixed, fixed + k_);
    double value = fixed_own_[b + 1];
    for (int64_t j = 0; j < k_; ++j) value += (targets_[j] - fixed[j]) * g[j];
    const int64_t rows = b >= 0 ? prefix_[b] : 0;
    const int64_t chunks = chunks_of(rows);
    std::vector<int64_t> part_counts(chunks * k_, 0);
    std::vector<double> part_value(chunks, 0.0);
    for_chunks(rows, threads_, [&](int64_t c, int64_t p0, int64_t p1) {
      row_states(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, &trial_.a[p0],
                 &trial_.gap[p0], &trial_.own[p0]);
      int64_t* mine = &part_counts[c * k_];
      double v = 0.0;
      for (int64_t p = p0; p < p1; ++p) {
        ++mine[trial_.a[p]];
        v += trial_.own[p] - g[trial_.a[p]];
      }
      part_value[c] = v;
    });
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t j = 0; j < k_; ++j) (*counts)[j] += part_counts[c * k_ + j];
      value += part_value[c];
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
    const int64_t rows = active_rows();
    band_gaps(g, r, &h);
    for (int widen = 0; widen < kWidenings; ++widen) {
      const double widest = *std::max_element(h.begin(), h.end());
      const int64_t chunks = chunks_of(rows);
      std::vector<double> part(chunks * k_ * k_, 0.0);
      for_chunks(rows, threads_, [&](int64_t c, int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p)  // a row's gap is to its nearest other candidate
          if (cur_.gap[p] < widest) add_row(p, g, h, &part[c * k_ * k_]);
      });
      std::vector<double> L(static_cast<size_t>(k_ * k_), 0.0);
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t e = 0; e < k_ * k_; ++e) L[e] += part[c * k_ * k_ + e];
      if (connected(L, r)) return solve(L, r, delta);
      for (double& x : h) x = x > 0 ? 2 * x : x;
    }
    return false;
  }

  // Each cluster's band h (k,) at g: the max(|r_j|, kMinBandRows)-th smallest
  // of the gaps add_gaps gives it (0: none), each thread's smallest merged.
  void band_gaps(const double* g, const std::vector<double>& r, std::vector<double>* h) const {
    const int64_t rows = active_rows();
    const int nt = static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>(threads_, chunks_of(rows))));
    std::vector<std::vector<Smallest>> heaps(nt, std::vector<Smallest>(k_));
    for (auto& mine : heaps)
      for (int64_t j = 0; j < k_; ++j)
        mine[j].reset(std::max<int64_t>(std::llabs(static_cast<int64_t>(r[j])), kMinBandRows));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      std::vector<Smallest>& mine = heaps[nt > 1 ? omp_get_thread_num() : 0];
      std::vector<double> bar(k_, -std::numeric_limits<double>::infinity());  // -inf: none
      for (int64_t j = 0; j < k_; ++j)
        if (r[j] > 0) bar[j] = mine[j].bar();
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks_of(rows); ++c)
        for (int64_t p = c * kChunkRows; p < std::min(rows, (c + 1) * kChunkRows); ++p)
          add_gaps(p, g, r, &mine, &bar);
    }
    for (size_t t = 1; t < heaps.size(); ++t)
      for (int64_t j = 0; j < k_; ++j) heaps[t][j].drain_into(&heaps[0][j]);
    for (int64_t j = 0; j < k_; ++j)
      if (!heaps[0][j].empty()) (*h)[j] = heaps[0][j].top();
  }

  // Row p's gaps for the bands at g: to its second candidate, for its own
  // cluster a when a has rows to spare (r_a <= 0); to each other candidate c
  // short of rows (r_c > 0), for c (the rows c would gain first). bar (k,):
  // what a gap must be below to change a cluster's smallest.
  void add_gaps(int64_t p, const double* g, const std::vector<double>& r,
                std::vector<Smallest>* smallest, std::vector<double>* bar) const {
    const int32_t a = cur_.a[p];
    if (r[a] <= 0 && cur_.gap[p] < (*smallest)[a].bar()) (*smallest)[a].push(cur_.gap[p]);
    const int32_t* ci = &cand_p_[p * m_];
    const T* di = &dist_p_[p * m_];
    const double best = cur_.own[p] - g[a];
    for (int64_t s = 0; s < m_ && ci[s] >= 0; ++s) {
      const int32_t c = ci[s];
      const double x = static_cast<double>(di[s]) - g[c] - best;
      if (x < (*bar)[c] && c != a) {
        (*smallest)[c].push(x);
        (*bar)[c] = (*smallest)[c].bar();
      }
    }
  }

  // Row p's share of the Laplacian at g: for each other candidate c within the
  // band of (a, c) of its best a, the density 1 / (2 band) on that pair.
  void add_row(int64_t p, const double* g, const std::vector<double>& h, double* L) const {
    const int32_t a = cur_.a[p];
    const int32_t* ci = &cand_p_[p * m_];
    const T* di = &dist_p_[p * m_];
    const double best = cur_.own[p] - g[a];
    for (int64_t s = 0; s < m_ && ci[s] >= 0; ++s) {
      const int32_t c = ci[s];
      if (c == a) continue;
      const double band = std::max(h[a], h[c]);
      if (static_cast<double>(di[s]) - g[c] - best < band) {
        const double w = 0.5 / band;
        L[a * k_ + c] -= w, L[c * k_ + a] -= w;
        L[a * k_ + a] += w, L[c * k_ + c] += w;
      }
    }
  }

  void accept(int active) {
    const int64_t rows = active >= 0 ? prefix_[active] : 0;
    if (rows == n_) {  // every row's state is the trial's
      std::swap(cur_, trial_);
      active_ = active;
      return;
    }
    std::copy(trial_.a.begin(), trial_.a.begin() + rows, cur_.a.begin());
    std::copy(trial_.gap.begin(), trial_.gap.begin() + rows, cur_.gap.begin());
    std::copy(trial_.own.begin(), trial_.own.begin() + rows, cur_.own.begin());
    active_ = active;
  }

  // Every row's label at g among its candidates, D there, and its gap (the
  // second candidate's value less the best's; inf when m = 1), in row order.
  void finish(const double* g, int64_t* labels, double* own, double* gap) const {
    RowState end(n_);
    for_chunks(n_, threads_, [&](int64_t, int64_t p0, int64_t p1) {
      row_states(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, &end.a[p0], &end.gap[p0],
                 &end.own[p0]);
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t i = order_[p];
        labels[i] = end.a[p], gap[i] = end.gap[p], own[i] = end.own[p];
      }
    });
  }

 private:
  int64_t row(int64_t i) const { return rows_ ? rows_[i] : i; }
  int64_t active_rows() const { return active_ >= 0 ? prefix_[active_] : 0; }

  int bucket_of(double gap) const {
    if (!(gap > 0)) return 0;
    if (!std::isfinite(gap)) return kBuckets - 1;
    const int e = std::ilogb(gap) - (top_exp_ - (kBuckets - 2));
    return std::min(kBuckets - 1, std::max(0, e));
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
  const int64_t* rows_;
  int64_t n_, m_, k_;
  const int64_t* targets_;
  int threads_;
  std::vector<double> g0_;
  RowState cur_, trial_;  // in bucket order
  int top_exp_ = 0;
  std::vector<int64_t> order_;   // the row at each place of the bucket order
  std::vector<int64_t> prefix_;  // prefix_[b]: the rows of the buckets <= b
  std::vector<int32_t> cand_p_;  // the candidates in bucket order
  std::vector<T> dist_p_;
  std::vector<int64_t> fixed_;
  std::vector<double> fixed_own_;
  int active_ = kBuckets - 1;
};

}  // namespace

template <typename T>
int64_t balanced_newton(const int32_t* cand, const T* cand_dist, const int64_t* rows, int64_t n,
                        int64_t m, int64_t k, const int64_t* targets, int64_t max_steps,
                        int64_t enough, double* g, int64_t* labels, double* own, double* gap,
                        int64_t* evals, int n_threads) {
  Newton<T> newton(cand, cand_dist, rows, n, m, k, targets, n_threads);
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

template <typename T>
void biased_row_states(const int32_t* cand, const T* cand_dist, int64_t n, int64_t m,
                       const double* g, int64_t* labels, double* own, double* gap,
                       int n_threads) {
  for_chunks(n, std::max(1, n_threads), [&](int64_t, int64_t i0, int64_t i1) {
    std::vector<int32_t> a(i1 - i0);
    row_states(cand + i0 * m, cand_dist + i0 * m, i1 - i0, m, g, a.data(), gap + i0, own + i0);
    std::copy(a.begin(), a.end(), labels + i0);
  });
}

template void biased_row_states<float>(const int32_t*, const float*, int64_t, int64_t,
                                       const double*, int64_t*, double*, double*, int);
template void biased_row_states<double>(const int32_t*, const double*, int64_t, int64_t,
                                        const double*, int64_t*, double*, double*, int);

template int64_t balanced_newton<float>(const int32_t*, const float*, const int64_t*, int64_t,
                                        int64_t, int64_t, const int64_t*, int64_t, int64_t, double*,
                                        int64_t*, double*, double*, int64_t*, int);
template int64_t balanced_newton<double>(const int32_t*, const double*, const int64_t*, int64_t,
                                         int64_t, int64_t, const int64_t*, int64_t, int64_t,
                                         double*, int64_t*, double*, double*, int64_t*, int);

}  // namespace softkmeans
