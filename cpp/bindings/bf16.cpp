// The bindings of the bf16 candidate pass (softkmeans/bf16.hpp): its switch and
// the test-only bound entry; and the split-bf16 tiles' (softkmeans/amx.hpp).
#include "bf16.hpp"

#include <pybind11/numpy.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "softkmeans/amx.hpp"
#include "softkmeans/bf16.hpp"
#include "softkmeans/config.hpp"

namespace py = pybind11;
using softkmeans::index_t;

namespace softkmeans_bindings {
namespace {

using f32 = py::array_t<float, py::array::c_style>;

// A C-contiguous 2-D float32 array of finite values, or a TypeError/ValueError naming it.
f32 finite_matrix(const py::array& a, const char* name) {
  if (!py::isinstance<f32>(a) || !(a.flags() & py::array::c_style))
    throw py::type_error(std::string(name) + " must be a C-contiguous array of dtype float32");
  if (a.ndim() != 2 || a.shape(0) < 1 || a.shape(1) < 1)
    throw py::value_error(std::string(name) + " must be 2-dimensional and non-empty");
  const f32 m = py::reinterpret_borrow<f32>(a);
  for (py::ssize_t i = 0; i < m.size(); ++i)
    if (!std::isfinite(m.data()[i]))
      throw py::value_error(std::string(name) + " must hold finite values");
  return m;
}

}  // namespace

void def_bf16(py::module_& m) {
  m.def("_bf16_available", &softkmeans::bf16_available,
        "The CPU has AVX512_BF16 and the build compiled the bf16 candidate pass");
  m.def("_bf16_enabled", &softkmeans::bf16_enabled, "The bf16 candidate pass is in use");
  m.def(
      "_set_bf16_enabled",
      [](bool on) {
        if (!softkmeans::set_bf16_enabled(on))
          throw py::value_error("the bf16 candidate pass is not available on this CPU/build");
      },
      py::arg("on"));
  m.def(
      "_bf16_distance_bounds",
      [](const py::array& X_, const py::array& C_) {
        const f32 X = finite_matrix(X_, "X"), C = finite_matrix(C_, "C");
        const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
        if (C.shape(1) != d) throw py::value_error("C must have as many columns as X");
        if (d <= softkmeans::kSmallDim)
          throw py::value_error("X must have more than " + std::to_string(softkmeans::kSmallDim) +
                                " columns (the bf16 pass is on the micro-kernel path)");
        py::array_t<double> approx({n, k}), eps({n, k});
        py::array_t<std::uint8_t> cand({n, k});
        bool ok;
        {
          py::gil_scoped_release release;
          ok = softkmeans::bf16_distance_bounds(X.data(), n, d, C.data(), k,
                                                approx.mutable_data(), eps.mutable_data(),
                                                cand.mutable_data());
        }
        if (!ok) return py::object(py::none());
        return py::object(py::make_tuple(approx, eps, cand.attr("astype")("bool")));
      },
      py::arg("X"), py::arg("C"),
      "(D~, eps, candidates) of every pair, or None where the pass is unavailable or declines");
  m.def("_amx_available", &softkmeans::amx_available,
        "The build compiled the split-bf16 tile kernels, the CPU has AMX-BF16 and Linux "
        "granted the tile permission");
  m.def(
      "_amx_distances",
      [](const py::array& X_, const py::array& C_, const py::array& shift_) {
        const f32 X = finite_matrix(X_, "X"), C = finite_matrix(C_, "C");
        const f32 shift = finite_matrix(shift_, "shift");
        const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
        if (C.shape(1) != d || shift.shape(0) != 1 || shift.shape(1) != d)
          throw py::value_error("C and shift (1, d) must have as many columns as X");
        if (!softkmeans::amx_available()) return py::object(py::none());
        const softkmeans::AmxPanels P = softkmeans::amx_panels(C.data(), k, d, shift.data());
        const index_t ld = P.tiles * 16, rows = softkmeans::kAmxRows;
        py::array_t<float> out({n, ld});
        bool ok = true;
        {
          py::gil_scoped_release release;
          std::vector<std::uint16_t> parts(softkmeans::amx_parts_size(P));
          for (index_t i0 = 0; i0 < n && ok; i0 += rows)
            ok = softkmeans::amx_distances(P, X.data() + i0 * d, std::min(rows, n - i0),
                                           out.mutable_data() + i0 * ld, ld, parts.data());
        }
        if (!ok) return py::object(py::none());
        return py::object(out[py::make_tuple(py::slice(0, n, 1), py::slice(0, k, 1))]);
      },
      py::arg("X"), py::arg("C"), py::arg("shift"),
      "D~ (n, k) of the split-bf16 tiles (amx_sq_slack bounds it), or None where they are "
      "unavailable or decline");
  m.def(
      "_amx_sq_slack",
      [](double xu, double cu, double dist_sq, index_t dim) {
        return softkmeans::amx_sq_slack(xu, cu, dist_sq, dim);
      },
      py::arg("xu"), py::arg("cu"), py::arg("dist_sq"), py::arg("dim"),
      "The bound on |D~ - ||x - c||^2| where ||x - s|| <= xu, ||c - s|| <= cu, "
      "||x - c||^2 <= dist_sq");
}

}  // namespace softkmeans_bindings
