// The CSR structure check (softkmeans/csr_check.hpp).
//
// Every pass of a sparse fit comes here with a valid matrix: a branch-free
// test, a few vectorized passes over the arrays, says so (about a tenth of the
// row-by-row loop's time); the loop then runs only to name a fault.
#include "softkmeans/csr_check.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace softkmeans {
namespace {

template <typename I>
bool structure_is_valid(const I* ind, const I* ptr, index_t n, index_t nnz, index_t d) {
  using U = typename std::make_unsigned<I>::type;
  // Counts in 32 bits per block of entries, so the loops vectorize for int32
  // indices (the core is built for the baseline instruction set).
  constexpr index_t kBlock = index_t(1) << 20;
  bool ordered = true;
  for (index_t i = 0; i < n; ++i) ordered &= ptr[i] <= ptr[i + 1];
  if (!ordered) return false;
  // A negative index is a huge unsigned one.
  const U end = static_cast<U>(std::min<index_t>(d, std::numeric_limits<I>::max()));
  // Columns strictly increase within each row: every place where they do not
  // (ind[e] <= ind[e - 1]) must be the start of a non-empty row (each such
  // place starts exactly one). (No entries: nothing to read, nothing out of range.)
  index_t out_of_range = nnz > 0 && static_cast<U>(ind[0]) >= end;
  index_t descents = 0, at_row_starts = 0;
  for (index_t b = 1; b < nnz; b += kBlock) {
    const index_t b1 = std::min(nnz, b + kBlock);
    std::uint32_t bad = 0, down = 0;
    for (index_t e = b; e < b1; ++e) {
      bad += static_cast<U>(ind[e]) >= end;
      down += ind[e] <= ind[e - 1];
    }
    out_of_range += bad;
    descents += down;
  }
  if (out_of_range) return false;
  for (index_t i = 0; i < n; ++i) {
    const index_t e = static_cast<index_t>(ptr[i]);
    if (e > 0 && ptr[i + 1] > ptr[i]) at_row_starts += ind[e] <= ind[e - 1];
  }
  return descents == at_row_starts;
}

template <typename I>
CsrFault structure_fault(const I* ind, const I* ptr, index_t n, index_t nnz, index_t d) {
  if (ptr[0] != 0 || static_cast<index_t>(ptr[n]) != nnz) return CsrFault::indptr_ends;
  if (structure_is_valid(ind, ptr, n, nnz, d)) return CsrFault::none;
  for (index_t i = 0; i < n; ++i) {
    if (ptr[i + 1] < ptr[i]) return CsrFault::indptr_decreasing;
    for (index_t e = ptr[i]; e < static_cast<index_t>(ptr[i + 1]); ++e) {
      if (ind[e] < 0 || static_cast<index_t>(ind[e]) >= d) return CsrFault::index_out_of_range;
      if (e > ptr[i] && ind[e] <= ind[e - 1]) return CsrFault::indices_not_increasing;
    }
  }
  return CsrFault::none;
}

}  // namespace

CsrFault csr_structure_fault(const std::int32_t* indices, const std::int32_t* indptr, index_t n,
                             index_t nnz, index_t d) {
  return structure_fault(indices, indptr, n, nnz, d);
}

CsrFault csr_structure_fault(const std::int64_t* indices, const std::int64_t* indptr, index_t n,
                             index_t nnz, index_t d) {
  return structure_fault(indices, indptr, n, nnz, d);
}

}  // namespace softkmeans
