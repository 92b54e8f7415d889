// Indexes over nodes that let the scheduler skip nodes instead of visiting
// them: a bitmap of node ids, and a max-tree that finds the nodes whose value
// lies above a bound. ClusterState keeps both current on every change.
#ifndef HF_CORE_NODE_INDEX_H_
#define HF_CORE_NODE_INDEX_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace hf {

using std::size_t;

// A set of node ids as a bitmap: one bit per node, 64 per word.
class NodeBitmap {
 public:
  void Resize(size_t nodes) { words_.resize((nodes + 63) / 64, 0); }
  void Set(uint32_t n, bool on) {
    const uint64_t bit = uint64_t{1} << (n & 63);
    if (on) words_[n >> 6] |= bit;
    else words_[n >> 6] &= ~bit;
  }
  bool Test(uint32_t n) const { return (words_[n >> 6] >> (n & 63)) & 1; }
  size_t word_count() const { return words_.size(); }
  uint64_t word(size_t i) const { return words_[i]; }
  const uint64_t* data() const { return words_.data(); }

 private:
  std::vector<uint64_t> words_;
};

// Calls f(node) for every set bit of `words` (count words), in ascending order.
template <typename F>
inline void ForEachSetBit(const uint64_t* words, size_t count, F&& f) {
  for (size_t w = 0; w < count; ++w) {
    uint64_t bits = words[w];
    while (bits) {
      f(uint32_t(w * 64 + std::countr_zero(bits)));
      bits &= bits - 1;
    }
  }
}

// The maximum of a value per node, as a binary tree of maxima, so that the
// nodes above a bound are found in O(k log n) for k results, and nothing at
// all is visited when no node is above it. Nodes without a value hold -inf.
class MaxTree {
 public:
  static constexpr double kNone = -std::numeric_limits<double>::infinity();

  void Resize(size_t nodes);
  void Set(uint32_t n, double v);
  // Node n's own value (kNone if it has none).
  double value(uint32_t n) const { return tree_[leaves_ + n]; }
  // Appends every node whose value is > bound, in ascending id order.
  void CollectAbove(double bound, std::vector<uint32_t>& out) const;
  // The same, only among the nodes in [first, last].
  void CollectAbove(double bound, uint32_t first, uint32_t last, std::vector<uint32_t>& out) const;

 private:
  void Collect(size_t i, double bound, std::vector<uint32_t>& out) const;
  // Node i covers the leaves [begin, end).
  void CollectIn(size_t i, size_t begin, size_t end, double bound, size_t first, size_t last,
                 std::vector<uint32_t>& out) const;
  size_t leaves_ = 0;  // a power of two >= the node count
  std::vector<double> tree_;  // tree_[1] is the root; leaves at [leaves_, 2 leaves_)
};

}  // namespace hf

#endif  // HF_CORE_NODE_INDEX_H_
