// The kernel tables of the instruction sets this build compiles, one
// translation unit each (kernels_<isa>.cpp, flags in CMakeLists.txt);
// dispatch.cpp selects one at run time.
#pragma once

#include <cstdint>

#include "softkmeans/kernels.hpp"

namespace softkmeans {

namespace scalar {
template <typename T>
Kernels<T> table();
}
#ifdef SOFTKMEANS_HAVE_AVX2
namespace avx2 {
template <typename T>
Kernels<T> table();
}
#endif
#ifdef SOFTKMEANS_HAVE_AVX512
namespace avx512 {
template <typename T>
Kernels<T> table();
}
#endif
#ifdef SOFTKMEANS_HAVE_AVX512BF16
namespace avx512bf16 {
template <typename T>
Kernels<T> table();
// softkmeans/bf16.hpp's bf16_distance_bounds.
bool distance_bounds(const float* X, index_t n, index_t d, const float* C, index_t k,
                     double* approx, double* eps, std::uint8_t* cand);
}  // namespace avx512bf16
#endif

}  // namespace softkmeans
