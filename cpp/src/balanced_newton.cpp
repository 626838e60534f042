// Damped Newton on the balanced assignment's dual (balanced.hpp,
// balanced_newton): offsets near the optimum's, moving many rows a step, for
// the exact repair (balanced_counts) to finish on a thin boundary.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <vector>

#include <omp.h>

#include "softkmeans/balanced.hpp"
#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"
#include "balanced_newton_rows.hpp"
#include "newton_memory.hpp"

namespace softkmeans {

namespace {

using newton_rows::Bands;
using newton_rows::Smallest;

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

}  // namespace

NewtonScratch::NewtonScratch() : buffers_(std::make_unique<Buffers>()) {}
NewtonScratch::~NewtonScratch() = default;

namespace {

using newton_memory::Fresh;

// Each row's best candidate at offsets g (float64): label a, the gap to the
// second candidate's value, and D at a.
struct RowState {
  Fresh<int32_t>& a;
  Fresh<double>& gap;
  Fresh<double>& own;
  RowState(NewtonScratch::Buffers& b, int64_t n)
      : a(b.start_label), gap(b.start_gap), own(b.start_own) {
    a.reserve(n), gap.reserve(n), own.reserve(n);
  }
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

// The rows of [0, rows) that the avx512 sweeps (balanced_newton_rows.hpp)
// take, eight rows a vector, where the CPU's selected level allows and m = 8
// (the pass's CANDIDATES): the scalar sweeps below take the rest, in order.
int64_t rows_of_8(int64_t rows, int64_t m) {
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (m == 8 && selected_simd_level() == SimdLevel::avx512) return rows / 8 * 8;
#endif
  (void)m, (void)rows;
  return 0;
}

// row_state of rows [0, rows) into label, gap, own.
template <typename T>
void row_states(const int32_t* cand, const T* dist, int64_t rows, int64_t m, const double* g,
                int64_t k, int32_t* label, double* gap, double* own) {
  const int64_t done = rows_of_8(rows, m);
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (done) newton_rows::row_states_8(cand, dist, done, g, k, label, gap, own);
#endif
  for (int64_t p = done; p < rows; ++p)
    row_state(cand + p * m, dist + p * m, m, g, label + p, gap + p, own + p);
}

// counts[a] += 1 for each of rows [0, rows)'s label a at g; returns the sum of
// D - g_a there (in row order).
template <typename T>
double count_rows(const int32_t* cand, const T* dist, int64_t rows, int64_t m, const double* g,
                  int64_t k, int64_t* counts) {
  double value = 0.0;
  const int64_t done = rows_of_8(rows, m);
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (done) newton_rows::count_rows_8(cand, dist, done, g, k, counts, &value);
#endif
  for (int64_t p = done; p < rows; ++p) {
    int32_t a;
    double gap, own;
    row_state(cand + p * m, dist + p * m, m, g, &a, &gap, &own);
    ++counts[a];
    value += own - g[a];
  }
  return value;
}

// Each row's gap at g into gaps, and its offers to the bands: its gap for its
// label a (a row a would lose), its value less the best for each other
// candidate c (a row c would gain first). The scalar rows' labels and D there
// too, for band_rows (their states cost a loop over m candidates again).
template <typename T>
void gap_rows(const int32_t* cand, const T* dist, int64_t rows, int64_t m, const double* g,
              int64_t k, Bands* bands, int32_t* label, double* gaps, double* own) {
  const int64_t done = rows_of_8(rows, m);
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (done) newton_rows::gap_rows_8(cand, dist, done, g, k, bands, gaps);
#endif
  for (int64_t p = done; p < rows; ++p) {
    const int32_t* ci = cand + p * m;
    const T* di = dist + p * m;
    row_state(ci, di, m, g, &label[p], &gaps[p], &own[p]);
    const int32_t a = label[p];
    bands->offer_lost(a, gaps[p]);
    const double best = own[p] - g[a];
    for (int64_t s = 0; s < m && ci[s] >= 0; ++s)
      if (ci[s] != a) bands->offer_gained(ci[s], static_cast<double>(di[s]) - g[ci[s]] - best);
  }
}

// The Laplacian L (k, k) of rows [0, rows) at g: for each row whose gap is
// below widest, each other candidate c within the band of (a, c) of its label
// a, max(h_a, h_c), adds the density 1 / (2 band) on that pair. The scalar
// rows' labels and D there as gap_rows left them.
template <typename T>
void band_rows(const int32_t* cand, const T* dist, int64_t rows, int64_t m, const double* g,
               const int32_t* label, const double* gaps, const double* own, double widest,
               const double* h, int64_t k, double* L) {
  const int64_t done = rows_of_8(rows, m);
#ifdef SOFTKMEANS_NEWTON_AVX512
  if (done) newton_rows::band_rows_8(cand, dist, done, g, gaps, widest, h, k, L);
#endif
  for (int64_t p = done; p < rows; ++p) {
    if (!(gaps[p] < widest)) continue;
    const int32_t* ci = cand + p * m;
    const T* di = dist + p * m;
    const int32_t a = label[p];
    const double best = own[p] - g[a];
    for (int64_t s = 0; s < m && ci[s] >= 0; ++s) {
      const double band = std::max(h[a], h[ci[s]]);
      if (ci[s] != a && static_cast<double>(di[s]) - g[ci[s]] - best < band)
        newton_rows::add_pair(a, ci[s], band, k, L);
    }
  }
}

template <typename T>
class Newton {
 public:
  // rows (n,): the rows of cand / dist read (nullptr: 0 .. n - 1).
  Newton(const int32_t* cand, const T* dist, const int64_t* rows, int64_t n, int64_t m, int64_t k,
         const int64_t* targets, int n_threads, NewtonScratch::Buffers& buffers)
      : cand_(cand), dist_(dist), rows_(rows), n_(n), m_(m), k_(k), targets_(targets),
        threads_(std::max(1, n_threads)), buf_(buffers), gap_(buffers.gap),
        label_(buffers.label), own_(buffers.own), order_(buffers.order), cand_p_(buffers.cand),
        dist_p_(buffers.dist(dist)) {}

