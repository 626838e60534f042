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

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "softkmeans/config.hpp"

#if defined(__AVX2__) || defined(__x86_64__)
#include <immintrin.h>
#endif

namespace softkmeans {
namespace SOFTKMEANS_ISA {

typedef float vf __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef double vd __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int32_t vi32 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::int64_t vi64 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::uint64_t vu64 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
typedef std::uint32_t vu32 __attribute__((vector_size(SOFTKMEANS_VEC_BYTES)));
// Eight lanes of T whatever the width (the 8 x 8 transposes of the lane
// packing, the row norms and the k-means++ distances; used only where a
// vector holds a multiple of 8 lanes, or by the AVX-512 unit's 8 candidates).
typedef float vf8 __attribute__((vector_size(32)));
typedef double vd8 __attribute__((vector_size(64)));
typedef float vf8_u __attribute__((vector_size(32), aligned(4), may_alias));
typedef double vd8_u __attribute__((vector_size(64), aligned(8), may_alias));
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
struct Oct;
template <>
struct Oct<float> {
  using v = vf8;
  using u = vf8_u;
};
template <>
struct Oct<double> {
  using v = vd8;
  using u = vd8_u;
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
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  if constexpr (std::is_same<V, vf>::value) return (V)_mm512_min_ps((__m512)a, (__m512)b);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm512_min_pd((__m512d)a, (__m512d)b);
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  if constexpr (std::is_same<V, vf>::value) return (V)_mm256_min_ps((__m256)a, (__m256)b);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm256_min_pd((__m256d)a, (__m256d)b);
#endif
  return a < b ? a : b;
}
template <typename V>
inline V vmax(V a, V b) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  if constexpr (std::is_same<V, vf>::value) return (V)_mm512_max_ps((__m512)a, (__m512)b);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm512_max_pd((__m512d)a, (__m512d)b);
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
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

// a * b + c rounded once (a fused multiply-add), at every level: the one
// multiply-add of the kernels. NOTE: every unit is compiled with
// -ffp-contract=off (CMakeLists.txt), so the compiler fuses nothing by itself
// and an expression's bits do not depend on what it chose to contract in
// which unit (SPEC.md, "Determinism across machines"); the kernels spell each
// multiply-add they want fused with these. The AVX units use the FMA
// instructions. The scalar unit (SSE2 code, no FMA in its instruction set)
// calls one out-of-line multiply-add per vector: the FMA instruction in a
// function compiled for it where the CPU has FMA, else fma/fmaf per lane
// (glibc's exact emulation). An FMA is exact either way: the same bits, the
// scalar level several times slower than with unfused multiply-adds.
#if !defined(__FMA__) && defined(__x86_64__)
namespace sse_fma {
typedef float f4 __attribute__((vector_size(16)));
typedef double d2 __attribute__((vector_size(16)));
inline const bool kHardware = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("fma") != 0;
}();
[[gnu::target("fma"), gnu::noinline]] inline f4 hw(f4 a, f4 b, f4 c) {
  return (f4)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)c);
}
[[gnu::target("fma"), gnu::noinline]] inline d2 hw(d2 a, d2 b, d2 c) {
  return (d2)_mm_fmadd_pd((__m128d)a, (__m128d)b, (__m128d)c);
}
[[gnu::target("fma"), gnu::noinline]] inline float hw1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
[[gnu::target("fma"), gnu::noinline]] inline double hw1(double a, double b, double c) {
  return _mm_cvtsd_f64(_mm_fmadd_sd(_mm_set_sd(a), _mm_set_sd(b), _mm_set_sd(c)));
}
template <typename V>
[[gnu::noinline]] inline V sw(V a, V b, V c) {
  for (std::size_t q = 0; q < sizeof(V) / sizeof(a[0]); ++q) a[q] = __builtin_fma(a[q], b[q], c[q]);
  return a;
}
[[gnu::noinline]] inline f4 sw(f4 a, f4 b, f4 c) {
  for (int q = 0; q < 4; ++q) a[q] = __builtin_fmaf(a[q], b[q], c[q]);
  return a;
}
}  // namespace sse_fma
#endif

template <typename T>
[[gnu::always_inline]] inline T lane_mul_add(T a, T b, T c) {
#if !defined(__FMA__) && defined(__x86_64__)
  if (sse_fma::kHardware) return sse_fma::hw1(a, b, c);
#endif
  return __builtin_fma(a, b, c);
}
template <>
[[gnu::always_inline]] inline float lane_mul_add(float a, float b, float c) {
#if !defined(__FMA__) && defined(__x86_64__)
  if (sse_fma::kHardware) return sse_fma::hw1(a, b, c);
#endif
  return __builtin_fmaf(a, b, c);
}
template <typename V>
[[gnu::always_inline]] inline V vfma(V a, V b, V c) {
  using E = std::remove_reference_t<decltype(a[0])>;
  constexpr bool f32 = std::is_same<E, float>::value;
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    if constexpr (f32)
      return (V)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
    else
      return (V)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
  }
