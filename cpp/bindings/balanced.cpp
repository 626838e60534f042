// Binding of the balanced solvers (softkmeans/balanced.hpp) and of the fused
// pass at offsets (kernels.hpp biased_hard_stats): checks shapes and dtypes,
// copies the prices, releases the GIL, calls.
#include "softkmeans/balanced.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <tuple>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "softkmeans/kernels.hpp"

namespace py = pybind11;

namespace softkmeans_bindings {

namespace {

// (labels (n,) int64, gap (n,) and dist (n,) X's dtype, W, N (k,), S (k, d),
// J): the fused
// pass at offsets g (k,) float64, interruptible (run_native).
template <typename T>
py::tuple biased_hard_stats_t(const py::array& Xa, const py::array& Ca, const py::array& ga,
                              const py::array& wa, int n_threads) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  if (C.shape(1) != d) throw py::value_error("X and C must have the same number of columns");
  if (n < 1 || d < 1 || k < 1) throw py::value_error("X and C must be non-empty");
  const auto g = as_vector<double>(ga, "g", k);
  const auto w = as_vector<double>(wa, "sample_weight", n);
  carray<std::int64_t> labels(n);
  carray<T> gap(n), dist(n);
  carray<double> N(k), S({k, d});
  double W = 0.0, J = 0.0;
  run_native([&] {
    softkmeans::kernels<T>().biased_hard_stats(X.data(), n, d, C.data(), k, g.data(), w.data(), &W,
                                               N.mutable_data(), S.mutable_data(), &J,
                                               labels.mutable_data(), gap.mutable_data(),
                                               dist.mutable_data(), n_threads);
  });
  return py::make_tuple(labels, gap, dist, W, N, S, J);
}

}  // namespace

void def_biased(py::module_& m) {
  m.def(
      "biased_hard_stats",
      [](const py::array& X, const py::array& C, const py::array& g, const py::array& w,
         int n_threads) {
        return by_dtype(X, [&](auto t) {
          return biased_hard_stats_t<decltype(t)>(X, C, g, w, n_threads);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("g"), py::arg("sample_weight"),
      py::arg("n_threads") = 0,
      "(labels, gap, dist, W, N, S, J): argmin_j (D_ij - g_j), the gap to the second smallest, "
      "D at the label, and the hard statistics at those labels, one pass");
}

}  // namespace softkmeans_bindings

namespace {

template <typename T>
using carray = py::array_t<T, py::array::c_style>;

template <typename T>
carray<T> checked(const py::array& a, const char* name, int ndim) {
  if (!py::isinstance<carray<T>>(a) || !(a.flags() & py::array::c_style) || a.ndim() != ndim)
    throw py::type_error(std::string(name) + " must be a C-contiguous " + std::to_string(ndim) +
                         "-d array of dtype " + py::str(py::dtype::of<T>()).cast<std::string>());
  return py::reinterpret_borrow<carray<T>>(a);
}

}  // namespace

void def_balanced(py::module_& m) {
  softkmeans_bindings::def_biased(m);
  m.def(
      "balanced_auction",
      [](const py::array& cand_, const py::array& cost_, const py::array& beyond_,
         const py::array& w_, const py::array& caps_, const py::array& prices_,
         const py::array& owner_, bool free_at_zero, double eps, int64_t max_bids) {
        auto cand = checked<int64_t>(cand_, "cand", 2);
        auto cost = checked<double>(cost_, "cost", 2);
        auto beyond = checked<double>(beyond_, "beyond", 1);
        auto w = checked<double>(w_, "w", 1);
        auto caps = checked<double>(caps_, "caps", 1);
        auto prices_in = checked<double>(prices_, "prices", 1);
        auto owner_in = checked<int64_t>(owner_, "owner", 1);
        const int64_t n = cand.shape(0), m = cand.shape(1), k = caps.shape(0);
        if (cost.shape(0) != n || cost.shape(1) != m || beyond.shape(0) != n || w.shape(0) != n ||
            prices_in.shape(0) != k || owner_in.shape(0) != n || m < 1 || k < 1 || !(eps > 0))
          throw py::value_error("balanced_auction: inconsistent shapes or eps <= 0");
        carray<double> prices(k);
        std::copy(prices_in.data(), prices_in.data() + k, prices.mutable_data());
        carray<int64_t> owner(n);
        std::copy(owner_in.data(), owner_in.data() + n, owner.mutable_data());
        int64_t short_row = -1;
        softkmeans::AuctionStatus status;
        {
          py::gil_scoped_release release;
          status = softkmeans::balanced_auction(
              cand.data(), cost.data(), beyond.data(), w.data(), n, m, caps.data(), k,
              prices.mutable_data(), free_at_zero, eps, max_bids, owner.mutable_data(), &short_row);
        }
        return std::make_tuple(static_cast<int>(status), owner, prices, short_row);
      },
      "One epsilon phase of the balanced forward auction (rows kept from owner where they may):\n"
      "(status, owner, prices, short_row).");
  m.def(
      "balanced_counts",
      [](const py::array& D_, const py::array& targets_, const py::array& g_,
         const py::array& owner_, int64_t rows_per_move, double band, int64_t edges_per_row,
         double slack, int64_t max_tries) {
        auto D = checked<double>(D_, "D", 2);
        auto targets = checked<int64_t>(targets_, "targets", 1);
        auto g_in = checked<double>(g_, "g", 1);
        auto owner_in = checked<int64_t>(owner_, "owner", 1);
        const int64_t n = D.shape(0), k = D.shape(1);
        if (targets.shape(0) != k || g_in.shape(0) != k || owner_in.shape(0) != n || k < 1 ||
            rows_per_move < 1 || max_tries < 1 || edges_per_row < 1)
          throw py::value_error("balanced_counts: inconsistent shapes");
        carray<double> g(k);
        std::copy(g_in.data(), g_in.data() + k, g.mutable_data());
        carray<int64_t> owner(n);
        std::copy(owner_in.data(), owner_in.data() + n, owner.mutable_data());
        int64_t moves = 0, rows_used = 0;
        softkmeans::TransferStatus status;
        softkmeans_bindings::run_native([&] {  // Ctrl-C stops it between moves
          std::copy(g_in.data(), g_in.data() + k, g.mutable_data());
          std::copy(owner_in.data(), owner_in.data() + n, owner.mutable_data());
          status = softkmeans::balanced_counts(D.data(), n, k, targets.data(), rows_per_move, band,
                                               edges_per_row, slack, max_tries, g.mutable_data(),
                                               owner.mutable_data(), &moves, &rows_used);
        });
        return std::make_tuple(static_cast<int>(status), owner, g, moves, rows_used);
      },
      "The hard balanced assignment to integer counts from the offsets g:\n"
      "(status, owner, g, moves, rows_used).");
}
