// Greedy k-means++ seeding: the potentials of a batch of candidates and the
// update of every point's closest chosen center.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "impl/drive.hpp"
#include "impl/vec.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Candidates in the lanes of V (G lanes): Cg [in] (d, G) one group of G
// candidates (padded with zeros); pacc [in,out] (G,) += sum_i w_i min(closest_i,
// ||x_i - c||^2) over rows [i0, i1) in order, kPPRows rows per step (one
// independent accumulator per row hides the FMA latency), distances in T,
// sums in double.
// dist [out, nullable]: the distances of row i to the group's la candidates
// at dist[a ldd + i] (the group's rows of the (L, n) output).
template <typename T, typename V, typename VD>
VD group_potentials(const T* X, index_t d, const double* w, const double* closest, const T* Cg,
                    index_t i0, index_t i1, VD pacc, T* dist, index_t ldd, index_t la) {
  constexpr index_t G = sizeof(V) / sizeof(T);
  typedef T V_u __attribute__((vector_size(sizeof(V)), aligned(sizeof(T)), may_alias));
  const auto load = [](const T* p) { return V(*reinterpret_cast<const V_u*>(p)); };
  const auto splat = [](T x) { return vsplat<V>(x, std::make_index_sequence<G>{}); };
  index_t i = i0;
  for (; i + kPPRows <= i1; i += kPPRows) {
    V acc[kPPRows] = {};
    for (index_t l = 0; l < d; ++l) {
      const V cv = load(Cg + l * G);
      for (index_t q = 0; q < kPPRows; ++q) {
        const V df = splat(X[(i + q) * d + l]) - cv;
        acc[q] = vfma(df, df, acc[q]);
      }
    }
    for (index_t q = 0; q < kPPRows; ++q) {
      const VD dv = __builtin_convertvector(acc[q], VD);
      const VD cl = VD{} + closest[i + q];
      pacc += w[i + q] * (dv < cl ? dv : cl);
    }
    if (dist) {
      if constexpr (G == 8 && kPPRows == 8) {
        // 8 rows x 8 candidates transposed in registers: a store of 8 rows
        // per candidate (lane by lane, 56 scattered stores were a third of
        // the pass at L = 7).
        V t[8];
        for (index_t q = 0; q < 8; ++q) t[q] = acc[q];
        transpose8(t);
        for (index_t a = 0; a < la; ++a) *reinterpret_cast<V_u*>(dist + a * ldd + i) = t[a];
      } else {
        for (index_t q = 0; q < kPPRows; ++q)
          for (index_t a = 0; a < la; ++a) dist[a * ldd + i + q] = acc[q][a];
      }
    }
  }
  for (; i < i1; ++i) {
    V acc = V{};
    for (index_t l = 0; l < d; ++l) {
      const V df = splat(X[i * d + l]) - load(Cg + l * G);
      acc = vfma(df, df, acc);
    }
    const VD dv = __builtin_convertvector(acc, VD);
    const VD cl = VD{} + closest[i];
    pacc += w[i] * (dv < cl ? dv : cl);
    if (dist)
      for (index_t a = 0; a < la; ++a) dist[a * ldd + i] = acc[a];
  }
  return pacc;
}

