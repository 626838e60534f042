// The softkmeans core: plain C++17 kernels over raw row-major arrays.
// The math contract cited as SPEC.md throughout cpp/ is python/softkmeans/SPEC.md.
//
// Conventions: T is float or double; X [in] (n, d), C [in] (k, d) row-major
// and contiguous; outputs are allocated by the caller. n_threads <= 0 means
// the OpenMP default (omp_get_max_threads() at the call, resolved by the kernel, so OMP_NUM_THREADS
// and threadpoolctl limits apply). Results never depend on the thread count (bitwise). Callers
// validate inputs (finite values, n, k, d >= 1, sigma > 0 for the soft kinds, weights >= 0 with a
// positive sum); kernels do not throw.
//
// Numerics: distances are ||x - s||^2 + ||c - s||^2 - 2 (x - s).(c - s) with a
// shift s near the centroids (d > kSmallDim), or direct differences (d <=
// kSmallDim), in the precision of T, clamped at 0. Weights, N, S, objectives
// are accumulated in double (float data: per-row-tile float sums of w r x are
// folded into double totals).
#pragma once

#include <atomic>
#include <cstdint>

#include "softkmeans/config.hpp"

namespace softkmeans {

// Cooperative cancellation (a flag, not a callback: the core knows nothing of
// Python). While a thread has a flag installed, the kernels it starts poll it
// between row tiles and stop early once it is non-zero; their outputs are then
// unspecified and the caller must discard them. The flag is a lock-free atomic
// so that a signal handler may set it. nullptr uninstalls.
void set_thread_cancel_flag(const std::atomic<int>* flag);
const std::atomic<int>* thread_cancel_flag();

// The assignment maps of SPEC.md.
enum class Kind : int { hard = 0, softmax = 1, entmax15 = 2 };

// A CSR matrix (n, d), the input of the csr_* kernels (SPEC.md, "Sparse
// input"): the stored entries of row i are data[indptr[i] .. indptr[i + 1])
// at columns indices[indptr[i] .. indptr[i + 1]). indices and indptr are both
// int32 or both int64 (index64), as scipy.sparse stores them. Callers
// guarantee indptr[0] == 0, indptr non-decreasing, and the columns of each row
// strictly increasing in [0, d) (scipy's canonical format: sorted, no
// duplicates), with finite values; n, d >= 1.
template <typename T>
struct CsrMatrix {
  const T* data = nullptr;
  const void* indices = nullptr;
  const void* indptr = nullptr;
  bool index64 = false;
  index_t n = 0, d = 0;
};

// The kernel table: one function pointer per kernel, each signature written
// here once. Every SIMD level fills one table per dtype from the same source
// (cpp/src/impl/table.hpp); kernels<T>() returns the selected level's. Call as
// softkmeans::kernels<float>().assign(X, n, d, C, k, labels, min_sq_dist, 0).
template <typename T>
struct Kernels {
  // D [out] (n, k): D_ij = ||x_i - c_j||^2, never negative.
  void (*sq_distances)(const T* X, index_t n, index_t d, const T* C, index_t k, T* D,
                       int n_threads) = nullptr;

  // labels [out] (n,): argmin_j D_ij, ties to the smallest j.
  // min_sq_dist [out] (n,): min_j D_ij.
  void (*assign)(const T* X, index_t n, index_t d, const T* C, index_t k, std::int64_t* labels,
                 T* min_sq_dist, int n_threads) = nullptr;

  // assign's labels and min_sq_dist, bit for bit, computing only the groups
  // of centroids whose ball (centre, radius) may hold a row's nearest
  // (cpp/src/impl/group_pruned.hpp). group [in] (k,): the group in [0, t) of
  // each centroid, t <= 64. second [out] (n,) or null: the second smallest
  // distance over the groups computed for the row (the kernel's bits; inf
  // when they hold one centroid); beyond [out] (n,) or null (with second):
  // a lower bound on the kernel's distance to every centroid of the other
  // groups (inf when none), so that second - min_sq_dist is the row's margin
  // when second <= beyond and at least beyond - min_sq_dist otherwise.
  // n_distances [out]: the distances computed.
  void (*assign_grouped)(const T* X, index_t n, index_t d, const T* C, index_t k,
                         const std::int64_t* group, index_t t, std::int64_t* labels,
                         T* min_sq_dist, T* second, double* beyond, std::int64_t* n_distances,
                         int n_threads) = nullptr;

