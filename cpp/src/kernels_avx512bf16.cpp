// The avx512 kernels again, with the bf16 candidate pass in the engine's row
// reductions (impl/engine_bf16.hpp; flags in CMakeLists.txt: AVX512_BF16 on
// top of avx512's). dispatch.cpp selects this table in place of avx512's on a
// CPU with AVX512_BF16, unless SOFTKMEANS_BF16=0 or set_bf16_enabled(false).
#define SOFTKMEANS_ISA avx512bf16
#define SOFTKMEANS_VEC_BYTES 64
#define SOFTKMEANS_MR 6
#define SOFTKMEANS_BF16 1
#include "impl/table.hpp"

namespace softkmeans {
namespace avx512bf16 {

// softkmeans/bf16.hpp's bf16_distance_bounds: the pass forced on, group by
// group, its a~ turned into D~ = xn + cn - 2 a~ and eps = e(x) + f(c).
bool distance_bounds(const float* X, index_t n, index_t d, const float* C, index_t k,
                     double* approx, double* eps, std::uint8_t* cand) {
  Engine<float> E(C, k, d, 0, true);
  E.enable_bf16();
  if (!E.bf16) return false;
  constexpr index_t G = Engine<float>::LR * Engine<float>::W;
  Workspace<float> ws;
  E.init(ws);
  E.init_bf16(ws);
  std::vector<float> dot(E.kl * G);
  float* xg = ws.xt.data();
  auto* xnv = ws.lanes.data() + 2 * Engine<float>::LR;
  for (index_t r0 = 0; r0 < n; r0 += G) {
    const index_t rn = std::min<index_t>(G, n - r0);
    E.pack_group(X, r0, rn, xg, xnv);
    if (!E.bf16_group(xg, xnv, rn, ws, dot.data())) return false;
    for (index_t r = 0; r < rn; ++r) {
      const double xn = static_cast<double>(xnv[r / 16][r % 16]);
      const double e = bf16_share(xn, d);
      const index_t i = r0 + r;
      for (index_t j = 0; j < k; ++j) {
        const double cn = static_cast<double>(E.cnl[j]);
        approx[i * k + j] = xn + cn - 2.0 * static_cast<double>(dot[j * G + r]);
        eps[i * k + j] = e + bf16_share(cn, d);
        cand[i * k + j] = 0;
      }
      for (index_t c = 0; c < ws.bf16.n_cand[r]; ++c) {
        const index_t j = ws.bf16.cand[r * E.kl + c];
        if (j < k) cand[i * k + j] = 1;
      }
    }
  }
  return true;
}

}  // namespace avx512bf16
}  // namespace softkmeans
