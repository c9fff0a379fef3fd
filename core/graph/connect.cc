#include "core/graph/connect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <tuple>

namespace kls {
namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int v) {
    while (parent[static_cast<size_t>(v)] != v) {
      parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
      v = parent[static_cast<size_t>(v)];
    }
    return v;
  }
  bool Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return false;
    parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
    return true;
  }
};

// A candidate edge ordered by (squared distance, i, j): a strict total order, so
// Borůvka's simultaneous choices never close a cycle.
struct Candidate {
  double d2 = std::numeric_limits<double>::infinity();
  int i = -1, j = -1;
  bool operator<(const Candidate& o) const { return std::tie(d2, i, j) < std::tie(o.d2, o.i, o.j); }
};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", std::isfinite(v) ? v : 0.0);
  return buf;
}

}  // namespace

const char* ConnectModeName(ConnectMode m) {
  switch (m) {
    case ConnectMode::kError: return "error";
    case ConnectMode::kGrowK: return "grow_k";
    case ConnectMode::kMst: return "mst";
  }
  return "error";
}

int ConnectedComponents(const Eigen::SparseMatrix<double>& adjacency, std::vector<int>* labels) {
  const int n = static_cast<int>(adjacency.rows());
  labels->assign(static_cast<size_t>(n), -1);
  std::vector<int> stack;
  int components = 0;
  for (int s = 0; s < n; ++s) {
    if ((*labels)[static_cast<size_t>(s)] >= 0) continue;
    (*labels)[static_cast<size_t>(s)] = components;
    stack.push_back(s);
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (Eigen::SparseMatrix<double>::InnerIterator it(adjacency, v); it; ++it) {
        const int u = static_cast<int>(it.index());
        if ((*labels)[static_cast<size_t>(u)] < 0) {
          (*labels)[static_cast<size_t>(u)] = components;
          stack.push_back(u);
        }
      }
    }
    ++components;
  }
  return components;
}

std::vector<ComponentEdge> JoinComponents(const Eigen::MatrixXd& points, const std::vector<int>& labels,
                                          int num_components) {
  const int n = static_cast<int>(points.rows());
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> x = points;  // contiguous rows
  UnionFind uf(num_components);
  std::vector<ComponentEdge> added;
  int remaining = num_components;
  while (remaining > 1) {
    // Each component's shortest edge to another component (Borůvka round).
    std::vector<Candidate> best(static_cast<size_t>(num_components));
    std::vector<int> root(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) root[static_cast<size_t>(i)] = uf.Find(labels[static_cast<size_t>(i)]);
    for (int i = 0; i < n; ++i) {
      const int ci = root[static_cast<size_t>(i)];
      for (int j = i + 1; j < n; ++j) {
        const int cj = root[static_cast<size_t>(j)];
        if (ci == cj) continue;
        const Candidate c{(x.row(i) - x.row(j)).squaredNorm(), i, j};
        if (c < best[static_cast<size_t>(ci)]) best[static_cast<size_t>(ci)] = c;
        if (c < best[static_cast<size_t>(cj)]) best[static_cast<size_t>(cj)] = c;
      }
    }
    bool joined = false;
    for (int c = 0; c < num_components; ++c) {
      const Candidate& b = best[static_cast<size_t>(c)];
      if (b.i < 0) continue;
      if (uf.Union(root[static_cast<size_t>(b.i)], root[static_cast<size_t>(b.j)])) {
        added.push_back({b.i, b.j, std::sqrt(b.d2)});
        --remaining;
        joined = true;
      }
    }
    if (!joined) break;  // cannot happen with ≥ 2 non-empty components; guards an endless loop
  }
  return added;
}

std::string ConnectReport::Json() const {
  std::string out = "{\"mode\":\"" + std::string(ConnectModeName(mode)) + "\"";
  out += ",\"components\":" + std::to_string(components);
  out += ",\"k\":" + std::to_string(k);
  out += ",\"k_used\":" + std::to_string(k_used);
  out += ",\"added_edges\":[";
  for (size_t t = 0; t < added_edges.size(); ++t) {
    if (t) out += ",";
    out += "[" + std::to_string(added_edges[t].i) + "," + std::to_string(added_edges[t].j) + "," +
           Num(added_edges[t].distance) + "]";
  }
  out += "]}";
  return out;
}

StatusOr<Eigen::SparseMatrix<double>> MakeConnectedKnnGraph(const Eigen::MatrixXd& points,
                                                            const ConnectedKnnOptions& options, const std::string& why,
                                                            ConnectReport* report) {
  const int n = static_cast<int>(points.rows());
  ConnectReport local;
  ConnectReport& r = report ? *report : local;
  r = ConnectReport{};
  r.mode = options.mode;
  r.k = r.k_used = options.k;
  int bound = options.k;
  if (options.mode == ConnectMode::kGrowK) {
    bound = options.max_k > 0 ? options.max_k : 4 * options.k;
    bound = std::max(options.k, std::min(bound, n - 1));
  }
  KnnOptions knn;
  knn.k = bound;
  knn.num_threads = options.num_threads;
  KLS_ASSIGN_OR_RETURN(KnnGraph g, ExactKnn(points, knn));
  Eigen::SparseMatrix<double> w = SymmetricAdjacency(g, options.k, options.weight, options.sigma);
  std::vector<int> labels;
  r.components = ConnectedComponents(w, &labels);
  if (r.components == 1) return w;
  const auto disconnected = [&](int k, int components, const std::string& note) {
    return FailedPreconditionError("the " + std::to_string(k) + "-NN graph" + note + " has " +
                                   std::to_string(components) + " connected components; " + why);
  };
  switch (options.mode) {
    case ConnectMode::kError:
      return disconnected(options.k, r.components, "");
    case ConnectMode::kGrowK: {
      int components = r.components;
      for (int k = options.k + 1; k <= bound; ++k) {
        w = SymmetricAdjacency(g, k, options.weight, options.sigma);
        components = ConnectedComponents(w, &labels);
        r.k_used = k;
        if (components == 1) return w;
      }
      return disconnected(bound, components, " (grow_k's bound, from k = " + std::to_string(options.k) + ")");
    }
    case ConnectMode::kMst: {
      r.added_edges = JoinComponents(points, labels, r.components);
      const double inv_two_sigma2 = options.sigma > 0.0 ? 1.0 / (2.0 * options.sigma * options.sigma) : 0.0;
      std::vector<Eigen::Triplet<double>> triplets;
      triplets.reserve(static_cast<size_t>(w.nonZeros()) + 2 * r.added_edges.size());
      for (int c = 0; c < w.outerSize(); ++c) {
        for (Eigen::SparseMatrix<double>::InnerIterator it(w, c); it; ++it) {
          triplets.emplace_back(static_cast<int>(it.row()), static_cast<int>(it.col()), it.value());
        }
      }
      for (const ComponentEdge& e : r.added_edges) {
        const double v = options.weight == EdgeWeight::kBinary
                             ? 1.0
                             : std::exp(-e.distance * e.distance * inv_two_sigma2);
        triplets.emplace_back(e.i, e.j, v);
        triplets.emplace_back(e.j, e.i, v);
      }
      Eigen::SparseMatrix<double> joined(n, n);
      joined.setFromTriplets(triplets.begin(), triplets.end());
      joined.makeCompressed();
      return joined;
    }
  }
  return w;
}

}  // namespace kls
