// SIMD level detection and selection, and the public kernel entry points that
// forward to the selected level's table.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "kernel_table.hpp"
#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"

namespace softkmeans {
namespace {

struct Tables {
  KernelTable<float> f[3];
  KernelTable<double> d[3];
  bool available[3] = {true, false, false};
  Tables() {
    fill_kernel_tables_scalar(&f[0], &d[0]);
#if defined(SOFTKMEANS_HAVE_AVX2) && (defined(__x86_64__) || defined(_M_X64))
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      fill_kernel_tables_avx2(&f[1], &d[1]);
      available[1] = true;
    }
#endif
#if defined(SOFTKMEANS_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      fill_kernel_tables_avx512(&f[2], &d[2]);
      available[2] = true;
    }
#endif
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

int best_level() {
  const Tables& t = tables();
  for (int l = 2; l >= 0; --l)
    if (t.available[l]) return l;
  return 0;
}

std::atomic<int>& current_level() {
  static std::atomic<int> level{[] {
    int chosen = best_level();
    // A forced level above what the CPU supports is ignored, not obeyed:
    // running AVX-512 code on a CPU without it would crash the process.
    if (const char* env = std::getenv("SOFTKMEANS_SIMD")) {
      SimdLevel forced;
      if (parse_simd_level(env, &forced) && tables().available[static_cast<int>(forced)])
        chosen = static_cast<int>(forced);
    }
    return chosen;
  }()};
  return level;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512:
      return "avx512";
    case SimdLevel::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

bool parse_simd_level(const std::string& name, SimdLevel* level) {
  if (name == "scalar") *level = SimdLevel::scalar;
  else if (name == "avx2") *level = SimdLevel::avx2;
  else if (name == "avx512") *level = SimdLevel::avx512;
  else return false;
  return true;
}

std::vector<SimdLevel> available_simd_levels() {
  std::vector<SimdLevel> out;
  for (int l = 0; l < 3; ++l)
    if (tables().available[l]) out.push_back(static_cast<SimdLevel>(l));
  return out;
}

SimdLevel selected_simd_level() { return static_cast<SimdLevel>(current_level().load()); }

bool set_simd_level(SimdLevel level) {
  if (!tables().available[static_cast<int>(level)]) return false;
  current_level().store(static_cast<int>(level));
  return true;
}

template <>
const KernelTable<float>& active_kernels<float>() {
  return tables().f[current_level().load()];
}
template <>
const KernelTable<double>& active_kernels<double>() {
  return tables().d[current_level().load()];
}

namespace {
thread_local const std::atomic<int>* t_cancel_flag = nullptr;
}  // namespace

void set_thread_cancel_flag(const std::atomic<int>* flag) { t_cancel_flag = flag; }
const std::atomic<int>* thread_cancel_flag() { return t_cancel_flag; }

int resolve_threads(int n_threads) { return n_threads > 0 ? n_threads : omp_get_max_threads(); }

template <typename T>
void sq_distances(const T* X, index_t n, index_t d, const T* C, index_t k, T* D, int n_threads) {
  active_kernels<T>().sq_distances(X, n, d, C, k, D, resolve_threads(n_threads));
}

template <typename T>
void assign(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
            T* min_sq_dist, int n_threads) {
  active_kernels<T>().assign(X, n, d, C, k, labels, min_sq_dist, resolve_threads(n_threads));
}

template <typename T>
void margins(const T* X, index_t n, index_t d, const T* C, index_t k, T* out, int n_threads) {
  active_kernels<T>().margins(X, n, d, C, k, out, resolve_threads(n_threads));
}

template <typename T>
void entmax15(const T* Z, index_t n, index_t k, T* R, int n_threads) {
  active_kernels<T>().entmax15(Z, n, k, R, resolve_threads(n_threads));
}

template <typename T>
void responsibilities(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind,
                      double sigma, T* R, int n_threads) {
  active_kernels<T>().responsibilities(X, n, d, C, k, kind, sigma, R, resolve_threads(n_threads));
}

template <typename T>
void block_stats(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind, double sigma,
                 const double* w, double* W, double* N, double* S, double* objective,
                 double* distortion, double* min_margin, std::int64_t* labels, T* grad_X,
                 int n_threads) {
  active_kernels<T>().stats(X, n, d, C, k, kind, sigma, w, W, N, S, objective, distortion,
                            min_margin, labels, grad_X, resolve_threads(n_threads));
}

template <typename T>
void weighted_covariance(const T* X, index_t n, index_t d, const double* w, double* mean,
                         double* cov, int n_threads) {
  active_kernels<T>().weighted_covariance(X, n, d, w, mean, cov, resolve_threads(n_threads));
}

template <typename T>
void kmeanspp_candidate_potentials(const T* X, index_t n, index_t d, const double* w,
                                   const double* closest, const std::int64_t* cand, index_t L,
                                   double* potentials, int n_threads) {
  active_kernels<T>().kmeanspp_candidate_potentials(X, n, d, w, closest, cand, L, potentials,
                                                    resolve_threads(n_threads));
}

template <typename T>
void kmeanspp_update_closest(const T* X, index_t n, index_t d, std::int64_t center,
                             double* closest, int n_threads) {
  active_kernels<T>().kmeanspp_update_closest(X, n, d, center, closest,
                                              resolve_threads(n_threads));
}

#define SOFTKMEANS_INSTANTIATE(T)                                                              \
  template void sq_distances<T>(const T*, index_t, index_t, const T*, index_t, T*, int);      \
  template void assign<T>(const T*, index_t, index_t, const T*, index_t, std::int64_t*, T*,   \
                          int);                                                                \
  template void margins<T>(const T*, index_t, index_t, const T*, index_t, T*, int);           \
  template void entmax15<T>(const T*, index_t, index_t, T*, int);                              \
  template void responsibilities<T>(const T*, index_t, index_t, const T*, index_t, Kind,      \
                                    double, T*, int);                                          \
  template void block_stats<T>(const T*, index_t, index_t, const T*, index_t, Kind, double,     \
                               const double*, double*, double*, double*, double*, double*,     \
                               double*, std::int64_t*, T*, int);                               \
  template void weighted_covariance<T>(const T*, index_t, index_t, const double*, double*,    \
                                       double*, int);                                          \
  template void kmeanspp_candidate_potentials<T>(const T*, index_t, index_t, const double*,   \
                                                 const double*, const std::int64_t*, index_t, \
                                                 double*, int);                                \
  template void kmeanspp_update_closest<T>(const T*, index_t, index_t, std::int64_t, double*, \
                                           int);

SOFTKMEANS_INSTANTIATE(float)
SOFTKMEANS_INSTANTIATE(double)
#undef SOFTKMEANS_INSTANTIATE

}  // namespace softkmeans
