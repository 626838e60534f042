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

// Rows of a sweep's block: its rows' states first, then what they add to the
// counts, bands or Laplacian, in row order.
constexpr int64_t kBlock = 256;

// The 8 x 8 bit matrix x (byte i, bit j) transposed (byte j, bit i): per
// position the rows, in, per row the positions, out (Hacker's Delight 7-3).
inline uint64_t transpose_bits_8(uint64_t x) {
  x = (x & 0xAA55AA55AA55AA55ull) | ((x & 0x00AA00AA00AA00AAull) << 7) |
      ((x >> 7) & 0x00AA00AA00AA00AAull);
  x = (x & 0xCCCC3333CCCC3333ull) | ((x & 0x0000CCCC0000CCCCull) << 14) |
      ((x >> 14) & 0x0000CCCC0000CCCCull);
  x = (x & 0xF0F0F0F00F0F0F0Full) | ((x & 0x00000000F0F0F0F0ull) << 28) |
      ((x >> 28) & 0x00000000F0F0F0F0ull);
  return x;
}

// A k-vector of doubles read by column: for k <= 64 held in eight registers
// and read by permutes (a gather of 8 costs ~14 cycles on Zen 5, these ~4),
// else gathered.
struct Table {
  __m512d t[8];
  const double* base;
  bool in_registers;
};

SOFTKMEANS_NEWTON_TARGET inline Table table_of(const double* x, int64_t k) {
  Table T;
  T.base = x, T.in_registers = k <= 64;
  if (T.in_registers) {
    alignas(64) double padded[64] = {0};
    std::copy(x, x + k, padded);
    for (int i = 0; i < 8; ++i) T.t[i] = _mm512_load_pd(padded + 8 * i);
  }
  return T;
}

// Columns c as a Table reads them: bits 0-3 pick of 16, bit 4 of 32, bit 5 of
// 64 (one index for the lookups of several tables).
struct Index {
  __m256i c;
  __m512i i;
  __mmask8 bit4, bit5;
};

SOFTKMEANS_NEWTON_TARGET inline Index index_of(__m256i c) {
  Index x;
  x.c = c, x.i = _mm512_cvtepi32_epi64(c);
  x.bit4 = _mm512_test_epi64_mask(x.i, _mm512_set1_epi64(16));
  x.bit5 = _mm512_test_epi64_mask(x.i, _mm512_set1_epi64(32));
  return x;
}

// x[c] in the lanes of mask (c in [0, k) there), src in the others.
SOFTKMEANS_NEWTON_TARGET inline __m512d look_up(const Table& T, __mmask8 mask, const Index& c,
                                                __m512d src) {
  if (!T.in_registers) return _mm512_mask_i32gather_pd(src, mask, c.c, T.base, 8);
  const __m512d lo = _mm512_mask_blend_pd(c.bit4, _mm512_permutex2var_pd(T.t[0], c.i, T.t[1]),
                                          _mm512_permutex2var_pd(T.t[2], c.i, T.t[3]));
  const __m512d hi = _mm512_mask_blend_pd(c.bit4, _mm512_permutex2var_pd(T.t[4], c.i, T.t[5]),
                                          _mm512_permutex2var_pd(T.t[6], c.i, T.t[7]));
  return _mm512_mask_blend_pd(mask, src, _mm512_mask_blend_pd(c.bit5, lo, hi));
}

// Eight rows of 8 candidates at g, one row a lane (where one row a vector
// spends its time reducing across lanes): at each column position s the
// columns c[s] and values v[s] = d - g_c (+inf where not held), and each
// row's label a (the smallest value, ties to the smaller column), its best and
// second best values v1, v2 (+inf with one candidate) and D at the label.
struct Rows8 {
  __m256i c[8];
  __m512d v[8];
  __m512d bar[8];  // rows_8's second table at c[s] (-inf where not held), if asked
  __m512d v1, v2, own;
  __m256i a;
};

