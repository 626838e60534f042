// The engine's micro-kernel path (d > kSmallDim, impl/engine.hpp), distance
// blocks: ||x - s||^2 + ||c - s||^2 - 2 (x - s).(c - s) with a shift s near
// the centroids, MR x NR register blocks (cp, cn) into a distance block.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "impl/engine.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// The shift of the micro-kernel path: the mean of C rounded to a multiple of a
// power of two no larger than the centroids' spread. Distances are invariant
// under it; it removes the cancellation of the norm expansion far from the
// origin (points at 100 with spread 0.1), and on integer data with spread >= 1
// it is an integer, so integer-valued distances stay exact.
template <typename T>
std::vector<T> centroid_shift(const T* C, index_t k, index_t d) {
  std::vector<double> mu(d, 0.0);
  for (index_t j = 0; j < k; ++j)
    for (index_t l = 0; l < d; ++l) mu[l] += static_cast<double>(C[j * d + l]);
  for (index_t l = 0; l < d; ++l) mu[l] /= static_cast<double>(k);
  double spread = 0.0;
  for (index_t j = 0; j < k; ++j)
    for (index_t l = 0; l < d; ++l)
      spread = std::max(spread, std::fabs(static_cast<double>(C[j * d + l]) - mu[l]));
  std::vector<T> shift(d, T(0));
  for (index_t l = 0; l < d; ++l) {
    if (spread > 0.0) {
      const double q = std::ldexp(1.0, std::ilogb(spread));
      shift[l] = static_cast<T>(std::nearbyint(mu[l] / q) * q);
    } else {
      shift[l] = C[l];  // all centroids equal: shift by them exactly
    }
  }
  return shift;
}

// shift and the panels cp, cn from C (k, d).
template <typename T>
inline void Engine<T>::prepare_blocks(const T* C) {
  shift = centroid_shift(C, k, d);
  cp.assign((kp / NR) * d * NR, T(0));
  cn.assign(kp, std::numeric_limits<T>::infinity());
  for (index_t j = 0; j < k; ++j) {
    const index_t p = j / NR, jj = j % NR;
    double nrm = 0.0;
    for (index_t l = 0; l < d; ++l) {
      const T c = C[j * d + l] - shift[l];
      cp[(p * d + l) * NR + jj] = c;
      nrm += static_cast<double>(c) * static_cast<double>(c);
    }
    cn[j] = static_cast<T>(nrm);
  }
}

// distances() on the micro-kernel path.
template <typename T>
inline void Engine<T>::block_distances(const T* X, index_t rows, Workspace<T>& ws) const {
  T* out = ws.dbuf.data();
  T* xb = ws.xb.data();
  T* xn = ws.xn.data();
  const index_t rows_pad = round_up(rows, MR);
  shift_rows(X, rows, xb, xn);
  for (index_t r = rows; r < rows_pad; ++r) {
    for (index_t l = 0; l < d; ++l) xb[r * d + l] = T(0);
    xn[r] = T(0);
  }
  // The panels a slice of d at a time (about panel_bytes, a kernel choice)
  // over every row group of the block: the slice stays in L1 while the rows
  // pass. Whole, a panel (d, NR) is read once per MR rows: 1 MB at d = 8000.
  // Between slices the running products wait in `out` (stored and reloaded
  // exactly: each is still one chain of multiply-adds in coordinate order).
  const index_t slice = std::max<index_t>(
      1, ch.panel_bytes / (NR * static_cast<index_t>(sizeof(T))));
  for (index_t l0 = 0; l0 < d; l0 += slice) {
    const index_t l1 = std::min(d, l0 + slice);
    for (index_t p = 0; p < kp / NR; ++p)
      for (index_t r0 = 0; r0 < rows_pad; r0 += MR)
        micro(xb + r0 * d, cp.data() + p * d * NR, xn + r0, cn.data() + p * NR,
              out + r0 * ld + p * NR, l0, l1);
  }
}

