#include "tests/test_util/npkl_sdp.h"

#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/common/solve_control.h"
#include "tests/test_util/sdp_oracle.h"

namespace kls::test_util {
namespace {

double BcdLoss(NpklLoss loss, double z) {
  const double h = std::max(0.0, 1.0 - z);
  switch (loss) {
    case NpklLoss::kSquare: return (1.0 - z) * (1.0 - z);
    case NpklLoss::kSquareHinge: return h * h;
    case NpklLoss::kHinge: return h;
    default: return NAN;
  }
}

// −tr(ΔX_0) as CSDP's maximization objective on block 0.
void AddLaplacianObjective(const Eigen::SparseMatrix<double>& lap, int block, SdpOracle* sdp) {
  for (int col = 0; col < lap.outerSize(); ++col) {
    for (Eigen::SparseMatrix<double>::InnerIterator it(lap, col); it; ++it) {
      if (it.row() <= col) sdp->AddObjective(block, static_cast<int>(it.row()), col, -it.value());
    }
  }
}

StatusOr<NpklSdpAnswer> Run(const SdpOracle& sdp, int kernel_block) {
  Stopwatch watch;
  KLS_ASSIGN_OR_RETURN(SdpOracle::Solution sol, sdp.Solve());
  NpklSdpAnswer out;
  out.seconds = watch.Seconds();
  out.objective = -sol.primal_objective;
  out.kernel = std::move(sol.blocks[kernel_block]);
  return out;
}

}  // namespace

double BcdObjective(const NpklProblem& p, NpklLoss loss, double c, const Eigen::MatrixXd& z) {
  double f = Eigen::MatrixXd(p.laplacian).cwiseProduct(z).sum();
  for (const Pair& q : p.constraints.pairs) f += c * BcdLoss(loss, q.sign() * z(q.i, q.j));
  return f;
}

// CSDP primal: X = diag(Z (n×n), B_k = [[t_k, p_k], [p_k, 1]] per pair k, LP
// slacks); B_k ⪰ 0 ⇔ t_k ≥ p_k², objective tr(ΔZ) + C Σ t_k, with
//   square:        p_k = 1 − T_k Z_ij                      (t_k ≥ (1 − T Z)²)
//   square hinge:  p_k − e_k = 1 − T_k Z_ij, p_k − f_k = 0, e, f ≥ 0
//   hinge:         s_k − e_k = 1 − T_k Z_ij, s, e ≥ 0, objective C Σ s_k.
StatusOr<NpklSdpAnswer> SolveBcdWithCsdp(const NpklProblem& p, NpklLoss loss, double c) {
  SdpOracle sdp;
  const int m = p.constraints.size();
  const int zb = sdp.AddBlock(p.num_points());
  AddLaplacianObjective(p.laplacian, zb, &sdp);
  std::vector<int> blocks;
  if (loss != NpklLoss::kHinge) {
    for (int k = 0; k < m; ++k) blocks.push_back(sdp.AddBlock(2));
  }
  const int lp = loss == NpklLoss::kSquare ? -1 : sdp.AddDiagonalBlock(2 * m);
  for (int k = 0; k < m; ++k) {
    const Pair& q = p.constraints.pairs[k];
    const int link = sdp.AddConstraint(1.0);  // (p_k or s_k) + T Z_ij [− e_k] = 1
    sdp.AddCoefficient(link, zb, q.i, q.j, 0.5 * q.sign());
    if (loss == NpklLoss::kHinge) {
      sdp.AddCoefficient(link, lp, 2 * k, 2 * k, 1.0);
      sdp.AddCoefficient(link, lp, 2 * k + 1, 2 * k + 1, -1.0);
      sdp.AddObjective(lp, 2 * k, 2 * k, -c);
      continue;
    }
    sdp.AddCoefficient(link, blocks[k], 0, 1, 0.5);
    const int one = sdp.AddConstraint(1.0);
    sdp.AddCoefficient(one, blocks[k], 1, 1, 1.0);
    sdp.AddObjective(blocks[k], 0, 0, -c);
    if (loss == NpklLoss::kSquareHinge) {
      sdp.AddCoefficient(link, lp, 2 * k, 2 * k, -1.0);
      const int nonneg = sdp.AddConstraint(0.0);
      sdp.AddCoefficient(nonneg, blocks[k], 0, 1, 0.5);
      sdp.AddCoefficient(nonneg, lp, 2 * k + 1, 2 * k + 1, -1.0);
    }
  }
  return Run(sdp, zb);
}

std::vector<PcpEntry> OrderedPcpEntries(const PairwiseConstraints& c) {
  std::vector<PcpEntry> out;
  for (const Pair& p : c.pairs) {
    const double t = p.kind == PairKind::kMustLink ? 1.0 : 0.0;
    out.push_back({p.i, p.j, t});
    if (p.i != p.j) out.push_back({p.j, p.i, t});
  }
  return out;
}

double PcpObjective(const NpklProblem& p, double gamma, const Eigen::MatrixXd& k) {
  double f = Eigen::MatrixXd(p.laplacian).cwiseProduct(k).sum();
  for (const PcpEntry& e : OrderedPcpEntries(p.constraints)) f += 0.5 * gamma * std::pow(k(e.i, e.j) - e.t, 2);
  return f;
}

// CSDP primal: X = diag(K, [[t_k, s_k], [s_k, 1]] per ordered entry k = (i, j)),
// s_k = K_ij − T_ij, so X ⪰ 0 ⇔ K ⪰ 0 and t_k ≥ s_k²; maximize
// −tr(LK) − (γ/2) Σ t_k.
StatusOr<NpklSdpAnswer> SolvePcpWithCsdp(const NpklProblem& p, double gamma) {
  SdpOracle sdp;
  const int kb = sdp.AddBlock(p.num_points());
  AddLaplacianObjective(p.laplacian, kb, &sdp);
  for (const PcpEntry& e : OrderedPcpEntries(p.constraints)) {
    const int b = sdp.AddBlock(2);
    sdp.AddObjective(b, 0, 0, -0.5 * gamma);
    const int one = sdp.AddConstraint(1.0);  // X_b(1,1) = 1
    sdp.AddCoefficient(one, b, 1, 1, 1.0);
    const int link = sdp.AddConstraint(-e.t);  // s_k − K_ij = −T_ij
    sdp.AddCoefficient(link, b, 0, 1, 0.5);    // off-diagonal: 2·0.5·X_01
    sdp.AddCoefficient(link, kb, e.i, e.j, e.i == e.j ? -1.0 : -0.5);
  }
  return Run(sdp, kb);
}

}  // namespace kls::test_util