// Eight rows of eight 32-bit values (contiguous) by position: out[t] holds
// positions 2 t (its lower half) and 2 t + 1 (upper), each the eight rows'.
SOFTKMEANS_NEWTON_TARGET inline void transpose_8x8_32(const void* rows, __m512i out[4]) {
  // round 1: lane 4 s + r <- row r (of four), position s (+4 for the upper)
  const __m512i lo = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
  // round 2: lane 8 t + r <- position t (+2), row r: rows 0-3 from the first
  // source, 4-7 from the second
  const __m512i first =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
  const __m512i* in = static_cast<const __m512i*>(rows);
  const __m512i r01 = _mm512_loadu_si512(in), r23 = _mm512_loadu_si512(in + 1);
  const __m512i r45 = _mm512_loadu_si512(in + 2), r67 = _mm512_loadu_si512(in + 3);
  const __m512i p0 = _mm512_permutex2var_epi32(r01, lo, r23);
  const __m512i p1 = _mm512_permutex2var_epi32(r01, hi, r23);
  const __m512i q0 = _mm512_permutex2var_epi32(r45, lo, r67);
  const __m512i q1 = _mm512_permutex2var_epi32(r45, hi, r67);
  out[0] = _mm512_permutex2var_epi32(p0, first, q0);
  out[1] = _mm512_permutex2var_epi32(p0, second, q0);
  out[2] = _mm512_permutex2var_epi32(p1, first, q1);
  out[3] = _mm512_permutex2var_epi32(p1, second, q1);
}

// The columns and D of rows p .. p + 7 by column position: 32-bit values
// transposed (the float bits moved as integers), float64 by a gather a
// position (rows of 64 bytes: in L1).
template <typename T>
SOFTKMEANS_NEWTON_TARGET inline void by_position_8(const int32_t* cand, const T* dist,
                                                   __m256i c[8], __m512d d[8]) {
  __m512i pairs[4];
  transpose_8x8_32(cand, pairs);
  for (int t = 0; t < 4; ++t) {
    c[2 * t] = _mm512_castsi512_si256(pairs[t]);
    c[2 * t + 1] = _mm512_extracti32x8_epi32(pairs[t], 1);
  }
  if constexpr (sizeof(T) == 4) {
    transpose_8x8_32(dist, pairs);
    for (int t = 0; t < 4; ++t) {
      const __m512 f = _mm512_castsi512_ps(pairs[t]);
      d[2 * t] = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
      d[2 * t + 1] = _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1));
    }
  } else {
    const __m256i rows = _mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56);
    const double* f = reinterpret_cast<const double*>(dist);
    for (int s = 0; s < 8; ++s) d[s] = _mm512_i32gather_pd(rows, f + s, 8);
  }
}

// Rows p .. p + 7 at g, each row's label as row_state finds it: the values in
// column order, each taken over the best so far where smaller, or equal and
// of a smaller column.
// With bar, bar at each c[s] too, on the same index.
template <typename T>
SOFTKMEANS_NEWTON_TARGET inline void rows_8(const int32_t* cand, const T* dist, const Table& g,
                                            Rows8* R, const Table* bar = nullptr) {
  const __m512d inf = _mm512_set1_pd(std::numeric_limits<double>::infinity());
  __m512d d[8];
  by_position_8(cand, dist, R->c, d);
  __m512d v1 = inf, v2 = inf, own = _mm512_setzero_pd();
  __m256i a = R->c[0];
  for (int s = 0; s < 8; ++s) {
    const __m256i c = R->c[s];
    const __mmask8 held = _mm256_cmpgt_epi32_mask(c, _mm256_set1_epi32(-1));
    const Index at = index_of(c);
    const __m512d v = _mm512_mask_sub_pd(inf, held, d[s], look_up(g, held, at, inf));
    if (bar) R->bar[s] = look_up(*bar, held, at, -inf);
    const __mmask8 take = _mm512_cmp_pd_mask(v, v1, _CMP_LT_OQ) |
                          (_mm512_cmp_pd_mask(v, v1, _CMP_EQ_OQ) &
                           _mm256_mask_cmplt_epi32_mask(held, c, a));
    v2 = _mm512_mask_blend_pd(take, _mm512_min_pd(v, v2), v1);  // min: v < v2 ? v : v2
    v1 = _mm512_mask_blend_pd(take, v1, v);
    a = _mm256_mask_blend_epi32(take, a, c);
    own = _mm512_mask_blend_pd(take, own, d[s]);
    R->v[s] = v;
  }
  R->v1 = v1, R->v2 = v2, R->own = own, R->a = a;
}

