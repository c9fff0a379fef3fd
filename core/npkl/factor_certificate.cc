#include "core/npkl/factor_certificate.h"

#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Spectra/SymEigsSolver.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/npkl/positive_spectrum.h"

namespace kls {
namespace {

// M = P S P + σ Q Qᵀ as a Spectra operator.
class DeflatedOperator {
 public:
  using Scalar = double;
  DeflatedOperator(int n, const SymmetricApply& apply_s, const Eigen::MatrixXd& q, double sigma)
      : n_(n), apply_s_(apply_s), q_(q), sigma_(sigma) {}
  Eigen::Index rows() const { return n_; }
  Eigen::Index cols() const { return n_; }
  void perform_op(const double* x_in, double* y_out) const {
    const Eigen::Map<const Eigen::VectorXd> x(x_in, n_);
    Eigen::Map<Eigen::VectorXd> y(y_out, n_);
    const Eigen::VectorXd c = q_.transpose() * x;  // Qᵀx
    px_ = x - q_ * c;                              // P x
    sx_.resize(n_);
    apply_s_(px_.data(), sx_.data());
    // y = P S P x + σ Q Qᵀ x = S P x + Q (σ Qᵀx − Qᵀ S P x): one pass over Q
    // instead of two.
    const Eigen::VectorXd d = sigma_ * c - q_.transpose() * sx_;
    y = sx_;
    y.noalias() += q_ * d;
  }

