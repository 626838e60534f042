// The fused centroid step, one pass over X per call (no (n, k) array), per
// kind, and the gradients that share its pass.
//
//   block_stats(kind), the pass behind centroid_step: W, N, S, objective, J
//   and Delta_min (the step S_j / N_j is formed in Python, O(k d)).
//     hard:     flops = 2 n k d + 2 n d   (distances; w x added to one S_j)
//     softmax:  flops = 4 n k d           (distances; R^T X as a dense product:
//               the kernel skips responsibilities that underflow to exactly 0,
//               so at low temperature its effective rate exceeds the real one)
//     entmax15: flops = 2 n k d + 2 n d   (at sigma = sqrt(Delta_min)/2 every
//               row is one-hot, so S gets one update per row, as in hard)
//     bytes = s (n d + 2 k d) + 8 n + 9 k  X, w read; C read, N, S written.
//   block_stats(softmax) with grad_X (n, d), the pass behind gradients.
//     flops = 6 n k d (distances, R^T X, and R C for grad_X);
//     bytes = s (2 n d + 2 k d) + 8 n.
// sigma: softmax sigma^2 = lambda_max / 10; entmax15 sigma = sqrt(Delta_min)/2
// (bench_temperature.hpp). Shapes: the (d, k) table at ~1 GFLOP of
// distances per call, plus an n sweep at (16, 64) for the steps.
#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "bench_temperature.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;
using softkmeans::Kind;

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::hard:
      return "hard";
    case Kind::softmax:
      return "softmax";
    default:
      return "entmax15";
  }
}

template <typename T>
void bm_step(benchmark::State& state, const Shape& s, int n_threads) {
  const Kind kind = static_cast<Kind>(s.param);
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  const double sigma = kind == Kind::softmax    ? skbench::softmax_sigma(p)
                       : kind == Kind::entmax15 ? skbench::recovery_sigma(p)
                                                : 1.0;
  const double* w = skbench::unit_weights(s.n);
  std::vector<double> N(static_cast<size_t>(s.k)), S(static_cast<size_t>(s.k * s.d));
  double W = 0.0, obj = 0.0, J = 0.0, mm = 0.0;
  for (auto _ : state) {
    softkmeans::kernels<T>().block_stats(p.X.data(), s.n, s.d, p.C.data(), s.k, kind, sigma, w, &W,
                                         N.data(), S.data(), &obj, &J, &mm, nullptr, nullptr,
                                         n_threads);
    benchmark::DoNotOptimize(S.data());
    benchmark::DoNotOptimize(obj);
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  const double flops = kind == Kind::softmax ? 4.0 * n * k * d : 2.0 * n * k * d + 2.0 * n * d;
  skbench::set_counters(state, flops, sizeof(T) * (n * d + 2.0 * k * d) + 8.0 * n + 9.0 * k, n);
}

template <typename T>
void bm_gradients(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  const double sigma = skbench::softmax_sigma(p);
  const double* w = skbench::unit_weights(s.n);
  std::vector<T> gX(static_cast<size_t>(s.n * s.d));
  std::vector<double> N(static_cast<size_t>(s.k)), S(static_cast<size_t>(s.k * s.d));
  double W = 0.0, obj = 0.0, J = 0.0, mm = 0.0;
  for (auto _ : state) {
    softkmeans::kernels<T>().block_stats(p.X.data(), s.n, s.d, p.C.data(), s.k, Kind::softmax,
                                         sigma, w, &W, N.data(), S.data(), &obj, &J, &mm, nullptr,
                                         gX.data(), n_threads);
    benchmark::DoNotOptimize(gX.data());
    benchmark::DoNotOptimize(S.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 6.0 * n * k * d, sizeof(T) * (2.0 * n * d + 2.0 * k * d) + 8.0 * n,
                        n);
}

void register_all() {
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  std::vector<Shape> shapes;
  for (auto [d, k] : skbench::table_dk())
    shapes.push_back(
        {tiny ? 2048 : skbench::rows_for_work(1e9, d, k, 1024, index_t{1} << 20), d, k});
  if (!tiny)
    for (index_t n : {index_t{1} << 14, index_t{1} << 18}) shapes.push_back({n, 16, 64});
  for (const Shape& base : shapes) {
    for (Kind kind : {Kind::hard, Kind::softmax, Kind::entmax15}) {
      Shape s = base;
      s.param = static_cast<int>(kind);
      const std::string op = std::string("centroid_step_") + kind_name(kind);
      skbench::register_sweep(skbench::shape_name(op.c_str(), "f32", s), s, bm_step<float>);
      skbench::register_sweep(skbench::shape_name(op.c_str(), "f64", s), s, bm_step<double>);
    }
  }
  for (auto [d, k] : skbench::table_dk()) {
    const Shape s{tiny ? 2048 : skbench::rows_for_work(0.5e9, d, k, 1024, index_t{1} << 20), d, k};
    skbench::register_sweep(skbench::shape_name("gradients_softmax", "f32", s), s,
                            bm_gradients<float>);
    skbench::register_sweep(skbench::shape_name("gradients_softmax", "f64", s), s,
                            bm_gradients<double>);
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
