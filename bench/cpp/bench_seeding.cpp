// Greedy k-means++ seeding kernels (scikit-learn's _kmeans_plusplus scheme):
//
//   kmeanspp_update_closest: closest_i = min(closest_i, ||x_i - x_center||^2),
//     after each chosen center.
//     flops = 3 n d (difference, square, add per coordinate; the min per row
//             is not counted);
//     bytes = s n d + 16 n   X read; closest (double) read and written.
//   kmeanspp_candidate_potentials: for L candidate rows, the potential
//     sum_i w_i min(closest_i, ||x_i - x_cand||^2), in one fused pass.
//     flops = 3 n d L + 2 n L;
//     bytes = s n d + 16 n + L (s d + 8)   X, w, closest read once; the
//             candidates' rows read; potentials written.
// L = 2 + floor(log k) as scikit-learn's default, at k in {8, 64, 1024}.
// A full seeding of k centers costs k update_closest calls and k - 1
// candidate_potentials calls (plus the sampling, done in Python).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "bench_common.hpp"
#include "bench_temperature.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;

// closest_i after one center (row 0): a realistic, nonzero starting state.
template <typename T>
std::vector<double> initial_closest(const skbench::Problem<T>& p) {
  std::vector<double> closest(static_cast<size_t>(p.n), std::numeric_limits<double>::infinity());
  softkmeans::kernels<T>().kmeanspp_update_closest(p.X.data(), p.n, p.d, 0, closest.data(), 0);
  return closest;
}

template <typename T>
void bm_update_closest(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, 1);
  std::vector<double> closest = initial_closest(p);
  std::int64_t center = 1;
  for (auto _ : state) {
    softkmeans::kernels<T>().kmeanspp_update_closest(p.X.data(), s.n, s.d, center, closest.data(),
                                                     n_threads);
    benchmark::DoNotOptimize(closest.data());
    benchmark::ClobberMemory();
    center = (center * 7919 + 1) % s.n;
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d);
  skbench::set_counters(state, 3.0 * n * d, sizeof(T) * n * d + 16.0 * n, n);
}

template <typename T>
void bm_candidate_potentials(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, 1);
  const std::vector<double> closest = initial_closest(p);
  const double* w = skbench::unit_weights(s.n);
  const index_t L = 2 + static_cast<index_t>(std::log(static_cast<double>(s.k)));
  std::vector<std::int64_t> cand(static_cast<size_t>(L));
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<std::int64_t> pick(0, s.n - 1);
  for (auto& c : cand) c = pick(rng);
  std::vector<double> pot(static_cast<size_t>(L));
  for (auto _ : state) {
    softkmeans::kernels<T>().kmeanspp_candidate_potentials(p.X.data(), s.n, s.d, w, closest.data(),
                                                           cand.data(), L, pot.data(), nullptr,
                                                           n_threads);
    benchmark::DoNotOptimize(pot.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               l = static_cast<double>(L);
  skbench::set_counters(state, 3.0 * n * d * l + 2.0 * n * l,
                        sizeof(T) * n * d + 16.0 * n + l * (sizeof(T) * d + 8.0), n);
  state.counters["candidates"] = l;
}

void register_all() {
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  const std::vector<index_t> ds =
      tiny ? std::vector<index_t>{2, 16} : std::vector<index_t>{2, 16, 64, 256};
  const std::vector<index_t> ks =
      tiny ? std::vector<index_t>{8} : std::vector<index_t>{8, 64, 1024};
  for (index_t d : ds) {
    // About 2^24 coordinates of X (64 MB float32): larger than the last-level cache.
    const index_t n = tiny ? 4096 : (index_t{1} << 24) / d;
    const Shape u{n, d, 1};
    skbench::register_sweep(skbench::shape_name("kmeanspp_update_closest", "f32", u), u,
                            bm_update_closest<float>);
    skbench::register_sweep(skbench::shape_name("kmeanspp_update_closest", "f64", u), u,
                            bm_update_closest<double>);
    for (index_t k : ks) {
      const Shape c{n, d, k};
      skbench::register_sweep(skbench::shape_name("kmeanspp_candidate_potentials", "f32", c), c,
                              bm_candidate_potentials<float>);
      skbench::register_sweep(skbench::shape_name("kmeanspp_candidate_potentials", "f64", c), c,
                              bm_candidate_potentials<double>);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