// The rows (each bit a row) whose value at position s less the best is below
// R.bar[s], the label's column aside.
SOFTKMEANS_NEWTON_TARGET inline __mmask8 below_8(const Rows8& R, int s) {
  const __mmask8 held = _mm256_cmpgt_epi32_mask(R.c[s], _mm256_set1_epi32(-1));
  const __mmask8 other = _mm256_mask_cmpneq_epi32_mask(held, R.c[s], R.a);
  return _mm512_mask_cmp_pd_mask(other, _mm512_sub_pd(R.v[s], R.v1), R.bar[s], _CMP_LT_OQ);
}

// Each row's label, gap (v2 - v1) and D at the label, rows a multiple of 8.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void row_states_8(const int32_t* cand, const T* dist, int64_t rows,
                                           const double* g, int64_t k, int32_t* label,
                                           double* gap, double* own) {
  const Table G = table_of(g, k);
  Rows8 R;
  for (int64_t p = 0; p < rows; p += 8) {
    rows_8(cand + p * 8, dist + p * 8, G, &R);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(label + p), R.a);
    _mm512_storeu_pd(gap + p, _mm512_sub_pd(R.v2, R.v1));
    _mm512_storeu_pd(own + p, R.own);
  }
}

// counts[a] += 1 for each row's label a; value += D - g_a there (the best
// value), in row order; rows a multiple of 8. The labels of a block first,
// then their counts: an increment waits on the last one's store, which would
// hold every row's reads behind the last row's label.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void count_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                           const double* g, int64_t k, int64_t* counts,
                                           double* value) {
  const Table G = table_of(g, k);
  alignas(64) int32_t label[kBlock];
  alignas(64) double best[kBlock];
  Rows8 R;
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    for (int64_t i = 0; i < span; i += 8) {
      rows_8(cand + (p0 + i) * 8, dist + (p0 + i) * 8, G, &R);
      _mm256_store_si256(reinterpret_cast<__m256i*>(label + i), R.a);
      _mm512_store_pd(best + i, R.v1);
    }
    for (int64_t i = 0; i < span; ++i) ++counts[label[i]], *value += best[i];
  }
}

// Each row's gap into gaps and its offers to the bands: its gap to its label
// (a row it would lose), its value less the best to each other candidate (a
// row it would gain); rows a multiple of 8. A block's rows first, against
// the bars at the block's start (they only fall: a superset of the offers
// that enter), then their offers in row order, each checked again then.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void gap_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                         const double* g, int64_t k, Bands* bands,
                                         double* gaps) {
  const Table G = table_of(g, k);
  alignas(64) int32_t label[kBlock];
  alignas(64) double best[kBlock];
  uint8_t lost[kBlock / 8];  // a bit a row
  uint64_t gained[kBlock / 8];  // byte s: a bit a row whose position s is offered
  Rows8 R;
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    const Table lose = table_of(bands->lose.data(), k), gain = table_of(bands->gain.data(), k);
    for (int64_t i = 0; i < span; i += 8) {
      rows_8(cand + (p0 + i) * 8, dist + (p0 + i) * 8, G, &R, &gain);
      const __m512d gap = _mm512_sub_pd(R.v2, R.v1);
      _mm512_storeu_pd(gaps + p0 + i, gap);
      _mm256_store_si256(reinterpret_cast<__m256i*>(label + i), R.a);
      _mm512_store_pd(best + i, R.v1);
      lost[i / 8] = _mm512_cmp_pd_mask(gap, look_up(lose, 0xff, index_of(R.a), gap), _CMP_LT_OQ);
      gained[i / 8] = 0;
      for (int s = 0; s < 8; ++s)
        gained[i / 8] |= uint64_t{below_8(R, s)} << (8 * s);
    }
    for (int64_t i = 0; i < span; i += 8) {
      if (!lost[i / 8] && !gained[i / 8]) continue;
      const uint64_t offers = transpose_bits_8(gained[i / 8]);  // byte r: row r's positions
      for (int row = 0; row < 8; ++row) {
        const int64_t p = p0 + i + row;
        if (lost[i / 8] >> row & 1) bands->offer_lost(label[i + row], gaps[p]);
        for (unsigned hit = offers >> (8 * row) & 0xff; hit; hit &= hit - 1) {
          const int s = __builtin_ctz(hit);
          const int32_t c = cand[p * 8 + s];
          bands->offer_gained(c, static_cast<double>(dist[p * 8 + s]) - g[c] - best[i + row]);
        }
      }
    }
  }
}

