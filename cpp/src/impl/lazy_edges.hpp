// The lazily ordered heap of balanced_counts' edges (balanced_counts.cpp):
// each edge j -> l of the cluster graph keeps the rows that may move along
// it, the cheapest on top.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace softkmeans {
namespace transfer {

using Edge = std::pair<double, int64_t>;  // (cost[i, l] - cost[i, j], row i)

// std::push_heap / pop_heap keep the largest on top: this order puts the
// cheapest move on top, and among equal ones the smaller row.
struct CheaperOnTop {
  bool operator()(const Edge& a, const Edge& b) const {
    if (a.first != b.first) return a.first > b.first;
    return a.second > b.second;
  }
};

// A LazyEdges heap takes about this many entries of its reserve at a time.
constexpr size_t kHeapBatch = 64;

// A min-heap of edges (CheaperOnTop) built lazily: entries enter an unordered
// reserve, and the heap takes those of the reserve below a floor (about the
// kHeapBatch cheapest, the floor estimated on a strided sample) whenever its
// top may not be the cheapest of all. The top is that of one heap of every
// entry, the same (cost, row) whatever the batches; a repair that moves few of
// many rows orders few (make_heap over every row's edges was a third of a
// 20,000-row repair).
class LazyEdges {
 public:
  void reserve(size_t n) { v_.reserve(n); }
  size_t size() const { return v_.size(); }
  // Adds e to the reserve (before the first top) or to the heap.
  void push(const Edge& e, bool to_heap) {
    if (!to_heap) {
      v_.push_back(e);
      return;
    }
    if (heap_ < v_.size()) {  // the reserve's first entry moves to the back
      v_.push_back(v_[heap_]);
      v_[heap_] = e;
    } else {
      v_.push_back(e);
    }
    std::push_heap(v_.begin(), v_.begin() + (++heap_), CheaperOnTop());
  }
  // The cheapest entry (nullptr: none).
  const Edge* top() {
    while (heap_ < v_.size() && (heap_ == 0 || !floor_known_ || CheaperOnTop()(v_.front(), floor_)))
      refill();
    return heap_ ? &v_.front() : nullptr;
  }
  void pop() {
    std::pop_heap(v_.begin(), v_.begin() + heap_, CheaperOnTop());
    --heap_;
    std::swap(v_[heap_], v_.back());  // (a reserve entry fills the hole)
    v_.pop_back();
  }

 private:
  static bool cheaper(const Edge& a, const Edge& b) { return CheaperOnTop()(b, a); }
  // Moves the reserve's entries not dearer than a floor into the heap: the
  // floor is the kHeapBatch / 16-th cheapest of every 16th entry (all of the
  // reserve when it is small), and every entry left is dearer than it.
  void refill() {
    const size_t size = v_.size() - heap_;
    Edge floor;
    if (size <= 2 * kHeapBatch) {
      floor = *std::max_element(v_.begin() + heap_, v_.end(), cheaper);
    } else {
      sample_.clear();
      for (size_t i = heap_; i < v_.size(); i += 16) sample_.push_back(v_[i]);
      const size_t at = std::min(sample_.size() - 1, kHeapBatch / 16);
      std::nth_element(sample_.begin(), sample_.begin() + at, sample_.end(), cheaper);
      floor = sample_[at];
    }
    for (size_t i = heap_; i < v_.size(); ++i)
      if (!cheaper(floor, v_[i])) {
        std::swap(v_[i], v_[heap_]);
        std::push_heap(v_.begin(), v_.begin() + (++heap_), CheaperOnTop());
      }
    floor_ = floor, floor_known_ = true;
  }

  std::vector<Edge> v_;  // [0, heap_): the heap; [heap_, size): the reserve
  size_t heap_ = 0;
  Edge floor_;  // every reserve entry is dearer (when floor_known_)
  bool floor_known_ = false;
  std::vector<Edge> sample_;
};

}  // namespace transfer
}  // namespace softkmeans