  // Each row's bucket of its gap at g0, and the rows copied in bucket order
  // (stable), so that the rows of the buckets <= b are a prefix: a row whose
  // gap at g0 exceeds the offsets' spread since then keeps its label.
  void start(const double* g0) {
    g0_.assign(g0, g0 + k_);
    RowState at0(buf_, n_);
    for_chunks(n_, threads_, [&](int64_t, int64_t i0, int64_t i1) {
      if (!rows_)  // the rows in sequence
        return row_states(cand_ + i0 * m_, dist_ + i0 * m_, i1 - i0, m_, g0, k_, &at0.a[i0],
                          &at0.gap[i0], &at0.own[i0]);
      std::vector<int32_t> cand8(8 * m_);  // eight rows at a time, side by side
      std::vector<T> dist8(8 * m_);
      for (int64_t i = i0; i < i1; i += 8) {
        const int64_t span = std::min<int64_t>(8, i1 - i);
        for (int64_t u = 0; u < span; ++u) {
          std::copy_n(cand_ + rows_[i + u] * m_, m_, &cand8[u * m_]);
          std::copy_n(dist_ + rows_[i + u] * m_, m_, &dist8[u * m_]);
        }
        row_states(cand8.data(), dist8.data(), span, m_, g0, k_, &at0.a[i], &at0.gap[i],
                   &at0.own[i]);
      }
    });
    double top = 0.0;
    for (int64_t i = 0; i < n_; ++i)
      if (std::isfinite(at0.gap[i])) top = std::max(top, at0.gap[i]);
    top_exp_ = top > 0 ? std::ilogb(top) : 0;
    Fresh<uint8_t>& bucket = buf_.bucket;
    bucket.reserve(n_);
    std::vector<int64_t> count(kBuckets + 1, 0);
    for (int64_t i = 0; i < n_; ++i) {
      bucket[i] = static_cast<uint8_t>(bucket_of(at0.gap[i]));
      ++count[bucket[i] + 1];
    }
    for (int b = 0; b < kBuckets; ++b) count[b + 1] += count[b];
    prefix_.assign(count.begin() + 1, count.end());  // rows in the buckets <= b
    order_.reserve(n_);
    Fresh<int64_t>& place = buf_.place;  // each row's place in the bucket order
    place.reserve(n_);
    for (int64_t i = 0; i < n_; ++i) place[i] = count[bucket[i]]++, order_[place[i]] = i;
    cand_p_.reserve(n_ * m_), dist_p_.reserve(n_ * m_);
    // in row order: the reads in sequence, the writes scattered (not waited on)
    for_chunks(n_, threads_, [&](int64_t, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t p = place[i], r = row(i);
        if (m_ == 8) {  // a fixed size: copied inline, not by a call a row
          std::memcpy(&cand_p_[p * 8], cand_ + r * 8, 8 * sizeof(int32_t));
          std::memcpy(&dist_p_[p * 8], dist_ + r * 8, 8 * sizeof(T));
          continue;
        }
        std::copy(cand_ + r * m_, cand_ + (r + 1) * m_, &cand_p_[p * m_]);
        std::copy(dist_ + r * m_, dist_ + (r + 1) * m_, &dist_p_[p * m_]);
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
    label_.reserve(n_), gap_.reserve(n_), own_.reserve(n_);  // label_, own_: if scalar
    active_ = kBuckets - 1;
  }

  // The count error sum_j |N_j - t_j| at g and the dual objective q (sum_i
  // min_j (D_ij - g_j) + t . g over the candidates), reading the rows that
  // may have moved (the buckets <= *active).
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
      part_value[c] = count_rows(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, k_,
                                 &part_counts[c * k_]);
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
      part_.assign(chunks * k_ * k_, 0.0);  // kept between calls: no fresh pages
      for_chunks(rows, threads_, [&](int64_t c, int64_t p0, int64_t p1) {
        // a row's gap is to its nearest other candidate: none nearer than widest
        band_rows(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, &label_[p0], &gap_[p0],
                  &own_[p0], widest,
                  h.data(), k_, &part_[c * k_ * k_]);
      });
      std::vector<double> L(static_cast<size_t>(k_ * k_), 0.0);
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t e = 0; e < k_ * k_; ++e) L[e] += part_[c * k_ * k_ + e];
      if (connected(L, r)) return solve(L, r, delta);
      for (double& x : h) x = x > 0 ? 2 * x : x;
    }
    return false;
  }

