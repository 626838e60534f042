// The binding of the validation pass's read (cpp/src/impl/moments.hpp):
// checks, the GIL released, the call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans_bindings {

namespace {

template <typename T>
py::tuple feature_moments_t(const py::array& Xa, const py::array& wa, index_t chunk_rows,
                            int n_threads) {
  auto X = as_matrix<T>(Xa, "X");
  const index_t n = X.shape(0), d = X.shape(1);
  auto w = as_vector<double>(wa, "sample_weight", n);
  if (n < 1 || d < 1) throw py::value_error("X must be non-empty");
  if (chunk_rows < 1) throw py::value_error("chunk_rows must be at least 1");
  const index_t chunks = (n + chunk_rows - 1) / chunk_rows;
  carray<double> W(chunks), mean({chunks, d}), M2({chunks, d}), max_abs(chunks);
  carray<std::uint8_t> finite(chunks);
  run_native([&] {
    softkmeans::kernels<T>().feature_moments(X.data(), n, d, w.data(), chunk_rows,
                                             W.mutable_data(), mean.mutable_data(),
                                             M2.mutable_data(), max_abs.mutable_data(),
                                             finite.mutable_data(), n_threads);
  });
  return py::make_tuple(W, mean, M2, max_abs, finite.attr("astype")("bool"));
}

}  // namespace

void def_moments(py::module_& m) {
  m.def(
      "feature_moments",
      [](const py::array& X, const py::array& w, index_t chunk_rows, int n_threads) {
        return by_dtype(X, [&](auto t) {
          return feature_moments_t<decltype(t)>(X, w, chunk_rows, n_threads);
        });
      },
      py::arg("X"), py::arg("sample_weight"), py::arg("chunk_rows"), py::arg("n_threads") = 0,
      "(W (c,), mean (c, d), M2 (c, d), max_abs (c,), finite (c,) bool) of each chunk of "
      "chunk_rows rows: the weights' sum, the features' weighted mean and sum of squared "
      "deviations, the largest |x| (of a finite chunk), whether every value is finite");
}

}  // namespace softkmeans_bindings
