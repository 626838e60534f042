// Runtime SIMD dispatch: the level is chosen once, at first use.
#pragma once

#include <string>
#include <vector>

namespace softkmeans {

enum class SimdLevel : int { scalar = 0, avx2 = 1, avx512 = 2 };

// Name of a level: "scalar", "avx2" or "avx512".
const char* simd_level_name(SimdLevel level);

// Levels this CPU can run, from scalar upwards (the build may lack some).
std::vector<SimdLevel> available_simd_levels();

// The level kernels use now: the best available one, or the one forced by the
// SOFTKMEANS_SIMD environment variable (read once) or by set_simd_level.
SimdLevel selected_simd_level();

// Forces a level. Returns false (and changes nothing) when the level is not
// available on this CPU or in this build.
bool set_simd_level(SimdLevel level);

// Parses "scalar" | "avx2" | "avx512"; returns false on anything else.
bool parse_simd_level(const std::string& name, SimdLevel* level);

}  // namespace softkmeans
