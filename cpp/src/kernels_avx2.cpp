// The kernels for the avx2 instruction set (flags in CMakeLists.txt): 32-byte vectors, 4-row
// micro-kernel.
#define SOFTKMEANS_ISA avx2
#define SOFTKMEANS_VEC_BYTES 32
#define SOFTKMEANS_MR 4
#include "impl/table.hpp"
