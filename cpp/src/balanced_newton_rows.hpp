// The per-row work of balanced_newton's sweeps (balanced_newton.cpp): the
// bands' smallest gaps (Smallest, Bands), a Laplacian pair (add_pair), and
// the sweeps over rows of 8 candidates one row a vector (AVX-512), each the
// same values as the scalar sweep it replaces: every value the one
// subtraction d - g_c (less the best, in the same order), min and compare
// exact, and the pushes and pairs made in the scalar order (the rows in
// sequence, a row's candidates by column position).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(SOFTKMEANS_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
#include <immintrin.h>
#define SOFTKMEANS_NEWTON_AVX512 1
#endif

namespace softkmeans::newton_rows {

// The q-th smallest of the values pushed, or the largest when fewer came
// (a selection: which values came in which order changes nothing). The
// values kept are those below bar(): +inf until q came, then the q-th
// smallest at the last compaction, when over 2q + 64 are kept (each push
// O(1) amortized, where a heap of a few thousand costs a dozen levels).
class Smallest {
 public:
  void reset(int64_t q) {
    q_ = q, kept_.clear(), bar_ = std::numeric_limits<double>::infinity();
  }
  void push(double x) {
    kept_.push_back(x);
    if (static_cast<int64_t>(kept_.size()) >= 2 * q_ + 64) compact();
  }
  void drain_into(Smallest* other) const {
    for (double x : kept_)
      if (x < other->bar()) other->push(x);
  }
  bool empty() const { return kept_.empty(); }
  double top() {
    if (static_cast<int64_t>(kept_.size()) < q_) return *std::max_element(kept_.begin(), kept_.end());
    compact();
    return bar_;
  }
  double bar() const { return bar_; }

 private:
  // Keeps the q smallest; bar_ the largest of them.
  void compact() {
    std::nth_element(kept_.begin(), kept_.begin() + (q_ - 1), kept_.end());
    bar_ = kept_[q_ - 1];
    kept_.resize(q_);
  }

  int64_t q_ = 0;
  double bar_ = 0.0;
  std::vector<double> kept_;
};

// One thread's smallest gaps of each cluster's band: a cluster with rows to
// spare (r_j <= 0) takes the gaps of the rows it would lose, one short of rows
// (r_j > 0) the gaps of the rows it would gain. lose / gain: the value an
// offer must be below to enter (-inf: the cluster takes none of that kind).
struct Bands {
  std::vector<Smallest> smallest;
  std::vector<double> lose, gain;

  // q_j = max(|r_j|, min_rows) smallest for each cluster j.
  void reset(const std::vector<double>& r, int64_t min_rows) {
    const double none = -std::numeric_limits<double>::infinity();
    const size_t k = r.size();
    smallest.resize(k), lose.assign(k, none), gain.assign(k, none);
    for (size_t j = 0; j < k; ++j) {
      smallest[j].reset(std::max<int64_t>(std::llabs(static_cast<int64_t>(r[j])), min_rows));
      (r[j] > 0 ? gain : lose)[j] = smallest[j].bar();
    }
  }
  void offer_lost(int32_t a, double gap) {
    if (gap < lose[a]) smallest[a].push(gap), lose[a] = smallest[a].bar();
  }
  void offer_gained(int32_t c, double x) {
    if (x < gain[c]) smallest[c].push(x), gain[c] = smallest[c].bar();
  }
};

// Laplacian L (k, k) += the density 1 / (2 band) on the pair (a, c).
inline void add_pair(int32_t a, int32_t c, double band, int64_t k, double* L) {
  const double w = 0.5 / band;
  L[a * k + c] -= w, L[c * k + a] -= w;
  L[a * k + a] += w, L[c * k + c] += w;
}

#ifdef SOFTKMEANS_NEWTON_AVX512
#define SOFTKMEANS_NEWTON_TARGET __attribute__((target("avx512f,avx512vl,avx512dq")))

// One row of 8 candidates at g: the values v = d - g_c (+inf past the last
// held column), the columns c, the held lanes, the label a (the smallest
// value, ties to the smaller column) at lane `lane`, and the best and second
// best values v1, v2 (+inf with one candidate).
struct Lanes8 {
  __m512d v;
  __m256i c;
  __mmask8 held;
  int32_t a;
  int lane;
  double v1, v2;
};

template <typename T>
SOFTKMEANS_NEWTON_TARGET inline Lanes8 lanes_8(const int32_t* ci, const T* di, const double* g) {
  Lanes8 L;
  const __m512d inf = _mm512_set1_pd(std::numeric_limits<double>::infinity());
  L.c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ci));
  L.held = _mm256_cmpgt_epi32_mask(L.c, _mm256_set1_epi32(-1));
  __m512d d;
  if constexpr (sizeof(T) == 4)
    d = _mm512_cvtps_pd(_mm256_loadu_ps(reinterpret_cast<const float*>(di)));
  else
    d = _mm512_loadu_pd(reinterpret_cast<const double*>(di));
  const __m512d gc = _mm512_mask_i32gather_pd(inf, L.held, L.c, g, 8);
  L.v = _mm512_mask_sub_pd(inf, L.held, d, gc);
  L.v1 = _mm512_reduce_min_pd(L.v);
  const __mmask8 tied = _mm512_cmp_pd_mask(L.v, _mm512_set1_pd(L.v1), _CMP_EQ_OQ) & L.held;
  L.a = _mm512_mask_reduce_min_epi32(tied, _mm512_castsi256_si512(L.c));
  const __mmask8 at = _mm256_mask_cmpeq_epi32_mask(tied, L.c, _mm256_set1_epi32(L.a));
  L.lane = __builtin_ctz(at);
  L.v2 = _mm512_mask_reduce_min_pd(static_cast<__mmask8>(~at), L.v);
  return L;
}

