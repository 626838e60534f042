// pybind11 bindings for the softkmeans core: convert, validate shapes and
// dtypes, allocate outputs, release the GIL, call. No algorithm lives here.
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"

namespace py = pybind11;
using softkmeans::index_t;

namespace {

template <typename T>
using carray = py::array_t<T, py::array::c_style>;

// Rejects anything but a C-contiguous 2-D array of T (the Python layer
// converts; this layer only guards the raw-pointer contract).
template <typename T>
carray<T> as_matrix(const py::array& a, const char* name) {
  if (!py::isinstance<carray<T>>(a) || !(a.flags() & py::array::c_style))
    throw py::type_error(std::string(name) + " must be a C-contiguous array of dtype " +
                         py::str(py::dtype::of<T>()).cast<std::string>());
  if (a.ndim() != 2) throw py::value_error(std::string(name) + " must be 2-dimensional");
  return py::reinterpret_borrow<carray<T>>(a);
}

void check_pair(const py::array& X, const py::array& C) {
  if (X.shape(1) != C.shape(1))
    throw py::value_error("X and C must have the same number of columns");
  if (X.shape(0) < 1 || X.shape(1) < 1 || C.shape(0) < 1)
    throw py::value_error("X and C must be non-empty");
}

template <typename T>
carray<T> as_vector(const py::array& a, const char* name, index_t n) {
  if (!py::isinstance<carray<T>>(a) || !(a.flags() & py::array::c_style))
    throw py::type_error(std::string(name) + " must be a C-contiguous array of dtype " +
                         py::str(py::dtype::of<T>()).cast<std::string>());
  if (a.ndim() != 1 || a.shape(0) != n)
    throw py::value_error(std::string(name) + " must be 1-dimensional with " + std::to_string(n) +
                          " entries");
  return py::reinterpret_borrow<carray<T>>(a);
}

// X (n, d) and C (k, d) of one dtype, checked.
template <typename T>
struct PairArgs {
  carray<T> X, C;
  index_t n, d, k;
  PairArgs(const py::array& Xa, const py::array& Ca)
      : X(as_matrix<T>(Xa, "X")), C(as_matrix<T>(Ca, "C")) {
    check_pair(X, C);
    n = X.shape(0), d = X.shape(1), k = C.shape(0);
  }
};

// X (n, d) alone, non-empty; the sample weights (n,) where the call takes them.
template <typename T>
struct DataArgs {
  carray<T> X;
  index_t n, d;
  explicit DataArgs(const py::array& Xa) : X(as_matrix<T>(Xa, "X")) {
    n = X.shape(0), d = X.shape(1);
    if (n < 1 || d < 1) throw py::value_error("X must be non-empty");
  }
  carray<double> weights(const py::array& wa) const {
    return as_vector<double>(wa, "sample_weight", n);
  }
};

// An output array of `shape` when `wanted`, its data in *data; else None and
// nullptr.
template <typename U>
py::object optional_output(bool wanted, std::vector<py::ssize_t> shape, U** data) {
  *data = nullptr;
  if (!wanted) return py::none();
  carray<U> a(std::move(shape));
  *data = a.mutable_data();
  return std::move(a);
}

// SIGINT during a long kernel: a handler chained in front of Python's sets a
// flag that the kernels poll between row tiles (the core's cancel flag), then
// lets Python's own handler record the signal; once the GIL is back,
// PyErr_CheckSignals raises KeyboardInterrupt. Only calls from the main thread
// (the one Python delivers signals to) are interruptible; others run to the end.
std::atomic<int> g_sigint_seen{0};
struct sigaction g_python_sigint;  // the handler we chain to, saved per call

extern "C" void chained_sigint(int sig) {
  g_sigint_seen.store(1, std::memory_order_relaxed);
  if (g_python_sigint.sa_flags & SA_SIGINFO) return;  // not Python's plain handler
  if (g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN)
    g_python_sigint.sa_handler(sig);
}

bool on_main_thread() {
  static const unsigned long main_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return PyThread_get_thread_ident() == main_ident;
}

// Runs f with the GIL released; from the main thread, interruptible by SIGINT.
template <typename F>
void run_native(F&& f) {
  bool hooked = false;
  if (on_main_thread()) {
    struct sigaction current;
    if (sigaction(SIGINT, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN &&
        current.sa_handler != chained_sigint) {
      g_python_sigint = current;
      g_sigint_seen.store(0, std::memory_order_relaxed);
      struct sigaction mine = current;
      mine.sa_handler = chained_sigint;
      hooked = sigaction(SIGINT, &mine, nullptr) == 0;
    }
  }
  struct Unhook {  // also on an exception (bad_alloc) out of f
    bool hooked;
    ~Unhook() {
      if (!hooked) return;
      softkmeans::set_thread_cancel_flag(nullptr);
      sigaction(SIGINT, &g_python_sigint, nullptr);
    }
  } unhook{hooked};
  {
    py::gil_scoped_release release;
    if (hooked) softkmeans::set_thread_cancel_flag(&g_sigint_seen);
    f();
  }
  if (!hooked) return;
  softkmeans::set_thread_cancel_flag(nullptr);
  sigaction(SIGINT, &g_python_sigint, nullptr);
  unhook.hooked = false;
  if (!g_sigint_seen.load(std::memory_order_relaxed)) return;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  // The Python-level handler returned without raising (a user's own handler):
  // the cancelled outputs are incomplete, so compute them again, to the end.
  py::gil_scoped_release release;
  f();
}

template <typename T>
py::array sq_distances_t(const py::array& Xa, const py::array& Ca, int n_threads) {
  const PairArgs<T> a(Xa, Ca);
  carray<T> D({a.n, a.k});
  run_native([&] {
    softkmeans::kernels<T>().sq_distances(a.X.data(), a.n, a.d, a.C.data(), a.k, D.mutable_data(),
                                          n_threads);
  });
  return D;
}

template <typename T>
py::tuple assign_t(const py::array& Xa, const py::array& Ca, int n_threads) {
  const PairArgs<T> a(Xa, Ca);
  carray<std::int64_t> labels(a.n);
  carray<T> mind(a.n);
  run_native([&] {
    softkmeans::kernels<T>().assign(a.X.data(), a.n, a.d, a.C.data(), a.k, labels.mutable_data(),
                                    mind.mutable_data(), n_threads);
  });
  return py::make_tuple(labels, mind);
}

softkmeans::Kind parse_kind(const std::string& kind) {
  if (kind == "hard") return softkmeans::Kind::hard;
  if (kind == "softmax") return softkmeans::Kind::softmax;
  if (kind == "entmax15") return softkmeans::Kind::entmax15;
  throw py::value_error("kind must be 'hard', 'softmax' or 'entmax15'");
}

double check_sigma(double sigma, softkmeans::Kind kind) {
  if (kind == softkmeans::Kind::hard) return 1.0;  // unused
  if (!(sigma > 0.0) || !std::isfinite(sigma))
    throw py::value_error("sigma must be finite and > 0");
  return sigma;
}

template <typename T>
py::array margins_t(const py::array& Xa, const py::array& Ca, int n_threads) {
  const PairArgs<T> a(Xa, Ca);
  carray<T> out(a.n);
  run_native([&] {
    softkmeans::kernels<T>().margins(a.X.data(), a.n, a.d, a.C.data(), a.k, out.mutable_data(),
                                     n_threads);
  });
  return out;
}

template <typename T>
py::array entmax15_t(const py::array& Za, int n_threads) {
  auto Z = as_matrix<T>(Za, "Z");
  const index_t n = Z.shape(0), k = Z.shape(1);
  if (n < 1 || k < 1) throw py::value_error("Z must be non-empty");
  carray<T> R({n, k});
  run_native(
      [&] { softkmeans::kernels<T>().entmax15(Z.data(), n, k, R.mutable_data(), n_threads); });
  return R;
}

// The checked arguments of the kind-dependent calls (responsibilities,
// block_stats); weights only where the call takes them.
template <typename T>
struct KindArgs : PairArgs<T> {
  softkmeans::Kind kind;
  double sigma;
  KindArgs(const py::array& Xa, const py::array& Ca, const std::string& kind_s, double sigma_in)
      : PairArgs<T>(Xa, Ca) {
    kind = parse_kind(kind_s);
    sigma = check_sigma(sigma_in, kind);
  }
  carray<double> weights(const py::array& wa) const {
    return as_vector<double>(wa, "sample_weight", this->n);
  }
};

template <typename T>
py::array responsibilities_t(const py::array& Xa, const py::array& Ca, const std::string& kind_s,
                             double sigma_in, int n_threads) {
  const KindArgs<T> a(Xa, Ca, kind_s, sigma_in);
  carray<T> R({a.n, a.k});
  run_native([&] {
    softkmeans::kernels<T>().responsibilities(a.X.data(), a.n, a.d, a.C.data(), a.k, a.kind,
                                              a.sigma, R.mutable_data(), n_threads);
  });
  return R;
}

// (W, N, S, objective, distortion, min_margin, labels, grad_X); N and S only
// with `sums`, labels with `labels`, grad_X with `grad_x` (None otherwise).
template <typename T>
py::tuple block_stats_t(const py::array& Xa, const py::array& Ca, const std::string& kind_s,
                        double sigma_in, const py::array& wa, int n_threads, bool sums,
                        bool with_labels, bool with_grad) {
  const KindArgs<T> a(Xa, Ca, kind_s, sigma_in);
  auto w = a.weights(wa);
  double *N_p, *S_p;
  std::int64_t* labels_p;
  T* gX_p;
  py::object N = optional_output(sums, {a.k}, &N_p);
  py::object S = optional_output(sums, {a.k, a.d}, &S_p);
  py::object labels = optional_output(with_labels, {a.n}, &labels_p);
  py::object gX = optional_output(with_grad, {a.n, a.d}, &gX_p);
  double W, obj, J, mm;
  run_native([&] {
    softkmeans::kernels<T>().block_stats(a.X.data(), a.n, a.d, a.C.data(), a.k, a.kind, a.sigma,
                                         w.data(), &W, N_p, S_p, &obj, &J, &mm, labels_p, gX_p,
                                         n_threads);
  });
  return py::make_tuple(W, N, S, obj, J, mm, labels, gX);
}

// (W, N, S, distortion, min_margin, n_computed, n_distances); labels (n,)
// int64 and lower (n, t) float64 updated in place; group (k,) int64 in
// [0, t), t <= 32. C_prev None: every row computed (labels and lower are
// outputs only); else C_prev (k, d) and labels in [0, k).
template <typename T>
py::tuple hard_stats_bounded_t(const py::array& Xa, const py::array& Ca, const py::object& Cpa,
                               const py::array& wa, py::array& la, py::array& lowa,
                               const py::array& ga, bool exact, int n_threads) {
  const PairArgs<T> a(Xa, Ca);
  auto w = as_vector<double>(wa, "sample_weight", a.n);
  auto labels = as_vector<std::int64_t>(la, "labels", a.n);
  auto group = as_vector<std::int64_t>(ga, "group", a.k);
  auto lower = as_matrix<double>(lowa, "lower");
  const index_t t = lower.shape(1);
  if (lower.shape(0) != a.n || t < 1 || t > 32)
    throw py::value_error("lower must have n rows and 1 to 32 columns (groups)");
  if (!labels.writeable() || !lower.writeable())
    throw py::value_error("labels and lower must be writeable");
  for (index_t j = 0; j < a.k; ++j)
    if (group.data()[j] < 0 || group.data()[j] >= t)
      throw py::value_error("group must be in [0, t), t the columns of lower");
  const T* C_prev = nullptr;
  carray<T> Cp;
  if (!Cpa.is_none()) {
    Cp = as_matrix<T>(Cpa.cast<py::array>(), "C_prev");
    if (Cp.shape(0) != a.k || Cp.shape(1) != a.d)
      throw py::value_error("C_prev must have the shape of C");
    const std::int64_t* lp = labels.data();
    for (index_t i = 0; i < a.n; ++i)
      if (lp[i] < 0 || lp[i] >= a.k) throw py::value_error("labels must be in [0, k)");
    C_prev = Cp.data();
  }
  carray<double> N(a.k);
  carray<double> S({a.k, a.d});
  double W, J, mm;
  index_t n_computed = 0;
  std::int64_t n_distances = 0;
  run_native([&] {
    softkmeans::kernels<T>().hard_stats_bounded(
        a.X.data(), a.n, a.d, a.C.data(), a.k, C_prev, group.data(), t, w.data(), &W,
        N.mutable_data(), S.mutable_data(), &J, &mm, labels.mutable_data(), lower.mutable_data(),
        exact, &n_computed, &n_distances, n_threads);
  });
  return py::make_tuple(W, N, S, J, mm, n_computed, n_distances);
}

template <typename T>
py::tuple weighted_covariance_t(const py::array& Xa, const py::array& wa, int n_threads) {
  const DataArgs<T> x(Xa);
  const index_t n = x.n, d = x.d;
  auto w = x.weights(wa);
  carray<double> mean(d);
  carray<double> cov({d, d});
  run_native([&] {
    softkmeans::kernels<T>().weighted_covariance(x.X.data(), n, d, w.data(), mean.mutable_data(),
                                                 cov.mutable_data(), n_threads);
  });
  return py::make_tuple(mean, cov);
}

// The k-means++ candidates (L,) int64, L >= 1, each a row index in [0, n).
carray<std::int64_t> checked_candidates(const py::array& ca, index_t n) {
  if (ca.ndim() != 1) throw py::value_error("cand_idx must be 1-dimensional");
  auto cand = as_vector<std::int64_t>(ca, "cand_idx", ca.shape(0));
  if (cand.shape(0) < 1) throw py::value_error("cand_idx must not be empty");
  for (index_t a = 0; a < cand.shape(0); ++a)
    if (cand.data()[a] < 0 || cand.data()[a] >= n) throw py::index_error("cand_idx out of range");
  return cand;
}

template <typename T>
py::array kpp_potentials_t(const py::array& Xa, const py::array& wa, const py::array& cla,
                           const py::array& ca, const py::object& dista, int n_threads) {
  const DataArgs<T> x(Xa);
  const index_t n = x.n, d = x.d;
  auto w = x.weights(wa);
  auto closest = as_vector<double>(cla, "closest", n);
  auto cand = checked_candidates(ca, n);
  const index_t L = cand.shape(0);
  carray<T> dist;
  if (!dista.is_none()) {
    dist = as_matrix<T>(dista.cast<py::array>(), "dist");
    if (dist.shape(0) != L || dist.shape(1) != n)
      throw py::value_error("dist must have shape (L, n): a row per candidate, a column per point");
    if (!dist.writeable()) throw py::value_error("dist must be writeable");
  }
  T* dp = dista.is_none() ? nullptr : dist.mutable_data();
  carray<double> pot(L);
  run_native([&] {
    softkmeans::kernels<T>().kmeanspp_candidate_potentials(x.X.data(), n, d, w.data(),
                                                           closest.data(), cand.data(), L,
                                                           pot.mutable_data(), dp, n_threads);
  });
  return pot;
}

template <typename T>
void kpp_update_t(const py::array& Xa, py::array& cla, std::int64_t center, int n_threads) {
  const DataArgs<T> x(Xa);
  const index_t n = x.n, d = x.d;
  auto closest = as_vector<double>(cla, "closest", n);
  if (!closest.writeable()) throw py::value_error("closest must be writeable");
  if (center < 0 || center >= n) throw py::index_error("center_idx out of range");
  run_native([&] {
    softkmeans::kernels<T>().kmeanspp_update_closest(x.X.data(), n, d, center,
                                                     closest.mutable_data(), n_threads);
  });
}

// X as CSR (softkmeans/kernels.hpp, CsrMatrix): data (nnz,) of T, indices
// (nnz,) and indptr (n + 1,) both int32 or both int64, n_features columns.
// The structure is checked here, before any kernel runs (the kernels index
// with it unchecked): indptr from 0 to nnz and non-decreasing, columns
// strictly increasing within each row and in [0, n_features).
//
// Every pass of a sparse fit comes here with a valid matrix: a branch-free
// test, a few vectorized passes over the arrays, says so (about a tenth of the
// row-by-row loop's time); the loop then runs only to name a fault.
template <typename I>
bool csr_structure_is_valid(const I* ind, const I* ptr, index_t n, index_t nnz, index_t d) {
  using U = typename std::make_unsigned<I>::type;
  // Counts in 32 bits per block of entries, so the loops vectorize for int32
  // indices (the module is built for the baseline instruction set).
  constexpr index_t kBlock = index_t(1) << 20;
  bool ordered = true;
  for (index_t i = 0; i < n; ++i) ordered &= ptr[i] <= ptr[i + 1];
  if (!ordered) return false;
  // A negative index is a huge unsigned one.
  const U end = static_cast<U>(std::min<index_t>(d, std::numeric_limits<I>::max()));
  // Columns strictly increase within each row: every place where they do not
  // (ind[e] <= ind[e - 1]) must be the start of a non-empty row (each such
  // place starts exactly one).
  index_t out_of_range = static_cast<U>(ind[0]) >= end, descents = 0, at_row_starts = 0;
  for (index_t b = 1; b < nnz; b += kBlock) {
    const index_t b1 = std::min(nnz, b + kBlock);
    std::uint32_t bad = 0, down = 0;
    for (index_t e = b; e < b1; ++e) {
      bad += static_cast<U>(ind[e]) >= end;
      down += ind[e] <= ind[e - 1];
    }
    out_of_range += bad;
    descents += down;
  }
  if (out_of_range) return false;
  for (index_t i = 0; i < n; ++i) {
    const index_t e = static_cast<index_t>(ptr[i]);
    if (e > 0 && ptr[i + 1] > ptr[i]) at_row_starts += ind[e] <= ind[e - 1];
  }
  return descents == at_row_starts;
}

template <typename I>
void check_csr_structure(const py::array& indices_a, const py::array& indptr_a, index_t d) {
  const auto indices = as_vector<I>(indices_a, "X.indices", indices_a.shape(0));
  const auto indptr = as_vector<I>(indptr_a, "X.indptr", indptr_a.shape(0));
  const I* ind = indices.data();
  const I* ptr = indptr.data();
  const index_t n = indptr.shape(0) - 1, nnz = indices.shape(0);
  if (ptr[0] != 0 || static_cast<index_t>(ptr[n]) != nnz)
    throw py::value_error("X.indptr must start at 0 and end at nnz");
  if (csr_structure_is_valid(ind, ptr, n, nnz, d)) return;
  for (index_t i = 0; i < n; ++i) {
    if (ptr[i + 1] < ptr[i]) throw py::value_error("X.indptr must be non-decreasing");
    for (index_t e = ptr[i]; e < static_cast<index_t>(ptr[i + 1]); ++e) {
      if (ind[e] < 0 || static_cast<index_t>(ind[e]) >= d)
        throw py::value_error("X.indices out of range [0, n_features)");
      if (e > ptr[i] && ind[e] <= ind[e - 1])
        throw py::value_error(
            "X.indices must be strictly increasing within each row (canonical CSR)");
    }
  }
}

template <typename T>
struct CsrArgs {
  carray<T> data;
  py::array indices, indptr;
  softkmeans::CsrMatrix<T> X;
  CsrArgs(const py::array& data_a, const py::array& indices_a, const py::array& indptr_a, index_t d)
      : data(as_vector<T>(data_a, "X.data", data_a.ndim() == 1 ? data_a.shape(0) : -1)),
        indices(indices_a),
        indptr(indptr_a) {
    if (indptr_a.ndim() != 1 || indptr_a.shape(0) < 2 || d < 1)
      throw py::value_error("X must be non-empty");
    if (indices_a.ndim() != 1 || indices_a.shape(0) != data.shape(0))
      throw py::value_error("X.indices and X.data must have the same length");
    const bool i64 = indptr_a.dtype().equal(py::dtype::of<std::int64_t>());
    if (i64 != indices_a.dtype().equal(py::dtype::of<std::int64_t>()))
      throw py::type_error("X.indices and X.indptr must have the same dtype (int32 or int64)");
    if (i64)
      check_csr_structure<std::int64_t>(indices_a, indptr_a, d);
    else
      check_csr_structure<std::int32_t>(indices_a, indptr_a, d);
    X.data = data.data();
    X.indices = indices.data();
    X.indptr = indptr.data();
    X.index64 = i64;
    X.n = indptr_a.shape(0) - 1;
    X.d = d;
  }
};

// CSR X and dense C (k, d) of one dtype, checked.
template <typename T>
struct CsrPairArgs : CsrArgs<T> {
  carray<T> C;
  index_t k;
  CsrPairArgs(const py::array& data_a, const py::array& indices_a, const py::array& indptr_a,
              index_t d, const py::array& Ca)
      : CsrArgs<T>(data_a, indices_a, indptr_a, d), C(as_matrix<T>(Ca, "C")) {
    if (C.shape(1) != d) throw py::value_error("X and C must have the same number of columns");
    if (C.shape(0) < 1) throw py::value_error("X and C must be non-empty");
    k = C.shape(0);
  }
};

template <typename T>
py::array csr_sq_distances_t(const CsrPairArgs<T>& a, int n_threads) {
  carray<T> D({a.X.n, a.k});
  run_native([&] {
    softkmeans::kernels<T>().csr_sq_distances(a.X, a.C.data(), a.k, D.mutable_data(), n_threads);
  });
  return D;
}

template <typename T>
py::tuple csr_assign_t(const CsrPairArgs<T>& a, int n_threads) {
  carray<std::int64_t> labels(a.X.n);
  carray<T> mind(a.X.n);
  run_native([&] {
    softkmeans::kernels<T>().csr_assign(a.X, a.C.data(), a.k, labels.mutable_data(),
                                        mind.mutable_data(), n_threads);
  });
  return py::make_tuple(labels, mind);
}

template <typename T>
py::array csr_margins_t(const CsrPairArgs<T>& a, int n_threads) {
  carray<T> out(a.X.n);
  run_native([&] {
    softkmeans::kernels<T>().csr_margins(a.X, a.C.data(), a.k, out.mutable_data(), n_threads);
  });
  return out;
}

template <typename T>
py::array csr_responsibilities_t(const CsrPairArgs<T>& a, const std::string& kind_s,
                                 double sigma_in, int n_threads) {
  const softkmeans::Kind kind = parse_kind(kind_s);
  const double sigma = check_sigma(sigma_in, kind);
  carray<T> R({a.X.n, a.k});
  run_native([&] {
    softkmeans::kernels<T>().csr_responsibilities(a.X, a.C.data(), a.k, kind, sigma,
                                                  R.mutable_data(), n_threads);
  });
  return R;
}

// As block_stats_t.
template <typename T>
py::tuple csr_block_stats_t(const CsrPairArgs<T>& a, const std::string& kind_s, double sigma_in,
                            const py::array& wa, int n_threads, bool sums, bool with_labels,
                            bool with_grad) {
  const softkmeans::Kind kind = parse_kind(kind_s);
  const double sigma = check_sigma(sigma_in, kind);
  const index_t n = a.X.n, d = a.X.d;
  auto w = as_vector<double>(wa, "sample_weight", n);
  double *N_p, *S_p;
  std::int64_t* labels_p;
  T* gX_p;
  py::object N = optional_output(sums, {a.k}, &N_p);
  py::object S = optional_output(sums, {a.k, d}, &S_p);
  py::object labels = optional_output(with_labels, {n}, &labels_p);
  py::object gX = optional_output(with_grad, {n, d}, &gX_p);
  double W, obj, J, mm;
  run_native([&] {
    softkmeans::kernels<T>().csr_block_stats(a.X, a.C.data(), a.k, kind, sigma, w.data(), &W, N_p,
                                             S_p, &obj, &J, &mm, labels_p, gX_p, n_threads);
  });
  return py::make_tuple(W, N, S, obj, J, mm, labels, gX);
}

template <typename T>
py::array csr_kpp_potentials_t(const CsrArgs<T>& x, const py::array& wa, const py::array& cla,
                               const py::array& ca, int n_threads) {
  const index_t n = x.X.n;
  auto w = as_vector<double>(wa, "sample_weight", n);
  auto closest = as_vector<double>(cla, "closest", n);
  auto cand = checked_candidates(ca, n);
  const index_t L = cand.shape(0);
  carray<double> pot(L);
  run_native([&] {
    softkmeans::kernels<T>().csr_kmeanspp_candidate_potentials(
        x.X, w.data(), closest.data(), cand.data(), L, pot.mutable_data(), n_threads);
  });
  return pot;
}

template <typename T>
void csr_kpp_update_t(const CsrArgs<T>& x, py::array& cla, std::int64_t center, int n_threads) {
  auto closest = as_vector<double>(cla, "closest", x.X.n);
  if (!closest.writeable()) throw py::value_error("closest must be writeable");
  if (center < 0 || center >= x.X.n) throw py::index_error("center_idx out of range");
  run_native([&] {
    softkmeans::kernels<T>().csr_kmeanspp_update_closest(x.X, center, closest.mutable_data(),
                                                         n_threads);
  });
}

template <typename T>
py::array csr_second_moment_matvec_t(const CsrArgs<T>& x, const py::array& wa, const py::array& va,
                                     int n_threads) {
  auto w = as_vector<double>(wa, "sample_weight", x.X.n);
  auto v = as_vector<double>(va, "v", x.X.d);
  carray<double> out(x.X.d);
  run_native([&] {
    softkmeans::kernels<T>().csr_second_moment_matvec(x.X, w.data(), v.data(), out.mutable_data(),
                                                      n_threads);
  });
  return out;
}

// Calls f(T{}) with T the dtype of X: float for float32, double otherwise (the
// callee's as_matrix rejects anything but float64 there). By equivalence, not
// identity: an equal but non-canonical float32 dtype object (e.g. a
// byte-order-qualified one) is still float32.
template <typename F>
auto by_dtype(const py::array& X, F&& f) {
  if (X.dtype().equal(py::dtype::of<float>())) return f(float{});
  return f(double{});
}

// The kernels of softkmeans/kernels.hpp.
void def_kernels(py::module_& m) {
  m.def(
      "sq_distances",
      [](const py::array& X, const py::array& C, int n_threads) {
        return by_dtype(X, [&](auto t) { return sq_distances_t<decltype(t)>(X, C, n_threads); });
      },
      py::arg("X"), py::arg("C"), py::arg("n_threads") = 0);
  m.def(
      "assign",
      [](const py::array& X, const py::array& C, int n_threads) {
        return by_dtype(X, [&](auto t) { return assign_t<decltype(t)>(X, C, n_threads); });
      },
      py::arg("X"), py::arg("C"), py::arg("n_threads") = 0);

  m.def(
      "margins",
      [](const py::array& X, const py::array& C, int n_threads) {
        return by_dtype(X, [&](auto t) { return margins_t<decltype(t)>(X, C, n_threads); });
      },
      py::arg("X"), py::arg("C"), py::arg("n_threads") = 0);
  m.def(
      "entmax15",
      [](const py::array& Z, int n_threads) {
        return by_dtype(Z, [&](auto t) { return entmax15_t<decltype(t)>(Z, n_threads); });
      },
      py::arg("Z"), py::arg("n_threads") = 0);
  m.def(
      "responsibilities",
      [](const py::array& X, const py::array& C, const std::string& kind, double sigma,
         int n_threads) {
        return by_dtype(X, [&](auto t) {
          return responsibilities_t<decltype(t)>(X, C, kind, sigma, n_threads);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("kind"), py::arg("sigma"), py::arg("n_threads") = 0);
  m.def(
      "block_stats",
      [](const py::array& X, const py::array& C, const std::string& kind, double sigma,
         const py::array& w, int n_threads, bool sums, bool labels, bool grad_x) {
        return by_dtype(X, [&](auto t) {
          return block_stats_t<decltype(t)>(X, C, kind, sigma, w, n_threads, sums, labels, grad_x);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("kind"), py::arg("sigma"), py::arg("sample_weight"),
      py::arg("n_threads") = 0, py::arg("sums") = true, py::arg("labels") = false,
      py::arg("grad_x") = false,
      "(W, N, S, objective, distortion, min_margin, labels, grad_X); None where not asked");
  m.def(
      "hard_stats_bounded",
      [](const py::array& X, const py::array& C, const py::object& C_prev, const py::array& w,
         py::array& labels, py::array& lower, const py::array& group, bool exact, int n_threads) {
        return by_dtype(X, [&](auto t) {
          return hard_stats_bounded_t<decltype(t)>(X, C, C_prev, w, labels, lower, group, exact,
                                                   n_threads);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("C_prev"), py::arg("sample_weight"), py::arg("labels"),
      py::arg("lower"), py::arg("group"), py::arg("exact") = false, py::arg("n_threads") = 0,
      "(W, N, S, distortion, min_margin, n_computed, n_distances); labels and lower updated in "
      "place");
  m.def(
      "weighted_covariance",
      [](const py::array& X, const py::array& w, int n_threads) {
        return by_dtype(
            X, [&](auto t) { return weighted_covariance_t<decltype(t)>(X, w, n_threads); });
      },
      py::arg("X"), py::arg("sample_weight"), py::arg("n_threads") = 0, "(mean (d,), cov (d, d))");
  m.def(
      "kmeanspp_candidate_potentials",
      [](const py::array& X, const py::array& w, const py::array& closest,
         const py::array& cand_idx, int n_threads, const py::object& dist) {
        return by_dtype(X, [&](auto t) {
          return kpp_potentials_t<decltype(t)>(X, w, closest, cand_idx, dist, n_threads);
        });
      },
      py::arg("X"), py::arg("sample_weight"), py::arg("closest"), py::arg("cand_idx"),
      py::arg("n_threads") = 0, py::arg("dist") = py::none(),
      "potentials (L,) float64: sum_i w_i min(closest_i, ||x_i - X[cand_idx[l]]||^2); "
      "dist (L, n) of X's dtype, if given: the distances ||x_i - X[cand_idx[l]]||^2");
  m.def(
      "kmeanspp_update_closest",
      [](const py::array& X, py::array& closest, std::int64_t center_idx, int n_threads) {
        by_dtype(X, [&](auto t) { kpp_update_t<decltype(t)>(X, closest, center_idx, n_threads); });
      },
      py::arg("X"), py::arg("closest"), py::arg("center_idx"), py::arg("n_threads") = 0,
      "in place: closest_i = min(closest_i, ||x_i - X[center_idx]||^2)");
}

// The csr_* kernels: X given as (X_data, X_indices, X_indptr, n_features).
void def_csr_kernels(py::module_& m) {
  // Calls f(CsrPairArgs<T>) with T the dtype of X_data.
  auto with_pair = [](const py::array& data, const py::array& indices, const py::array& indptr,
                      index_t d, const py::array& C, auto&& f) {
    return by_dtype(
        data, [&](auto t) { return f(CsrPairArgs<decltype(t)>(data, indices, indptr, d, C)); });
  };
  // name(X_data, X_indices, X_indptr, n_features, C, n_threads) -> call(args, n_threads).
  auto def_pair = [&](const char* name, auto call) {
    m.def(
        name,
        [=](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
            const py::array& C, int n_threads) {
          return with_pair(data, indices, indptr, d, C,
                           [&](const auto& a) { return py::object(call(a, n_threads)); });
        },
        py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
        py::arg("C"), py::arg("n_threads") = 0);
  };
  def_pair("csr_sq_distances", [](const auto& a, int nt) { return csr_sq_distances_t(a, nt); });
  def_pair("csr_assign", [](const auto& a, int nt) { return csr_assign_t(a, nt); });
  def_pair("csr_margins", [](const auto& a, int nt) { return csr_margins_t(a, nt); });
  m.def(
      "csr_responsibilities",
      [=](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
          const py::array& C, const std::string& kind, double sigma, int n_threads) {
        return with_pair(data, indices, indptr, d, C, [&](const auto& a) {
          return py::object(csr_responsibilities_t(a, kind, sigma, n_threads));
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      py::arg("C"), py::arg("kind"), py::arg("sigma"), py::arg("n_threads") = 0);
  m.def(
      "csr_block_stats",
      [=](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
          const py::array& C, const std::string& kind, double sigma, const py::array& w,
          int n_threads, bool sums, bool labels, bool grad_x) {
        return with_pair(data, indices, indptr, d, C, [&](const auto& a) {
          return py::object(csr_block_stats_t(a, kind, sigma, w, n_threads, sums, labels, grad_x));
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      py::arg("C"), py::arg("kind"), py::arg("sigma"), py::arg("sample_weight"),
      py::arg("n_threads") = 0, py::arg("sums") = true, py::arg("labels") = false,
      py::arg("grad_x") = false,
      "(W, N, S, objective, distortion, min_margin, labels, grad_X); None where not asked");
  m.def(
      "csr_kmeanspp_candidate_potentials",
      [](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
         const py::array& w, const py::array& closest, const py::array& cand_idx, int n_threads) {
        return by_dtype(data, [&](auto t) {
          const CsrArgs<decltype(t)> x(data, indices, indptr, d);
          return csr_kpp_potentials_t(x, w, closest, cand_idx, n_threads);
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      py::arg("sample_weight"), py::arg("closest"), py::arg("cand_idx"), py::arg("n_threads") = 0);
  m.def(
      "csr_kmeanspp_update_closest",
      [](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
         py::array& closest, std::int64_t center_idx, int n_threads) {
        by_dtype(data, [&](auto t) {
          const CsrArgs<decltype(t)> x(data, indices, indptr, d);
          csr_kpp_update_t(x, closest, center_idx, n_threads);
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      py::arg("closest"), py::arg("center_idx"), py::arg("n_threads") = 0);
  m.def(
      "csr_second_moment_matvec",
      [](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
         const py::array& w, const py::array& v, int n_threads) {
        return by_dtype(data, [&](auto t) {
          const CsrArgs<decltype(t)> x(data, indices, indptr, d);
          return csr_second_moment_matvec_t(x, w, v, n_threads);
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      py::arg("sample_weight"), py::arg("v"), py::arg("n_threads") = 0,
      "X^T diag(w) X v, float64 (d,)");
}

// SIMD levels, threads, and how the module was built.
void def_runtime(py::module_& m) {
  m.def("available_simd_levels", [] {
    py::list out;
    for (auto l : softkmeans::available_simd_levels()) out.append(softkmeans::simd_level_name(l));
    return out;
  });
  m.def("selected_simd_level",
        [] { return std::string(softkmeans::simd_level_name(softkmeans::selected_simd_level())); });
  m.def(
      "_set_simd_level",
      [](const std::string& name) {
        softkmeans::SimdLevel level;
        if (!softkmeans::parse_simd_level(name, &level))
          throw py::value_error("unknown SIMD level '" + name + "' (scalar, avx2, avx512)");
        if (!softkmeans::set_simd_level(level))
          throw py::value_error("SIMD level '" + name + "' is not available on this CPU/build");
      },
      py::arg("level"));
  m.def("default_threads", [] { return omp_get_max_threads(); });
  // Dimensions up to this take the direct-difference distance path (config.hpp).
  m.attr("small_dim") = softkmeans::kSmallDim;
  m.attr("openmp_version") = _OPENMP;
#if defined(__clang__)
  m.attr("compiler") = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m.attr("compiler") = std::string("gcc ") + __VERSION__;
#else
  m.attr("compiler") = "unknown";
#endif
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "softkmeans native core (use the softkmeans package, not this module)";
  def_kernels(m);
  def_csr_kernels(m);
  def_runtime(m);
}