  // Each cluster's band h (k,) at g: the max(|r_j|, kMinBandRows)-th smallest
  // of the gaps gap_rows offers it (0: none), each thread's smallest merged;
  // the active rows' gaps at g into gap_.
  void band_gaps(const double* g, const std::vector<double>& r, std::vector<double>* h) {
    const int64_t rows = active_rows();
    const int nt = static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>(threads_, chunks_of(rows))));
    std::vector<Bands> bands(nt);
    for (Bands& mine : bands) mine.reset(r, kMinBandRows);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      Bands* mine = &bands[nt > 1 ? omp_get_thread_num() : 0];
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks_of(rows); ++c) {
        const int64_t p0 = c * kChunkRows, p1 = std::min(rows, (c + 1) * kChunkRows);
        gap_rows(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, k_, mine, &label_[p0],
                 &gap_[p0], &own_[p0]);
      }
    }
    for (int t = 1; t < nt; ++t)
      for (int64_t j = 0; j < k_; ++j) bands[t].smallest[j].drain_into(&bands[0].smallest[j]);
    for (int64_t j = 0; j < k_; ++j)
      if (!bands[0].smallest[j].empty()) (*h)[j] = bands[0].smallest[j].top();
  }

  // The trial offsets of evaluate(..., &active) become the current ones.
  void accept(int active) { active_ = active; }

  // Every row's label at g among its candidates, D there, and its gap (the
  // second candidate's value less the best's; inf when m = 1), in row order.
  void finish(const double* g, int64_t* labels, double* own, double* gap) const {
    for_chunks(n_, threads_, [&](int64_t, int64_t p0, int64_t p1) {
      std::vector<int32_t> a(p1 - p0);  // a chunk's states (in cache), not the call's
      std::vector<double> chunk_gap(p1 - p0), chunk_own(p1 - p0);
      row_states(&cand_p_[p0 * m_], &dist_p_[p0 * m_], p1 - p0, m_, g, k_, a.data(),
                 chunk_gap.data(), chunk_own.data());
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t i = order_[p];
        labels[i] = a[p - p0], gap[i] = chunk_gap[p - p0], own[i] = chunk_own[p - p0];
      }
    });
  }

 private:
  int64_t row(int64_t i) const { return rows_ ? rows_[i] : i; }
  int64_t active_rows() const { return active_ >= 0 ? prefix_[active_] : 0; }

  // std::ilogb of a finite x > 0, read from its bits where it is normal.
  static int exponent(double x) {
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    const int biased = static_cast<int>(bits >> 52 & 0x7ff);
    return biased ? biased - 1023 : std::ilogb(x);
  }

  int bucket_of(double gap) const {
    if (!(gap > 0)) return 0;
    if (!std::isfinite(gap)) return kBuckets - 1;
    const int e = exponent(gap) - (top_exp_ - (kBuckets - 2));
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
  NewtonScratch::Buffers& buf_;
  std::vector<double> g0_;
  // the active rows' gaps at the current offsets (band_gaps), in bucket order,
  // and the scalar sweeps' rows' labels and D there
  Fresh<double>& gap_;
  Fresh<int32_t>& label_;
  Fresh<double>& own_;
  std::vector<double> part_;  // direction's Laplacian of each chunk
  int top_exp_ = 0;
  Fresh<int64_t>& order_;  // the row at each place of the bucket order
  std::vector<int64_t> prefix_;  // prefix_[b]: the rows of the buckets <= b
  Fresh<int32_t>& cand_p_;  // the candidates in bucket order
  Fresh<T>& dist_p_;
  std::vector<int64_t> fixed_;
  std::vector<double> fixed_own_;
  int active_ = kBuckets - 1;
};

}  // namespace

