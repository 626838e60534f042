// pybind11 bindings for the softkmeans core: convert, validate shapes and
// dtypes, allocate outputs, release the GIL, call. No algorithm lives here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <omp.h>

#include <cstdint>
#include <string>

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
py::array sq_distances_t(const py::array& Xa, const py::array& Ca, int n_threads) {
  auto X = as_matrix<T>(Xa, "X");
  auto C = as_matrix<T>(Ca, "C");
  check_pair(X, C);
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  carray<T> D({n, k});
  {
    py::gil_scoped_release release;
    softkmeans::sq_distances<T>(X.data(), n, d, C.data(), k, D.mutable_data(), n_threads);
  }
  return D;
}

template <typename T>
py::tuple assign_t(const py::array& Xa, const py::array& Ca, int n_threads) {
  auto X = as_matrix<T>(Xa, "X");
  auto C = as_matrix<T>(Ca, "C");
  check_pair(X, C);
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  carray<std::int64_t> labels(n);
  carray<T> mind(n);
  {
    py::gil_scoped_release release;
    softkmeans::assign<T>(X.data(), n, d, C.data(), k, labels.mutable_data(), mind.mutable_data(),
                          n_threads);
  }
  return py::make_tuple(labels, mind);
}

bool is_float32(const py::array& a) { return a.dtype().is(py::dtype::of<float>()); }

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "softkmeans native core (use the softkmeans package, not this module)";

  m.def(
      "sq_distances",
      [](const py::array& X, const py::array& C, int n_threads) {
        return is_float32(X) ? sq_distances_t<float>(X, C, n_threads)
                             : sq_distances_t<double>(X, C, n_threads);
      },
      py::arg("X"), py::arg("C"), py::arg("n_threads") = 0);
  m.def(
      "assign",
      [](const py::array& X, const py::array& C, int n_threads) {
        return is_float32(X) ? assign_t<float>(X, C, n_threads)
                             : assign_t<double>(X, C, n_threads);
      },
      py::arg("X"), py::arg("C"), py::arg("n_threads") = 0);

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
  m.attr("openmp_version") = _OPENMP;
#if defined(__clang__)
  m.attr("compiler") = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  m.attr("compiler") = std::string("gcc ") + __VERSION__;
#else
  m.attr("compiler") = "unknown";
#endif
}