// out [out] (d,) with stride `stride`: x - s; returns ||x - s||^2, summed in
// coordinate order by the lanes' multiply-add (pack_group's bits: both
// reductions of the micro-kernel path see the same distances).
template <typename T>
inline T Engine<T>::shifted_row(const T* x, T* out, index_t stride) const {
  T nrm = 0;
  for (index_t l = 0; l < d; ++l) {
    const T v = x[l] - shift[l];
    out[l * stride] = v;
    nrm = lane_mul_add(v, v, nrm);
  }
  return nrm;
}

// xb [out] (rows, d): rows X[0..rows) minus the shift; xn [out] (rows,)
// their squared norms with shifted_row's bits. Where a vector holds a
// multiple of 8 lanes, 8 rows at a time: each 8 x 8 block is transposed in
// registers and the norms summed in the lanes, as pack_group does (row by
// row, shifted_row's multiply-adds are a chain of d dependent operations;
// this costs what the unfused vectorized loop it replaced did).
template <typename T>
inline void Engine<T>::shift_rows(const T* X, index_t rows, T* xb, T* xn) const {
  index_t r = 0;
  if constexpr (W % 8 == 0) {
    using O = typename Oct<T>::v;
    using OU = typename Oct<T>::u;
    for (; r + 8 <= rows; r += 8) {
      O nrm{};
      index_t l0 = 0;
      for (; l0 + 8 <= d; l0 += 8) {
        const O s = *reinterpret_cast<const OU*>(shift.data() + l0);
        O v[8];
#pragma GCC unroll 8
        for (index_t q = 0; q < 8; ++q) {
          v[q] = *reinterpret_cast<const OU*>(X + (r + q) * d + l0) - s;
          *reinterpret_cast<OU*>(xb + (r + q) * d + l0) = v[q];
        }
        transpose8(v);
#pragma GCC unroll 8
        for (index_t c = 0; c < 8; ++c) nrm = vfma(v[c], v[c], nrm);
      }
      for (index_t l = l0; l < d; ++l)
        for (index_t q = 0; q < 8; ++q) {
          const T v = X[(r + q) * d + l] - shift[l];
          xb[(r + q) * d + l] = v;
          nrm[q] = lane_mul_add(v, v, nrm[q]);
        }
      *reinterpret_cast<OU*>(xn + r) = nrm;
    }
  }
  for (; r < rows; ++r) xn[r] = shifted_row(X + r * d, xb + r * d, 1);
}

// The register-blocked micro-kernel: MR rows x NR centroids of x.c
// accumulated over coordinates l0 .. l1 in MR x 2 vector registers (from
// `out`'s running products unless l0 = 0), then, at l1 = d,
// D = ||x||^2 + ||c||^2 - 2 x.c clamped at 0, stored with row stride ld
// (before d, the running products).
template <typename T>
inline void Engine<T>::micro(const T* xb, const T* cpan, const T* xn, const T* cnp, T* out,
                             index_t l0, index_t l1) const {
  V a0[MR], a1[MR];
#pragma GCC unroll 16
  for (index_t r = 0; r < MR; ++r) {
    a0[r] = l0 == 0 ? V{} : vload(out + r * ld);
    a1[r] = l0 == 0 ? V{} : vload(out + r * ld + W);
  }
  for (index_t l = l0; l < l1; ++l) {
    const V c0 = vload(cpan + l * NR);
    const V c1 = vload(cpan + l * NR + W);
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) {
      const V xv = vset<T>(xb[r * d + l]);
      a0[r] = vfma(xv, c0, a0[r]);
      a1[r] = vfma(xv, c1, a1[r]);
    }
  }
  if (l1 < d) {
#pragma GCC unroll 16
    for (index_t r = 0; r < MR; ++r) {
      vstore(out + r * ld, a0[r]);
      vstore(out + r * ld + W, a1[r]);
    }
    return;
  }
  const V cn0 = vload(cnp), cn1 = vload(cnp + W);
#pragma GCC unroll 16
  for (index_t r = 0; r < MR; ++r) {
    const V x = vset<T>(xn[r]);
    V d0 = (x + cn0) - (a0[r] + a0[r]);
    V d1 = (x + cn1) - (a1[r] + a1[r]);
    d0 = vmax(d0, V{});
    d1 = vmax(d1, V{});
    vstore(out + r * ld, d0);
    vstore(out + r * ld + W, d1);
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