#endif
#if defined(__FMA__)
  if constexpr (sizeof(V) == 32) {
    if constexpr (f32)
      return (V)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
    else
      return (V)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
  } else if constexpr (sizeof(V) == 64) {
    // Two halves (the AVX2 unit's 64-byte vectors).
    typedef E H __attribute__((vector_size(32)));
    H a2[2], b2[2], c2[2];
    __builtin_memcpy(a2, &a, 64);
    __builtin_memcpy(b2, &b, 64);
    __builtin_memcpy(c2, &c, 64);
    a2[0] = vfma(a2[0], b2[0], c2[0]);
    a2[1] = vfma(a2[1], b2[1], c2[1]);
    __builtin_memcpy(&a, a2, 64);
    return a;
  }
#endif
#if !defined(__FMA__) && defined(__x86_64__)
  if constexpr (sizeof(V) == 16) {
    using U = std::conditional_t<f32, sse_fma::f4, sse_fma::d2>;
    return (V)(sse_fma::kHardware ? sse_fma::hw((U)a, (U)b, (U)c) : sse_fma::sw((U)a, (U)b, (U)c));
  } else if constexpr (sizeof(V) % 16 == 0) {
    // 16-byte pieces (the scalar unit's 8-lane vectors).
    typedef E H __attribute__((vector_size(16)));
    constexpr std::size_t P = sizeof(V) / 16;
    H a2[P], b2[P], c2[P];
    __builtin_memcpy(a2, &a, sizeof(V));
    __builtin_memcpy(b2, &b, sizeof(V));
    __builtin_memcpy(c2, &c, sizeof(V));
    for (std::size_t i = 0; i < P; ++i) a2[i] = vfma(a2[i], b2[i], c2[i]);
    __builtin_memcpy(&a, a2, sizeof(V));
    return a;
  }
#endif
  for (std::size_t q = 0; q < sizeof(V) / sizeof(E); ++q) a[q] = lane_mul_add<E>(a[q], b[q], c[q]);
  return a;
}
// The square root of each lane, correctly rounded (std::sqrt's bits).
template <typename V>
inline V vsqrt(V x) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  if constexpr (std::is_same<V, vf>::value) return (V)_mm512_sqrt_ps((__m512)x);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm512_sqrt_pd((__m512d)x);
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  if constexpr (std::is_same<V, vf>::value) return (V)_mm256_sqrt_ps((__m256)x);
  if constexpr (std::is_same<V, vd>::value) return (V)_mm256_sqrt_pd((__m256d)x);
#endif
  for (std::size_t q = 0; q < sizeof(V) / sizeof(x[0]); ++q) x[q] = std::sqrt(x[q]);
  return x;
}

constexpr index_t round_up(index_t a, index_t b) { return (a + b - 1) / b * b; }

// Lane q of the result is lane q ^ S of v (S a power of two below the lane
// count): one shuffle with constant indices. NOTE: not __builtin_shuffle with
// an index vector: GCC built that vector at run time (moves and inserts) before
// a variable permute.
template <index_t S, typename V, std::size_t... I>
inline V lanes_xor(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (I ^ S)...);
}
template <index_t S, typename V>
inline V lanes_xor(V v) {
  return lanes_xor<S>(v, std::make_index_sequence<sizeof(V) / sizeof(v[0])>{});
}

// v + lanes_xor<S>(v), then the same with S / 2, ... 1: every lane holds the
// sum of all (a tree of log2(W) adds, in a fixed order).
template <index_t S, typename V>
inline V lanes_sum_tree(V v) {
  if constexpr (S >= 1)
    return lanes_sum_tree<S / 2>(v + lanes_xor<S>(v));
  else
    return v;
}

