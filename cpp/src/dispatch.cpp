// SIMD level detection and selection: the kernel table of each level the CPU
// runs, built once, and the selected one.
#include <atomic>
#include <cstdlib>
#include <string>

#include "choices_probe.hpp"
#include "isa_tables.hpp"
#include "softkmeans/bf16.hpp"
#include "softkmeans/choices.hpp"
#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"

namespace softkmeans {
namespace {

struct Tables {
  Kernels<float> f[3];
  Kernels<double> d[3];
  bool available[3] = {true, false, false};
  Kernels<float> f_bf16;  // avx512's float kernels with the bf16 candidate pass
  bool bf16 = false;
  Tables() {
    f[0] = scalar::table<float>();
    d[0] = scalar::table<double>();
#if defined(SOFTKMEANS_HAVE_AVX2) && (defined(__x86_64__) || defined(_M_X64))
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      f[1] = avx2::table<float>();
      d[1] = avx2::table<double>();
      available[1] = true;
    }
#endif
#if defined(SOFTKMEANS_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      f[2] = avx512::table<float>();
      d[2] = avx512::table<double>();
      available[2] = true;
    }
#endif
#if defined(SOFTKMEANS_HAVE_AVX512BF16) && (defined(__x86_64__) || defined(_M_X64))
    if (available[2] && __builtin_cpu_supports("avx512bf16")) {
      f_bf16 = avx512bf16::table<float>();
      bf16 = true;
    }
#endif
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

int best_level() {
  const Tables& t = tables();
  for (int l = 2; l >= 0; --l)
    if (t.available[l]) return l;
  return 0;
}

std::atomic<int>& current_level() {
  static std::atomic<int> level{[] {
    int chosen = best_level();
    // A forced level above what the CPU supports is ignored, not obeyed:
    // running AVX-512 code on a CPU without it would crash the process.
    if (const char* env = std::getenv("SOFTKMEANS_SIMD")) {
      SimdLevel forced;
      if (parse_simd_level(env, &forced) && tables().available[static_cast<int>(forced)])
        chosen = static_cast<int>(forced);
    }
    return chosen;
  }()};
  return level;
}

}  // namespace

bool bf16_available() { return tables().bf16; }

// The pass wanted is a kernel choice (softkmeans/choices.hpp: the table, the
// probe, SOFTKMEANS_BF16=0 or SOFTKMEANS_KERNEL_CHOICES).
bool bf16_enabled() {
  if (!tables().bf16 || current_level().load() != 2) return false;
  ensure_kernel_choices();
  return kernel_choices().bf16;
}

bool set_bf16_enabled(bool on) {
  if (on && !tables().bf16) return false;
  std::string unused;
  return set_kernel_choices(on ? "bf16=on" : "bf16=off", &unused);
}

const Kernels<float>* probe_float_kernels(bool bf16) {
  const Tables& t = tables();
  if (bf16) return t.bf16 ? &t.f_bf16 : nullptr;
  return &t.f[best_level()];
}

bool bf16_distance_bounds(const float* X, index_t n, index_t d, const float* C, index_t k,
                          double* approx, double* eps, std::uint8_t* cand) {
#ifdef SOFTKMEANS_HAVE_AVX512BF16
  if (tables().bf16) return avx512bf16::distance_bounds(X, n, d, C, k, approx, eps, cand);
#endif
  (void)X, (void)n, (void)d, (void)C, (void)k, (void)approx, (void)eps, (void)cand;
  return false;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512:
      return "avx512";
    case SimdLevel::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

bool parse_simd_level(const std::string& name, SimdLevel* level) {
  if (name == "scalar")
    *level = SimdLevel::scalar;
  else if (name == "avx2")
    *level = SimdLevel::avx2;
  else if (name == "avx512")
    *level = SimdLevel::avx512;
  else
    return false;
  return true;
}

std::vector<SimdLevel> available_simd_levels() {
  std::vector<SimdLevel> out;
  for (int l = 0; l < 3; ++l)
    if (tables().available[l]) out.push_back(static_cast<SimdLevel>(l));
  return out;
}

SimdLevel selected_simd_level() { return static_cast<SimdLevel>(current_level().load()); }

bool set_simd_level(SimdLevel level) {
  if (!tables().available[static_cast<int>(level)]) return false;
  current_level().store(static_cast<int>(level));
  return true;
}

template <>
const Kernels<float>& kernels<float>() {
  ensure_kernel_choices();
  if (bf16_enabled()) return tables().f_bf16;
  return tables().f[current_level().load()];
}
template <>
const Kernels<double>& kernels<double>() {
  ensure_kernel_choices();
  return tables().d[current_level().load()];
}

}  // namespace softkmeans
