// Everything one instruction-set translation unit compiles: every kernel
// family, and the table of their instantiations (one entry per name of
// SOFTKMEANS_KERNEL_NAMES), returned by SOFTKMEANS_ISA::table<T>() (declared
// in isa_tables.hpp).
#pragma once

#include "impl/biased.hpp"
#include "impl/bounded.hpp"
#include "impl/covariance.hpp"
#include "impl/group_pruned.hpp"
#include "impl/moments.hpp"
#include "impl/per_row.hpp"
#include "impl/projected.hpp"
#include "impl/seeding.hpp"
#include "impl/sparse_covariance.hpp"
#include "impl/sparse_per_row.hpp"
#include "impl/sparse_seeding.hpp"
#include "impl/sparse_stats.hpp"
#include "impl/stats.hpp"
#include "isa_tables.hpp"
#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace SOFTKMEANS_ISA {

template <typename T>
Kernels<T> table() {
  Kernels<T> t;
#define SOFTKMEANS_TABLE_ENTRY(name) t.name = &name<T>;
  SOFTKMEANS_KERNEL_NAMES(SOFTKMEANS_TABLE_ENTRY)
#undef SOFTKMEANS_TABLE_ENTRY
  return t;
}

template Kernels<float> table<float>();
template Kernels<double> table<double>();

}  // namespace SOFTKMEANS_ISA
}  // namespace softkmeans
