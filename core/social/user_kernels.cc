#include "core/social/user_kernels.h"

#include <Spectra/MatOp/DenseSymMatProd.h>
#include <Spectra/SymEigsSolver.h>

#include <Eigen/Eigenvalues>
#include <Eigen/SparseCore>
#include <cmath>
#include <map>

namespace kls {

const char* UserKernelName(UserKernel k) {
  static const char* names[] = {"visual", "textual", "comment", "group", "contact", "location", "fave"};
  return names[static_cast<int>(k)];
}

Status UserKernelOptions::Validate(std::string_view path) const {
  return CheckPositiveOption("cell_degrees", cell_degrees, path);
}

StatusOr<double> SmallestEigenvalue(const Eigen::MatrixXd& k) {
  return GuardExceptions("SmallestEigenvalue", [&]() -> StatusOr<double> {
    const Eigen::Index n = k.rows();
    if (n <= 600) {
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(k, Eigen::EigenvaluesOnly);
      return es.eigenvalues()[0];
    }
    // λ_min = λ_max − λ_max(λ_max I − K): two largest-algebraic Lanczos runs, which converge fast.
    auto largest = [&](const Eigen::MatrixXd& m) -> StatusOr<double> {
      Spectra::DenseSymMatProd<double> op(m);
      Spectra::SymEigsSolver<Spectra::DenseSymMatProd<double>> eigs(op, 1, std::min<Eigen::Index>(n, 30));
      eigs.init();
      eigs.compute(Spectra::SortRule::LargestAlge, 3000, 1e-10);
      if (eigs.info() != Spectra::CompInfo::Successful) return InternalError("Lanczos did not converge");
      return eigs.eigenvalues()[0];
    };
    KLS_ASSIGN_OR_RETURN(double top, largest(k));
    Eigen::MatrixXd shifted = -k;
    shifted.diagonal().array() += top;
    KLS_ASSIGN_OR_RETURN(double top_shifted, largest(shifted));
    return top - top_shifted;
  });
}

StatusOr<double> RepairPsd(Eigen::MatrixXd& k) {
  for (Eigen::Index i = 0; i < k.rows(); ++i) {
    const double m = k.row(i).maxCoeff();
    if (m > 0.0) k.row(i) /= m;
  }
  k = 0.5 * (k + k.transpose()).eval();
  KLS_ASSIGN_OR_RETURN(double lmin, SmallestEigenvalue(k));
  // A small relative margin absorbs the Lanczos tolerance.
  const double delta = lmin < 0.0 ? -lmin * (1.0 + 1e-6) + 1e-12 : 0.0;
  k.diagonal().array() += delta;
  return delta;
}

StatusOr<UserKernels> ComputeUserKernels(const Community& d, const UserKernelOptions& options) {
  return GuardExceptions("ComputeUserKernels", [&]() -> StatusOr<UserKernels> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(d.Validate());
    const int nu = d.num_users, np = d.num_photos();
    using Sp = Eigen::SparseMatrix<double>;
    using T = Eigen::Triplet<double>;
    UserKernels out;
    // Photo → owner incidence (users × photos).
    std::vector<T> own;
    for (int p = 0; p < np; ++p) own.emplace_back(d.photo_owner[p], p, 1.0);
    Sp owner(nu, np);
    owner.setFromTriplets(own.begin(), own.end());
    const Eigen::VectorXd count = owner * Eigen::VectorXd::Ones(np);

    // 1. Visual centroid Gaussian, σ = mean Euclidean distance between centroids.
    Eigen::MatrixXd centroid = owner * d.photo_visual;
    for (int u = 0; u < nu; ++u)
      if (count[u] > 0) centroid.row(u) /= count[u];
    const Eigen::VectorXd sq = centroid.rowwise().squaredNorm();
    Eigen::MatrixXd d2 = (-2.0 * centroid * centroid.transpose()).colwise() + sq;
    d2.rowwise() += sq.transpose();
    d2 = d2.cwiseMax(0.0);
    const double mean_dist = nu > 1 ? d2.cwiseSqrt().sum() / (double(nu) * (nu - 1)) : 1.0;
    const double sigma2 = mean_dist > 0 ? mean_dist * mean_dist : 1.0;
    out.k[0] = (-d2 / sigma2).array().exp().matrix();

    // 2. Tag tf-idf cosine (tf = tag count over the user's photos, idf over users).
    Sp tf = owner * d.photo_tags;  // users × vocabulary
    Eigen::VectorXd df = Eigen::VectorXd::Zero(tf.cols());
    for (int j = 0; j < tf.outerSize(); ++j)
      for (Sp::InnerIterator it(tf, j); it; ++it)
        if (it.value() > 0) df[j] += 1.0;
    for (int j = 0; j < tf.outerSize(); ++j)
      for (Sp::InnerIterator it(tf, j); it; ++it) it.valueRef() *= std::log(double(nu) / df[j]);
    Eigen::MatrixXd text = Eigen::MatrixXd(tf * tf.transpose());
    const Eigen::VectorXd norm = text.diagonal().cwiseMax(0.0).cwiseSqrt();
    for (int i = 0; i < nu; ++i)
      for (int j = 0; j < nu; ++j) text(i, j) = norm[i] > 0 && norm[j] > 0 ? text(i, j) / (norm[i] * norm[j]) : 0.0;
    out.k[1] = std::move(text);

    // 3. Mutual comments: owner ↔ author counts, symmetric.
    Eigen::MatrixXd comment = Eigen::MatrixXd::Zero(nu, nu);
    for (const Comment& c : d.comments) {
      const int a = d.photo_owner[c.photo], b = c.author;
      comment(a, b) += 1.0;
      if (a != b) comment(b, a) += 1.0;
    }
    out.k[2] = std::move(comment);

    // 4–7. Co-occurrence counts B Bᵀ of binary incidences.
    auto cooccurrence = [&](const std::vector<T>& entries, int cols) {
      Sp b(nu, cols);
      b.setFromTriplets(entries.begin(), entries.end());
      b = b.unaryExpr([](double v) { return v > 0 ? 1.0 : 0.0; });  // binary even with duplicates
      return Eigen::MatrixXd(b * b.transpose());
    };
    std::vector<T> g, f, l, fav;
    for (int u = 0; u < nu; ++u) {
      for (int x : d.groups[u]) g.emplace_back(u, x, 1.0);
      for (int x : d.contacts[u]) f.emplace_back(u, x, 1.0);
    }
    out.k[3] = cooccurrence(g, d.num_groups);
    out.k[4] = cooccurrence(f, nu);
    std::map<std::pair<long, long>, int> cells;
    for (int p = 0; p < np; ++p) {
      const std::pair<long, long> key(static_cast<long>(std::floor(d.photo_latitude[p] / options.cell_degrees)),
                                      static_cast<long>(std::floor(d.photo_longitude[p] / options.cell_degrees)));
      auto it = cells.emplace(key, static_cast<int>(cells.size())).first;
      l.emplace_back(d.photo_owner[p], it->second, 1.0);
    }
    out.k[5] = cooccurrence(l, static_cast<int>(cells.size()));
    for (const auto& [u, p] : d.favourites) fav.emplace_back(u, p, 1.0);
    out.k[6] = cooccurrence(fav, np);

    if (options.repair_psd)
      for (int t = 0; t < kNumUserKernels; ++t) {
        KLS_ASSIGN_OR_RETURN(out.delta[t], RepairPsd(out.k[t]));
      }
    return out;
  });
}

}  // namespace kls
