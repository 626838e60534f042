// Vectors of the instruction set the including unit targets: types, loads and
// stores, lane tests, and a vectorized exp. The root of the per-ISA kernel
// headers: each including translation unit defines SOFTKMEANS_ISA (scalar,
// avx2, avx512), SOFTKMEANS_VEC_BYTES (the vector width it targets) and
// SOFTKMEANS_MR (rows of the register-blocked micro-kernel), plus its own
// compiler flags; the namespace keeps the per-ISA instantiations distinct (ODR).
//
// Vectors are GCC/Clang vector extensions of SOFTKMEANS_VEC_BYTES bytes: the
// same source becomes SSE2 (scalar level: the portable baseline and the
// oracle), AVX2+FMA or AVX-512 code by the flags of the including unit.
#pragma once

#ifndef SOFTKMEANS_ISA
#error "define SOFTKMEANS_ISA before including the kernel headers"
#endif
#ifndef SOFTKMEANS_VEC_BYTES
#error "define SOFTKMEANS_VEC_BYTES before including the kernel headers"
#endif
#ifndef SOFTKMEANS_MR
#error "define SOFTKMEANS_MR before including the kernel headers"
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "softkmeans/config.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace softkmeans {
namespace SOFTKMEANS_ISA {

typedef float vf __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef double vd __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int32_t vi32 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int64_t vi64 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef float vf_u __attribute__((vector_size(SOFTKMEANS_VEC_BYTES), aligned(4), may_alias));
typedef double vd_u __attribute__((vector_size(SOFTKMEANS_VEC_BYTES), aligned(8), may_alias));

template <typename T>
struct VT;
template <>
struct VT<float> {
  using v = vf;
  using u = vf_u;
  using i = vi32;
  static constexpr index_t W = SOFTKMEANS_VEC_BYTES / 4;
};
template <>
struct VT<double> {
  using v = vd;
  using u = vd_u;
  using i = vi64;
  static constexpr index_t W = SOFTKMEANS_VEC_BYTES / 8;
};

template <typename T>
inline typename VT<T>::v vload(const T* p) {
  return *reinterpret_cast<const typename VT<T>::u*>(p);
}
template <typename T>
inline void vstore(T* p, typename VT<T>::v x) {
  *reinterpret_cast<typename VT<T>::u*>(p) = x;
}
// Every lane x. NOTE: a vector constructor of W copies (one broadcast), not
// `V{} + x`: that form is an add of +0.0 the compiler must keep (it turns -0.0
// into +0.0), one scalar add before each broadcast of the kernels' inner loops.
template <typename V, typename T, std::size_t... I>
inline V vsplat(T x, std::index_sequence<I...>) {
  return V{(static_cast<void>(I), x)...};
}
template <typename T>
inline typename VT<T>::v vset(T x) {
  return vsplat<typename VT<T>::v>(x, std::make_index_sequence<VT<T>::W>{});
}

// a < b ? a : b and a > b ? a : b lane by lane (NaN and equal lanes: b), which
// is exactly what the min/max instructions compute. NOTE: spelled with the
// instructions where there are some: for b = 0 the compiler otherwise emits a
// compare and a mask (two instructions in the kernels' inner loops).
template <typename V>
inline V vmin(V a, V b) {
#if defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  if constexpr (std::is_same<V, vf>::value) return (V)_mm256_min_ps((__m256)a, (__m256)b);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm256_min_pd((__m256d)a, (__m256d)b);
#endif
  return a < b ? a : b;
}
template <typename V>
inline V vmax(V a, V b) {
#if defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  if constexpr (std::is_same<V, vf>::value) return (V)_mm256_max_ps((__m256)a, (__m256)b);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm256_max_pd((__m256d)a, (__m256d)b);
#endif
  return a > b ? a : b;
}

// Lane comparisons, one bit per lane (lane q = bit q). NOTE: a lane loop over
// a vector-extension mask compiles to one extract per lane (~50 instructions
// for 16 floats); the compare-to-mask instructions make it one compare and one
// move. Ordered: NaN lanes compare false.
enum class Cmp { lt, le };

template <Cmp op, typename V>
inline unsigned lane_bits(V a, V b) {
  constexpr bool f32 = std::is_same<V, vf>::value;
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  constexpr int imm = op == Cmp::lt ? _CMP_LT_OQ : _CMP_LE_OQ;
  if constexpr (f32)
    return _mm512_cmp_ps_mask((__m512)a, (__m512)b, imm);
  else
    return _mm512_cmp_pd_mask((__m512d)a, (__m512d)b, imm);
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  constexpr int imm = op == Cmp::lt ? _CMP_LT_OQ : _CMP_LE_OQ;
  if constexpr (f32)
    return _mm256_movemask_ps(_mm256_cmp_ps((__m256)a, (__m256)b, imm));
  else
    return _mm256_movemask_pd(_mm256_cmp_pd((__m256d)a, (__m256d)b, imm));
#else
  (void)f32;
  const auto m = op == Cmp::lt ? (a < b) : (a <= b);
  unsigned bits = 0;
  for (index_t q = 0; q < index_t(sizeof(V) / sizeof(a[0])); ++q)
    bits |= static_cast<unsigned>(m[q] != 0) << q;
  return bits;
#endif
}

// True when a_q < b_q in every lane.
template <typename V>
inline bool all_less(V a, V b) {
  constexpr unsigned all = (1u << (sizeof(V) / sizeof(a[0]))) - 1;
  return lane_bits<Cmp::lt>(a, b) == all;
}

// True when a_q <= b_q in at least one lane.
template <typename V>
inline bool any_less_equal(V a, V b) {
  return lane_bits<Cmp::le>(a, b) != 0;
}

constexpr index_t round_up(index_t a, index_t b) { return (a + b - 1) / b * b; }

// 2^t for t <= 0, float (the softmax step's exp, scores pre-scaled by
// log2(e)): t = n + f, n = round(t), |f| <= 1/2, 2^f = 1 + f q(f) with q of
// degree 4 fitted for the minimax relative error on that interval (1.9e-7
// evaluated in float, against the 1e-4 parity tolerance; 2^0 = 1 exactly),
// scaled by 2^n through the exponent bits. One multiply and two multiply-adds
// fewer than vexp's reduction of x = t ln2. NOTE: flushed to exactly 0 below
// 2^kExp2FlushFloat = e^-87, as vexp flushes (the same threshold in base 2).
inline constexpr float kExp2FlushFloat = -125.51551f;  // -87 log2(e)
inline vf vexp2(vf t) {
  // No clamp: lanes below lo (-inf included, whose f is NaN) are replaced
  // by 0 at the end whatever they computed.
  const vf lo = vset<float>(kExp2FlushFloat);
  const vf nf = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  const vf f = t - nf;
  vf q = vset<float>(0.0013264563167467713f);
  q = q * f + 0.009671463631093502f;
  q = q * f + 0.05550733581185341f;
  q = q * f + 0.24022242426872253f;
  q = q * f + 0.6931470036506653f;
  const vf p = q * f + 1.0f;
  const vi32 ni = __builtin_convertvector(nf, vi32);
  const vi32 bits = (ni + 127) << 23;
  const vf scale = reinterpret_cast<const vf&>(bits);
  return t < lo ? vf{} : p * scale;
}

// exp(x) for x <= 0 (the max-shifted scores), double, vectorized. Range
// reduction x = n ln2 + r, |r| <= ln2/2, polynomial 1 + r + r^2 q(r) (so
// exp(0) = 1 exactly) with q fitted for the minimax relative error on that
// interval (degree 8 in all: approximation error 1.2e-12 relative, against the
// 1e-10 parity tolerance), scaling by 2^n through the exponent bits. NOTE:
// results below the smallest normal number (x < -708) are flushed to exactly
// 0 instead of denormals: they are < 1e-307 of the row's largest entry, and
// exact zeros let the accumulation skip them. Float: vexp2 above.
inline vd vexp(vd x) {
  const vd lo = vset<double>(-708.0);
  const vd xc = vmax(x, lo);
  const vd t = xc * 1.4426950408889634074;
  const vd nf = (t + 6755399441055744.0) - 6755399441055744.0;  // round to nearest
  vd r = xc - nf * 6.93145751953125e-1;
  r = r - nf * 1.42860682030941723212e-6;
  vd p = vset<double>(2.4708294663993273e-05);
  p = p * r + 0.0001990894176633983;
  p = p * r + 0.0013889197137043968;
  p = p * r + 0.008333281803813633;
  p = p * r + 0.04166666440490332;
  p = p * r + 0.16666666784456427;
  p = p * r + 0.5000000000426867;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const vi64 ni = __builtin_convertvector(nf, vi64);
  const vi64 bits = (ni + 1023) << 52;
  const vd scale = reinterpret_cast<const vd&>(bits);
  const vd res = p * scale;
  return x < lo ? vd{} : res;
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
