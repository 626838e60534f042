// The softkmeans core: plain C++17 kernels over raw row-major arrays.
//
// Conventions: T is float or double; X [in] (n, d), C [in] (k, d) row-major
// and contiguous; outputs are allocated by the caller. n_threads <= 0 means
// the OpenMP default (honours OMP_NUM_THREADS). Results never depend on the
// thread count. Callers validate inputs (finite values, n, k, d >= 1); kernels
// do not throw.
#pragma once

#include <cstdint>

#include "softkmeans/config.hpp"

namespace softkmeans {

// D [out] (n, k): D_ij = ||x_i - c_j||^2, never negative.
template <typename T>
void sq_distances(const T* X, index_t n, index_t d, const T* C, index_t k, T* D, int n_threads);

// labels [out] (n,): argmin_j D_ij, ties to the smallest j.
// min_sq_dist [out] (n,): min_j D_ij.
template <typename T>
void assign(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
            T* min_sq_dist, int n_threads);

// The number of threads a parallel region started with n_threads uses.
int resolve_threads(int n_threads);

}  // namespace softkmeans