  // assign_grouped's outputs (labels, min_sq_dist, second, beyond: the same
  // contract), pruned by a projection instead of groups
  // (cpp/src/impl/projected.hpp): Q [in] (d, p) row-major, orthonormal
  // columns (the bound allows for how far they are from it), mu [in] (d,).
  // n_distances [out]: the full distances computed (the candidates and W a
  // row), not counting the k (p + 1)-dimensional ones.
  void (*assign_projected)(const T* X, index_t n, index_t d, const T* C, index_t k,
                           const double* Q, const double* mu, index_t p, std::int64_t* labels,
                           T* min_sq_dist, T* second, double* beyond,
                           std::int64_t* n_distances, int n_threads) = nullptr;

  // margins [out] (n,): D_i(2) - D_i(1), the gap between the two smallest
  // distances (inf when k == 1).
  void (*margins)(const T* X, index_t n, index_t d, const T* C, index_t k, T* margins,
                  int n_threads) = nullptr;

  // Z [in] (n, k) scores; R [out] (n, k) row-wise entmax15(Z), exact zeros off
  // the support. Candidate-filtered sort-based threshold computed in double.
  void (*entmax15)(const T* Z, index_t n, index_t k, T* R, int n_threads) = nullptr;

  // R [out] (n, k): responsibilities of `kind` at width sigma (ignored for hard).
  void (*responsibilities)(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind,
                           double sigma, T* R, int n_threads) = nullptr;

  // The raw statistics of the rows of X (SPEC.md, "Block statistics"), one
  // fused pass (no (n, k) array). w [in] (n,) sample weights.
  // W [out]: sum_i w_i.  N [out, nullable] (k,): sum_i w_i r_ij; S [out,
  // nullable] (k, d): sum_i w_i r_ij x_i (N and S both or neither).
  // objective [out]: J, F_sigma or G_sigma of `kind` at C; distortion [out]: J;
  // min_margin [out]: Delta_min over w_i > 0 (inf when k == 1).
  // labels [out, nullable] (n,): argmin_j D_ij.  grad_X [out, nullable] (n, d):
  // 2 w_i (x_i - sum_j r_ij c_j).  Statistics of disjoint blocks merge by
  // adding and taking the minimum (softkmeans._stats); the centroid step
  // S_j / N_j is formed there, once.
  void (*block_stats)(const T* X, index_t n, index_t d, const T* C, index_t k, Kind kind,
                      double sigma, const double* w, double* W, double* N, double* S,
                      double* objective, double* distortion, double* min_margin,
                      std::int64_t* labels, T* grad_X, int n_threads) = nullptr;

  // The hard step of block_stats with distance bounds (cpp/src/impl/bounded.hpp):
  // W, N, S (both non-null), distortion J and min_margin of kind hard at C.
  // group [in] (k,): the group in [0, t) of each centroid (t <= 64), the same
  // from one call to the next. labels [in,out] (n,) and lower [in,out] (n, t)
  // carry each row's label and, per group, a lower bound on its exact distance
  // (not squared) to the group's centroids other than its label's, from one
  // call to the next; C_prev [in] (k, d): the centroids of the previous call,
  // or nullptr (every distance computed, labels and lower only written). Only
  // the groups whose centroids may be nearer than a row's label are computed;
  // labels, N and S are bitwise block_stats's wherever it takes the row-wise
  // hard accumulation (d > kSmallDim, or k > kLaneAccK); J and min_margin are
  // its bits when every distance is computed, else J sums the skipped rows'
  // exact distances and min_margin covers the rows computed in full only.
  // exact: J and min_margin are block_stats's bits in any case (every row's
  // distance to its label computed; the rows whose margin the bounds leave
  // open, and that may be the least, computed in full after the pass).
  // n_computed [out]: the rows with distances computed; n_distances [out]:
  // the distances computed (n k when all).
  void (*hard_stats_bounded)(const T* X, index_t n, index_t d, const T* C, index_t k,
                             const T* C_prev, const std::int64_t* group, index_t t, const double* w,
                             double* W, double* N, double* S, double* distortion,
                             double* min_margin, std::int64_t* labels, double* lower, bool exact,
                             index_t* n_computed, std::int64_t* n_distances,
                             int n_threads) = nullptr;

