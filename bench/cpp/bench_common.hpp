// Shared machinery of the google-benchmark microbenchmarks in bench/cpp.
//
// Every benchmark is registered once per (shape, dtype, SIMD level, thread
// count) with a name of the form
//   <kernel>/<dtype>/n:<n>/d:<d>/k:<k>/<simd>/threads:<t>
// and reports throughput counters (all are rates over wall time, because the
// kernels run OpenMP threads that the main thread's CPU time does not see):
//   GFLOP/s  floating-point operations per second / 1e9 (count per kernel in
//            its file's header comment and in bench/README.md),
//   GB/s     bytes of the kernel's inputs read plus outputs written, once each
//            (the compulsory traffic; caches can only make real traffic larger),
//   rows/s   rows of X (or of the score matrix) processed per second.
// The label carries the SIMD level the kernel actually ran at.
//
// Full run of every family, JSON per binary and one Markdown table:
//   python bench/cpp/run_all.py            (see its --help; --sizes tiny for CI)
// One family: build/bench/bench_step --benchmark_filter='f32/.*/threads:2'
//
// Command-line flags of our own (removed before google-benchmark sees argv):
//   --sizes=tiny|default   tiny: a few small shapes, for CI smoke runs (seconds);
//                          default: the sweep documented in bench/README.md.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "softkmeans/choices.hpp"
#include "softkmeans/config.hpp"
#include "softkmeans/simd.hpp"

