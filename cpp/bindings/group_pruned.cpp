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

// The outputs both assignments fill (kernels.hpp): labels (n,) int64 and
// min_sq_dist (n,) T; with margins also second (n,) T and beyond (n,) float64;
// n_distances.
template <typename T>
struct AssignOutputs {
  AssignOutputs(index_t n, bool margins)
      : margins(margins), labels(n), mind(n), second(margins ? n : 0), beyond(margins ? n : 0) {}
  T* second_or_null() { return margins ? second.mutable_data() : nullptr; }
  double* beyond_or_null() { return margins ? beyond.mutable_data() : nullptr; }
  // (labels, min_sq_dist, n_distances), or with margins (labels, min_sq_dist,
  // second, beyond, n_distances).
  py::tuple result() const {
    if (margins) return py::make_tuple(labels, mind, second, beyond, n_distances);
    return py::make_tuple(labels, mind, n_distances);
  }

  bool margins;
  carray<std::int64_t> labels;
  carray<T> mind, second;
  carray<double> beyond;
  std::int64_t n_distances = 0;
};

// (labels (n,) int64, min_sq_dist (n,) X's dtype, n_distances): assign's
// labels and minima, bit for bit; group (k,) int64 in [0, 64). margins: also
// second (n,) X's dtype and beyond (n,) float64 (kernels.hpp), before
// n_distances.
template <typename T>
py::tuple assign_grouped_t(const py::array& Xa, const py::array& Ca, const py::array& ga,
                           bool margins, int n_threads) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  check_points(X, C);
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  const auto group = as_vector<std::int64_t>(ga, "group", k);
  index_t t = 0;
  for (index_t j = 0; j < k; ++j) {
    const std::int64_t g = group.data()[j];
    if (g < 0 || g >= 64) throw py::value_error("group must be in [0, 64)");
    t = std::max<index_t>(t, g + 1);
  }
  AssignOutputs<T> out(n, margins);
  run_native([&] {
    softkmeans::kernels<T>().assign_grouped(X.data(), n, d, C.data(), k, group.data(), t,
                                            out.labels.mutable_data(), out.mind.mutable_data(),
                                            out.second_or_null(), out.beyond_or_null(),
                                            &out.n_distances, n_threads);
  });
  return out.result();
}

// assign_grouped_t's outputs, pruned by the projection on Q (d, p) float64
// about mu (d,) float64 (kernels.hpp's assign_projected).
template <typename T>
py::tuple assign_projected_t(const py::array& Xa, const py::array& Ca, const py::array& Qa,
                             const py::array& mua, bool margins, int n_threads) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  check_points(X, C);
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  const auto Q = as_matrix<double>(Qa, "Q");
  if (Q.shape(0) != d || Q.shape(1) < 1 || Q.shape(1) > d)
    throw py::value_error("Q must be (d, p) with 1 <= p <= d, d the columns of X");
  const index_t p = Q.shape(1);
  const auto mu = as_vector<double>(mua, "mu", d);
  AssignOutputs<T> out(n, margins);
  run_native([&] {
    softkmeans::kernels<T>().assign_projected(X.data(), n, d, C.data(), k, Q.data(), mu.data(), p,
                                              out.labels.mutable_data(), out.mind.mutable_data(),
                                              out.second_or_null(), out.beyond_or_null(),
                                              &out.n_distances, n_threads);
  });
  return out.result();
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
