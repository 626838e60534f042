// Greedy k-means++ seeding on CSR rows: squared distances between two rows by
// direct differences over the union of their stored columns, walked in
// column order (the columns of a row are sorted), so the sum has the dense
// kernels' terms in the dense kernels' order less the shared zeros.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "impl/drive.hpp"
#include "impl/sparse_rows.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

// ||x_a - x_b||^2 of rows a and b of X, differences and sum in U. Branch-free
// merge (the next column of each row compared, an exhausted row's as +inf; the
// value of a row whose column is not next read as 0): the same differences
// (x - 0 = x, 0 - y = -y exactly) added in the same order as a branching walk,
// without its mispredicted branches.
template <typename U, typename T, typename I>
inline U csr_row_sq_distance(const CsrRows<T, I>& X, index_t a, index_t b) {
  index_t p = X.begin(a), q = X.begin(b);
  const index_t pe = X.end(a), qe = X.end(b);
  U s = U(0);
  if (p == pe || q == qe) {  // one row empty: the other's squares in order
    const index_t r0 = p == pe ? q : p, r1 = p == pe ? qe : pe;
    for (index_t r = r0; r < r1; ++r) {
      const U df = p == pe ? U(0) - static_cast<U>(X.val[r]) : static_cast<U>(X.val[r]);
      s += df * df;
    }
    return s;
  }
  constexpr index_t kEnd = std::numeric_limits<index_t>::max();
  while (p < pe || q < qe) {
    const index_t ca = p < pe ? static_cast<index_t>(X.col[p]) : kEnd;
    const index_t cb = q < qe ? static_cast<index_t>(X.col[q]) : kEnd;
    const bool ta = ca <= cb, tb = cb <= ca;
    const U va = static_cast<U>(X.val[std::min(p, pe - 1)]);
    const U vb = static_cast<U>(X.val[std::min(q, qe - 1)]);
    const U df = (ta ? va : U(0)) - (tb ? vb : U(0));
    s += df * df;
    p += ta;
    q += tb;
  }
  return s;
}

// The filter that spares most exact distances (the outputs keep their bits):
// a row's distance matters only through min(D, closest_i), so where a cheap
// lower bound of the exact pass's D already exceeds closest_i the result is
// closest_i and the union walk is skipped. The bound comes from the norm
// expansion in double, Dt = ||x||^2 + ||c||^2 - 2 x.c (x.c by gathering the
// candidates scattered over d; one pass over the row's entries for all of
// them). Error (u = 2^-53, Higham's gamma): ||x||^2, ||c||^2 and x.c summed
// over at most m = m_x + m_c terms are each within gamma_m of the sum of their
// terms' magnitudes (sum |x_l c_l| <= sqrt(xx cc)); the two final additions
// add 2u (xx + cc + 2 x.c); so the real distance of the stored rows is >=
// Dt - 2 (m + 4) u (xx + cc + 2 sqrt(xx cc)) (the 2 covers gamma's 1/(1 - m u)
// and the roundings of this bound). The exact pass sums (x_l - c_l)^2, each
// difference rounded in U, over at most m terms in U (fused or not): its value
// is >= the real distance x (1 - (m + 3) u_U), taken twice again.
template <typename U>
inline bool surely_above(double xx, double cc, double dot, index_t m, double bound) {
  const double u = 1.1102230246251565e-16;
  const double u_sum = static_cast<double>(std::numeric_limits<U>::epsilon()) / 2.0;
  const double spread = xx + cc + 2.0 * std::sqrt(xx * cc);
  const double real_low = (xx + cc - 2.0 * dot) - 2.0 * static_cast<double>(m + 4) * u * spread;
  const double kernel_low = real_low * (1.0 - 2.0 * static_cast<double>(m + 3) * u_sum);
  return real_low > 0.0 && kernel_low > bound;
}

// Candidates scattered for the filter: cd (d, Lp) row-major, Lp = L rounded up
// to the G lanes the dot products take at a time (0 off their entries and in
// the padding), their squared norms in double and their numbers of entries.
template <typename T, typename I, index_t G>
struct ScatteredRows {
  index_t L, Lp;
  std::vector<T> cd;
  std::vector<double> cc;
  std::vector<index_t> m;

