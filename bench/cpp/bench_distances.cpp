// Distance tile: softkmeans::sq_distances, D (n, k) = ||x_i - c_j||^2.
//
// Counts per call (T = float or double, s = sizeof(T)):
//   flops = 2 n k d   the cross term X C^T, one multiply and one add per
//                     (i, j, l); the norms (2 (n + k) d) and the combination
//                     ||x||^2 + ||c||^2 - 2 x.c (3 n k) are not counted, so
//                     GFLOP/s compares directly with a GEMM rate;
//   bytes = s (n d + k d + n k)   X and C read once, D written once;
//   rows  = n.
// Shapes: the (d, k) table at a size where one call does about 0.5
// GFLOP (capped so D stays <= 2^23 entries), plus an n sweep at (d, k) = (16, 64)
// that shows the step from cache-resident to memory-bound output.
#include <vector>

#include "bench_common.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;

template <typename T>
void bm_sq_distances(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& p = skbench::cached_problem<T>(s.n, s.d, s.k);
  std::vector<T> D(static_cast<size_t>(s.n * s.k));
  for (auto _ : state) {
    softkmeans::kernels<T>().sq_distances(p.X.data(), s.n, s.d, p.C.data(), s.k, D.data(),
                                          n_threads);
    benchmark::DoNotOptimize(D.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), d = static_cast<double>(s.d),
               k = static_cast<double>(s.k);
  skbench::set_counters(state, 2.0 * n * k * d, sizeof(T) * (n * d + k * d + n * k), n);
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  for (auto [d, k] : skbench::table_dk()) {
    index_t n = tiny ? 2048 : skbench::rows_for_work(0.5e9, d, k, 1024, index_t{1} << 20);
    while (n * k > (index_t{1} << 23)) n /= 2;
    out.push_back({n, d, k});
  }
  if (!tiny)
    for (index_t n : {index_t{1} << 10, index_t{1} << 14, index_t{1} << 18})
      out.push_back({n, 16, 64});
  return out;
}

void register_all() {
  for (const Shape& s : shapes()) {
    skbench::register_sweep(skbench::shape_name("sq_distances", "f32", s), s,
                            bm_sq_distances<float>);
    skbench::register_sweep(skbench::shape_name("sq_distances", "f64", s), s,
                            bm_sq_distances<double>);
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
