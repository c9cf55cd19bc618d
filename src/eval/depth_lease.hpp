// depth_lease.hpp — scratch memory that a thread keeps for work that can run inside itself.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace vlad {

// One T per depth of uses running inside one another (a transform that meets a lambda to
// transform, a free-variable walk that meets a lambda with captures), kept by the thread from one
// use to the next instead of made afresh: the reverse transform's first arena block, the walk's
// vectors. A T made for a new depth is default-initialized; a reused one keeps its last contents.
template <class T>
class DepthLease {
 public:
  DepthLease() : value_(take()) {}
  ~DepthLease() { depth()--; }
  DepthLease(const DepthLease&) = delete;
  DepthLease& operator=(const DepthLease&) = delete;
  T& get() const { return value_; }

 private:
  static std::vector<std::unique_ptr<T>>& pool() {
    thread_local std::vector<std::unique_ptr<T>> p;
    return p;
  }
  static size_t& depth() {
    thread_local size_t d = 0;
    return d;
  }
  static T& take() {
    std::vector<std::unique_ptr<T>>& p = pool();
    size_t& d = depth();
    if (d == p.size()) p.push_back(std::unique_ptr<T>(new T));
    return *p[d++];
  }
  T& value_;
};

}  // namespace vlad
