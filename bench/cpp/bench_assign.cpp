// Hard assignment: softkmeans::assign, labels_i = argmin_j D_ij and
// min_j D_ij, without materializing D.
//
// Counts per call (s = sizeof(T)):
//   flops = 2 n k d            the distance cross term (the argmin's k compares
//                              per row and the norms are not counted);
//   bytes = s (n d + k d + n) + 8 n   X and C read, min distances and int64
//                              labels written;
//   rows  = n.
// margins: Delta_i = D_i(2) - D_i(1), the same pass keeping the two smallest.
//   flops = 2 n k d; bytes = s (n d + k d + n); rows = n.
// Shapes: the (d, k) table at about 1 GFLOP per call, plus an n sweep
// at (d, k) = (16, 64).
#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;

template <typename T>
void bm_assign(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  std::vector<std::int64_t> labels(static_cast<size_t>(s.n));
  std::vector<T> min_sq(static_cast<size_t>(s.n));
  for (auto _ : state) {
    softkmeans::kernels<T>().assign(p.X.data(), s.n, s.d, p.C.data(), s.k, labels.data(),
                                    min_sq.data(), n_threads);
    benchmark::DoNotOptimize(labels.data());
    benchmark::DoNotOptimize(min_sq.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 2.0 * n * k * d, sizeof(T) * (n * d + k * d + n) + 8.0 * n, n);
}

template <typename T>
void bm_margins(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  std::vector<T> out(static_cast<size_t>(s.n));
  for (auto _ : state) {
    softkmeans::kernels<T>().margins(p.X.data(), s.n, s.d, p.C.data(), s.k, out.data(), n_threads);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 2.0 * n * k * d, sizeof(T) * (n * d + k * d + n), n);
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  for (auto [d, k] : skbench::table_dk())
    out.push_back({tiny ? 2048 : skbench::rows_for_work(1e9, d, k, 1024, index_t{1} << 20), d, k});
  if (!tiny)
    for (index_t n : {index_t{1} << 10, index_t{1} << 14, index_t{1} << 18})
      out.push_back({n, 16, 64});
  return out;
}

void register_all() {
  for (const Shape& s : shapes()) {
    skbench::register_sweep(skbench::shape_name("assign", "f32", s), s, bm_assign<float>);
    skbench::register_sweep(skbench::shape_name("assign", "f64", s), s, bm_assign<double>);
    skbench::register_sweep(skbench::shape_name("margins", "f32", s), s, bm_margins<float>);
    skbench::register_sweep(skbench::shape_name("margins", "f64", s), s, bm_margins<double>);
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
