// A FIFO over a power-of-two array that only grows: once it has reached the
// depth a link needs, pushing and popping allocate nothing (std::deque
// allocates and frees a block every few hundred elements). Popped elements
// are kept, not destroyed, so their buffers keep their capacity for reuse.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace trillion::tb5 {

template <class T>
class Ring {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  // Appends a slot and returns it; it holds whatever it held when last
  // popped (callers reset the fields they use).
  T& push_back() {
    if (size_ == slots_.size()) grow();
    ++size_;
    return back();
  }
  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    // The popped slots' buffers move too, behind the live ones.
    for (size_t i = size_; i < slots_.size(); ++i) bigger[i] = std::move((*this)[i]);
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> slots_;
  size_t head_ = 0, size_ = 0;
};

}  // namespace trillion::tb5
