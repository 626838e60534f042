// The kernels for the avx512 instruction set (flags in CMakeLists.txt): 64-byte vectors, 6-row
// micro-kernel.
#define SOFTKMEANS_ISA avx512
#define SOFTKMEANS_VEC_BYTES 64
#define SOFTKMEANS_MR 6
#include "impl/table.hpp"
