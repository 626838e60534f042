// The kernel tables of the instruction sets this build compiles, one
// translation unit each (kernels_<isa>.cpp, flags in CMakeLists.txt);
// dispatch.cpp selects one at run time.
#pragma once

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

}  // namespace softkmeans
