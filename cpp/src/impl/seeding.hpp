// Greedy k-means++ seeding: the potentials of a batch of candidates and the
// update of every point's closest chosen center.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "impl/drive.hpp"
#include "impl/vec.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Candidates in the lanes: Cg [in] (d, W) one group of W candidates (padded with
// zeros); pacc [in,out] (W,) += sum_i w_i min(closest_i, ||x_i - c||^2) over
// rows [i0, i1) in order, kPPRows rows per step (one independent accumulator per
// row hides the FMA latency), distances in T, sums in double.
template <typename T, typename VD>
VD group_potentials(const T* X, index_t d, const double* w, const double* closest, const T* Cg,
                    index_t i0, index_t i1, VD pacc) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  index_t i = i0;
  for (; i + kPPRows <= i1; i += kPPRows) {
    V acc[kPPRows] = {};
    for (index_t l = 0; l < d; ++l) {
      const V cv = vload(Cg + l * W);
      for (index_t q = 0; q < kPPRows; ++q) {
        const V df = vset<T>(X[(i + q) * d + l]) - cv;
        acc[q] += df * df;
      }
    }
    for (index_t q = 0; q < kPPRows; ++q) {
      const VD dv = __builtin_convertvector(acc[q], VD);
      const VD cl = VD{} + closest[i + q];
      pacc += w[i + q] * (dv < cl ? dv : cl);
    }
  }
  for (; i < i1; ++i) {
    V acc = V{};
    for (index_t l = 0; l < d; ++l) {
      const V df = vset<T>(X[i * d + l]) - vload(Cg + l * W);
      acc += df * df;
    }
    const VD dv = __builtin_convertvector(acc, VD);
    const VD cl = VD{} + closest[i];
    pacc += w[i] * (dv < cl ? dv : cl);
  }
  return pacc;
}

// Direct differences with the candidates in lanes; no distance tile: for a
// handful of candidates the Engine's tile and its scalar reduction cost more than
// the distances. Accumulation: each chunk (fixed by n, not by the thread count)
// keeps per-candidate double partials over its rows in order; chunks merged in
// order.
template <typename T>
void kmeanspp_candidate_potentials(const T* X, index_t n, index_t d, const double* w,
                                   const double* closest, const std::int64_t* cand, index_t L,
                                   double* potentials, int n_threads) {
  constexpr index_t W = VT<T>::W;
  typedef double VD __attribute__((vector_size(W * 8)));
  typedef double VD_u __attribute__((vector_size(W * 8), aligned(8), may_alias));
  const index_t n_groups = (L + W - 1) / W;
  std::vector<T> Ct(n_groups * d * W, T(0));
  for (index_t a = 0; a < L; ++a)
    for (index_t l = 0; l < d; ++l) Ct[((a / W) * d + l) * W + a % W] = X[cand[a] * d + l];
  const index_t n_chunks = std::min(n_tiles_of(n), kMaxChunks);
  const index_t Lp = n_groups * W;
  std::vector<double> part(n_chunks * Lp, 0.0);
  const int nt = resolve_threads(n_threads, n * L * d);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (index_t c = 0; c < n_chunks; ++c) {
    const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
    for (index_t g = 0; g < n_groups; ++g) {
      VD_u* pg = reinterpret_cast<VD_u*>(part.data() + c * Lp + g * W);
      *pg = group_potentials<T, VD>(X, d, w, closest, Ct.data() + g * d * W, i0, i1, *pg);
    }
  }
  std::fill(potentials, potentials + L, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < L; ++a) potentials[a] += part[c * Lp + a];
}

// closest [in,out] (n,): min(closest_i, ||x_i - x_center||^2) by direct
// differences in double, each row's sum over l in order. kPPRows rows per step
// with one accumulator each: a single row's sum is a chain of d dependent FMAs,
// so one row at a time is bound by their latency, not by the reads of X.
template <typename T>
void kmeanspp_update_closest(const T* X, index_t n, index_t d, std::int64_t center, double* closest,
                             int n_threads) {
  std::vector<double> c(d);
  for (index_t l = 0; l < d; ++l) c[l] = static_cast<double>(X[center * d + l]);
  const index_t n_steps = (n + kPPRows - 1) / kPPRows;
  const int nt = resolve_threads(n_threads, n * d);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (index_t step = 0; step < n_steps; ++step) {
    const index_t i0 = step * kPPRows;
    if (i0 + kPPRows <= n) {
      double s[kPPRows] = {};
      for (index_t l = 0; l < d; ++l) {
        const double cl = c[l];
        for (index_t q = 0; q < kPPRows; ++q) {
          const double df = static_cast<double>(X[(i0 + q) * d + l]) - cl;
          s[q] += df * df;
        }
      }
      for (index_t q = 0; q < kPPRows; ++q) closest[i0 + q] = std::min(closest[i0 + q], s[q]);
    } else {
      for (index_t i = i0; i < n; ++i) {
        double s = 0.0;
        for (index_t l = 0; l < d; ++l) {
          const double df = static_cast<double>(X[i * d + l]) - c[l];
          s += df * df;
        }
        closest[i] = std::min(closest[i], s);
      }
    }
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
