// Binding of the balanced solvers (softkmeans/balanced.hpp) and of the fused
// pass at offsets (kernels.hpp biased_hard_stats): checks shapes and dtypes,
// copies the prices, releases the GIL, calls.
#include "softkmeans/balanced.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "softkmeans/kernels.hpp"

namespace py = pybind11;

namespace softkmeans_bindings {

namespace {

// (labels (n,) int64, gap (n,) and dist (n,) X's dtype, W, N (k,), S (k, d),
// J, cand (n, m) int32, cand_dist (n, m) and floor (n,) X's dtype): the
// fused pass at offsets g (k,) float64 with each row's m best biased columns
// within band of its best, interruptible (run_native).
template <typename T>
py::tuple biased_hard_stats_t(const py::array& Xa, const py::array& Ca, const py::array& ga,
                              const py::array& wa, int n_threads, index_t m, double band) {
  const auto X = as_matrix<T>(Xa, "X");
  const auto C = as_matrix<T>(Ca, "C");
  check_points(X, C);
  const index_t n = X.shape(0), d = X.shape(1), k = C.shape(0);
  const auto g = as_vector<double>(ga, "g", k);
  const auto w = as_vector<double>(wa, "sample_weight", n);
  if (m < 0 || m > std::min<index_t>(k, 64))
    throw py::value_error("m (candidates per row) must be in [0, min(k, 64)]; got " +
                          std::to_string(m));
  if (!(band > 0)) throw py::value_error("band must be > 0 (inf: every column)");
  carray<std::int32_t> cand({n, m});
  carray<T> cand_dist({n, m}), floor(m > 0 ? n : 0);
  carray<std::int64_t> labels(n);
  carray<T> gap(n), dist(n);
  carray<double> N(k), S({k, d});
  double W = 0.0, J = 0.0;
  run_native([&] {
    softkmeans::kernels<T>().biased_hard_stats(X.data(), n, d, C.data(), k, g.data(), w.data(), &W,
                                               N.mutable_data(), S.mutable_data(), &J,
                                               labels.mutable_data(), gap.mutable_data(),
                                               dist.mutable_data(), m, band,
                                               cand.mutable_data(), cand_dist.mutable_data(),
                                               floor.mutable_data(), n_threads);
  });
  return py::make_tuple(labels, gap, dist, W, N, S, J, cand, cand_dist, floor);
}

// Each of the n rows read of cand (rows: their indices, nullptr: the first n)
// holds columns in [0, k), -1 (none) only after its first.
void check_candidates(const carray<std::int32_t>& cand, index_t k, const std::int64_t* rows,
                      index_t n) {
  const index_t total = cand.shape(0), m = cand.shape(1);
  if (rows) {
    bool outside = false;
    for (index_t r = 0; r < n; ++r) outside |= rows[r] < 0 || rows[r] >= total;
    if (outside) throw py::value_error("rows holds a row outside [0, len(cand))");
  }
  // Branch-free reductions (a branch an entry held every call at 1e6 x 8 for
  // ~5 ms): a column c is bad where c + 1, unsigned, exceeds k (c < -1 or
  // c >= k), a first column where it is negative.
  const std::int32_t* c = cand.data();
  const auto top = static_cast<std::uint32_t>(k);
  std::uint32_t bad = 0, first_bad = 0;
  for (index_t r = 0; r < n; ++r) {
    const std::int32_t* ci = c + (rows ? rows[r] : r) * m;
    first_bad |= ci[0] < 0;
    for (index_t s = 0; s < m; ++s) bad |= static_cast<std::uint32_t>(ci[s]) + 1u > top;
  }
  if (bad | first_bad)
    throw py::value_error("cand holds a column outside [0, k) (-1: none, after the first)");
}

// (cand (N, m) int32, cand_dist (N, m) T, g (k,) float64): the candidate
// arrays of the balanced offset solvers, checked to agree in shape.
template <typename T>
std::tuple<carray<std::int32_t>, carray<T>, carray<double>> candidate_arrays(
    const py::array& cand_a, const py::array& dist_a, const py::array& g_a) {
  auto cand = as_matrix<std::int32_t>(cand_a, "cand");
  auto dist = as_matrix<T>(dist_a, "cand_dist");
  if (dist.shape(0) != cand.shape(0) || dist.shape(1) != cand.shape(1))
    throw py::value_error("cand and cand_dist must have the same shape");
  return {cand, dist, as_vector<double>(g_a, "g", g_a.size())};
}

// (labels (n,) int64, own (n,) and gap (n,) float64): biased_row_states of
// every row of cand at the offsets g, on n_threads; with a bound (floor_a:
// the pass's floor (n,) in cand_dist's dtype or None, then the six numbers
// of MarginBound), the margin in place of the gap.
template <typename T>
py::tuple biased_row_states_t(const py::array& cand_a, const py::array& dist_a,
                              const py::array& g_a, int n_threads,
                              const py::object& floor_a = py::none(),
                              const std::vector<double>& bound_numbers = {}) {
  // (not a structured binding: a lambda below captures them, which C++17 forbids of one)
  const auto arrays = candidate_arrays<T>(cand_a, dist_a, g_a);
  const auto &cand = std::get<0>(arrays), &dist = std::get<1>(arrays);
  const auto& g = std::get<2>(arrays);
  const index_t n = cand.shape(0), m = cand.shape(1), k = g.shape(0);
  if (m < 1 || m > k) throw py::value_error("need 1 <= m <= k candidates a row");
  check_candidates(cand, k, nullptr, n);
  carray<std::int64_t> labels(n);
  carray<double> own(n), gap(n);
  const int threads = softkmeans::resolve_threads(n_threads);
  softkmeans::MarginBound<T> bound;
  carray<T> floor(0);
  const bool bounded = bound_numbers.size() == 6;
  if (bounded) {
    if (!floor_a.is_none()) {
      floor = as_vector<T>(floor_a.cast<py::array>(), "floor", n);
      bound.floor = floor.data();
    }
    bound.floor_scale = bound_numbers[0], bound.floor_shift = bound_numbers[1];
    bound.rise = bound_numbers[2], bound.scale = bound_numbers[3];
    bound.shift = bound_numbers[4], bound.tiny = bound_numbers[5];
  }
  run_native([&] {
    softkmeans::biased_row_states<T>(cand.data(), dist.data(), n, m, k, g.data(),
                                     labels.mutable_data(), own.mutable_data(),
                                     gap.mutable_data(), threads, bounded ? &bound : nullptr);
  });
  return py::make_tuple(labels, own, gap);
}

// (count error, g (k,), labels (n,) int64, own (n,) and gap (n,) float64,
// evals): balanced_newton from the offsets g on the candidates of the rows
// `rows` (None: every row of cand), on n_threads.
template <typename T>
py::tuple balanced_newton_t(const py::array& cand_a, const py::array& dist_a,
                            const py::array& targets_a, const py::array& g_a, int64_t max_steps,
                            int64_t enough, const py::object& rows_a, int n_threads,
                            const py::object& scratch_o, bool outputs) {
  softkmeans::NewtonScratch* scratch =
      scratch_o.is_none() ? nullptr : scratch_o.cast<softkmeans::NewtonScratch*>();
  const auto arrays = candidate_arrays<T>(cand_a, dist_a, g_a);
  const auto &cand = std::get<0>(arrays), &dist = std::get<1>(arrays);
  const auto& g_in = std::get<2>(arrays);
  const index_t total = cand.shape(0), m = cand.shape(1), k = g_in.shape(0);
  const auto targets = as_vector<std::int64_t>(targets_a, "targets", k);
  carray<std::int64_t> rows(0);
  const bool some = !rows_a.is_none();
  if (some) {
    const auto ra = rows_a.cast<py::array>();
    rows = as_vector<std::int64_t>(ra, "rows", ra.size());
  }
  const index_t n = some ? rows.shape(0) : total;
  if (n < 1 || m < 1 || m > k) throw py::value_error("need n >= 1 and 1 <= m <= k");
  check_candidates(cand, k, some ? rows.data() : nullptr, n);
  const index_t rows_out = outputs ? n : 0;  // (not wanted: no sweep, no memory)
  carray<double> g(k), own(rows_out), gap(rows_out);
  carray<std::int64_t> labels(rows_out);
  std::int64_t err = 0, evals = 0;
  const int threads = softkmeans::resolve_threads(n_threads);
  run_native([&] {
    std::copy(g_in.data(), g_in.data() + k, g.mutable_data());
    err = softkmeans::balanced_newton<T>(cand.data(), dist.data(), some ? rows.data() : nullptr,
                                         n, m, k, targets.data(), max_steps, enough,
                                         g.mutable_data(),
                                         outputs ? labels.mutable_data() : nullptr,
                                         outputs ? own.mutable_data() : nullptr,
                                         outputs ? gap.mutable_data() : nullptr, &evals, threads,
                                         scratch);
  });
  if (!outputs) return py::make_tuple(err, g, py::none(), py::none(), py::none(), evals);
  return py::make_tuple(err, g, labels, own, gap, evals);
}

}  // namespace

void def_biased(py::module_& m) {
  py::class_<softkmeans::NewtonScratch>(
      m, "NewtonScratch",
      "balanced_newton's memory kept between calls (one call at a time; balanced.hpp)")
      .def(py::init<>());
  m.def(
      "balanced_newton",
      [](const py::array& cand, const py::array& cand_dist, const py::array& targets,
         const py::array& g, int64_t max_steps, int64_t enough, const py::object& rows,
         int n_threads, const py::object& scratch, bool outputs) {
        return by_dtype(cand_dist, [&](auto t) {
          return balanced_newton_t<decltype(t)>(cand, cand_dist, targets, g, max_steps, enough,
                                                rows, n_threads, scratch, outputs);
        });
      },
      py::arg("cand"), py::arg("cand_dist"), py::arg("targets"), py::arg("g"),
      py::arg("max_steps"), py::arg("enough") = 0, py::arg("rows") = py::none(),
      py::arg("n_threads") = 1, py::arg("scratch") = py::none(), py::arg("outputs") = true,
      "(count error, g, labels, own, gap, evals): damped Newton on the balanced dual from the "
      "offsets g, on the candidates of the rows `rows` (None: every row), on n_threads");
  m.def(
      "biased_row_states",
      [](const py::array& cand, const py::array& cand_dist, const py::array& g, int n_threads) {
        return by_dtype(cand_dist, [&](auto t) {
          return biased_row_states_t<decltype(t)>(cand, cand_dist, g, n_threads);
        });
      },
      py::arg("cand"), py::arg("cand_dist"), py::arg("g"), py::arg("n_threads") = 1,
      "(labels, own, gap): each row's best candidate at the offsets g (ties to the smaller "
      "column), D there and the second best candidate's value less the best's");
  m.def(
      "biased_row_margins",
      [](const py::array& cand, const py::array& cand_dist, const py::array& g,
         const py::object& floor, double floor_scale, double floor_shift, double rise,
         double scale, double shift, double tiny, int n_threads) {
        const std::vector<double> numbers{floor_scale, floor_shift, rise, scale, shift, tiny};
        return by_dtype(cand_dist, [&](auto t) {
          return biased_row_states_t<decltype(t)>(cand, cand_dist, g, n_threads, floor, numbers);
        });
      },
      py::arg("cand"), py::arg("cand_dist"), py::arg("g"), py::arg("floor"),
      py::arg("floor_scale"), py::arg("floor_shift"), py::arg("rise"), py::arg("scale"),
      py::arg("shift"), py::arg("tiny"), py::arg("n_threads") = 1,
      "(labels, own, margin): biased_row_states with the margin (a lower bound on the gap over "
      "every column, less its rounding; softkmeans/balanced.hpp MarginBound) for the gap");
  m.def(
      "biased_hard_stats",
      [](const py::array& X, const py::array& C, const py::array& g, const py::array& w,
         int n_threads, index_t m, double band) {
        return by_dtype(X, [&](auto t) {
          return biased_hard_stats_t<decltype(t)>(X, C, g, w, n_threads, m, band);
        });
      },
      py::arg("X"), py::arg("C"), py::arg("g"), py::arg("sample_weight"),
      py::arg("n_threads") = 0, py::arg("m") = 0,
      py::arg("band") = std::numeric_limits<double>::infinity(),
      "(labels, gap, dist, W, N, S, J, cand, cand_dist, floor): argmin_j (D_ij - g_j), the gap "
      "to the second smallest, D at the label, the hard statistics at those labels, each row's m "
      "best biased columns within band of its best, their D and a floor on the others, one pass");
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
      "least_margin_rows",
      [](const py::array& rows_, const py::object& keys_, const py::array& margin_,
         const py::array& counts_) {
        const auto rows = checked<int64_t>(rows_, "rows", 1);
        const auto margin = checked<double>(margin_, "margin", 1);
        const auto counts = checked<int64_t>(counts_, "counts", 1);
        const int64_t n = margin.shape(0), k = counts.shape(0), n_rows = rows.shape(0);
        carray<int64_t> keys(0);
        if (!keys_.is_none()) keys = checked<int64_t>(keys_.cast<py::array>(), "keys", 1);
        if (!keys_.is_none() && keys.shape(0) != n)
          throw py::value_error("keys must hold one entry a row of margin");
        if (keys_.is_none() && k != 1)
          throw py::value_error("counts must hold one entry when keys is None");
        const int64_t* r = rows.data();
        for (int64_t s = 0; s < n_rows; ++s)
          if (r[s] < 0 || r[s] >= n) throw py::value_error("rows must lie in [0, n)");
        carray<uint8_t> mask(n);
        {
          py::gil_scoped_release release;
          softkmeans::least_margin_rows(r, n_rows, keys_.is_none() ? nullptr : keys.data(),
                                        margin.data(), n, counts.data(), k, mask.mutable_data());
        }
        return mask;
      },
      py::arg("rows"), py::arg("keys"), py::arg("margin"), py::arg("counts"),
      "mask (n,) uint8: 1 on rows and on each group j's counts[j] rows (keys == j; keys None: "
      "every row, one group) of least margin, ties to the smaller row (balanced.hpp)");
  m.def(
      "balanced_counts",
      [](const py::array& D_, const py::array& targets_, const py::array& g_,
         const py::array& owner_, int64_t rows_per_move, double band, int64_t edges_per_row,
         double slack, int64_t max_tries) {
        // D float32 (read as double, no float64 copy) or float64
        auto solve = [&](auto type) {
          using T = decltype(type);
          auto D = checked<T>(D_, "D", 2);
          auto targets = checked<int64_t>(targets_, "targets", 1);
          auto g_in = checked<double>(g_, "g", 1);
          auto owner_in = checked<int64_t>(owner_, "owner", 1);
          const int64_t n = D.shape(0), k = D.shape(1);
          if (targets.shape(0) != k || g_in.shape(0) != k || owner_in.shape(0) != n || k < 1 ||
              rows_per_move < 1 || max_tries < 1 || edges_per_row < 1)
            throw py::value_error("balanced_counts: inconsistent shapes");
          carray<double> g(k);
          carray<int64_t> owner(n);
          int64_t moves = 0, rows_used = 0;
          softkmeans::TransferStatus status;
          softkmeans_bindings::run_native([&] {  // Ctrl-C stops it between moves
            std::copy(g_in.data(), g_in.data() + k, g.mutable_data());
            std::copy(owner_in.data(), owner_in.data() + n, owner.mutable_data());
            status = softkmeans::balanced_counts(D.data(), n, k, targets.data(), rows_per_move,
                                                 band, edges_per_row, slack, max_tries,
                                                 g.mutable_data(), owner.mutable_data(), &moves,
                                                 &rows_used);
          });
          return std::make_tuple(static_cast<int>(status), owner, g, moves, rows_used);
        };
        return py::isinstance<carray<float>>(D_) ? solve(float{}) : solve(double{});
      },
      "The hard balanced assignment to integer counts from the offsets g:\n"
      "(status, owner, g, moves, rows_used).");
}
