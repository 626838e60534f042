// Kernel bodies, compiled once per instruction set. Each including translation
// unit defines SOFTKMEANS_ISA (scalar, avx2, avx512) and its own compiler
// flags; the namespace keeps the per-ISA instantiations distinct (ODR).
#pragma once

#ifndef SOFTKMEANS_ISA
#error "define SOFTKMEANS_ISA before including kernels_impl.hpp"
#endif

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "softkmeans/config.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// Accumulation type: float data is summed in double so that D keeps full
// float precision even for points far from the origin.
template <typename T>
struct Acc {
  using type = double;
};

template <typename T>
inline typename Acc<T>::type sq_dist_row(const T* x, const T* c, index_t d) {
  using A = typename Acc<T>::type;
  A s = 0;
  for (index_t l = 0; l < d; ++l) {
    const A diff = static_cast<A>(x[l]) - static_cast<A>(c[l]);
    s += diff * diff;
  }
  return s;
}

template <typename T>
void sq_distances(const T* X, index_t n, index_t d, const T* C, index_t k, T* D, int n_threads) {
  const index_t n_tiles = (n + kRowTile - 1) / kRowTile;
#pragma omp parallel for schedule(static) num_threads(n_threads)
  for (index_t t = 0; t < n_tiles; ++t) {
    const index_t i_end = std::min(n, (t + 1) * kRowTile);
    for (index_t i = t * kRowTile; i < i_end; ++i) {
      for (index_t j = 0; j < k; ++j) D[i * k + j] = static_cast<T>(sq_dist_row(X + i * d, C + j * d, d));
    }
  }
}

template <typename T>
void assign(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
            T* min_sq_dist, int n_threads) {
  using A = typename Acc<T>::type;
  const index_t n_tiles = (n + kRowTile - 1) / kRowTile;
#pragma omp parallel for schedule(static) num_threads(n_threads)
  for (index_t t = 0; t < n_tiles; ++t) {
    const index_t i_end = std::min(n, (t + 1) * kRowTile);
    for (index_t i = t * kRowTile; i < i_end; ++i) {
      A best = std::numeric_limits<A>::infinity();
      index_t best_j = 0;
      for (index_t j = 0; j < k; ++j) {
        const A dij = sq_dist_row(X + i * d, C + j * d, d);
        if (dij < best) {  // strict: ties keep the smallest j
          best = dij;
          best_j = j;
        }
      }
      labels[i] = best_j;
      min_sq_dist[i] = static_cast<T>(best);
    }
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
