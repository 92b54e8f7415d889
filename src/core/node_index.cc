#include "core/node_index.h"

#include <algorithm>

namespace hf {

void MaxTree::Resize(size_t nodes) {
  if (nodes <= leaves_) return;
  size_t leaves = leaves_ ? leaves_ : 64;
  while (leaves < nodes) leaves *= 2;
  // Grow by doubling, so adding nodes one by one costs O(n) in total.
  std::vector<double> old(tree_.begin() + std::min(tree_.size(), leaves_), tree_.end());
  leaves_ = leaves;
  tree_.assign(2 * leaves_, kNone);
  for (size_t i = 0; i < old.size(); ++i) tree_[leaves_ + i] = old[i];
  for (size_t i = leaves_ - 1; i >= 1; --i) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
}

void MaxTree::Set(uint32_t n, double v) {
  size_t i = leaves_ + n;
  tree_[i] = v;
  for (i /= 2; i >= 1; i /= 2) {
    const double m = std::max(tree_[2 * i], tree_[2 * i + 1]);
    if (tree_[i] == m) break;  // nothing above changes
    tree_[i] = m;
  }
}

void MaxTree::CollectAbove(double bound, std::vector<uint32_t>& out) const {
  if (!tree_.empty() && tree_[1] > bound) Collect(1, bound, out);
}

void MaxTree::CollectAbove(double bound, uint32_t first, uint32_t last,
                           std::vector<uint32_t>& out) const {
  if (!tree_.empty() && first <= last && tree_[1] > bound) {
    CollectIn(1, 0, leaves_, bound, first, last, out);
  }
}

void MaxTree::CollectIn(size_t i, size_t begin, size_t end, double bound, size_t first,
                        size_t last, std::vector<uint32_t>& out) const {
  if (end <= first || begin > last || !(tree_[i] > bound)) return;
  if (first <= begin && end - 1 <= last) return Collect(i, bound, out);  // wholly inside
  const size_t mid = begin + (end - begin) / 2;
  CollectIn(2 * i, begin, mid, bound, first, last, out);
  CollectIn(2 * i + 1, mid, end, bound, first, last, out);
}

void MaxTree::Collect(size_t i, double bound, std::vector<uint32_t>& out) const {
  if (i >= leaves_) {
    out.push_back(uint32_t(i - leaves_));
    return;
  }
  if (tree_[2 * i] > bound) Collect(2 * i, bound, out);
  if (tree_[2 * i + 1] > bound) Collect(2 * i + 1, bound, out);
}

}  // namespace hf
