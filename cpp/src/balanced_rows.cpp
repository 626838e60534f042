// The balanced repair's sets of rows (balanced.hpp, least_margin_rows): each
// group's rows of least margin, added to a set of rows, in one or two passes
// over the rows where NumPy's argpartition of each group and of every row took
// a seventh of the 1e6-row fit (softkmeans.fit.balanced_rows).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "softkmeans/balanced.hpp"

namespace softkmeans {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A margin's order key: NaN counts as +inf.
inline double key_of(double margin) { return std::isnan(margin) ? kInf : margin; }

struct Entry {
  double key;
  int64_t row;
};

// Least key first, equal keys by row.
inline bool entry_before(const Entry& a, const Entry& b) {
  return a.key < b.key || (a.key == b.key && a.row < b.row);
}

// Every group's counts[j] least rows at once: a bounded max-heap a group,
// whose top each row is compared with (rows come in order, so a row whose key
// equals the top's never displaces it: ties to the smaller row). Most rows are
// read and dropped: their group is not asked for (below -inf), or their key is
// not below the top.
void least_by_group(const int64_t* keys, const double* margin, int64_t n, const int64_t* counts,
                    int64_t k, uint8_t* mask) {
  std::vector<std::vector<Entry>> heap(k);
  std::vector<uint8_t> open(k + 1, 0);     // takes any row: its heap not yet full
  std::vector<double> below(k + 1, -kInf);  // takes a key below this (the full heap's top)
  for (int64_t j = 0; j < k; ++j) open[j] = counts[j] > 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t key = keys[i];
    const int64_t j = (key >= 0 && key < k) ? key : k;  // k: the rows of no group
    const double v = key_of(margin[i]);
    if (!(v < below[j]) && !open[j]) continue;
    std::vector<Entry>& h = heap[j];
    if (open[j]) {
      h.push_back({v, i});
      if (static_cast<int64_t>(h.size()) == counts[j]) {
        std::make_heap(h.begin(), h.end(), entry_before);
        open[j] = 0, below[j] = h.front().key;
      }
      continue;
    }
    std::pop_heap(h.begin(), h.end(), entry_before);
    h.back() = {v, i};
    std::push_heap(h.begin(), h.end(), entry_before);
    below[j] = h.front().key;
  }
  for (int64_t j = 0; j < k; ++j)
    for (const Entry& e : heap[j]) mask[e.row] = 1;
}

// The take least rows of all n: a sample's order statistics bracket the
// take-th least key, one pass counts the rows below the bracket and keeps
// those within it, and a selection among those finds the rest; a selection
// among every row where the bracket misses (the same rows either way).
void least_of_all(const double* margin, int64_t n, int64_t take, uint8_t* mask) {
  if (take <= 0) return;
  if (take >= n) {
    std::fill(mask, mask + n, uint8_t{1});
    return;
  }
  const int64_t s = std::min<int64_t>(n, 4096);
  std::vector<double> sample(s);
  for (int64_t t = 0; t < s; ++t) sample[t] = key_of(margin[t * n / s]);
  std::sort(sample.begin(), sample.end());
  const double q = static_cast<double>(take) / static_cast<double>(n);
  const double at = q * static_cast<double>(s), spread = 4.0 * std::sqrt(s * q * (1.0 - q)) + 2.0;
  const int64_t lo_at = static_cast<int64_t>(std::floor(at - spread));
  const int64_t hi_at = static_cast<int64_t>(std::ceil(at + spread));
  // rows of key < lo are taken, of lo <= key <= hi selected among (no bound: +-inf)
  const double lo = lo_at >= 0 ? sample[lo_at] : -kInf, hi = hi_at < s ? sample[hi_at] : kInf;
  std::vector<Entry> within;
  int64_t under = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = key_of(margin[i]);
    if (v < lo) {
      ++under;
    } else if (v <= hi) {
      within.push_back({v, i});
    }
  }
  const int64_t rest = take - under;
  if (rest < 0 || rest > static_cast<int64_t>(within.size())) {  // missed: every row
    within.resize(n);
    for (int64_t i = 0; i < n; ++i) within[i] = {key_of(margin[i]), i};
    std::nth_element(within.begin(), within.begin() + (take - 1), within.end(), entry_before);
    for (int64_t t = 0; t < take; ++t) mask[within[t].row] = 1;
    return;
  }
  if (rest > 0)
    std::nth_element(within.begin(), within.begin() + (rest - 1), within.end(), entry_before);
  for (int64_t t = 0; t < rest; ++t) mask[within[t].row] = 1;
  if (under > 0)
    for (int64_t i = 0; i < n; ++i) mask[i] |= static_cast<uint8_t>(key_of(margin[i]) < lo);
}

}  // namespace

void least_margin_rows(const int64_t* rows, int64_t n_rows, const int64_t* keys,
                       const double* margin, int64_t n, const int64_t* counts, int64_t k,
                       uint8_t* mask) {
  std::fill(mask, mask + n, uint8_t{0});
  for (int64_t s = 0; s < n_rows; ++s) mask[rows[s]] = 1;
  if (keys == nullptr) {  // one group: every row
    if (k >= 1) least_of_all(margin, n, counts[0], mask);
    return;
  }
  least_by_group(keys, margin, n, counts, k, mask);
}

}  // namespace softkmeans
