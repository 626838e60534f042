// Temperatures of the soft benchmarks, computed with the core's own kernels:
//   softmax:  sigma^2 = lambda_max / 10 (the operating point; lambda_max
//             is the largest eigenvalue of the population covariance, the
//             critical temperature of SPEC.md);
//   entmax15: sigma = sqrt(Delta_min) / 2, the exact-recovery temperature at
//             which every entmax15 row is one-hot (the step equals Lloyd's).
// Both are cached per problem, like the data.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "bench_common.hpp"
#include "softkmeans/kernels.hpp"

namespace skbench {

// Unit sample weights of length n, shared by every benchmark that takes w.
inline const double* unit_weights(index_t n) {
  static std::vector<double> w;
  if (static_cast<index_t>(w.size()) < n) w.assign(static_cast<size_t>(n), 1.0);
  return w.data();
}

template <typename T>
double lambda_max(const Problem<T>& p) {
  static const Problem<T>* last = nullptr;
  static index_t last_n = -1, last_d = -1, last_k = -1;
  static double value = 0.0;
  if (last == &p && last_n == p.n && last_d == p.d && last_k == p.k) return value;
  const index_t d = p.d;
  std::vector<double> mean(static_cast<size_t>(d)), cov(static_cast<size_t>(d * d));
  softkmeans::kernels<T>().weighted_covariance(p.X.data(), p.n, d, unit_weights(p.n), mean.data(),
                                               cov.data(), 0);
  // Power iteration: the covariance is positive semi-definite, so it converges
  // to the largest eigenvalue; 200 steps are plenty for a benchmark's sigma.
  std::vector<double> v(static_cast<size_t>(d), 1.0), u(static_cast<size_t>(d));
  double lam = 0.0;
  for (int it = 0; it < 200; ++it) {
    double norm = 0.0;
    for (index_t a = 0; a < d; ++a) {
      double s = 0.0;
      for (index_t b = 0; b < d; ++b) s += cov[a * d + b] * v[b];
      u[a] = s;
      norm += s * s;
    }
    norm = std::sqrt(norm);
    if (norm == 0.0) break;
    for (index_t a = 0; a < d; ++a) v[a] = u[a] / norm;
    lam = norm;
  }
  last = &p;
  last_n = p.n;
  last_d = p.d;
  last_k = p.k;
  value = lam;
  return value;
}

template <typename T>
double softmax_sigma(const Problem<T>& p) {
  return std::sqrt(lambda_max(p) / 10.0);
}

template <typename T>
double recovery_sigma(const Problem<T>& p) {
  static const Problem<T>* last = nullptr;
  static index_t last_n = -1, last_d = -1, last_k = -1;
  static double value = 0.0;
  if (last == &p && last_n == p.n && last_d == p.d && last_k == p.k) return value;
  std::vector<T> m(static_cast<size_t>(p.n));
  softkmeans::kernels<T>().margins(p.X.data(), p.n, p.d, p.C.data(), p.k, m.data(), 0);
  double dmin = std::numeric_limits<double>::infinity();
  for (T v : m) dmin = std::min(dmin, static_cast<double>(v));
  // A zero margin (two equal centroids) would give sigma = 0; fall back to a
  // tiny positive width, which is still the hard limit.
  value = std::max(std::sqrt(std::max(dmin, 0.0)) / 2.0, 1e-6 * std::sqrt(lambda_max(p)));
  last = &p;
  last_n = p.n;
  last_d = p.d;
  last_k = p.k;
  return value;
}

}  // namespace skbench
