// The kernels for the scalar instruction set (flags in CMakeLists.txt): 16-byte vectors (SSE2),
// 4-row micro-kernel.
#define SOFTKMEANS_ISA scalar
#define SOFTKMEANS_VEC_BYTES 16
#define SOFTKMEANS_MR 4
#include "impl/table.hpp"
