// St += A R, a register-blocked product over rows: the dense accumulation of
// the softmax statistics.
#pragma once

#include <algorithm>
#include <cstdint>

#include "impl/vec.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// S^T += A R for one row block: A [in] (dp, rows) with row stride lda (the
// weighted rows w_r x_r^T, transposed, and w as row d), R [in] (rows, kp) the
// responsibilities with row stride kp, St [in,out] (dp, kp). The reduction
// runs over the block's rows in 8 x 1 vector registers (the softmax
// accumulation, dense: a second register-blocked product).
// nz [in, nullable] (rows, kp / W): 0 marks an all-zero W-block of R, skipped.
template <index_t MB, typename T>
inline void accumulate_rt_x(const T* A, index_t lda, index_t dp, const T* R, index_t rows,
                            index_t kp, T* St, const std::uint8_t* nz = nullptr) {
  using V = typename VT<T>::v;
  constexpr index_t W = VT<T>::W;
  const index_t nb = kp / W;
  constexpr index_t kMaxRows = 1024;
  std::int32_t live[kMaxRows];  // rows whose W-block j is not all zero
  for (index_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const index_t rn = std::min(kMaxRows, rows - r0);
    for (index_t j = 0; j < kp; j += W) {
      index_t cnt = 0;
      for (index_t r = r0; r < r0 + rn; ++r)
        if (!nz || nz[r * nb + j / W]) live[cnt++] = static_cast<std::int32_t>(r);
      if (cnt == 0) continue;
      for (index_t l0 = 0; l0 < dp; l0 += MB) {
        V acc[MB];
#pragma GCC unroll 8
        for (index_t q = 0; q < MB; ++q) acc[q] = V{};
        for (index_t c = 0; c < cnt; ++c) {
          const index_t r = live[c];
          const V rv = vload(R + r * kp + j);
#pragma GCC unroll 8
          for (index_t q = 0; q < MB; ++q) acc[q] += vset<T>(A[(l0 + q) * lda + r]) * rv;
        }
#pragma GCC unroll 8
        for (index_t q = 0; q < MB; ++q)
          vstore(St + (l0 + q) * kp + j, vload(St + (l0 + q) * kp + j) + acc[q]);
      }
    }
  }
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
