// The array conversions every binding file shares: dtype and shape checks of
// the raw-pointer contract (the Python layer converts; these only guard).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "softkmeans/kernels.hpp"

namespace softkmeans_bindings {

namespace py = pybind11;
using softkmeans::index_t;

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

// Rejects points X (n, d) and centroids C (k, d) of different widths, or any
// of n, d, k zero.
template <typename T>
void check_points(const carray<T>& X, const carray<T>& C) {
  if (C.shape(1) != X.shape(1))
    throw py::value_error("X and C must have the same number of columns");
  if (X.shape(0) < 1 || X.shape(1) < 1 || C.shape(0) < 1)
    throw py::value_error("X and C must be non-empty");
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

// The group-pruned assignment (group_pruned.cpp).
void def_group_pruned(py::module_& m);

// The validation pass's read (moments.cpp).
void def_moments(py::module_& m);

// k-means|| seeding's row-wise helpers (seeding_rows.cpp).
void def_seeding_rows(py::module_& m);

}  // namespace softkmeans_bindings
