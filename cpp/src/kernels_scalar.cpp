// Kernels compiled for the scalar instruction set (flags set in CMakeLists.txt).
#define SOFTKMEANS_ISA scalar
#include "kernels_impl.hpp"
#include "kernel_table.hpp"

namespace softkmeans {

template <typename T>
static void fill(KernelTable<T>* t) {
  t->sq_distances = &scalar::sq_distances<T>;
  t->assign = &scalar::assign<T>;
}

void fill_kernel_tables_scalar(KernelTable<float>* f, KernelTable<double>* d) {
  fill(f);
  fill(d);
}

}  // namespace softkmeans
