// Lanes of a vector picked by a mask, packed to the front in lane order (the
// fused biased pass's candidates, impl/biased.hpp): one compress instruction
// on AVX-512, a table-driven permute on AVX2, a lane loop on the scalar unit.
// The same lanes in the same order at every level.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The element type of VT<T>::i (int32 lanes for float, int64 for double).
constexpr bool defined_avx512() {
#if defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

template <typename T>
using lane_index_t = std::remove_reference_t<decltype(std::declval<typename VT<T>::i>()[0])>;

// Entry b: byte p is the 32-bit lane that goes to position p when the lanes
// whose bit is set in b (of `lanes` lanes, each `span` 32-bit lanes wide) are
// packed to the front; the bytes past them are 0 (don't care).
template <int lanes, int span>
constexpr std::array<std::uint64_t, (1 << lanes)> compress_table() {
  std::array<std::uint64_t, (1 << lanes)> t{};
  for (int b = 0; b < (1 << lanes); ++b) {
    int p = 0;
    for (int q = 0; q < lanes; ++q)
      if (b >> q & 1)
        for (int h = 0; h < span; ++h) t[b] |= std::uint64_t(q * span + h) << (8 * p++);
  }
  return t;
}

// Writes the lanes of v and of ix whose bit is set in bits to val [out] (W,)
// and idx [out] (W,), in lane order (the entries past them unspecified).
// Returns how many.
template <typename T>
inline index_t compress_lanes(typename VT<T>::v v, typename VT<T>::i ix, unsigned bits, T* val,
                              lane_index_t<T>* idx) {
  constexpr bool f32 = std::is_same<T, float>::value;
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  // NOTE: the register forms and a plain store: the memory form of the compress is
  // microcoded (slow) on AMD's Zen 4.
  if constexpr (f32) {
    vstore(val, (vf)_mm512_maskz_compress_ps(bits, (__m512)v));
    _mm512_storeu_si512(idx, _mm512_maskz_compress_epi32(bits, (__m512i)ix));
  } else {
    vstore(val, (vd)_mm512_maskz_compress_pd(bits, (__m512d)v));
    _mm512_storeu_si512(idx, _mm512_maskz_compress_epi64(bits, (__m512i)ix));
  }
  return __builtin_popcount(bits);
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  static constexpr auto floats = compress_table<8, 1>();
  static constexpr auto doubles = compress_table<4, 2>();
  const std::uint64_t code = f32 ? floats[bits] : doubles[bits];
  const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)code));
  vstore(val, (typename VT<T>::v)_mm256_permutevar8x32_ps((__m256)v, perm));
  _mm256_storeu_si256((__m256i*)idx, _mm256_permutevar8x32_epi32((__m256i)ix, perm));
  return __builtin_popcount(bits);
#else
  (void)f32;
  index_t c = 0;
  for (index_t q = 0; q < VT<T>::W; ++q) {
    val[c] = v[q];
    idx[c] = ix[q];
    c += (bits >> q) & 1u;
  }
  return c;
#endif
}

// Whether append_lanes runs in registers (AVX-512's compress and expand): where
// it does not, the packed lanes are read back from compress_lanes's stores.
inline constexpr bool kPacksInRegisters = SOFTKMEANS_VEC_BYTES == 64 && defined_avx512();

// Puts the lanes of v and of ix whose bit is set in bits into the lanes c,
// c + 1, ... of P and PI [in/out], in lane order (those past W dropped).
template <typename T>
inline void append_lanes(typename VT<T>::v v, typename VT<T>::i ix, unsigned bits, index_t c,
                         typename VT<T>::v& P, typename VT<T>::i& PI) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  const std::uint64_t n = static_cast<std::uint64_t>(__builtin_popcount(bits));
  const std::uint64_t lanes = ((std::uint64_t(1) << n) - 1) << std::min<index_t>(c, 32);
  const unsigned to = static_cast<unsigned>(lanes);  // c .. c + n, those below W
  if constexpr (std::is_same<T, float>::value) {
    P = (vf)_mm512_mask_expand_ps((__m512)P, to, _mm512_maskz_compress_ps(bits, (__m512)v));
    PI = (vi32)_mm512_mask_expand_epi32((__m512i)PI, to,
                                        _mm512_maskz_compress_epi32(bits, (__m512i)ix));
  } else {
    P = (vd)_mm512_mask_expand_pd((__m512d)P, to, _mm512_maskz_compress_pd(bits, (__m512d)v));
    PI = (vi64)_mm512_mask_expand_epi64((__m512i)PI, to,
                                        _mm512_maskz_compress_epi64(bits, (__m512i)ix));
  }
#else
  for (index_t q = 0; q < VT<T>::W; ++q)
    if (bits >> q & 1u) {
      if (c < VT<T>::W) P[c] = v[q], PI[c] = ix[q];
      ++c;
    }
#endif
}

// cand [out] (m,) every entry -1 and dist [out] (m,) every entry 0. NOTE: masked
// stores on AVX-512: GCC makes the plain loop two calls of memset (out of line, the
// cost of the candidates of a row).
template <typename T>
inline void fill_none(std::int32_t* cand, T* dist, index_t m) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  for (index_t t = 0; t < m; t += 8) {
    const __mmask8 lanes = m - t >= 8 ? 0xff : static_cast<__mmask8>((1u << (m - t)) - 1u);
    _mm256_mask_storeu_epi32(cand + t, lanes, _mm256_set1_epi32(-1));
    if constexpr (std::is_same<T, float>::value)
      _mm256_mask_storeu_ps(dist + t, lanes, _mm256_setzero_ps());
    else
      _mm512_mask_storeu_pd(dist + t, lanes, _mm512_setzero_pd());
  }
#else
  for (index_t t = 0; t < m; ++t) cand[t] = -1, dist[t] = T(0);
#endif
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