// 8 x 8 lanes transposed in registers: r [in/out] rows in, columns out.
// Three rounds of two-input shuffles (AVX's unpack, shuffle and 128-bit
// permute for floats; two-source permutes for AVX-512's eight doubles).
// Always inlined: out of line (GCC's choice once it was a free function) its
// eight vectors went through memory.
template <typename U>
__attribute__((always_inline)) inline void transpose8(U* r) {
  U t[8], u[8];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = __builtin_shufflevector(r[2 * p], r[2 * p + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * p + 1] = __builtin_shufflevector(r[2 * p], r[2 * p + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const U a = t[4 * h + p], b = t[4 * h + p + 2];
      u[4 * h + 2 * p] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
      u[4 * h + 2 * p + 1] = __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[c + 4] = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// Virtual lanes: a sum kept in lanes is kept in VW = 64 bytes of them
// whatever the unit's width (16 floats or 8 doubles, AVX-512's vector), as
// kVirtual vectors of the unit (AVX-512 one, AVX2 two halves, the scalar
// unit's SSE2 four quarters): entry j of a row goes to virtual lane j % VW,
// each lane adds its entries in order, and virtual_lane_sum reduces the VW
// lanes by one fixed pairwise tree. So the sum has the same bits at every
// level (SPEC.md, "Determinism across machines").
inline constexpr index_t kVirtual = 64 / SOFTKMEANS_VEC_BYTES;

// f [out] (2,): the float lanes of v in double, lanes 0 .. W/2 and W/2 .. W.
inline void widen(vf v, vd* f) {
#if defined(__AVX512F__) && SOFTKMEANS_VEC_BYTES == 64
  f[0] = (vd)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)v));
  f[1] = (vd)_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd((__m512d)v, 1)));
#elif defined(__AVX2__) && SOFTKMEANS_VEC_BYTES == 32
  f[0] = (vd)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)v));
  f[1] = (vd)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)v, 1));
#else
  constexpr index_t H = VT<double>::W;
  for (index_t q = 0; q < H; ++q) {
    f[0][q] = static_cast<double>(v[q]);
    f[1][q] = static_cast<double>(v[q + H]);
  }
#endif
}

// The sum of VW virtual lanes of doubles held in c vectors v [in/out] (the
// lanes in order): lane q + VW/2 added to lane q, then VW/4, ... 1 (the
// vectors halved first, then lanes_sum_tree inside the last one).
inline double virtual_tree(vd* v, index_t c) {
  for (; c > 1; c /= 2)
    for (index_t i = 0; i < c / 2; ++i) v[i] = v[i] + v[i + c / 2];
  return lanes_sum_tree<VT<double>::W / 2>(v[0])[0];
}
// acc [in] (kVirtual,): the virtual lanes of a double sum (8 lanes).
inline double virtual_lane_sum(const vd* acc) {
  vd v[kVirtual];
  for (index_t i = 0; i < kVirtual; ++i) v[i] = acc[i];
  return virtual_tree(v, kVirtual);
}
// acc [in] (kVirtual,): the virtual lanes of a float sum (16 lanes), summed in
// double. NOTE: on AVX-512 the bits of the single-vector lane sum this
// replaced (lanes q and q + 8 added in double first, then the tree).
inline double virtual_lane_sum(const vf* acc) {
  vd v[2 * kVirtual];
  for (index_t i = 0; i < kVirtual; ++i) widen(acc[i], v + 2 * i);
  // widen gives halves (lanes 0..W/2, W/2..W) of each vector: in lane order.
  return virtual_tree(v, 2 * kVirtual);
}

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
  const vf round = vset<float>(12582912.0f);  // 1.5 2^23
  const vf shifted = t + round;               // n in the low mantissa bits (two's complement)
  const vf nf = shifted - round;              // round to nearest
  const vf f = t - nf;
  vf q = vset<float>(0.0013264563167467713f);
  q = vfma(q, f, vset<float>(0.009671463631093502f));
  q = vfma(q, f, vset<float>(0.05550733581185341f));
  q = vfma(q, f, vset<float>(0.24022242426872253f));
  q = vfma(q, f, vset<float>(0.6931470036506653f));
  const vf p = vfma(q, f, vset<float>(1.0f));
  // p 2^n by adding n to p's exponent field (an integer add, where a multiply
  // by 2^n took a slot of the two FMA pipes that the polynomial saturates):
  // the same bits, p 2^n being normal for t >= lo. n (mod 2^9, the bits above
  // shift out) comes from shifted's low mantissa bits and the add is unsigned,
  // as in the double vexp2: no conversion of the flushed lanes' -inf/NaN to
  // int and no signed overflow (UBSan reported both for t < lo).
  const vu32 bits =
      reinterpret_cast<const vu32&>(p) + (reinterpret_cast<const vu32&>(shifted) << 23);
  return t < lo ? vf{} : reinterpret_cast<const vf&>(bits);
}

