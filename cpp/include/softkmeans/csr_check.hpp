// The structure check of a CSR matrix (softkmeans/kernels.hpp, CsrMatrix),
// run before any csr_* kernel: the kernels index with the structure unchecked.
#pragma once

#include <cstdint>

#include "softkmeans/config.hpp"

namespace softkmeans {

// The first fault of a CSR structure, in the order the check looks for them.
enum class CsrFault : int {
  none = 0,
  indptr_ends,             // indptr[0] != 0 or indptr[n] != nnz
  indptr_decreasing,       // indptr[i + 1] < indptr[i]
  index_out_of_range,      // a column outside [0, d)
  indices_not_increasing,  // columns not strictly increasing within a row
};

// indices [in] (nnz,), indptr [in] (n + 1,), n >= 1, d >= 1: the fault of the
// structure, CsrFault::none when indptr starts at 0, ends at nnz and never
// decreases, and the columns of each row strictly increase in [0, d) (scipy's
// canonical format). A fault is named at the first row (and entry) that has
// one. Costs a few vectorized passes over the arrays when there is none.
CsrFault csr_structure_fault(const std::int32_t* indices, const std::int32_t* indptr, index_t n,
                             index_t nnz, index_t d);
CsrFault csr_structure_fault(const std::int64_t* indices, const std::int64_t* indptr, index_t n,
                             index_t nnz, index_t d);

}  // namespace softkmeans
