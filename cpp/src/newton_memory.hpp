// balanced_newton's memory (balanced_newton.cpp): uninitialized arrays on
// transparent huge pages, and the ones a NewtonScratch keeps between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "softkmeans/balanced.hpp"

namespace softkmeans {

namespace newton_memory {

// n elements of T, uninitialized; from 4 MiB on transparent huge pages where
// Linux gives them: a call on 10^6 rows takes ~150 MB of fresh memory, whose
// 4 KiB pages cost a fault each (a fifth of the call), where 2 MiB pages cost
// few (a small buffer rounded up to 2 MiB would cost more than it saves).
template <typename T>
class Fresh {
 public:
  Fresh() = default;
  explicit Fresh(int64_t n) { reset(n); }
  // Room for n elements, reallocated only when n exceeds the room held (the
  // contents undefined either way): a scratch kept between calls.
  void reserve(int64_t n) {
    if (n > capacity_) reset(n);
  }
  void reset(int64_t n) {
    capacity_ = n;
    constexpr size_t kHuge = size_t(1) << 21;
    size_t bytes = static_cast<size_t>(n) * sizeof(T);
    const bool huge = bytes >= 2 * kHuge;
    if (huge) bytes = (bytes + kHuge - 1) / kHuge * kHuge;
    data_.reset(static_cast<T*>(huge ? std::aligned_alloc(kHuge, bytes) : std::malloc(bytes)));
    if (bytes && !data_) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) madvise(data_.get(), bytes, MADV_HUGEPAGE);  // advice only: fine if refused
#endif
  }
  T& operator[](int64_t i) { return data_.get()[i]; }
  const T& operator[](int64_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  int64_t capacity_ = 0;
};

}  // namespace newton_memory

// The memory of a call's sweeps (~130 bytes a row read), in a NewtonScratch
// between calls.
struct NewtonScratch::Buffers {
  newton_memory::Fresh<int32_t> start_label;  // each row's state at the start offsets
  newton_memory::Fresh<double> start_gap, start_own;
  newton_memory::Fresh<uint8_t> bucket;
  newton_memory::Fresh<int64_t> place, order;
  newton_memory::Fresh<int32_t> cand, label;
  newton_memory::Fresh<float> dist_float;
  newton_memory::Fresh<double> dist_double, gap, own;
  newton_memory::Fresh<float>& dist(const float*) { return dist_float; }
  newton_memory::Fresh<double>& dist(const double*) { return dist_double; }
};

}  // namespace softkmeans
