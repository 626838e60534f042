// The row-wise helpers of k-means|| seeding (softkmeans/seeding_rows.hpp).
#include "softkmeans/seeding_rows.hpp"

#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// A row's work in multiply-add units for `resolve_threads` (a hash or a masked
// copy: about a cache line's worth of arithmetic), so a call spreads over the
// threads from about 65,000 rows.
constexpr index_t kRowWork = 16;

// SplitMix64's finaliser (Steele, Lea and Flood 2014).
inline std::uint64_t splitmix_finaliser(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

template <typename T>
void take_closer_t(const T* dist, const std::int64_t* labels, index_t n, std::int64_t first,
                   double* closest, std::int64_t* nearest, int n_threads) {
#pragma omp parallel for schedule(static) num_threads(resolve_threads(n_threads, n * kRowWork))
  for (index_t i = 0; i < n; ++i) {
    const double di = static_cast<double>(dist[i]);
    const bool closer = di < closest[i];
    closest[i] = closer ? di : closest[i];
    nearest[i] = closer ? labels[i] + first : nearest[i];
  }
}

}  // namespace

void row_uniforms(std::uint64_t seed, std::uint64_t round, index_t start, index_t n, double* out,
                  int n_threads) {
  const std::uint64_t key =
      splitmix_finaliser(splitmix_finaliser(seed * kGolden) ^ splitmix_finaliser(round * kGolden));
  const std::uint64_t first = static_cast<std::uint64_t>(start);
#pragma omp parallel for schedule(static) num_threads(resolve_threads(n_threads, n * kRowWork))
  for (index_t i = 0; i < n; ++i) {
    const std::uint64_t h = splitmix_finaliser((first + static_cast<std::uint64_t>(i)) * kGolden +
                                               key);
    // 53 bits convert exactly, and the scaling by 2^-53 is exact.
    out[i] = static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
  }
}

void take_closer(const float* dist, const std::int64_t* labels, index_t n, std::int64_t first,
                 double* closest, std::int64_t* nearest, int n_threads) {
  take_closer_t(dist, labels, n, first, closest, nearest, n_threads);
}

void take_closer(const double* dist, const std::int64_t* labels, index_t n, std::int64_t first,
                 double* closest, std::int64_t* nearest, int n_threads) {
  take_closer_t(dist, labels, n, first, closest, nearest, n_threads);
}

}  // namespace softkmeans
