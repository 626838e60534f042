// The binding of the group-pruned assignment (cpp/src/impl/group_pruned.hpp):
// checks, the GIL released, the call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans_bindings {

namespace {

// (labels (n,) int64, min_sq_dist (n,) X's dtype, n_distances): assign's
// labels and minima, bit for bit; group (k,) int64 in [0, 64). margins: also
// second (n,) X's dtype and beyond (n,) float64 (kernels.hpp), before
// n_distances.
template <typename T>
py::tuple assign_grouped_t(const py::array& Xa, const py::array& Ca, const py::array& ga,
                           bool margins, int n_threads) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  if (C.shape(1) != d) throw py::value_error("X and C must have the same number of columns");
  if (n < 1 || d < 1 || k < 1) throw py::value_error("X and C must be non-empty");
  const auto group = as_vector<std::int64_t>(ga, "group", k);
  index_t t = 0;
  for (index_t j = 0; j < k; ++j) {
    const std::int64_t g = group.data()[j];
    if (g < 0 || g >= 64) throw py::value_error("group must be in [0, 64)");
    t = std::max<index_t>(t, g + 1);
  }
  carray<std::int64_t> labels(n);
  carray<T> mind(n), second(margins ? n : 0);
  carray<double> beyond(margins ? n : 0);
  std::int64_t n_distances = 0;
  run_native([&] {
    softkmeans::kernels<T>().assign_grouped(
        X.data(), n, d, C.data(), k, group.data(), t, labels.mutable_data(),
        mind.mutable_data(), margins ? second.mutable_data() : nullptr,
        margins ? beyond.mutable_data() : nullptr, &n_distances, n_threads);
  });
  if (margins) return py::make_tuple(labels, mind, second, beyond, n_distances);
  return py::make_tuple(labels, mind, n_distances);
}

// assign_grouped_t's outputs, pruned by the projection on Q (d, p) float64
// about mu (d,) float64 (kernels.hpp's assign_projected).
template <typename T>
py::tuple assign_projected_t(const py::array& Xa, const py::array& Ca, const py::array& Qa,
                             const py::array& mua, bool margins, int n_threads) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  if (C.shape(1) != d) throw py::value_error("X and C must have the same number of columns");
  if (n < 1 || d < 1 || k < 1) throw py::value_error("X and C must be non-empty");
  const auto Q = as_matrix<double>(Qa, "Q");
  if (Q.shape(0) != d || Q.shape(1) < 1 || Q.shape(1) > d)
    throw py::value_error("Q must be (d, p) with 1 <= p <= d, d the columns of X");
  const index_t p = Q.shape(1);
  const auto mu = as_vector<double>(mua, "mu", d);
  carray<std::int64_t> labels(n);
  carray<T> mind(n), second(margins ? n : 0);
  carray<double> beyond(margins ? n : 0);
  std::int64_t n_distances = 0;
  run_native([&] {
    softkmeans::kernels<T>().assign_projected(
        X.data(), n, d, C.data(), k, Q.data(), mu.data(), p, labels.mutable_data(),
        mind.mutable_data(), margins ? second.mutable_data() : nullptr,
        margins ? beyond.mutable_data() : nullptr, &n_distances, n_threads);
  });
  if (margins) return py::make_tuple(labels, mind, second, beyond, n_distances);
  return py::make_tuple(labels, mind, n_distances);
}

}  // namespace

void def_group_pruned(py::module_& m) {
  m.def(
      "assign_grouped",
      [](const py::array& X, const py::array& C, const py::array& group, int n_threads,
         bool margins) {
        return by_dtype(X, [&](auto t) {
          return assign_grouped_t<decltype(t)>(X, C, group, margins, n_threads);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("group"), py::arg("n_threads") = 0,
      py::arg("margins") = false,
      "(labels, min_sq_dist, n_distances): assign's, computing only the centroid groups that "
      "may hold a row's nearest; margins: (labels, min_sq_dist, second, beyond, n_distances)");
  m.def(
      "assign_projected",
      [](const py::array& X, const py::array& C, const py::array& Q, const py::array& mu,
         int n_threads, bool margins) {
        return by_dtype(X, [&](auto t) {
          return assign_projected_t<decltype(t)>(X, C, Q, mu, margins, n_threads);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("Q"), py::arg("mu"), py::arg("n_threads") = 0,
      py::arg("margins") = false,
      "assign_grouped's outputs, computing only the centroids whose distance in the "
      "projection on Q's columns about mu (with the residual's norm) may be the row's least");
}

}  // namespace softkmeans_bindings
