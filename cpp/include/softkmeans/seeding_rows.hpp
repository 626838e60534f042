// The row-wise helpers of k-means|| seeding (SPEC.md, "k-means|| seeding"):
// each row's hashed uniform, and the nearest-candidate update after a pass.
// Plain C++17 over arrays, no instruction-set dispatch (integer hashing and
// masked copies: the memory, not the arithmetic, sets their speed).
#pragma once

#include <cstdint>

#include "softkmeans/config.hpp"

namespace softkmeans {

// out [out] (n,): the uniforms in [0, 1) of rows start..start+n-1 in round
// `round` for `seed`: u_i = (h >> 11) 2^-53, h = splitmix64's finaliser of
// i * G + key (G the golden-ratio constant, arithmetic mod 2^64), key =
// fin(fin(seed * G) ^ fin(round * G)). Each u_i depends on (seed, round, i)
// only, so on no chunking or thread count.
void row_uniforms(std::uint64_t seed, std::uint64_t round, index_t start, index_t n, double* out,
                  int n_threads);

// In place over n rows, where dist[i] (widened to double) < closest[i]:
// closest[i] = dist[i] and nearest[i] = labels[i] + first (the rows that a
// pass over new candidates first..first+k-1 brought strictly closer).
void take_closer(const float* dist, const std::int64_t* labels, index_t n, std::int64_t first,
                 double* closest, std::int64_t* nearest, int n_threads);
void take_closer(const double* dist, const std::int64_t* labels, index_t n, std::int64_t first,
                 double* closest, std::int64_t* nearest, int n_threads);

}  // namespace softkmeans