  // The hard assignment at per-centroid offsets (cpp/src/impl/biased.hpp;
  // SPEC.md, "Balanced assignments as one pass"), one fused pass. g [in] (k,)
  // the offsets, rounded to T once (g~); w [in] (n,). labels [out] (n,):
  // argmin_j (D_ij - g~_j) in T, ties to the smallest j; gap [out] (n,): the
  // second smallest of D_ij - g~_j less the smallest (0 when tied, inf when
  // k == 1); dist [out] (n,): D_{i, labels_i}; W [out], N [out] (k,), S
  // [out] (k, d), distortion [out]: J =
  // sum_i w_i D_{i, labels_i}, all at those labels and in block_stats's order
  // (at g = 0: block_stats hard's bits where it takes the row-wise hard
  // accumulation, d > kSmallDim or k > kLaneAccK). m [in] 0..min(k, 64) and
  // band [in] > 0 (may be inf): cand [out] (n, m) int32, each row's columns
  // of biased value below its smallest + band (band rounded to T, the sum in
  // T), the m smallest of them, ascending (ties to the smaller j; cand[i, 0]
  // = labels_i; -1 past the last), cand_dist [out] (n, m) their D_ij (0 past
  // the last), floor [out] (n,) a floor on the biased value of every other
  // column (the m-th value when m are held, else smallest + band); all
  // untouched when m = 0.
  void (*biased_hard_stats)(const T* X, index_t n, index_t d, const T* C, index_t k,
                            const double* g, const double* w, double* W, double* N, double* S,
                            double* distortion, std::int64_t* labels, T* gap, T* dist, index_t m,
                            double band, std::int32_t* cand, T* cand_dist, T* floor,
                            int n_threads) = nullptr;

  // w [in] (n,).  mean [out] (d,): sum_i w_i x_i / W.  cov [out] (d, d): the
  // weighted population covariance sum_i w_i (x_i - mean)(x_i - mean)^T / W.
  // The validation pass's read (impl/moments.hpp): per chunk of chunk_rows
  // rows (c = ceil(n / chunk_rows) chunks), W (c,) the weights' sum, mean and
  // M2 (c, d) the features' weighted mean and sum of squared deviations (0
  // where W = 0), max_abs (c,) the largest |x| of a finite chunk, finite (c,) 0 where a
  // value is NaN or infinite; in double, each sum sequential over the rows.
  void (*feature_moments)(const T* X, index_t n, index_t d, const double* w, index_t chunk_rows,
                          double* W, double* mean, double* M2, double* max_abs,
                          std::uint8_t* finite, int n_threads) = nullptr;
  void (*weighted_covariance)(const T* X, index_t n, index_t d, const double* w, double* mean,
                              double* cov, int n_threads) = nullptr;

  // The weighted centred second moment applied to a vector (lambda_max of a
  // wide X by Lanczos, nothing d x d formed): w [in] (n,), mean [in, nullable]
  // (d,), v [in] (d,), out [out] (d,): sum_i w_i ((x_i - mean) . v)
  // (x_i - mean), in double. Memory: O(chunks x d).
  void (*second_moment_matvec)(const T* X, index_t n, index_t d, const double* w,
                               const double* mean, const double* v, double* out,
                               int n_threads) = nullptr;

  // Greedy k-means++ (as scikit-learn's _kmeans_plusplus), one fused pass:
  // w [in] (n,); closest [in] (n,) current squared distance of each point to
  // its nearest chosen center; cand [in] (L,) row indices of X (0 <= cand < n);
  // potentials [out] (L,): sum_i w_i min(closest_i, ||x_i - x_cand_l||^2);
  // dist [out, nullable] (L, n): the distances ||x_i - x_cand_l||^2 in T, the
  // values the potentials took (the chosen candidate's row then updates
  // closest without another pass over X, as scikit-learn keeps them).
  void (*kmeanspp_candidate_potentials)(const T* X, index_t n, index_t d, const double* w,
                                        const double* closest, const std::int64_t* cand, index_t L,
                                        double* potentials, T* dist, int n_threads) = nullptr;

