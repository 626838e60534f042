// A 16 x 16 transpose of floats in AVX-512 registers (the chains of 16
// gathered rows in the lanes of one vector: engine_bf16.hpp's candidates,
// projected.hpp's). AVX-512F only: every unit built for 512-bit vectors.
#pragma once

#include "impl/vec.hpp"

#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
#include <immintrin.h>

#define SOFTKMEANS_TRANSPOSE16 1

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// A 16 x 16 transpose in registers: row i of r becomes column i.
[[gnu::always_inline]] inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = (__m512)_mm512_unpacklo_pd((__m512d)t[i], (__m512d)t[i + 2]);
    r[i + 1] = (__m512)_mm512_unpackhi_pd((__m512d)t[i], (__m512d)t[i + 2]);
    r[i + 2] = (__m512)_mm512_unpacklo_pd((__m512d)t[i + 1], (__m512d)t[i + 3]);
    r[i + 3] = (__m512)_mm512_unpackhi_pd((__m512d)t[i + 1], (__m512d)t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans

#endif
