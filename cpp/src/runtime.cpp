// The per-thread cancel flag and the thread-count default of the kernels
// (softkmeans/kernels.hpp).
#include <omp.h>

#include <atomic>

#include "softkmeans/kernels.hpp"

namespace softkmeans {
namespace {
thread_local const std::atomic<int>* t_cancel_flag = nullptr;
}  // namespace

void set_thread_cancel_flag(const std::atomic<int>* flag) { t_cancel_flag = flag; }
const std::atomic<int>* thread_cancel_flag() { return t_cancel_flag; }

int resolve_threads(int n_threads) { return n_threads > 0 ? n_threads : omp_get_max_threads(); }

int resolve_threads(int n_threads, index_t work) {
  return work < kSerialWork ? 1 : resolve_threads(n_threads);
}

}  // namespace softkmeans