// The lanes other than the label's, among the held, whose value less best is
// below bar (a gathered per column, masked: -inf).
SOFTKMEANS_NEWTON_TARGET inline __mmask8 below_8(const Lanes8& L, double best, __m512d bar) {
  const __mmask8 other = _mm256_mask_cmpneq_epi32_mask(L.held, L.c, _mm256_set1_epi32(L.a));
  const __m512d x = _mm512_sub_pd(L.v, _mm512_set1_pd(best));
  return _mm512_mask_cmp_pd_mask(other, x, bar, _CMP_LT_OQ);
}

// Each row's label, gap (v2 - v1) and D at the label.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void row_states_8(const int32_t* cand, const T* dist, int64_t rows,
                                           const double* g, int32_t* label, double* gap,
                                           double* own) {
  for (int64_t p = 0; p < rows; ++p) {
    const Lanes8 L = lanes_8(cand + p * 8, dist + p * 8, g);
    label[p] = L.a, gap[p] = L.v2 - L.v1, own[p] = static_cast<double>(dist[p * 8 + L.lane]);
  }
}

// counts[a] += 1 for each row's label a; returns the sum of D - g_a there
// (in row order). The labels of a block first, then their counts: an
// increment waits on the last one's store, which would hold every row's
// reads behind the last row's label.
template <typename T>
SOFTKMEANS_NEWTON_TARGET double count_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                             const double* g, int64_t* counts) {
  constexpr int64_t kBlock = 256;
  int32_t label[kBlock];
  double best[kBlock];
  double value = 0.0;
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    for (int64_t i = 0; i < span; ++i) {
      const int64_t p = p0 + i;
      const Lanes8 L = lanes_8(cand + p * 8, dist + p * 8, g);
      label[i] = L.a, best[i] = static_cast<double>(dist[p * 8 + L.lane]) - g[L.a];
    }
    for (int64_t i = 0; i < span; ++i) ++counts[label[i]], value += best[i];
  }
  return value;
}

// Each row's gap into gaps and its offers to the bands: its gap to its label
// (the row it would lose), its value less the best to each other candidate
// (the row it would gain). A block's rows first, against the bars at the
// block's start (they only fall: a superset of the offers that enter), then
// their offers in row order, each checked again against its bar then.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void gap_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                         const double* g, Bands* bands, double* gaps) {
  constexpr int64_t kBlock = 256;
  int32_t label[kBlock];
  double best[kBlock];
  uint8_t gained[kBlock];
  bool lost[kBlock];
  const __m512d none = _mm512_set1_pd(-std::numeric_limits<double>::infinity());
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    for (int64_t i = 0; i < span; ++i) {
      const int64_t p = p0 + i;
      const Lanes8 L = lanes_8(cand + p * 8, dist + p * 8, g);
      gaps[p] = L.v2 - L.v1;
      label[i] = L.a, best[i] = static_cast<double>(dist[p * 8 + L.lane]) - g[L.a];
      lost[i] = gaps[p] < bands->lose[L.a];
      const __m512d bar = _mm512_mask_i32gather_pd(none, L.held, L.c, bands->gain.data(), 8);
      gained[i] = below_8(L, best[i], bar);
    }
    for (int64_t i = 0; i < span; ++i) {
      const int32_t* ci = cand + (p0 + i) * 8;
      const T* di = dist + (p0 + i) * 8;
      if (lost[i]) bands->offer_lost(label[i], gaps[p0 + i]);
      for (unsigned hit = gained[i]; hit; hit &= hit - 1) {
        const int s = __builtin_ctz(hit);
        bands->offer_gained(ci[s], static_cast<double>(di[s]) - g[ci[s]] - best[i]);
      }
    }
  }
}

// The Laplacian pairs of the rows whose gap is below widest: each other
// candidate c whose value less the best is below max(h_a, h_c). A block's
// rows below widest listed first (no branch a row), then their pairs found,
// then added in row order.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void band_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                          const double* g, const double* gaps, double widest,
                                          const double* h, int64_t k, double* Lap) {
  constexpr int64_t kBlock = 256;
  int64_t near[kBlock];
  int32_t label[kBlock];
  uint8_t pairs[kBlock];
  const __m512d zero = _mm512_setzero_pd();
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    int64_t count = 0;
    for (int64_t i = 0; i < span; ++i) near[count] = p0 + i, count += gaps[p0 + i] < widest;
    for (int64_t i = 0; i < count; ++i) {
      const int32_t* ci = cand + near[i] * 8;
      const T* di = dist + near[i] * 8;
      const Lanes8 L = lanes_8(ci, di, g);
      const double best = static_cast<double>(di[L.lane]) - g[L.a];
      // max(h_c, h_a) as std::max(h_a, h_c): h_a where either is NaN or both equal
      const __m512d hc = _mm512_mask_i32gather_pd(zero, L.held, L.c, h, 8);
      const __m512d band = _mm512_max_pd(hc, _mm512_set1_pd(h[L.a]));
      label[i] = L.a, pairs[i] = below_8(L, best, band);
    }
    for (int64_t i = 0; i < count; ++i) {
      const int32_t a = label[i];
      for (unsigned hit = pairs[i]; hit; hit &= hit - 1) {
        const int32_t c = cand[near[i] * 8 + __builtin_ctz(hit)];
        add_pair(a, c, std::max(h[a], h[c]), k, Lap);
      }
    }
  }
}

#undef SOFTKMEANS_NEWTON_TARGET
#endif

}  // namespace softkmeans::newton_rows
