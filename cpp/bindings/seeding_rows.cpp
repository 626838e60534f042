// The binding of k-means|| seeding's row-wise helpers (softkmeans/seeding_rows.hpp):
// checks, the GIL released, the call.
#include "softkmeans/seeding_rows.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "arrays.hpp"
#include "interrupt.hpp"

namespace softkmeans_bindings {

namespace {

carray<double> row_uniforms(std::uint64_t seed, std::uint64_t round, index_t start, index_t stop,
                            int n_threads) {
  if (start < 0 || stop < start) throw py::value_error("need 0 <= start <= stop");
  carray<double> out(stop - start);
  run_native([&] {
    softkmeans::row_uniforms(seed, round, start, stop - start, out.mutable_data(), n_threads);
  });
  return out;
}

template <typename T>
void take_closer_t(const py::array& dist_a, const py::array& labels_a, std::int64_t first,
                   py::array& closest_a, py::array& nearest_a, int n_threads) {
  if (dist_a.ndim() != 1) throw py::value_error("dist must be 1-dimensional");
  const index_t n = dist_a.shape(0);
  auto dist = as_vector<T>(dist_a, "dist", n);
  auto labels = as_vector<std::int64_t>(labels_a, "labels", n);
  auto closest = as_vector<double>(closest_a, "closest", n);
  auto nearest = as_vector<std::int64_t>(nearest_a, "nearest", n);
  if (!closest.writeable() || !nearest.writeable())
    throw py::value_error("closest and nearest must be writeable");
  run_native([&] {
    softkmeans::take_closer(dist.data(), labels.data(), n, first, closest.mutable_data(),
                            nearest.mutable_data(), n_threads);
  });
}

}  // namespace

void def_seeding_rows(py::module_& m) {
  m.def("row_uniforms", &row_uniforms, py::arg("seed"), py::arg("round"), py::arg("start"),
        py::arg("stop"), py::arg("n_threads") = 0,
        "(stop - start,) float64: the hashed uniforms of rows start..stop-1 in `round` for "
        "`seed` (each a function of seed, round and the row index only)");
  m.def(
      "take_closer",
      [](const py::array& dist, const py::array& labels, std::int64_t first, py::array& closest,
         py::array& nearest, int n_threads) {
        by_dtype(dist, [&](auto t) {
          take_closer_t<decltype(t)>(dist, labels, first, closest, nearest, n_threads);
        });
      },
      py::arg("dist"), py::arg("labels"), py::arg("first"), py::arg("closest"),
      py::arg("nearest"), py::arg("n_threads") = 0,
      "in place where dist < closest: closest = dist, nearest = labels + first");
}

}  // namespace softkmeans_bindings