  ScatteredRows(const CsrRows<T, I>& X, const std::int64_t* rows, index_t L_)
      : L(L_), Lp((L_ + G - 1) / G * G), cd(X.d * Lp, T(0)), cc(L_, 0.0), m(L_) {
    for (index_t a = 0; a < L; ++a) {
      const index_t e0 = X.begin(rows[a]), e1 = X.end(rows[a]);
      for (index_t p = e0; p < e1; ++p) {
        cd[static_cast<index_t>(X.col[p]) * Lp + a] = X.val[p];
        cc[a] += static_cast<double>(X.val[p]) * static_cast<double>(X.val[p]);
      }
      m[a] = e1 - e0;
    }
  }

  // ||x_i||^2 (returned) and dot[a] = x_i . c_a for a in [0, Lp), in double
  // over x_i's entries, G candidates per sweep with their sums in registers.
  double dots(const CsrRows<T, I>& X, index_t i, double* dot) const {
    const index_t e0 = X.begin(i), e1 = X.end(i);
    double xx = 0.0;
    for (index_t p = e0; p < e1; ++p) xx += static_cast<double>(X.val[p]) * X.val[p];
    for (index_t g = 0; g < Lp; g += G) {
      double acc[G] = {};
      const T* base = cd.data() + g;
      for (index_t p = e0; p < e1; ++p) {
        const double v = static_cast<double>(X.val[p]);
        const T* c = base + static_cast<index_t>(X.col[p]) * Lp;
        for (index_t q = 0; q < G; ++q) acc[q] += v * static_cast<double>(c[q]);
      }
      for (index_t q = 0; q < G; ++q) dot[g + q] = acc[q];
    }
    return xx;
  }
};

// As kmeanspp_candidate_potentials: distances in T, sums in double, per-chunk
// partials over rows in order (chunks fixed by n), merged in chunk order; each
// distance by the union walk unless the filter above proves it above closest_i.
template <typename T>
void csr_kmeanspp_candidate_potentials(const CsrMatrix<T>& Xm, const double* w,
                                       const double* closest, const std::int64_t* cand, index_t L,
                                       double* potentials, int n_threads) {
  const index_t n = Xm.n;
  const index_t n_chunks = std::min(n_tiles_of(n), kMaxChunks);
  std::vector<double> part(n_chunks * L, 0.0);
  const int nt = resolve_threads(n_threads, csr_distance_work(Xm, L));
  with_csr_rows(Xm, [&](const auto& X) {
    using I = std::remove_cv_t<std::remove_pointer_t<decltype(X.col)>>;
    const ScatteredRows<T, I, 4> C(X, cand, L);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (index_t c = 0; c < n_chunks; ++c) {
      const index_t i0 = c * n / n_chunks, i1 = (c + 1) * n / n_chunks;
      double* pc = part.data() + c * L;
      std::vector<double> dot(C.Lp);
      for (index_t i = i0; i < i1; ++i) {
        const double xx = C.dots(X, i, dot.data());
        const index_t mi = X.end(i) - X.begin(i);
        for (index_t a = 0; a < L; ++a) {
          double m = closest[i];
          if (!surely_above<T>(xx, C.cc[a], dot[a], mi + C.m[a], m)) {
            const double dv = static_cast<double>(csr_row_sq_distance<T>(X, i, cand[a]));
            m = std::min(dv, closest[i]);
          }
          pc[a] += w[i] * m;
        }
      }
    }
  });
  std::fill(potentials, potentials + L, 0.0);
  for (index_t c = 0; c < n_chunks; ++c)
    for (index_t a = 0; a < L; ++a) potentials[a] += part[c * L + a];
}

// As kmeanspp_update_closest: the distance by direct differences in double,
// skipped where the filter proves it above closest_i.
template <typename T>
void csr_kmeanspp_update_closest(const CsrMatrix<T>& Xm, std::int64_t center, double* closest,
                                 int n_threads) {
  const int nt = resolve_threads(n_threads, csr_distance_work(Xm, 1));
  with_csr_rows(Xm, [&](const auto& X) {
    using I = std::remove_cv_t<std::remove_pointer_t<decltype(X.col)>>;
    const ScatteredRows<T, I, 1> C(X, &center, 1);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (index_t i = 0; i < X.n; ++i) {
      double dot;
      const double xx = C.dots(X, i, &dot);
      if (!surely_above<double>(xx, C.cc[0], dot, X.end(i) - X.begin(i) + C.m[0], closest[i]))
        closest[i] = std::min(closest[i], csr_row_sq_distance<double>(X, i, center));
    }
  });
}

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
