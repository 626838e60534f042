// Kernels compiled for the avx512 instruction set (flags set in CMakeLists.txt).
#define SOFTKMEANS_ISA avx512
#include "kernels_impl.hpp"
#include "kernel_table.hpp"

namespace softkmeans {

template <typename T>
static void fill(KernelTable<T>* t) {
  t->sq_distances = &avx512::sq_distances<T>;
  t->assign = &avx512::assign<T>;
}

void fill_kernel_tables_avx512(KernelTable<float>* f, KernelTable<double>* d) {
  fill(f);
  fill(d);
}

}  // namespace softkmeans
