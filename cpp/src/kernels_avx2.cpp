// Kernels compiled for the avx2 instruction set (flags set in CMakeLists.txt):
// 32-byte vectors, 4-row micro-kernel.
#define SOFTKMEANS_ISA avx2
#define SOFTKMEANS_VEC_BYTES 32
#define SOFTKMEANS_MR 4
#include "kernels_impl.hpp"
#include "kernel_table.hpp"

namespace softkmeans {

template <typename T>
static void fill(KernelTable<T>* t) {
  t->sq_distances = &avx2::sq_distances<T>;
  t->assign = &avx2::assign<T>;
  t->margins = &avx2::margins<T>;
  t->entmax15 = &avx2::entmax15<T>;
  t->responsibilities = &avx2::responsibilities<T>;
  t->stats = &avx2::stats<T>;
  t->weighted_covariance = &avx2::weighted_covariance<T>;
  t->kmeanspp_candidate_potentials = &avx2::kmeanspp_candidate_potentials<T>;
  t->kmeanspp_update_closest = &avx2::kmeanspp_update_closest<T>;
}

void fill_kernel_tables_avx2(KernelTable<float>* f, KernelTable<double>* d) {
  fill(f);
  fill(d);
}

}  // namespace softkmeans
