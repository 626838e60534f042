// The split-bf16 tile kernels of softkmeans/amx.hpp (flags in CMakeLists.txt:
// AMX-TILE and AMX-BF16 for this unit alone; without them, or on another
// architecture, amx_available() is false and nothing here runs).
#include "softkmeans/amx.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#ifdef SOFTKMEANS_HAVE_AMX
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace softkmeans {
namespace {

// |a| below this a coordinate: products below 2^100, their sums far from
// float32's overflow at any dimension this library takes.
constexpr double kAmxRange = 0x1p50;

// x rounded to bf16 (nearest, ties to even) as its 16 bits; 0 below the
// smallest normal (the unit reads denormals as zero: the split says so).
std::uint16_t to_bf16(float x) {
  if (!(std::abs(x) >= 0x1p-126f)) return 0;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

double from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return static_cast<double>(x);
}

// a's two parts.
void split(double a, std::uint16_t* hi, std::uint16_t* lo) {
  *hi = to_bf16(static_cast<float>(a));
  *lo = to_bf16(static_cast<float>(a - from_bf16(*hi)));
}

}  // namespace

AmxPanels amx_panels(const float* C, index_t k, index_t dim, const float* shift) {
  AmxPanels P;
  P.k = k;
  P.dim = dim;
  P.chunks = (dim + 31) / 32;
  P.tiles = ((k + 15) / 16 + 1) / 2 * 2;
  P.shift.assign(shift, shift + dim);
  P.b.assign(P.tiles * P.chunks * 2 * 512, 0);
  P.vn.assign(P.tiles * 16, std::numeric_limits<float>::infinity());
  P.usable = true;
  for (index_t j = 0; j < k; ++j) {
    const index_t t = j / 16, n = j % 16;
    double norm = 0.0;
    for (index_t l = 0; l < dim; ++l) {
      const double v = static_cast<double>(C[j * dim + l]) - static_cast<double>(shift[l]);
      if (!(std::abs(v) < kAmxRange)) P.usable = false;
      norm += v * v;
      std::uint16_t* block = P.b.data() + (t * P.chunks + l / 32) * 2 * 512;
      const index_t at = (l % 32) / 2 * 32 + n * 2 + l % 2;
      split(v, block + at, block + 512 + at);
    }
    P.vn[j] = static_cast<float>(norm);
  }
  return P;
}

#ifdef SOFTKMEANS_HAVE_AMX

bool amx_available() {
  static const bool granted = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return false;  // AMX-BF16, AMX-TILE
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

namespace {

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

}  // namespace

// Tiles 0-3: the 2 x 2 products (rows 0-15 / 16-31 of a pair of row tiles
// by the centroids of the two tiles of a step); 4, 5: the rows' part; 6, 7:
// the centroids'. A step's centroid tiles (4 KiB) serve every row pair from
// L1 (one pair a step read the 512 KiB of panels at k = 4096 from L2 for
// every 32 rows: their loads were a fifth of the pass).
bool amx_distances(const AmxPanels& P, const float* X, index_t rows, float* out, index_t ld,
                   std::uint16_t* parts) {
  const index_t width = P.chunks * 32;  // a row's part, bf16
  const index_t pairs = (rows + 31) / 32;
  if (rows > kAmxRows || !P.usable) return false;
  std::uint16_t* a[2] = {parts, parts + kAmxRows * width};
  std::memset(parts, 0, sizeof(std::uint16_t) * 2 * kAmxRows * width);
  float xn[kAmxRows];
  for (index_t r = 0; r < rows; ++r) {
    double norm = 0.0;
    for (index_t l = 0; l < P.dim; ++l) {
      const double u = static_cast<double>(X[r * P.dim + l]) - static_cast<double>(P.shift[l]);
      if (!(std::abs(u) < kAmxRange)) return false;
      norm += u * u;
      split(u, &a[0][r * width + l], &a[1][r * width + l]);
    }
    xn[r] = static_cast<float>(norm);
  }
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  const index_t stride = width * 2;  // bytes
  alignas(64) float dot[32 * 32];
  for (index_t tp = 0; tp < P.tiles; tp += 2) {
    const float* vn = P.vn.data() + tp * 16;
    for (index_t rp = 0; rp < pairs; ++rp) {
      const std::uint16_t* hi = a[0] + rp * 32 * width;
      const std::uint16_t* lo = a[1] + rp * 32 * width;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (index_t c = 0; c < P.chunks; ++c) {
        const std::uint16_t* b0 = P.b.data() + (tp * P.chunks + c) * 2 * 512;
        const std::uint16_t* b1 = P.b.data() + ((tp + 1) * P.chunks + c) * 2 * 512;
        // Tiles 0-3 += the row parts' (loaded into 4, 5 unless null: those
        // there) products with the centroid parts c0, c1 (into 6, 7).
        auto products = [&](const std::uint16_t* part, const std::uint16_t* c0,
                            const std::uint16_t* c1) {
          if (part != nullptr) {
            _tile_loadd(4, part + c * 32, stride);
            _tile_loadd(5, part + 16 * width + c * 32, stride);
          }
          _tile_loadd(6, c0, 64);
          _tile_loadd(7, c1, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        };
        products(hi, b0, b1);                   // x_hi.c_hi
        products(nullptr, b0 + 512, b1 + 512);  // x_hi.c_lo
        products(lo, b0, b1);                   // x_lo.c_hi
      }
      _tile_stored(0, dot, 128);
      _tile_stored(1, dot + 16, 128);
      _tile_stored(2, dot + 16 * 32, 128);
      _tile_stored(3, dot + 16 * 32 + 16, 128);
      const index_t r_end = std::min<index_t>(32, rows - rp * 32);
      for (index_t r = 0; r < r_end; ++r) {
        float* o = out + (rp * 32 + r) * ld + tp * 16;
        const float x = xn[rp * 32 + r];
        for (index_t n = 0; n < 32; ++n) o[n] = (x + vn[n]) - 2.0f * dot[r * 32 + n];
      }
    }
  }
  _tile_release();
  return true;
}

#else

bool amx_available() { return false; }

bool amx_distances(const AmxPanels&, const float*, index_t, float*, index_t, std::uint16_t*) {
  return false;
}

#endif

}  // namespace softkmeans