// kmeanspp_candidate_potentials (below) with the candidates in groups of the
// lanes of V.
template <typename T, typename V>
void candidate_potentials_in(const T* X, index_t n, index_t d, const double* w,
                             const double* closest, const std::int64_t* cand, index_t L,
                             double* potentials, T* dist, int n_threads) {
  constexpr index_t G = sizeof(V) / sizeof(T);
  typedef double VD __attribute__((vector_size(G * 8)));
  typedef double VD_u __attribute__((vector_size(G * 8), aligned(8), may_alias));
  const index_t n_groups = (L + G - 1) / G;
  std::vector<T> Ct(n_groups * d * G, T(0));
  for (index_t a = 0; a < L; ++a)
    for (index_t l = 0; l < d; ++l) Ct[((a / G) * d + l) * G + a % G] = X[cand[a] * d + l];
  const index_t n_chunks = std::min(n_tiles_of(n), kMaxChunks);
  const index_t Lp = n_groups * G;
  std::vector<double> part(n_chunks * Lp, 0.0);
  const int nt = resolve_threads(n_threads, n * L * d);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
    for (index_t g = 0; g < n_groups; ++g) {
      VD_u* pg = reinterpret_cast<VD_u*>(part.data() + c * Lp + g * G);
      *pg = group_potentials<T, V, VD>(X, d, w, closest, Ct.data() + g * d * G, i0, i1, *pg,
                                       dist ? dist + g * G * n : nullptr, n,
                                       std::min<index_t>(G, L - g * G));
    }
  }
  std::fill(potentials, potentials + L, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < L; ++a) potentials[a] += part[c * Lp + a];
}

// Direct differences with the candidates in lanes; no distance tile: for a
// handful of candidates the Engine's tile and its scalar reduction cost more than
// the distances. Accumulation: each chunk (fixed by n, not by the thread count)
// keeps per-candidate double partials over its rows in order; chunks merged in
// order. At most 8 candidates (2 + ln k for k < 1097) take 8 lanes where a
// vector has more (AVX-512 float): 16 lanes left 9 of 16 empty, and the pass
// cost twice AVX2's. Each candidate's sums are the same either way.
template <typename T>
void kmeanspp_candidate_potentials(const T* X, index_t n, index_t d, const double* w,
                                   const double* closest, const std::int64_t* cand, index_t L,
                                   double* potentials, T* dist, int n_threads) {
  using V = typename VT<T>::v;
  if constexpr (VT<T>::W > 8) {
    if (L <= 8)
      return candidate_potentials_in<T, typename Oct<T>::v>(X, n, d, w, closest, cand, L,
                                                            potentials, dist, n_threads);
  }
  candidate_potentials_in<T, V>(X, n, d, w, closest, cand, L, potentials, dist, n_threads);
}

// closest [in,out] (n,): min(closest_i, ||x_i - x_center||^2) by direct
// differences in T, each row's sum over l in order by the lanes' multiply-add
// (lane_mul_add): the bits kmeanspp_candidate_potentials gives the same
// distance, so an update from its kept distances and this pass agree (the
// seeding of a memory-mapped or strided X equals the in-memory one). kPPRows
// rows per step with one accumulator each: a single row's sum is a chain of d
// dependent FMAs, so one row at a time is bound by their latency.
template <typename T>
void kmeanspp_update_closest(const T* X, index_t n, index_t d, std::int64_t center, double* closest,
                             int n_threads) {
  std::vector<T> c(X + center * d, X + (center + 1) * d);
  const index_t n_steps = (n + kPPRows - 1) / kPPRows;
  const int nt = resolve_threads(n_threads, n * d);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t step = 0; step < n_steps; ++step) {
    const index_t i0 = step * kPPRows;
    if (i0 + kPPRows <= n) {
      T s[kPPRows] = {};
      for (index_t l = 0; l < d; ++l) {
        const T cl = c[l];
        for (index_t q = 0; q < kPPRows; ++q) {
          const T df = X[(i0 + q) * d + l] - cl;
          s[q] = lane_mul_add(df, df, s[q]);
        }
      }
      for (index_t q = 0; q < kPPRows; ++q)
        closest[i0 + q] = std::min(closest[i0 + q], static_cast<double>(s[q]));
    } else {
      for (index_t i = i0; i < n; ++i) {
        T s = T(0);
        for (index_t l = 0; l < d; ++l) {
          const T df = X[i * d + l] - c[l];
          s = lane_mul_add(df, df, s);
        }
        closest[i] = std::min(closest[i], static_cast<double>(s));
      }
    }
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