template <typename T>
int64_t balanced_newton(const int32_t* cand, const T* cand_dist, const int64_t* rows, int64_t n,
                        int64_t m, int64_t k, const int64_t* targets, int64_t max_steps,
                        int64_t enough, double* g, int64_t* labels, double* own, double* gap,
                        int64_t* evals, int n_threads, NewtonScratch* scratch) {
  std::unique_ptr<NewtonScratch> own_scratch;  // (none given: this call's)
  if (scratch == nullptr) own_scratch = std::make_unique<NewtonScratch>();
  Newton<T> newton(cand, cand_dist, rows, n, m, k, targets, n_threads,
                   (scratch ? scratch : own_scratch.get())->buffers());
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
  if (labels != nullptr) newton.finish(g, labels, own, gap);  // (a sweep over every row)
  return err;
}

// The margins of rows [i0, i1) from their states (a their labels, from i0;
// biased_row_states's bound, in its order).
template <typename T>
void bound_margins(const MarginBound<T>& b, int64_t i0, int64_t i1, const int32_t* a,
                   const double* g, const double* own, double* gap) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t i = i0; i < i1; ++i) {
    double v = gap[i];
    if (b.floor) {
      double f = static_cast<double>(b.floor[i]);
      f -= b.floor_scale * (std::fabs(f) + b.floor_shift);
      f -= b.rise - g[a[i - i0]];
      f -= own[i];
      v = f < v ? f : v;
    }
    const double finite = std::fabs(v) < inf ? std::fabs(v) : 0.0;
    gap[i] = (v - b.scale * ((std::fabs(own[i]) + b.shift) + finite)) - b.tiny;
  }
}

template <typename T>
void biased_row_states(const int32_t* cand, const T* cand_dist, int64_t n, int64_t m, int64_t k,
                       const double* g, int64_t* labels, double* own, double* gap, int n_threads,
                       const MarginBound<T>* bound) {
  for_chunks(n, std::max(1, n_threads), [&](int64_t, int64_t i0, int64_t i1) {
    std::vector<int32_t> a(i1 - i0);
    row_states(cand + i0 * m, cand_dist + i0 * m, i1 - i0, m, g, k, a.data(), gap + i0,
               own + i0);
    if (bound) bound_margins(*bound, i0, i1, a.data(), g, own, gap);
    std::copy(a.begin(), a.end(), labels + i0);
  });
}

template void biased_row_states<float>(const int32_t*, const float*, int64_t, int64_t, int64_t,
                                       const double*, int64_t*, double*, double*, int,
                                       const MarginBound<float>*);
template void biased_row_states<double>(const int32_t*, const double*, int64_t, int64_t, int64_t,
                                        const double*, int64_t*, double*, double*, int,
                                        const MarginBound<double>*);

template int64_t balanced_newton<float>(const int32_t*, const float*, const int64_t*, int64_t,
                                        int64_t, int64_t, const int64_t*, int64_t, int64_t, double*,
                                        int64_t*, double*, double*, int64_t*, int,
                                        NewtonScratch*);
template int64_t balanced_newton<double>(const int32_t*, const double*, const int64_t*, int64_t,
                                         int64_t, int64_t, const int64_t*, int64_t, int64_t,
                                         double*, int64_t*, double*, double*, int64_t*, int,
                                         NewtonScratch*);

}  // namespace softkmeans
