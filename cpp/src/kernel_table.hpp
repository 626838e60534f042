// Function-pointer tables: one per instruction set and dtype, filled by the
// per-ISA translation units and selected once by dispatch.cpp.
#pragma once

#include <cstdint>

#include "softkmeans/config.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {

template <typename T>
struct KernelTable {
  void (*sq_distances)(const T*, index_t, index_t, const T*, index_t, T*, int) = nullptr;
  void (*assign)(const T*, index_t, index_t, const T*, index_t, std::int64_t*, T*, int) = nullptr;
  void (*margins)(const T*, index_t, index_t, const T*, index_t, T*, int) = nullptr;
  void (*entmax15)(const T*, index_t, index_t, T*, int) = nullptr;
  void (*responsibilities)(const T*, index_t, index_t, const T*, index_t, Kind, double, T*,
                           int) = nullptr;
  void (*stats)(const T*, index_t, index_t, const T*, index_t, Kind, double, const double*,
                double*, double*, double*, double*, double*, double*, std::int64_t*, T*,
                int) = nullptr;
  void (*weighted_covariance)(const T*, index_t, index_t, const double*, double*, double*,
                              int) = nullptr;
  void (*kmeanspp_candidate_potentials)(const T*, index_t, index_t, const double*,
                                        const double*, const std::int64_t*, index_t, double*,
                                        int) = nullptr;
  void (*kmeanspp_update_closest)(const T*, index_t, index_t, std::int64_t, double*,
                                  int) = nullptr;
};

void fill_kernel_tables_scalar(KernelTable<float>* f, KernelTable<double>* d);
#ifdef SOFTKMEANS_HAVE_AVX2
void fill_kernel_tables_avx2(KernelTable<float>* f, KernelTable<double>* d);
#endif
#ifdef SOFTKMEANS_HAVE_AVX512
void fill_kernel_tables_avx512(KernelTable<float>* f, KernelTable<double>* d);
#endif

// The table of the currently selected SIMD level.
template <typename T>
const KernelTable<T>& active_kernels();

}  // namespace softkmeans
