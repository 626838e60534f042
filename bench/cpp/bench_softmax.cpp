// Softmax responsibilities (log-sum-exp rows) and the fused softmax objective.
//
//   responsibilities(kind=softmax): R (n, k) = softmax(-D / 2 sigma^2) rows,
//     written out because the caller asked for them.
//     flops = 2 n k d (distance cross term; the n k exponentials are counted
//             separately as entries/s = n k);
//     bytes = s (n d + k d + n k)   X, C read; R written.
//   objective(kind=softmax): F_sigma without any (n, k) array.
//     flops = 2 n k d; bytes = s (n d + k d) + 8 n (X, C, weights read).
// sigma^2 = lambda_max / 10 (bench_temperature.hpp). Shapes as bench_distances
// (R capped at 2^23 entries) and bench_assign (objective, ~1 GFLOP per call).
#include <vector>

#include "bench_common.hpp"
#include "bench_temperature.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;
using softkmeans::Kind;

template <typename T>
void bm_responsibilities(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  const double sigma = skbench::softmax_sigma(p);
  std::vector<T> R(static_cast<size_t>(s.n * s.k));
  for (auto _ : state) {
    softkmeans::kernels<T>().responsibilities(p.X.data(), s.n, s.d, p.C.data(), s.k, Kind::softmax,
                                              sigma, R.data(), n_threads);
    benchmark::DoNotOptimize(R.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 2.0 * n * k * d, sizeof(T) * (n * d + k * d + n * k), n);
  state.counters["entries/s"] =
      benchmark::Counter(n * k, benchmark::Counter::kIsIterationInvariantRate);
}

template <typename T>
void bm_objective(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  const double sigma = skbench::softmax_sigma(p);
  const double* w = skbench::unit_weights(s.n);
  double W = 0.0, obj = 0.0, J = 0.0, mm = 0.0;
  for (auto _ : state) {
    // The objective alone: block_stats without N, S, labels or grad_X.
    softkmeans::kernels<T>().block_stats(p.X.data(), s.n, s.d, p.C.data(), s.k, Kind::softmax,
                                         sigma, w, &W, nullptr, nullptr, &obj, &J, &mm, nullptr,
                                         nullptr, n_threads);
    benchmark::DoNotOptimize(obj);
    benchmark::DoNotOptimize(J);
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 2.0 * n * k * d, sizeof(T) * (n * d + k * d) + 8.0 * n, n);
}

void register_all() {
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  for (auto [d, k] : skbench::table_dk()) {
    index_t n = tiny ? 2048 : skbench::rows_for_work(0.5e9, d, k, 1024, index_t{1} << 20);
    while (n * k > (index_t{1} << 23)) n /= 2;
    const Shape r{n, d, k};
    skbench::register_sweep(skbench::shape_name("responsibilities_softmax", "f32", r), r,
                            bm_responsibilities<float>);
    skbench::register_sweep(skbench::shape_name("responsibilities_softmax", "f64", r), r,
                            bm_responsibilities<double>);
    const Shape o{tiny ? 2048 : skbench::rows_for_work(1e9, d, k, 1024, index_t{1} << 20), d, k};
    skbench::register_sweep(skbench::shape_name("objective_softmax", "f32", o), o,
                            bm_objective<float>);
    skbench::register_sweep(skbench::shape_name("objective_softmax", "f64", o), o,
                            bm_objective<double>);
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
