// Transposes of floats in registers, for chains of gathered rows run in the
// lanes of vectors (engine_bf16.hpp's candidates, projected.hpp's): 16 x 16 in
// every unit built for 512-bit vectors (SOFTKMEANS_TRANSPOSE16), 8 x 8 in
// those built for AVX2 (SOFTKMEANS_TRANSPOSE8).
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

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define SOFTKMEANS_TRANSPOSE8 1

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// An 8 x 8 transpose in registers: row i of r becomes column i.
[[gnu::always_inline]] inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans

#endif