// The Laplacian pairs of the rows whose gap is below widest: each other
// candidate c whose value less the best is below max(h_a, h_c); rows a
// multiple of 8. A block's pairs found first, then added in row order.
template <typename T>
SOFTKMEANS_NEWTON_TARGET void band_rows_8(const int32_t* cand, const T* dist, int64_t rows,
                                          const double* g, const double* gaps, double widest,
                                          const double* h, int64_t k, double* Lap) {
  const Table G = table_of(g, k), H = table_of(h, k);
  alignas(64) int32_t label[kBlock];
  uint64_t pairs[kBlock / 8];  // byte s: a bit a row whose position s is a pair
  Rows8 R;
  for (int64_t p0 = 0; p0 < rows; p0 += kBlock) {
    const int64_t span = std::min(kBlock, rows - p0);
    for (int64_t i = 0; i < span; i += 8) {
      const __mmask8 near =
          _mm512_cmp_pd_mask(_mm512_loadu_pd(gaps + p0 + i), _mm512_set1_pd(widest), _CMP_LT_OQ);
      pairs[i / 8] = 0;
      if (!near) continue;
      rows_8(cand + (p0 + i) * 8, dist + (p0 + i) * 8, G, &R, &H);
      _mm256_store_si256(reinterpret_cast<__m256i*>(label + i), R.a);
      // max(h_c, h_a) is std::max(h_a, h_c): h_a where either is NaN or both equal
      const __m512d ha = look_up(H, 0xff, index_of(R.a), _mm512_setzero_pd());
      for (int s = 0; s < 8; ++s) {
        const __mmask8 held = _mm256_cmpgt_epi32_mask(R.c[s], _mm256_set1_epi32(-1));
        const __mmask8 other = _mm256_mask_cmpneq_epi32_mask(held & near, R.c[s], R.a);
        const __m512d band = _mm512_max_pd(R.bar[s], ha);
        const __mmask8 below =
            _mm512_mask_cmp_pd_mask(other, _mm512_sub_pd(R.v[s], R.v1), band, _CMP_LT_OQ);
        pairs[i / 8] |= uint64_t{below} << (8 * s);
      }
    }
    for (int64_t i = 0; i < span; i += 8) {
      if (!pairs[i / 8]) continue;
      const uint64_t rows_pairs = transpose_bits_8(pairs[i / 8]);  // byte r: row r's positions
      for (int row = 0; row < 8; ++row) {
        const int32_t a = label[i + row];
        for (unsigned hit = rows_pairs >> (8 * row) & 0xff; hit; hit &= hit - 1) {
          const int32_t c = cand[(p0 + i + row) * 8 + __builtin_ctz(hit)];
          add_pair(a, c, std::max(h[a], h[c]), k, Lap);
        }
      }
    }
  }
}

#undef SOFTKMEANS_NEWTON_TARGET
#endif

}  // namespace softkmeans::newton_rows