// 2^t for t <= 0, double (the softmax step's exp, scores pre-scaled by
// log2(e), as vexp2 above): t = n + f, n = round(t), |f| <= 1/2, 2^f = 1 + f
// q(f) with q of degree 7 fitted for the minimax relative error on that
// interval (8.1e-13 evaluated in double, against the 1e-10 parity tolerance;
// 2^0 = 1 exactly). The scaling of t by log2(e) / (2 sigma^2) is one rounding
// of t, so a result's relative error grows by |t| 2^-52 ln2 (1e-14 at t = -50,
// where r < 1e-15). n is read from the low mantissa bits of t + 1.5 2^52 and
// 2^n built by integer adds and shifts: AVX2 has no double-to-int64
// conversion, and the compiler's lane-by-lane one cost 12 instructions per
// vector. NOTE: flushed to exactly 0 below 2^kExp2FlushDouble = e^-708 (the
// smallest normal number is e^-708.4), instead of denormals: such a result is
// < 1e-307 of the row's largest entry, and exact zeros let the accumulation
// skip them.
inline constexpr double kExp2FlushDouble = -1021.4247681331422;  // -708 log2(e)
inline vd vexp2(vd t) {
  const vd lo = vset<double>(kExp2FlushDouble);
  const vd round = vset<double>(6755399441055744.0);  // 1.5 2^52
  // No clamp: lanes below lo (-inf included, whose f is NaN) are replaced by
  // 0 at the end whatever they computed.
  const vd shifted = t + round;  // n in the low mantissa bits (two's complement)
  const vd nf = shifted - round;
  const vd f = t - nf;
  vd q = vset<double>(1.317893313320462e-06);
  q = vfma(q, f, vset<double>(1.5309156473849318e-05));
  q = vfma(q, f, vset<double>(0.00015403825466894544));
  q = vfma(q, f, vset<double>(0.001333345485921595));
  q = vfma(q, f, vset<double>(0.009618128616111247));
  q = vfma(q, f, vset<double>(0.0555041093526797));
  q = vfma(q, f, vset<double>(0.24022650698110698));
  q = vfma(q, f, vset<double>(0.6931471805482118));
  const vd p = vfma(q, f, vset<double>(1.0));
  // p 2^n by adding n (mod 2^12, the bits above shift out) to p's exponent
  // field, as in vexp2 for float: the same bits as p * 2^n.
  const vu64 bits =
      reinterpret_cast<const vu64&>(p) + (reinterpret_cast<const vu64&>(shifted) << 52);
  return t < lo ? vd{} : reinterpret_cast<const vd&>(bits);
}

// log(x) of positive normal finite doubles, vectorized (the log-sum-exp of the
// softmax rows, W rows at a time: their sums are in [1, k]). x = 2^e m with m
// in [sqrt(1/2), sqrt(2)) read from the bits; log m = 2 atanh(s) = 2 (s + s^3/3
// + s^5/5 + ...) with s = (m - 1) / (m + 1) (m - 1 is exact), |s| <= 0.172,
// summed to s^17 (the rest is below 1e-15 of the sum); log x = e ln2 + log m.
inline vd vlog(vd x) {
  constexpr std::uint64_t kSqrtHalf = 0x3FE6A09E667F3BCDu;  // the bits of sqrt(1/2)
  constexpr std::uint64_t kOne = 0x3FF0000000000000u;       // the bits of 1
  const vu64 ux = reinterpret_cast<const vu64&>(x);
  // e + 1023: the exponent field of x / sqrt(1/2), read without a division.
  const vu64 eb = (ux - kSqrtHalf + kOne) >> 52;
  const vu64 um = ux - ((eb - 1023u) << 52);
  const vd m = reinterpret_cast<const vd&>(um);
  // e as a double: the integer in the low mantissa bits of 1.5 2^52 (no
  // int64-to-double conversion on AVX2).
  const vu64 ue = eb - 1023u + 0x4338000000000000u;
  const vd e = reinterpret_cast<const vd&>(ue) - 6755399441055744.0;
  const vd s = (m - 1.0) / (m + 1.0);
  const vd s2 = s * s;
  vd q = vset<double>(1.0 / 17.0);
  q = vfma(q, s2, vset<double>(1.0 / 15.0));
  q = vfma(q, s2, vset<double>(1.0 / 13.0));
  q = vfma(q, s2, vset<double>(1.0 / 11.0));
  q = vfma(q, s2, vset<double>(1.0 / 9.0));
  q = vfma(q, s2, vset<double>(1.0 / 7.0));
  q = vfma(q, s2, vset<double>(1.0 / 5.0));
  q = vfma(q, s2, vset<double>(1.0 / 3.0));
  const vd two_s = s + s;
  return e * 0.6931471805599453 + (two_s + two_s * (s2 * q));
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
