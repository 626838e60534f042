// The probe of the kernel choices the table of measured CPUs does not make
// (choices_probe.hpp): each variant timed on the running CPU, one thread, on
// clustered data (blobs, as bench/bf16.py's), the variants interleaved and
// each taken at its best of three; about 20-60 ms in all.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "choices_probe.hpp"

namespace softkmeans {
namespace {

struct Problem {
  index_t n, d, k;
  std::vector<float> X, C;
  std::vector<std::int64_t> labels;
  std::vector<float> dist;
};

// k centroids of spread 4, n rows around them (noise 0.25), by a fixed LCG.
Problem blobs(index_t n, index_t d, index_t k) {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto uniform = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state >> 40) * 0x1p-24f - 0.5f;
  };
  Problem p{n, d, k, std::vector<float>(n * d), std::vector<float>(k * d),
            std::vector<std::int64_t>(n), std::vector<float>(n)};
  for (float& c : p.C) c = 8.0f * uniform();
  for (index_t i = 0; i < n; ++i)
    for (index_t l = 0; l < d; ++l) p.X[i * d + l] = p.C[(i % k) * d + l] + 0.5f * uniform();
  return p;
}

// Seconds of one assign of p by table t with the variant spec set.
double seconds(const Kernels<float>& t, Problem& p, const std::string& spec) {
  set_probe_choice(spec);
  const auto start = std::chrono::steady_clock::now();
  t.assign(p.X.data(), p.n, p.d, p.C.data(), p.k, p.labels.data(), p.dist.data(), 1);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The fastest of the variants (override specs) by their best of three runs
// (after one warm-up each); the first wins unless another is 3% faster.
std::string fastest(const Kernels<float>& t, Problem p, const std::vector<std::string>& variants) {
  std::vector<double> best(variants.size(), 1e300);
  for (int round = 0; round < 4; ++round)
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const double s = seconds(t, p, variants[v]);
      if (round > 0) best[v] = std::min(best[v], s);
    }
  std::size_t pick = 0;
  for (std::size_t v = 1; v < variants.size(); ++v)
    if (best[v] < 0.97 * best[pick]) pick = v;
  return variants[pick];
}

}  // namespace

std::string probe_kernel_choices(const std::vector<std::string>& names) {
  const auto wanted = [&](const char* name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string spec;
  const auto add = [&spec](const std::string& s) { spec += (spec.empty() ? "" : ",") + s; };
  if (wanted("lane_blocking")) {
    // The float lane reduction at a shape where its inner loop dominates.
    if (const Kernels<float>* t = probe_float_kernels(false))
      add(fastest(*t, blobs(4096, 64, 256), {"lane_blocking=4x4", "lane_blocking=2x8"}));
  }
  if (wanted("lane_pipeline")) {
    // The pipelined lane reduction where it engages (d = 16), few centroids:
    // its steps' folds are a large part of the work.
    if (const Kernels<float>* t = probe_float_kernels(false)) {
      set_probe_choice(spec);
      add(fastest(*t, blobs(4096, 16, 64), {"lane_pipeline=off", "lane_pipeline=on"}));
    }
  }
  if (wanted("bf16")) {
    // The pass against the float path where the table of Zen 5 found it
    // 1.3-1.4x faster (d = 256, k = 1024), with the lane blocking just chosen.
    const Kernels<float>* with = probe_float_kernels(true);
    const Kernels<float>* without = probe_float_kernels(false);
    if (with == nullptr || without == nullptr) {
      add("bf16=off");
    } else {
      Problem p = blobs(768, 256, 1024);
      set_probe_choice(spec);
      double on = 1e300, off = 1e300;
      for (int round = 0; round < 4; ++round) {
        const double a = seconds(*with, p, "bf16=on"), b = seconds(*without, p, "bf16=off");
        if (round > 0) on = std::min(on, a), off = std::min(off, b);
      }
      add(on < 0.97 * off ? "bf16=on" : "bf16=off");
    }
  }
  return spec;
}

}  // namespace softkmeans
