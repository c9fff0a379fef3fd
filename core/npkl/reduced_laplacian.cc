#include "core/npkl/reduced_laplacian.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/common/parallel.h"

namespace kls {

StatusOr<ReducedLaplacian> ReducedLaplacian::Build(const SparseMatrix& lap, const std::vector<int>& local,
                                                   Representation representation) {
  ReducedLaplacian red;
  const int n = static_cast<int>(lap.rows());
  std::vector<int> interior_pos(n, -1);
  int l = 0;
  for (int g = 0; g < n; ++g) l += local[g] >= 0 ? 1 : 0;
  red.boundary_.assign(l, -1);
  for (int g = 0; g < n; ++g) {
    if (local[g] >= 0) {
      red.boundary_[local[g]] = g;
    } else {
      interior_pos[g] = static_cast<int>(red.interior_.size());
      red.interior_.push_back(g);
    }
  }
  const int u = red.u();

  std::vector<Eigen::Triplet<double>> ll, uu, ul;
  for (int col = 0; col < lap.outerSize(); ++col) {
    for (SparseMatrix::InnerIterator it(lap, col); it; ++it) {
      const int row = static_cast<int>(it.row());
      const int lr = local[row], lc = local[col];
      if (lr >= 0 && lc >= 0) {
        ll.emplace_back(lr, lc, it.value());
      } else if (lr < 0 && lc < 0) {
        uu.emplace_back(interior_pos[row], interior_pos[col], it.value());
      } else if (lr < 0) {  // row ∈ U, col ∈ L
        ul.emplace_back(interior_pos[row], lc, it.value());
      }
    }
  }
  red.lap_ll_.resize(l, l);
  red.lap_ll_.setFromTriplets(ll.begin(), ll.end());
  red.lap_ul_.resize(u, l);
  red.lap_ul_.setFromTriplets(ul.begin(), ul.end());
  red.diag_ = red.lap_ll_.diagonal();

  red.factored_ = representation == Representation::kFactored ||
                  (representation == Representation::kAuto && 2 * static_cast<long>(u) < l);
  if (u > 0) {
    SparseMatrix lap_uu(u, u);
    lap_uu.setFromTriplets(uu.begin(), uu.end());
    red.interior_ldlt_ = std::make_unique<Ldlt>(lap_uu);
    const std::string hint = " over the " + std::to_string(u) +
                             " unconstrained points is not positive definite; Prop. 1 needs it "
                             "invertible — build the Laplacian with delta > 0 (BCDNPKL §2, §4.2: δ = C/2)";
    if (red.interior_ldlt_->info() != Eigen::Success) {
      return InvalidArgumentError("laplacian: the block Δ_UU" + hint);
    }
    const Eigen::VectorXd& pivots = red.interior_ldlt_->vectorD();
    const double max_pivot = pivots.maxCoeff();
    const double min_pivot = pivots.minCoeff();
    if (!(max_pivot > 0.0) || !(min_pivot > 1e-12 * max_pivot)) {
      return InvalidArgumentError("laplacian: the block Δ_UU (smallest LDLᵀ pivot " + FormatNumber(min_pivot) +
                                  ", largest " + FormatNumber(max_pivot) + ")" + hint);
    }
  }

  if (red.factored_) {
    // B = D^{-1/2} L⁻¹ P Δ_UL, so that BᵀB = Δ_LU Δ_UU⁻¹ Δ_UL (Δ_UU = P⁻¹ L D Lᵀ P).
    // With u = 0 (every point constrained) B is 0 × l and Δ̃ = Δ_LL.
    red.b_.resize(u, l);
    const Eigen::ArrayXd inv_sqrt_d =
        u > 0 ? Eigen::ArrayXd(red.interior_ldlt_->vectorD().array().rsqrt()) : Eigen::ArrayXd();
    for (int first = 0; first < l; first += kBlock) {
      const int width = std::min(kBlock, l - first);
      Eigen::MatrixXd block(u, width);
      if (u > 0) {
        block = red.interior_ldlt_->permutationP() * Eigen::MatrixXd(red.lap_ul_.middleCols(first, width));
        red.interior_ldlt_->matrixL().solveInPlace(block);
        block.array().colwise() *= inv_sqrt_d;
      }
      red.b_.middleCols(first, width) = block;
      red.diag_.segment(first, width) -= block.colwise().squaredNorm().transpose();
      red.block_gram_.push_back(block.transpose() * block);
    }
  } else {
    red.dense_ = Eigen::MatrixXd(red.lap_ll_);
    if (u > 0) {
      // Δ̃ −= Δ_LU (Δ_UU⁻¹ Δ_UL), a block of columns at a time so the dense
      // right-hand sides need O(u · block) memory rather than O(u · l).
      Eigen::MatrixXd rhs;
      for (int first = 0; first < l; first += kBlock) {
        const int width = std::min(kBlock, l - first);
        rhs = Eigen::MatrixXd(red.lap_ul_.middleCols(first, width));
        rhs = red.interior_ldlt_->solve(rhs);
        red.dense_.middleCols(first, width).noalias() -= red.lap_ul_.transpose() * rhs;
      }
      // Symmetrize against rounding: the Gauss–Seidel products read columns.
      red.dense_ = 0.5 * (red.dense_ + red.dense_.transpose()).eval();
    }
    red.diag_ = red.dense_.diagonal();
  }
  for (int i = 0; i < l; ++i) {
    if (!(red.diag_[i] > 0.0) || !std::isfinite(red.diag_[i])) {
      return InvalidArgumentError("laplacian: the reduced Laplacian Δ̃ has Δ̃_ii = " + FormatNumber(red.diag_[i]) +
                                  " at point " + std::to_string(red.boundary_[i]) +
                                  "; eq. (6) needs Δ̃_ii > 0 (Δ must be positive definite, e.g. delta > 0)");
    }
  }
  return red;
}

Eigen::MatrixXd ReducedLaplacian::ExtendInterior(const Eigen::MatrixXd& v) const {
  if (interior_.empty()) return Eigen::MatrixXd(0, v.rows());
  Eigen::MatrixXd rhs = lap_ul_ * v.transpose();  // u × r
  return -interior_ldlt_->solve(rhs);
}

void ReducedLaplacian::Apply(const Eigen::MatrixXd& v, Eigen::MatrixXd* out) const {
  if (!factored_) {
    out->noalias() = v * dense_;
    return;
  }
  out->noalias() = v * lap_ll_;
  const Eigen::MatrixXd z = v * b_.transpose();
  out->noalias() -= z * b_;
}

void ReducedLaplacian::ApplyVector(const double* x, double* y) const {
  const Eigen::Map<const Eigen::VectorXd> xv(x, l());
  Eigen::Map<Eigen::VectorXd> yv(y, l());
  if (!factored_) {
    yv.noalias() = dense_ * xv;
    return;
  }
  // Δ_LL x − Δ_LU (Δ_UU⁻¹ (Δ_UL x)) through the sparse LDLᵀ: 2·nnz(Δ_UL) +
  // 4·nnz(L) flops, far less than the dense B's 4·u·l (and no pass over B).
  yv.noalias() = lap_ll_ * xv;
  if (u() > 0) {
    const Eigen::VectorXd rhs = lap_ul_ * xv;
    const Eigen::VectorXd w = interior_ldlt_->solve(rhs);
    yv.noalias() -= lap_ul_.transpose() * w;
  }
}

double ReducedLaplacian::Quadratic(const Eigen::MatrixXd& v) const {
  if (!factored_) return (v * dense_).cwiseProduct(v).sum();
  const Eigen::MatrixXd vl = v * lap_ll_;
  return vl.cwiseProduct(v).sum() - (v * b_.transpose()).squaredNorm();
}

double ReducedLaplacian::FrobeniusNorm() const {
  if (frobenius_ >= 0.0) return frobenius_;
  if (!factored_) {
    frobenius_ = dense_.norm();
    return frobenius_;
  }
  // ‖Δ_LL − BᵀB‖²_F = ‖Δ_LL‖²_F − 2 Σ_{(i,j) ∈ nnz} Δ_ij B_iᵀB_j + ‖B Bᵀ‖²_F.
  double cross = 0.0;
  for (int col = 0; col < lap_ll_.outerSize(); ++col) {
    for (SparseMatrix::InnerIterator it(lap_ll_, col); it; ++it) {
      cross += it.value() * b_.col(it.row()).dot(b_.col(col));
    }
  }
  Eigen::MatrixXd bbt = Eigen::MatrixXd::Zero(u(), u());
  bbt.selfadjointView<Eigen::Lower>().rankUpdate(b_);
  const double gram = 2.0 * bbt.triangularView<Eigen::StrictlyLower>().toDenseMatrix().squaredNorm() +
                      bbt.diagonal().squaredNorm();
  frobenius_ = std::sqrt(std::max(0.0, lap_ll_.squaredNorm() - 2.0 * cross + gram));
  return frobenius_;
}

void ReducedLaplacian::BeginSweep(const Eigen::MatrixXd& v, bool resync) {
  if (!factored_ || !(resync || z_.rows() != v.rows() || z_.cols() != u())) return;
  z_.resize(v.rows(), u());
  // Z = V Bᵀ by slices of Z's columns (each entry is computed by one thread).
  ParallelFor(u(), threads_, [&](int begin, int end) {
    z_.middleCols(begin, end - begin).noalias() = v * b_.middleRows(begin, end - begin).transpose();
  });
}

double ReducedLaplacian::QuadraticAfterSweep(const Eigen::MatrixXd& v) const {
  if (!factored_) return Quadratic(v);
  const Eigen::MatrixXd vl = v * lap_ll_;
  return vl.cwiseProduct(v).sum() - z_.squaredNorm();
}

void ReducedLaplacian::BeginBlock(int first, int width) {
  block_first_ = first;
  block_width_ = width;
  if (!factored_) return;
  // P = Z B_blk = Σ_slices Z_s B_blk,s, the slices' partial products summed in
  // slice order (deterministic for a fixed thread count).
  const int slices = std::max(1, std::min(threads_, u()));
  if (slices == 1) {
    p_.noalias() = z_ * b_.middleCols(first, width);
  } else {
    partial_.resize(slices);
    const int chunk = (u() + slices - 1) / slices;
    ParallelFor(slices, slices, [&](int s_begin, int s_end) {
      for (int s = s_begin; s < s_end; ++s) {
        const int begin = s * chunk, len = std::max(0, std::min(u(), begin + chunk) - begin);
        partial_[s].noalias() = z_.middleCols(begin, len) * b_.block(begin, first, len, width);
      }
    });
    p_ = partial_[0];
    for (int s = 1; s < slices; ++s) p_ += partial_[s];
  }
  changes_.setZero(z_.rows(), width);
}

void ReducedLaplacian::ColumnProduct(const Eigen::MatrixXd& v, int i, Eigen::VectorXd* out) {
  if (!factored_) {
    out->noalias() = v * dense_.col(i);
    return;
  }
  // V Δ_LL e_i (sparse column) − Z_current B_i, where
  // Z_current B_i = Z_blockstart B_i + Σ_{k<i in block} d_k (B_kᵀ B_i).
  const int k = i - block_first_;
  const Eigen::MatrixXd& gram = block_gram_[block_first_ / kBlock];
  out->noalias() = -p_.col(k);
  if (k > 0) out->noalias() -= changes_.leftCols(k) * gram.col(k).head(k);
  for (SparseMatrix::InnerIterator it(lap_ll_, i); it; ++it) *out += it.value() * v.col(it.row());
}

void ReducedLaplacian::ColumnChanged(int i, const Eigen::VectorXd& delta) {
  if (factored_) changes_.col(i - block_first_) = delta;
}

void ReducedLaplacian::EndBlock() {
  if (!factored_) return;
  ParallelFor(u(), threads_, [&](int begin, int end) {
    z_.middleCols(begin, end - begin).noalias() +=
        changes_ * b_.block(begin, block_first_, end - begin, block_width_).transpose();
  });
}

}  // namespace kls
