// The engine's direct path (d <= kSmallDim, impl/engine.hpp): differences
// x - c vectorized over centroids (ct, cpad), or over rows with centroids
// broadcast (craw).
#pragma once

#include <algorithm>
#include <limits>

#include "impl/engine.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// ct, cpad, craw from C (k, d).
template <typename T>
inline void Engine<T>::prepare_direct(const T* C) {
  ct.assign(d * kp, T(0));
  for (index_t j = 0; j < k; ++j)
    for (index_t l = 0; l < d; ++l) ct[l * kp + j] = C[j * d + l];
  cpad.assign(kp, T(0));
  for (index_t j = k; j < kp; ++j) cpad[j] = std::numeric_limits<T>::infinity();
  craw.assign(C, C + k * d);
}

// Direct differences, vectorized over centroids with broadcasts of x.
template <typename T>
template <int D>
inline void Engine<T>::direct(const T* X, index_t rows, T* out) const {
  for (index_t r = 0; r < rows; ++r) {
    V xs[D];
    for (int l = 0; l < D; ++l) xs[l] = vset<T>(X[r * D + l]);
    T* o = out + r * ld;
    for (index_t j = 0; j < kp; j += W) {
      V s = V{};
      for (int l = 0; l < D; ++l) {
        const V df = xs[l] - vload(ct.data() + l * kp + j);
        s = vfma(df, df, s);
      }
      vstore(o + j, s + vload(cpad.data() + j));
    }
  }
}

// Direct path fused with the reduction: the two smallest distances of row x
// and the first argmin, in registers (no distance row is stored).
template <typename T>
template <int D>
inline RowMin<T> Engine<T>::direct_min2(const T* x) const {
  V xs[D];
  for (int l = 0; l < D; ++l) xs[l] = vset<T>(x[l]);
  Min2<T> m;
  for (index_t j = 0; j < kp; j += W) {
    V s = vload(cpad.data() + j);
    for (int l = 0; l < D; ++l) {
      const V df = xs[l] - vload(ct.data() + l * kp + j);
      s = vfma(df, df, s);
    }
    m.push(s);
  }
  return m.finish();
}

// xv [out] (D,): rows X[r0 .. r0 + rn) in the lanes, coordinate by
// coordinate; lanes past rn repeat the last row.
template <typename T>
template <int D>
inline void Engine<T>::load_row_lanes(const T* X, index_t r0, index_t rn, V* xv) {
  alignas(64) T xt[D][W];
  for (index_t q = 0; q < W; ++q) {
    const index_t r = r0 + std::min<index_t>(q, rn - 1);
    for (int l = 0; l < D; ++l) xt[l][q] = X[r * D + l];
  }
  for (int l = 0; l < D; ++l) xv[l] = vload(&xt[l][0]);
}

// Rows in the lanes (xv (D,), from load_row_lanes), centroids broadcast: per
// lane the running min v1, second min v2 and first argmin i1 (strict <: ties
// keep the smallest j).
template <typename T>
template <int D>
inline void Engine<T>::lane_min2(const V* xv, V& v1, V& v2, VI& i1) const {
  const T inf = std::numeric_limits<T>::infinity();
  v1 = vset<T>(inf);
  v2 = vset<T>(inf);
  i1 = VI{};
  const T* c = craw.data();
  for (index_t j = 0; j < k; ++j) {
    V sv = V{};
    for (int l = 0; l < D; ++l) {
      const V df = xv[l] - c[j * D + l];
      sv = vfma(df, df, sv);
    }
    const VI lt = sv < v1;
    v2 = vmin(v2, vmax(v1, sv));
    i1 = lt ? (VI{} + static_cast<Int>(j)) : i1;
    v1 = vmin(v1, sv);
  }
}

// Small k: W rows at a time in the lanes. out [out] (rows,).
template <typename T>
template <int D>
inline void Engine<T>::direct_min2_rows(const T* X, index_t rows, RowMin<T>* out) const {
  for (index_t r0 = 0; r0 < rows; r0 += W) {
    const index_t rn = std::min<index_t>(W, rows - r0);
    V xv[D], v1, v2;
    VI i1;
    load_row_lanes<D>(X, r0, rn, xv);
    lane_min2<D>(xv, v1, v2, i1);
    for (index_t q = 0; q < rn; ++q) out[r0 + q] = {v1[q], v2[q], static_cast<index_t>(i1[q])};
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
