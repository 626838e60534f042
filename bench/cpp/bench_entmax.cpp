// entmax15 rows: softkmeans::entmax15 on an (n, k) score matrix Z.
//
// The support size is what drives the cost (SPEC.md: only candidates with
// z_j > max(z) - 2 are sorted), so each k runs at two temperatures:
//   low:  Z ~ N(0, 100^2): one or two candidates per row (entmax15 ~ argmax);
//   high: Z ~ N(0, 0.5^2): most of the row is a candidate (k log k sort).
// Counts per call:
//   flops = 3 n k   nominal: per entry the halving, the shift by the row max
//                   and the candidate test (the candidates' sort and the squares
//                   on the support are not counted: compare rows/s across
//                   temperatures instead);
//   bytes = 2 s n k Z read, R written;
//   rows  = n; entries/s = n k.
// n is chosen so that Z has 2^22 entries (tiny: 2^12 rows x k).
#include <random>
#include <vector>

#include "bench_common.hpp"
#include "softkmeans/kernels.hpp"

namespace {

using skbench::index_t;
using skbench::Shape;

enum Temperature : int { low = 0, high = 1 };

template <typename T>
const std::vector<T>& cached_scores(index_t n, index_t k, int temperature) {
  static std::vector<T> Z;
  static index_t last_n = -1, last_k = -1;
  static int last_t = -1;
  if (n != last_n || k != last_k || temperature != last_t) {
    std::mt19937_64 rng(777 + static_cast<std::uint64_t>(k) * 31 + temperature);
    std::normal_distribution<double> gauss(0.0, temperature == low ? 100.0 : 0.5);
    Z.resize(static_cast<size_t>(n * k));
    for (auto& z : Z) z = static_cast<T>(gauss(rng));
    last_n = n;
    last_k = k;
    last_t = temperature;
  }
  return Z;
}

template <typename T>
void bm_entmax15(benchmark::State& state, const Shape& s, int n_threads) {
  const auto& Z = cached_scores<T>(s.n, s.k, s.param);
  std::vector<T> R(static_cast<size_t>(s.n * s.k));
  for (auto _ : state) {
    softkmeans::kernels<T>().entmax15(Z.data(), s.n, s.k, R.data(), n_threads);
    benchmark::DoNotOptimize(R.data());
    benchmark::ClobberMemory();
  }
  const double n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  skbench::set_counters(state, 3.0 * n * k, 2.0 * sizeof(T) * n * k, n);
  state.counters["entries/s"] =
      benchmark::Counter(n * k, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const bool tiny = skbench::sizes() == skbench::Sizes::tiny;
  const std::vector<index_t> ks =
      tiny ? std::vector<index_t>{8, 64} : std::vector<index_t>{8, 64, 1024};
  for (index_t k : ks) {
    const index_t n = tiny ? 4096 : (index_t{1} << 22) / k;
    for (int t : {low, high}) {
      const Shape s{n, 1, k, t};
      const char* temp = t == low ? "support:low" : "support:high";
      std::string base_f =
          "entmax15/f32/n:" + std::to_string(n) + "/k:" + std::to_string(k) + "/" + temp;
      std::string base_d =
          "entmax15/f64/n:" + std::to_string(n) + "/k:" + std::to_string(k) + "/" + temp;
      skbench::register_sweep(base_f, s, bm_entmax15<float>);
      skbench::register_sweep(base_d, s, bm_entmax15<double>);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return skbench::run_main(argc, argv, register_all); }