 private:
  const int n_;
  const SymmetricApply& apply_s_;
  const Eigen::MatrixXd& q_;
  const double sigma_;
  mutable Eigen::VectorXd px_, sx_;
};

}  // namespace

FactorCertificate CertifyFactor(int n, const SymmetricApply& apply_s, const Eigen::MatrixXd& v, double objective,
                                const FactorCertificateOptions& options) {
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(v.transpose());
  qr.setThreshold(1e-10);
  const int rank = static_cast<int>(qr.rank());
  const Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(n, rank);
  const double sigma = options.sigma;
  DeflatedOperator op(n, apply_s, q, sigma);

  FactorCertificate out;
  out.numerical_rank = rank;
  {
    Eigen::VectorXd row(n), srow(n);
    double inner = 0.0;
    for (int k = 0; k < v.rows(); ++k) {
      row = v.row(k).transpose();
      apply_s(row.data(), srow.data());
      inner += row.dot(srow);
    }
    out.inner_product = inner;
  }
  const int nev = std::max(1, std::min(options.nev, n - rank));
  if (n - rank <= 0) {
    out.min_eigenvalue = 0.0;
  } else if (n <= kDenseCertificateMax || 2 * nev + 20 >= n) {
    Eigen::MatrixXd m(n, n);
    Eigen::VectorXd e = Eigen::VectorXd::Zero(n);
    for (int j = 0; j < n; ++j) {
      e[j] = 1.0;
      op.perform_op(e.data(), m.col(j).data());
      e[j] = 0.0;
    }
    m = 0.5 * (m + m.transpose()).eval();
    if (!DenseSmallestEigenpairs(m, nev, &out.eigenvalues, &out.eigenvectors).ok()) {
      out.min_eigenvalue = -std::numeric_limits<double>::infinity();  // nothing certified
      out.gap = std::numeric_limits<double>::infinity();
      return out;
    }
    out.operations = n;
  } else {
    const int ncv = std::min(n, std::max(2 * nev + 1, nev + 40));
    Spectra::SymEigsSolver<DeflatedOperator> eigs(op, nev, ncv);
    eigs.init();  // Spectra's fixed-seed start vector: deterministic
    eigs.compute(Spectra::SortRule::SmallestAlge, options.max_restarts, options.lanczos_tolerance,
                 Spectra::SortRule::SmallestAlge);
    out.operations = eigs.num_operations();
    Eigen::VectorXd values = eigs.eigenvalues();
    if (values.size() == 0) {  // not converged: report what is known to be safe (nothing certified)
      out.min_eigenvalue = -std::numeric_limits<double>::infinity();
      out.gap = std::numeric_limits<double>::infinity();
      return out;
    }
    out.eigenvalues = values;
    out.eigenvectors = eigs.eigenvectors();
  }
  if (out.eigenvalues.size() > 0) out.min_eigenvalue = std::min(out.eigenvalues.minCoeff(), sigma);
  const double trace = v.squaredNorm();
  out.gap = (std::abs(out.inner_product) + std::max(0.0, -out.min_eigenvalue) * trace) /
                           std::max(std::abs(objective), options.objective_floor);
  return out;
}

int AppendNegativeDirections(const FactorCertificate& cert, const DirectionCurvature& curvature, int max_rows,
                             Eigen::MatrixXd* v) {
  std::vector<int> take;
  for (int k = 0; k < cert.eigenvalues.size() && static_cast<int>(take.size()) < max_rows; ++k) {
    if (cert.eigenvalues[k] < 0.0) take.push_back(k);
  }
  if (take.empty()) return 0;
  const int n = static_cast<int>(v->cols());
  const int r = static_cast<int>(v->rows());
  Eigen::MatrixXd grown(r + static_cast<int>(take.size()), n);
  grown.topRows(r) = *v;
  for (size_t s = 0; s < take.size(); ++s) {
    const Eigen::VectorXd x = cert.eigenvectors.col(take[s]).normalized();
    const double f2 = curvature(x);
    const double t = f2 > 0.0 ? -cert.eigenvalues[take[s]] / f2 / static_cast<double>(take.size()) : 0.0;
    grown.row(r + static_cast<int>(s)) = std::sqrt(t) * x.transpose();
  }
  *v = std::move(grown);
  return static_cast<int>(take.size());
}

Eigen::MatrixXd DropDegenerateDirections(const Eigen::MatrixXd& v, double relative_floor, int extra, int multiple) {
  const int r = static_cast<int>(v.rows());
  if (r == 0) return v;
  const Eigen::MatrixXd gram = v * v.transpose();  // = U Σ² Uᵀ
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
  if (eig.info() != Eigen::Success) return v;
  const Eigen::VectorXd& s2 = eig.eigenvalues();  // ascending
  const double floor2 = relative_floor * relative_floor * std::max(s2[r - 1], 0.0);
  int keep = 0;
  while (keep < r && s2[r - 1 - keep] > floor2) ++keep;
  if (keep == 0) return v;
  keep += std::max(extra, 0);
  if (multiple > 1) keep = (keep + multiple - 1) / multiple * multiple;
  keep = std::min(r, keep);
  if (keep == r) return v;
  return eig.eigenvectors().rightCols(keep).transpose() * v;
}

Eigen::MatrixXd PrepareWarmFactor(const Eigen::MatrixXd& v, const FactorCertify& certify,
                                  const DirectionCurvature& curvature, int max_rank, double certificate_tolerance,
                                  const FactorSettle& settle) {
  Eigen::MatrixXd out = DropDegenerateDirections(v, kWarmStartDegenerateFloor);
  if (settle) settle(&out);
  // The previous factor's rank budget (at least one new row); the escalation
  // grows it further if the certificate asks.
  const int budget = std::min(max_rank, std::max(static_cast<int>(v.rows()), static_cast<int>(out.rows()) + 1));
  const int max_rows = budget - static_cast<int>(out.rows());
  if (max_rows <= 0) return out;
  double f = 0.0;
  FactorCertificate cert = certify(out, &f);
  const double trace = out.squaredNorm();
  if (!(cert.gap > certificate_tolerance) || !(trace > 0.0)) return out;
  const double significant = certificate_tolerance * std::max(std::abs(f), 1.0) / trace;
  for (int k = 0; k < cert.eigenvalues.size(); ++k) {
    if (!(cert.eigenvalues[k] < -significant)) cert.eigenvalues[k] = 0.0;  // not taken
  }
  AppendNegativeDirections(cert, curvature, max_rows, &out);
  return out;
}

Status ValidateEscalationOptions(int initial_rank, int escalation_step, double certificate_tolerance,
                                 std::string_view path) {
  if (initial_rank < 1) {
    return InvalidArgumentError(std::string(path) + ".initial_rank = " + std::to_string(initial_rank) + " must be >= 1");
  }
  if (escalation_step < 1) {
    return InvalidArgumentError(std::string(path) + ".escalation_step = " + std::to_string(escalation_step) + " must be >= 1");
  }
  if (!(certificate_tolerance >= 0.0) || !std::isfinite(certificate_tolerance)) {
    return InvalidArgumentError(std::string(path) + ".certificate_tolerance = " + FormatNumber(certificate_tolerance) +
                                " must be non-negative and finite");
  }
  return OkStatus();
}

void FactorDiagnostics::Record(const FactorCertificate& cert, double seconds, double certificate_tolerance) {
  certificate_seconds += seconds;
  ++certificate_checks;
  lanczos_operations += cert.operations;
  min_eigenvalue = cert.min_eigenvalue;
  numerical_rank = cert.numerical_rank;
  inner_product = cert.inner_product;
  gap = cert.gap;
  certified = cert.gap <= certificate_tolerance;
}

void PutFactorDiagnostics(ByteWriter* w, const FactorDiagnostics& d) {
  w->PutInts(d.rank_history);
  w->PutInts(d.stage_sweeps);
  w->Put<int32_t>(d.numerical_rank);
  w->Put<int32_t>(d.certificate_checks);
  w->Put<double>(d.min_eigenvalue);
  w->Put<double>(d.inner_product);
  w->Put<double>(d.gap);
  w->Put<uint8_t>(d.certified ? 1 : 0);
  w->Put<int64_t>(d.lanczos_operations);
  w->Put<double>(d.certificate_seconds);
}

Status GetFactorDiagnostics(ByteReader* in, FactorDiagnostics* d) {
  KLS_RETURN_IF_ERROR(in->GetInts(&d->rank_history));
  KLS_RETURN_IF_ERROR(in->GetInts(&d->stage_sweeps));
  int32_t numerical_rank = 0, checks = 0;
  KLS_RETURN_IF_ERROR(in->Get(&numerical_rank));
  KLS_RETURN_IF_ERROR(in->Get(&checks));
  d->numerical_rank = numerical_rank;
  d->certificate_checks = checks;
  KLS_RETURN_IF_ERROR(in->Get(&d->min_eigenvalue));
  KLS_RETURN_IF_ERROR(in->Get(&d->inner_product));
  KLS_RETURN_IF_ERROR(in->Get(&d->gap));
  uint8_t certified = 0;
  KLS_RETURN_IF_ERROR(in->Get(&certified));
  d->certified = certified != 0;
  int64_t operations = 0;
  KLS_RETURN_IF_ERROR(in->Get(&operations));
  d->lanczos_operations = operations;
  return in->Get(&d->certificate_seconds);
}

}  // namespace kls