namespace skbench {

using softkmeans::index_t;

// A problem shape: n rows, d dimensions, k centroids. `param` is a free
// per-family parameter (e.g. the temperature class of entmax benchmarks).
struct Shape {
  index_t n, d, k;
  int param = 0;
};

enum class Sizes { tiny, standard };

inline Sizes& sizes() {
  static Sizes s = Sizes::standard;
  return s;
}

template <typename T>
const char* dtype_name();
template <>
inline const char* dtype_name<float>() {
  return "f32";
}
template <>
inline const char* dtype_name<double>() {
  return "f64";
}

// The thread counts every benchmark is run at (the machine class of
// bench/README.md has 2 cores).
inline std::vector<int> thread_counts() { return {1, 2}; }

// The (n, d, k) shapes of the performance table: d in {2, 16, 64, 256}
// with the k each is paired with there. n is chosen per family so that one
// call is long enough to time and short enough to sweep (see rows_for_work).
inline std::vector<std::pair<index_t, index_t>> table_dk() {
  if (sizes() == Sizes::tiny) return {{2, 8}, {16, 64}};
  return {{2, 8}, {2, 1024}, {16, 64}, {16, 1024}, {64, 256}, {256, 1024}};
}

// Rows such that one call does about `flops` multiply-adds x 2 over (k, d),
// rounded to a power of two and clamped to [lo, hi].
inline index_t rows_for_work(double flops, index_t d, index_t k, index_t lo, index_t hi) {
  double want = flops / (2.0 * static_cast<double>(d) * static_cast<double>(k));
  index_t n = lo;
  while (n < hi && static_cast<double>(2 * n) <= want) n *= 2;
  return n;
}

// Deterministic data: X ~ N(0, 1) per coordinate around k_true blob centres
// spread N(0, spread^2); C = k rows of X picked with a fixed seed (as a
// k-means++ or random init would). Seeds depend only on the shape.
template <typename T>
struct Problem {
  index_t n = 0, d = 0, k = 0;
  std::vector<T> X, C;
};

template <typename T>
Problem<T> make_problem(index_t n, index_t d, index_t k, std::uint64_t seed = 12345) {
  Problem<T> p;
  p.n = n;
  p.d = d;
  p.k = k;
  std::mt19937_64 rng(seed ^ (static_cast<std::uint64_t>(n) * 0x9E3779B97F4A7C15ULL) ^
                      (static_cast<std::uint64_t>(d) << 32) ^ static_cast<std::uint64_t>(k));
  std::normal_distribution<double> gauss(0.0, 1.0);
  const index_t blobs = k;
  std::vector<double> centres(static_cast<size_t>(blobs * d));
  for (auto& c : centres) c = 4.0 * gauss(rng);
  p.X.resize(static_cast<size_t>(n * d));
  std::uniform_int_distribution<index_t> pick_blob(0, blobs - 1);
  for (index_t i = 0; i < n; ++i) {
    const double* c = centres.data() + pick_blob(rng) * d;
    for (index_t l = 0; l < d; ++l)
      p.X[static_cast<size_t>(i * d + l)] = static_cast<T>(c[l] + gauss(rng));
  }
  // Distinct rows (a partial Fisher-Yates shuffle) when k <= n: equal centroids
  // would make every margin-based temperature zero.
  p.C.resize(static_cast<size_t>(k * d));
  std::vector<index_t> order(static_cast<size_t>(n));
  for (index_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (index_t j = 0; j < k; ++j) {
    const index_t jj = j % n;
    std::uniform_int_distribution<index_t> pick(jj, n - 1);
    std::swap(order[static_cast<size_t>(jj)], order[static_cast<size_t>(pick(rng))]);
    const index_t i = order[static_cast<size_t>(jj)];
    for (index_t l = 0; l < d; ++l)
      p.C[static_cast<size_t>(j * d + l)] = p.X[static_cast<size_t>(i * d + l)];
  }
  return p;
}

// google-benchmark calls a benchmark function several times while it sizes
// the iteration count; building the data once per shape (registration order
// keeps equal shapes adjacent) keeps the sweep fast.
template <typename T>
const Problem<T>& cached_problem(index_t n, index_t d, index_t k) {
  static Problem<T> p;
  if (p.n != n || p.d != d || p.k != k) p = make_problem<T>(n, d, k);
  return p;
}

// Selects the SIMD level for this run; false when the CPU cannot run it (the
// benchmark is then skipped with a message instead of silently running
// another level).
inline bool select_level(benchmark::State& state, softkmeans::SimdLevel level) {
  if (!softkmeans::set_simd_level(level)) {
    state.SkipWithError("SIMD level not available on this CPU/build");
    return false;
  }
  return true;
}

// Sets the standard counters. Per-call counts; google-benchmark multiplies by
// the iteration count and divides by the wall time.
inline void set_counters(benchmark::State& state, double flops, double bytes, double rows) {
  using benchmark::Counter;
  state.counters["GFLOP/s"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = Counter(bytes * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = Counter(rows, Counter::kIsIterationInvariantRate);
  state.SetLabel(softkmeans::simd_level_name(softkmeans::selected_simd_level()));
}

inline std::string shape_name(const char* kernel, const char* dtype, const Shape& s,
                              const char* extra = nullptr) {
  std::string name = std::string(kernel) + "/" + dtype + "/n:" + std::to_string(s.n) +
                     "/d:" + std::to_string(s.d) + "/k:" + std::to_string(s.k);
  if (extra != nullptr) name += std::string("/") + extra;
  return name;
}

// Registers `fn(state, shape, n_threads)` for every SIMD level the CPU and
// build offer and every thread count. Real time, because the work runs on
// OpenMP threads.
template <typename Fn>
void register_sweep(const std::string& base, const Shape& shape, Fn fn) {
  for (softkmeans::SimdLevel level : softkmeans::available_simd_levels()) {
    for (int t : thread_counts()) {
      const std::string name =
          base + "/" + softkmeans::simd_level_name(level) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& state) {
                                     if (!select_level(state, level)) return;
                                     fn(state, shape, t);
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

// Strips our own flags from argv, then runs google-benchmark. `register_all`
// is called after the flags are known.
template <typename Register>
int run_main(int argc, char** argv, Register register_all) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sizes=", 8) == 0) {
      const char* v = argv[i] + 8;
      if (std::strcmp(v, "tiny") == 0) {
        sizes() = Sizes::tiny;
      } else if (std::strcmp(v, "default") == 0) {
        sizes() = Sizes::standard;
      } else {
        std::fprintf(stderr, "unknown --sizes=%s (expected tiny or default)\n", v);
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  register_all();
  benchmark::AddCustomContext("softkmeans.simd_selected_at_start",
                              softkmeans::simd_level_name(softkmeans::selected_simd_level()));
  // The kernel choices made for this CPU, and why (SOFTKMEANS_KERNEL_CHOICES
  // runs a variant: softkmeans/choices.hpp).
  for (const auto& c : softkmeans::kernel_choice_reports())
    benchmark::AddCustomContext("softkmeans.kernel_choice." + c.name,
                                c.value + " (" + c.source + ")");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace skbench
