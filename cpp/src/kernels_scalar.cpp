// Kernels compiled for the scalar instruction set (flags set in CMakeLists.txt):
// 16-byte vectors, 4-row micro-kernel.
#define SOFTKMEANS_ISA scalar
#define SOFTKMEANS_VEC_BYTES 16
#define SOFTKMEANS_MR 4
#include "kernels_impl.hpp"
#include "kernel_table.hpp"

namespace softkmeans {

template <typename T>
static void fill(KernelTable<T>* t) {
  t->sq_distances = &scalar::sq_distances<T>;
  t->assign = &scalar::assign<T>;
  t->margins = &scalar::margins<T>;
  t->entmax15 = &scalar::entmax15<T>;
  t->responsibilities = &scalar::responsibilities<T>;
  t->stats = &scalar::stats<T>;
  t->weighted_covariance = &scalar::weighted_covariance<T>;
  t->kmeanspp_candidate_potentials = &scalar::kmeanspp_candidate_potentials<T>;
  t->kmeanspp_update_closest = &scalar::kmeanspp_update_closest<T>;
}

void fill_kernel_tables_scalar(KernelTable<float>* f, KernelTable<double>* d) {
  fill(f);
  fill(d);
}

}  // namespace softkmeans
