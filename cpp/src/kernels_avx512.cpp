// Kernels compiled for the avx512 instruction set (flags set in CMakeLists.txt):
// 64-byte vectors, 6-row micro-kernel.
#define SOFTKMEANS_ISA avx512
#define SOFTKMEANS_VEC_BYTES 64
#define SOFTKMEANS_MR 6
#include "kernels_impl.hpp"
#include "kernel_table.hpp"

namespace softkmeans {

template <typename T>
static void fill(KernelTable<T>* t) {
  t->sq_distances = &avx512::sq_distances<T>;
  t->assign = &avx512::assign<T>;
  t->margins = &avx512::margins<T>;
  t->entmax15 = &avx512::entmax15<T>;
  t->responsibilities = &avx512::responsibilities<T>;
  t->stats = &avx512::stats<T>;
  t->weighted_covariance = &avx512::weighted_covariance<T>;
  t->kmeanspp_candidate_potentials = &avx512::kmeanspp_candidate_potentials<T>;
  t->kmeanspp_update_closest = &avx512::kmeanspp_update_closest<T>;
}

void fill_kernel_tables_avx512(KernelTable<float>* f, KernelTable<double>* d) {
  fill(f);
  fill(d);
}

}  // namespace softkmeans
