// pybind11 bindings for the softkmeans core: convert, validate shapes and
// dtypes, allocate outputs, release the GIL (interrupt.hpp), call. No
// algorithm lives here.
//
// The entry points that take X dense or CSR are written once, over the access
// type of X (DenseX, CsrX), and defined twice: name(X, ...) and
// csr_name(X_data, X_indices, X_indptr, n_features, ...).
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "bf16.hpp"
#include "choices.hpp"
#include "interrupt.hpp"
#include "softkmeans/csr_check.hpp"
#include "softkmeans/kernels.hpp"
#include "softkmeans/simd.hpp"

namespace py = pybind11;
using softkmeans::index_t;
using softkmeans_bindings::as_matrix;
using softkmeans_bindings::as_vector;
using softkmeans_bindings::by_dtype;
using softkmeans_bindings::carray;
using softkmeans_bindings::run_native;

namespace {

template <typename T>
using Kernels = softkmeans::Kernels<T>;

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

// The k-means++ candidates (L,) int64, L >= 1, each a row index in [0, n).
carray<std::int64_t> checked_candidates(const py::array& ca, index_t n) {
  if (ca.ndim() != 1) throw py::value_error("cand_idx must be 1-dimensional");
  auto cand = as_vector<std::int64_t>(ca, "cand_idx", ca.shape(0));
  if (cand.shape(0) < 1) throw py::value_error("cand_idx must not be empty");
  for (index_t a = 0; a < cand.shape(0); ++a)
    if (cand.data()[a] < 0 || cand.data()[a] >= n) throw py::index_error("cand_idx out of range");
  return cand;
}

// ---- the access types of X: n, d, and the call of a kernel on X ----

// X dense (n, d) of T, converted (not yet checked non-empty: check_alone or
// Centroids does, with its own message).
template <typename T_>
struct DenseX {
  using T = T_;
  static constexpr bool csr = false;
  carray<T> X;
  index_t n, d;
  explicit DenseX(const py::array& Xa) : X(as_matrix<T>(Xa, "X")), n(X.shape(0)), d(X.shape(1)) {}
  // dense(X, n, d, args...), the kernel of dense X.
  template <typename Dense, typename Sparse, typename... Args>
  void call(Dense dense, Sparse, Args&&... args) const {
    (softkmeans::kernels<T>().*dense)(X.data(), n, d, std::forward<Args>(args)...);
  }
};

// The structure of a CSR X, before any kernel runs (the kernels index with it
// unchecked): indices (nnz,) and indptr (n + 1,) of I.
template <typename I>
void check_csr_structure(const py::array& indices_a, const py::array& indptr_a, index_t d) {
  const auto indices = as_vector<I>(indices_a, "X.indices", indices_a.shape(0));
  const auto indptr = as_vector<I>(indptr_a, "X.indptr", indptr_a.shape(0));
  using softkmeans::CsrFault;
  switch (softkmeans::csr_structure_fault(indices.data(), indptr.data(), indptr.shape(0) - 1,
                                          indices.shape(0), d)) {
    case CsrFault::none:
      return;
    case CsrFault::indptr_ends:
      throw py::value_error("X.indptr must start at 0 and end at nnz");
    case CsrFault::indptr_decreasing:
      throw py::value_error("X.indptr must be non-decreasing");
    case CsrFault::index_out_of_range:
      throw py::value_error("X.indices out of range [0, n_features)");
    case CsrFault::indices_not_increasing:
      throw py::value_error(
          "X.indices must be strictly increasing within each row (canonical CSR)");
  }
}

// X as CSR (softkmeans/kernels.hpp, CsrMatrix), checked: data (nnz,) of T,
// indices (nnz,) and indptr (n + 1,) both int32 or both int64, n_features
// columns; non-empty.
template <typename T_>
struct CsrX {
  using T = T_;
  static constexpr bool csr = true;
  carray<T> data;
  py::array indices, indptr;
  softkmeans::CsrMatrix<T> X;
  index_t n, d;
  CsrX(const py::array& data_a, const py::array& indices_a, const py::array& indptr_a, index_t d_)
      : data(as_vector<T>(data_a, "X.data", data_a.ndim() == 1 ? data_a.shape(0) : -1)),
        indices(indices_a),
        indptr(indptr_a),
        d(d_) {
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
    n = indptr_a.shape(0) - 1;
    X.data = data.data();
    X.indices = indices.data();
    X.indptr = indptr.data();
    X.index64 = i64;
    X.n = n;
    X.d = d;
  }
  // sparse(X, args...), the kernel of CSR X.
  template <typename Dense, typename Sparse, typename... Args>
  void call(Dense, Sparse sparse, Args&&... args) const {
    (softkmeans::kernels<T>().*sparse)(X, std::forward<Args>(args)...);
  }
};

// X alone must be non-empty (a CSR X is by construction).
template <typename A>
void check_alone(const A& x) {
  if (x.n < 1 || x.d < 1) throw py::value_error("X must be non-empty");
}

// C (k, d) of X's dtype, checked against X.
template <typename A>
struct Centroids {
  carray<typename A::T> C;
  index_t k;
  Centroids(const A& x, const py::array& Ca) : C(as_matrix<typename A::T>(Ca, "C")) {
    if (x.d != C.shape(1)) throw py::value_error("X and C must have the same number of columns");
    if (x.n < 1 || x.d < 1 || C.shape(0) < 1) throw py::value_error("X and C must be non-empty");
    k = C.shape(0);
  }
};

// ---- the entry points, each over any access type A of X ----

template <typename A>
py::array sq_distances_t(const A& x, const py::array& Ca, int n_threads) {
  using K = Kernels<typename A::T>;
  const Centroids<A> c(x, Ca);
  carray<typename A::T> D({x.n, c.k});
  run_native([&] {
    x.call(&K::sq_distances, &K::csr_sq_distances, c.C.data(), c.k, D.mutable_data(), n_threads);
  });
  return D;
}

template <typename A>
py::tuple assign_t(const A& x, const py::array& Ca, int n_threads) {
  using K = Kernels<typename A::T>;
  const Centroids<A> c(x, Ca);
  carray<std::int64_t> labels(x.n);
  carray<typename A::T> mind(x.n);
  run_native([&] {
    x.call(&K::assign, &K::csr_assign, c.C.data(), c.k, labels.mutable_data(), mind.mutable_data(),
           n_threads);
  });
  return py::make_tuple(labels, mind);
}

template <typename A>
py::array margins_t(const A& x, const py::array& Ca, int n_threads) {
  using K = Kernels<typename A::T>;
  const Centroids<A> c(x, Ca);
  carray<typename A::T> out(x.n);
  run_native([&] {
    x.call(&K::margins, &K::csr_margins, c.C.data(), c.k, out.mutable_data(), n_threads);
  });
  return out;
}

template <typename A>
py::array responsibilities_t(const A& x, const py::array& Ca, const std::string& kind_s,
                             double sigma_in, int n_threads) {
  using K = Kernels<typename A::T>;
  const Centroids<A> c(x, Ca);
  const softkmeans::Kind kind = parse_kind(kind_s);
  const double sigma = check_sigma(sigma_in, kind);
  carray<typename A::T> R({x.n, c.k});
  run_native([&] {
    x.call(&K::responsibilities, &K::csr_responsibilities, c.C.data(), c.k, kind, sigma,
           R.mutable_data(), n_threads);
  });
  return R;
}

// (W, N, S, objective, distortion, min_margin, labels, grad_X); N and S only
// with `sums`, labels with `with_labels`, grad_X (dense (n, d)) with
// `with_grad` (None otherwise).
template <typename A>
py::tuple block_stats_t(const A& x, const py::array& Ca, const std::string& kind_s, double sigma_in,
                        const py::array& wa, int n_threads, bool sums, bool with_labels,
                        bool with_grad) {
  using K = Kernels<typename A::T>;
  const Centroids<A> c(x, Ca);
  const softkmeans::Kind kind = parse_kind(kind_s);
  const double sigma = check_sigma(sigma_in, kind);
  auto w = as_vector<double>(wa, "sample_weight", x.n);
  double *N_p, *S_p;
  std::int64_t* labels_p;
  typename A::T* gX_p;
  py::object N = optional_output(sums, {c.k}, &N_p);
  py::object S = optional_output(sums, {c.k, x.d}, &S_p);
  py::object labels = optional_output(with_labels, {x.n}, &labels_p);
  py::object gX = optional_output(with_grad, {x.n, x.d}, &gX_p);
  double W, obj, J, mm;
  run_native([&] {
    x.call(&K::block_stats, &K::csr_block_stats, c.C.data(), c.k, kind, sigma, w.data(), &W, N_p,
           S_p, &obj, &J, &mm, labels_p, gX_p, n_threads);
  });
  return py::make_tuple(W, N, S, obj, J, mm, labels, gX);
}

// dist: None, or (L, n) of X's dtype (dense X only: the CSR kernel keeps no
// distances).
template <typename A>
py::array kpp_potentials_t(const A& x, const py::array& wa, const py::array& cla,
                           const py::array& ca, int n_threads, const py::object& dista) {
  using T = typename A::T;
  check_alone(x);
  auto w = as_vector<double>(wa, "sample_weight", x.n);
  auto closest = as_vector<double>(cla, "closest", x.n);
  auto cand = checked_candidates(ca, x.n);
  const index_t L = cand.shape(0);
  carray<T> dist;
  if (!dista.is_none()) {
    dist = as_matrix<T>(dista.cast<py::array>(), "dist");
    if (dist.shape(0) != L || dist.shape(1) != x.n)
      throw py::value_error("dist must have shape (L, n): a row per candidate, a column per point");
    if (!dist.writeable()) throw py::value_error("dist must be writeable");
  }
  T* dp = dista.is_none() ? nullptr : dist.mutable_data();
  carray<double> pot(L);
  run_native([&] {
    const auto& kern = softkmeans::kernels<T>();
    if constexpr (A::csr)
      kern.csr_kmeanspp_candidate_potentials(x.X, w.data(), closest.data(), cand.data(), L,
                                             pot.mutable_data(), n_threads);
    else
      kern.kmeanspp_candidate_potentials(x.X.data(), x.n, x.d, w.data(), closest.data(),
                                         cand.data(), L, pot.mutable_data(), dp, n_threads);
  });
  return pot;
}

template <typename A>
void kpp_update_t(const A& x, py::array& cla, std::int64_t center, int n_threads) {
  using K = Kernels<typename A::T>;
  check_alone(x);
  auto closest = as_vector<double>(cla, "closest", x.n);
  if (!closest.writeable()) throw py::value_error("closest must be writeable");
  if (center < 0 || center >= x.n) throw py::index_error("center_idx out of range");
  run_native([&] {
    x.call(&K::kmeanspp_update_closest, &K::csr_kmeanspp_update_closest, center,
           closest.mutable_data(), n_threads);
  });
}

// The kernels of one access type only.

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

// The checked arguments of hard_stats_bounded_t besides X and C: weights,
// labels (n,) and lower (n, t) writeable, group (k,) in [0, t), t <= 64;
// C_prev None, or (k, d) with labels in [0, k).
template <typename T>
struct BoundedArgs {
  carray<double> w, lower;
  carray<std::int64_t> labels, group;
  carray<T> Cp;
  const T* C_prev = nullptr;
  index_t t;
  BoundedArgs(const DenseX<T>& x, index_t k, const py::object& Cpa, const py::array& wa,
              const py::array& la, const py::array& lowa, const py::array& ga)
      : w(as_vector<double>(wa, "sample_weight", x.n)),
        labels(as_vector<std::int64_t>(la, "labels", x.n)),
        group(as_vector<std::int64_t>(ga, "group", k)) {
    lower = as_matrix<double>(lowa, "lower");
    t = lower.shape(1);
    if (lower.shape(0) != x.n || t < 1 || t > 64)
      throw py::value_error("lower must have n rows and 1 to 64 columns (groups)");
    if (!labels.writeable() || !lower.writeable())
      throw py::value_error("labels and lower must be writeable");
    for (index_t j = 0; j < k; ++j)
      if (group.data()[j] < 0 || group.data()[j] >= t)
        throw py::value_error("group must be in [0, t), t the columns of lower");
    if (Cpa.is_none()) return;
    Cp = as_matrix<T>(Cpa.cast<py::array>(), "C_prev");
    if (Cp.shape(0) != k || Cp.shape(1) != x.d)
      throw py::value_error("C_prev must have the shape of C");
    const std::int64_t* lp = labels.data();
    for (index_t i = 0; i < x.n; ++i)
      if (lp[i] < 0 || lp[i] >= k) throw py::value_error("labels must be in [0, k)");
    C_prev = Cp.data();
  }
};

// (W, N, S, distortion, min_margin, n_computed, n_distances); labels (n,)
// int64 and lower (n, t) float64 updated in place; group (k,) int64 in
// [0, t), t <= 64. C_prev None: every row computed (labels and lower are
// outputs only); else C_prev (k, d) and labels in [0, k).
template <typename T>
py::tuple hard_stats_bounded_t(const DenseX<T>& x, const py::array& Ca, const py::object& Cpa,
                               const py::array& wa, py::array& la, py::array& lowa,
                               const py::array& ga, bool exact, int n_threads) {
  const Centroids<DenseX<T>> c(x, Ca);
  BoundedArgs<T> b(x, c.k, Cpa, wa, la, lowa, ga);
  carray<double> N(c.k);
  carray<double> S({c.k, x.d});
  double W, J, mm;
  index_t n_computed = 0;
  std::int64_t n_distances = 0;
  run_native([&] {
    softkmeans::kernels<T>().hard_stats_bounded(
        x.X.data(), x.n, x.d, c.C.data(), c.k, b.C_prev, b.group.data(), b.t, b.w.data(), &W,
        N.mutable_data(), S.mutable_data(), &J, &mm, b.labels.mutable_data(),
        b.lower.mutable_data(), exact, &n_computed, &n_distances, n_threads);
  });
  return py::make_tuple(W, N, S, J, mm, n_computed, n_distances);
}

template <typename T>
py::tuple weighted_covariance_t(const DenseX<T>& x, const py::array& wa, int n_threads) {
  check_alone(x);
  auto w = as_vector<double>(wa, "sample_weight", x.n);
  carray<double> mean(x.d);
  carray<double> cov({x.d, x.d});
  run_native([&] {
    softkmeans::kernels<T>().weighted_covariance(
        x.X.data(), x.n, x.d, w.data(), mean.mutable_data(), cov.mutable_data(), n_threads);
  });
  return py::make_tuple(mean, cov);
}

template <typename T>
py::array dense_second_moment_matvec_t(const DenseX<T>& x, const py::array& wa,
                                       const py::object& mean_obj, const py::array& va,
                                       int n_threads) {
  auto w = as_vector<double>(wa, "sample_weight", x.n);
  auto v = as_vector<double>(va, "v", x.d);
  const bool centred = !mean_obj.is_none();
  auto mean = as_vector<double>(centred ? py::array(mean_obj) : py::array(va), "mean", x.d);
  carray<double> out(x.d);
  run_native([&] {
    softkmeans::kernels<T>().second_moment_matvec(x.X.data(), x.n, x.d, w.data(),
                                                  centred ? mean.data() : nullptr, v.data(),
                                                  out.mutable_data(), n_threads);
  });
  return out;
}

template <typename T>
py::array second_moment_matvec_t(const CsrX<T>& x, const py::array& wa, const py::array& va,
                                 int n_threads) {
  auto w = as_vector<double>(wa, "sample_weight", x.n);
  auto v = as_vector<double>(va, "v", x.d);
  carray<double> out(x.d);
  run_native([&] {
    softkmeans::kernels<T>().csr_second_moment_matvec(x.X, w.data(), v.data(), out.mutable_data(),
                                                      n_threads);
  });
  return out;
}

// ---- the Python functions ----

// name(X, args...) -> entry(DenseX<T>, args...); extra: the py::arg of each
// of args (and a docstring).
template <typename... Args, typename Entry, typename... Extra>
void def_dense(py::module_& m, const char* name, Entry entry, const Extra&... extra) {
  m.def(
      name,
      [entry](const py::array& X, Args... args) {
        return by_dtype(X, [&](auto t) { return entry(DenseX<decltype(t)>(X), args...); });
      },
      py::arg("X"), extra...);
}

// name(X_data, X_indices, X_indptr, n_features, args...) -> entry(CsrX<T>, args...).
template <typename... Args, typename Entry, typename... Extra>
void def_csr(py::module_& m, const char* name, Entry entry, const Extra&... extra) {
  m.def(
      name,
      [entry](const py::array& data, const py::array& indices, const py::array& indptr, index_t d,
              Args... args) {
        return by_dtype(data, [&](auto t) {
          return entry(CsrX<decltype(t)>(data, indices, indptr, d), args...);
        });
      },
      py::arg("X_data"), py::arg("X_indices"), py::arg("X_indptr"), py::arg("n_features"),
      extra...);
}

// name (dense X) and csr_name (CSR X), both -> entry(x, args...).
template <typename... Args, typename Entry, typename... Extra>
void def_dense_and_csr(py::module_& m, const std::string& name, Entry entry,
                       const Extra&... extra) {
  def_dense<Args...>(m, name.c_str(), entry, extra...);
  def_csr<Args...>(m, ("csr_" + name).c_str(), entry, extra...);
}

// The k-means++ steps: the CSR ones keep no distances (no `dist`).
void def_kmeanspp(py::module_& m, const py::arg_v& n_threads) {
  using Arr = const py::array&;
  const auto potentials = [](const auto& x, Arr w, Arr closest, Arr cand_idx, int nt,
                             const py::object& dist) {
    return kpp_potentials_t(x, w, closest, cand_idx, nt, dist);
  };
  def_dense<Arr, Arr, Arr, int, const py::object&>(
      m, "kmeanspp_candidate_potentials", potentials, py::arg("sample_weight"), py::arg("closest"),
      py::arg("cand_idx"), n_threads, py::arg("dist") = py::none(),
      "potentials (L,) float64: sum_i w_i min(closest_i, ||x_i - X[cand_idx[l]]||^2); "
      "dist (L, n) of X's dtype, if given: the distances ||x_i - X[cand_idx[l]]||^2");
  def_csr<Arr, Arr, Arr, int>(
      m, "csr_kmeanspp_candidate_potentials",
      [=](const auto& x, Arr w, Arr closest, Arr cand_idx, int nt) {
        return potentials(x, w, closest, cand_idx, nt, py::none());
      },
      py::arg("sample_weight"), py::arg("closest"), py::arg("cand_idx"), n_threads);
  const auto update = [](const auto& x, py::array& closest, std::int64_t center_idx, int nt) {
    kpp_update_t(x, closest, center_idx, nt);
  };
  def_dense<py::array&, std::int64_t, int>(
      m, "kmeanspp_update_closest", update, py::arg("closest"), py::arg("center_idx"), n_threads,
      "in place: closest_i = min(closest_i, ||x_i - X[center_idx]||^2)");
  def_csr<py::array&, std::int64_t, int>(m, "csr_kmeanspp_update_closest", update,
                                         py::arg("closest"), py::arg("center_idx"), n_threads);
}

// The kernels of softkmeans/kernels.hpp.
void def_kernels(py::module_& m) {
  using Arr = const py::array&;
  const py::arg_v n_threads = py::arg("n_threads") = 0;
  def_dense_and_csr<Arr, int>(
      m, "sq_distances", [](const auto& x, Arr C, int nt) { return sq_distances_t(x, C, nt); },
      py::arg("C"), n_threads);
  def_dense_and_csr<Arr, int>(
      m, "assign", [](const auto& x, Arr C, int nt) { return assign_t(x, C, nt); }, py::arg("C"),
      n_threads);
  def_dense_and_csr<Arr, int>(
      m, "margins", [](const auto& x, Arr C, int nt) { return margins_t(x, C, nt); }, py::arg("C"),
      n_threads);
  m.def(
      "entmax15",
      [](Arr Z, int nt) {
        return by_dtype(Z, [&](auto t) { return entmax15_t<decltype(t)>(Z, nt); });
      },
      py::arg("Z"), n_threads);
  def_dense_and_csr<Arr, const std::string&, double, int>(
      m, "responsibilities",
      [](const auto& x, Arr C, const std::string& kind, double sigma, int nt) {
        return responsibilities_t(x, C, kind, sigma, nt);
      },
      py::arg("C"), py::arg("kind"), py::arg("sigma"), n_threads);
  def_dense_and_csr<Arr, const std::string&, double, Arr, int, bool, bool, bool>(
      m, "block_stats",
      [](const auto& x, Arr C, const std::string& kind, double sigma, Arr w, int nt, bool sums,
         bool labels,
         bool grad_x) { return block_stats_t(x, C, kind, sigma, w, nt, sums, labels, grad_x); },
      py::arg("C"), py::arg("kind"), py::arg("sigma"), py::arg("sample_weight"), n_threads,
      py::arg("sums") = true, py::arg("labels") = false, py::arg("grad_x") = false,
      "(W, N, S, objective, distortion, min_margin, labels, grad_X); None where not asked");
  def_dense<Arr, const py::object&, Arr, py::array&, py::array&, Arr, bool, int>(
      m, "hard_stats_bounded",
      [](const auto& x, Arr C, const py::object& C_prev, Arr w, py::array& labels, py::array& lower,
         Arr group, bool exact,
         int nt) { return hard_stats_bounded_t(x, C, C_prev, w, labels, lower, group, exact, nt); },
      py::arg("C"), py::arg("C_prev"), py::arg("sample_weight"), py::arg("labels"),
      py::arg("lower"), py::arg("group"), py::arg("exact") = false, n_threads,
      "(W, N, S, distortion, min_margin, n_computed, n_distances); labels and lower updated in "
      "place");
  def_dense<Arr, int>(
      m, "weighted_covariance",
      [](const auto& x, Arr w, int nt) { return weighted_covariance_t(x, w, nt); },
      py::arg("sample_weight"), n_threads, "(mean (d,), cov (d, d))");
  def_dense<Arr, const py::object&, Arr, int>(
      m, "second_moment_matvec",
      [](const auto& x, Arr w, const py::object& mean, Arr v, int nt) {
        return dense_second_moment_matvec_t(x, w, mean, v, nt);
      },
      py::arg("sample_weight"), py::arg("mean"), py::arg("v"), n_threads,
      "sum_i w_i ((x_i - mean) . v) (x_i - mean), float64 (d,) (mean None: 0)");
  def_kmeanspp(m, n_threads);
  def_csr<Arr, Arr, int>(
      m, "csr_second_moment_matvec",
      [](const auto& x, Arr w, Arr v, int nt) { return second_moment_matvec_t(x, w, v, nt); },
      py::arg("sample_weight"), py::arg("v"), n_threads, "X^T diag(w) X v, float64 (d,)");
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

void def_balanced(py::module_& m);  // balanced.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "softkmeans native core (use the softkmeans package, not this module)";
  def_kernels(m);
  softkmeans_bindings::def_group_pruned(m);
  softkmeans_bindings::def_moments(m);
  softkmeans_bindings::def_seeding_rows(m);
  def_runtime(m);
  softkmeans_bindings::def_bf16(m);
  softkmeans_bindings::def_choices(m);
  def_balanced(m);
}