  // closest [in,out] (n,): min(closest_i, ||x_i - x_center||^2), the distance
  // computed by direct differences in T with the bits kmeanspp_candidate_potentials
  // gives it (its kept distances update closest alike); 0 <= center < n.
  void (*kmeanspp_update_closest)(const T* X, index_t n, index_t d, std::int64_t center,
                                  double* closest, int n_threads) = nullptr;

  // The kernels above for a CSR matrix X (n, d) against dense centroids C
  // (k, d): the same outputs, the same definitions and tile reductions, with
  // x.c formed from the stored entries only (never densified) as
  // D = ||x||^2 + ||c||^2 - 2 x.c clamped at 0 (no shift: it would densify x).
  // Memory: O(nnz + threads x row block x k + chunks x k x d).
  void (*csr_sq_distances)(const CsrMatrix<T>& X, const T* C, index_t k, T* D,
                           int n_threads) = nullptr;
  void (*csr_assign)(const CsrMatrix<T>& X, const T* C, index_t k, std::int64_t* labels,
                     T* min_sq_dist, int n_threads) = nullptr;
  void (*csr_margins)(const CsrMatrix<T>& X, const T* C, index_t k, T* margins,
                      int n_threads) = nullptr;
  void (*csr_responsibilities)(const CsrMatrix<T>& X, const T* C, index_t k, Kind kind,
                               double sigma, T* R, int n_threads) = nullptr;
  // grad_X [out, nullable] is dense (n, d).
  void (*csr_block_stats)(const CsrMatrix<T>& X, const T* C, index_t k, Kind kind, double sigma,
                          const double* w, double* W, double* N, double* S, double* objective,
                          double* distortion, double* min_margin, std::int64_t* labels, T* grad_X,
                          int n_threads) = nullptr;
  // k-means++ on the rows of X: distances by direct differences over the union
  // of the two rows' stored columns (in column order, as the dense kernels sum
  // over all columns, the shared zeros adding nothing).
  void (*csr_kmeanspp_candidate_potentials)(const CsrMatrix<T>& X, const double* w,
                                            const double* closest, const std::int64_t* cand,
                                            index_t L, double* potentials, int n_threads) = nullptr;
  void (*csr_kmeanspp_update_closest)(const CsrMatrix<T>& X, std::int64_t center, double* closest,
                                      int n_threads) = nullptr;
  // The weighted second moment of the rows applied to a vector (lambda_max of
  // a sparse X by Lanczos): w [in] (n,), v [in] (d,), out [out] (d,):
  // X^T diag(w) X v, in double. Memory: O(chunks x d).
  void (*csr_second_moment_matvec)(const CsrMatrix<T>& X, const double* w, const double* v,
                                   double* out, int n_threads) = nullptr;
};

// The names of the members of Kernels, for code generated per kernel (the
// per-ISA tables).
#define SOFTKMEANS_KERNEL_NAMES(F)     \
  F(sq_distances)                      \
  F(assign)                            \
  F(assign_grouped)                    \
  F(assign_projected)                  \
  F(margins)                           \
  F(entmax15)                          \
  F(responsibilities)                  \
  F(block_stats)                       \
  F(hard_stats_bounded)                \
  F(biased_hard_stats)                 \
  F(feature_moments)                   \
  F(weighted_covariance)               \
  F(second_moment_matvec)              \
  F(kmeanspp_candidate_potentials)     \
  F(kmeanspp_update_closest)           \
  F(csr_sq_distances)                  \
  F(csr_assign)                        \
  F(csr_margins)                       \
  F(csr_responsibilities)              \
  F(csr_block_stats)                   \
  F(csr_kmeanspp_candidate_potentials) \
  F(csr_kmeanspp_update_closest)       \
  F(csr_second_moment_matvec)

// The table of the currently selected SIMD level (softkmeans/simd.hpp).
template <typename T>
const Kernels<T>& kernels();

// The number of threads a parallel region started with n_threads uses.
int resolve_threads(int n_threads);
// The same for a call of `work` multiply-adds: 1 below kSerialWork.
int resolve_threads(int n_threads, index_t work);

}  // namespace softkmeans
