#include "core/qsdp/qsdp_subspace.h"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/common/checkpoint_codec.h"
#include "core/qsdp/qsdp_solver.h"

namespace kls {

Status QsdpSubspaceOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(CheckPositiveOption("gap_tolerance", gap_tolerance, path));
  auto at_least_one = [&p](const char* field, int v) -> Status {
    if (v < 1) return InvalidArgumentError(p + "." + field + " = " + std::to_string(v) + " must be >= 1");
    return OkStatus();
  };
  KLS_RETURN_IF_ERROR(at_least_one("full_system_size", full_system_size));
  KLS_RETURN_IF_ERROR(at_least_one("initial_dimension", initial_dimension));
  KLS_RETURN_IF_ERROR(at_least_one("margin", margin));
  KLS_RETURN_IF_ERROR(at_least_one("max_rounds", max_rounds));
  if (!(growth >= 1.0) || !std::isfinite(growth)) {
    return InvalidArgumentError(p + ".growth = " + FormatNumber(growth) + " must be finite and >= 1");
  }
  if (!(min_gap_reduction > 0.0 && min_gap_reduction <= 1.0)) {
    return InvalidArgumentError(p + ".min_gap_reduction = " + FormatNumber(min_gap_reduction) + " must be in (0, 1]");
  }
  if (!(range_threshold > 0.0 && range_threshold < 1.0)) {
    return InvalidArgumentError(p + ".range_threshold = " + FormatNumber(range_threshold) + " must be in (0, 1)");
  }
  // The IPM's options sit under the same path: the service's qsdp.max_iterations
  // is ipm.max_iterations, and its gap_tolerance sets both.
  return ipm.Validate(path);
}

QsdpProblem RestrictToFace(const QsdpProblem& problem, const Eigen::MatrixXd& u) {
  QsdpProblem r;
  r.left = problem.left * u;
  r.right = problem.right * u;
  r.target = problem.target;
  r.weight = problem.weight;
  r.trace_weight = problem.trace_weight;  // tr(U S Uᵀ) = tr(S) for orthonormal U
  if (problem.linear.size() != 0) {
    r.linear = u.transpose() * problem.linear * u;
    r.linear = (0.5 * (r.linear + r.linear.transpose())).eval();
  }
  return r;
}

namespace {

// Appends the columns of `candidates` (in order) to the orthonormal `basis`
// by twice-repeated Gram–Schmidt, skipping nearly dependent ones, until it has
// `target` columns.
void ExtendBasis(const Eigen::MatrixXd& candidates, int target, Eigen::MatrixXd* basis) {
  const int m = static_cast<int>(candidates.rows());
  std::vector<Eigen::VectorXd> cols;
  for (int j = 0; j < basis->cols(); ++j) cols.push_back(basis->col(j));
  for (int j = 0; j < candidates.cols() && static_cast<int>(cols.size()) < target; ++j) {
    Eigen::VectorXd v = candidates.col(j);
    for (int pass = 0; pass < 2; ++pass)
      for (const Eigen::VectorXd& c : cols) v -= c.dot(v) * c;
    const double norm = v.norm();
    if (norm > 1e-6) cols.push_back(v / norm);
  }
  basis->resize(m, static_cast<Eigen::Index>(cols.size()));
  for (size_t j = 0; j < cols.size(); ++j) basis->col(static_cast<Eigen::Index>(j)) = cols[j];
}

// ---- Checkpoints (SolveControl::checkpoint / resume_from) -------------------
//
// Taken after a round that does not end the run (the face rounds; when the
// full-space IPM is called directly its own "qsdp_ipm/1" checkpoints are
// used). After the common prefix (core/common/checkpoint_codec.h; one history
// entry per round): Y_k, the orthonormal range(Y_k), the ∇f·range directions
// carried to the next face, the next face dimension p, the last gap, the best
// certified iterate (Y and its certificate), the IPM iteration total and the
// per-round records. ∇f(Y_k) is recomputed from Y_k exactly as the
// uninterrupted run computes it, so a resumed run is bit-identical.
constexpr char kCheckpointTag[] = "qsdp_subspace/1";
constexpr uint32_t kCheckpointMagic = 0x51535353;  // "QSSS"
constexpr uint32_t kCheckpointVersion = 1;

// The problem and every option that shapes the faces or the inner IPM's
// iterates; gap_tolerance too, since the face solves stop at a tenth of it.
// Not max_rounds (the last round is decided as the run goes).
uint64_t CheckpointFingerprint(const QsdpProblem& problem, const QsdpSubspaceOptions& o) {
  Fingerprint fp;
  fp.AddString(kCheckpointTag);
  AddQsdpProblemToFingerprint(problem, &fp);
  fp.AddInt(o.full_system_size).AddInt(o.initial_dimension).AddInt(o.margin).AddDouble(o.growth);
  fp.AddDouble(o.min_gap_reduction).AddDouble(o.range_threshold);
  fp.AddDouble(o.ipm.step_fraction).AddInt(static_cast<int>(o.ipm.newton_system)).AddInt(o.ipm.precondition);
  fp.AddDouble(o.ipm.rank_threshold).AddDouble(o.gap_tolerance).AddDouble(o.ipm.gap_tolerance);
  fp.AddInt(o.ipm.max_iterations);
  return fp.value();
}

struct ResumeState {
  std::vector<double> objective_history;
  Eigen::MatrixXd y, range, rotation, best_y;
  int p = 0;
  double previous_gap = 0.0;
  QsdpResult best_cert;
  int ipm_iterations = 0;
  std::vector<QsdpSubspaceRound> rounds;
};

std::string EncodeCheckpoint(uint64_t fingerprint, int rounds_done, const QsdpSubspaceResult& result,
                             const Eigen::MatrixXd& y, const Eigen::MatrixXd& range, const Eigen::MatrixXd& rotation,
                             int p, double previous_gap, const QsdpResult& best_cert, const Eigen::MatrixXd& best_y) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kCheckpointMagic, kCheckpointVersion, fingerprint, rounds_done,
                      result.stats.objective_history);
  w.PutMatrix(y);
  w.PutMatrix(range);
  w.PutMatrix(rotation);
  w.Put<int32_t>(p);
  w.Put<double>(previous_gap);
  w.PutMatrix(best_y);
  w.Put<double>(best_cert.objective);
  w.Put<double>(best_cert.stats.certificate.lower_bound);
  w.Put<double>(best_cert.stats.certificate.gap);
  w.Put<double>(best_cert.stats.certificate.kkt_residual);
  w.Put<int32_t>(best_cert.rank);
  w.Put<int32_t>(result.ipm_iterations);
  w.Put<uint64_t>(result.rounds.size());
  for (const QsdpSubspaceRound& r : result.rounds) {
    w.Put<int32_t>(r.dimension);
    w.Put<int32_t>(r.ipm_iterations);
    w.Put<double>(r.gap);
    w.Put<double>(r.seconds);
  }
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeCheckpoint(const Checkpoint& c, uint64_t fingerprint, int m, ResumeState* s) {
  ByteReader in(c.bytes, "qsdp_subspace checkpoint");
  KLS_RETURN_IF_ERROR(
      GetCheckpointPrefix(&in, c, kCheckpointMagic, kCheckpointVersion, fingerprint, &s->objective_history));
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, m, m, &s->y));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->range));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->rotation));
  int32_t p = 0, rank = 0, ipm_iterations = 0;
  KLS_RETURN_IF_ERROR(in.Get(&p));
  KLS_RETURN_IF_ERROR(in.Get(&s->previous_gap));
  KLS_RETURN_IF_ERROR(GetMatrixOfShape(&in, m, m, &s->best_y));
  KLS_RETURN_IF_ERROR(in.Get(&s->best_cert.objective));
  KLS_RETURN_IF_ERROR(in.Get(&s->best_cert.stats.certificate.lower_bound));
  KLS_RETURN_IF_ERROR(in.Get(&s->best_cert.stats.certificate.gap));
  KLS_RETURN_IF_ERROR(in.Get(&s->best_cert.stats.certificate.kkt_residual));
  KLS_RETURN_IF_ERROR(in.Get(&rank));
  KLS_RETURN_IF_ERROR(in.Get(&ipm_iterations));
  uint64_t count = 0;
  KLS_RETURN_IF_ERROR(in.Get(&count));
  if (count != static_cast<uint64_t>(c.iteration)) return DataLossError(in.what() + ": wrong number of rounds");
  for (uint64_t k = 0; k < count; ++k) {
    QsdpSubspaceRound r;
    int32_t dimension = 0, iterations = 0;
    KLS_RETURN_IF_ERROR(in.Get(&dimension));
    KLS_RETURN_IF_ERROR(in.Get(&iterations));
    KLS_RETURN_IF_ERROR(in.Get(&r.gap));
    KLS_RETURN_IF_ERROR(in.Get(&r.seconds));
    r.dimension = dimension;
    r.ipm_iterations = iterations;
    s->rounds.push_back(r);
  }
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  s->p = p;
  s->best_cert.rank = rank;
  s->ipm_iterations = ipm_iterations;
  if (s->range.rows() != m || s->rotation.rows() != m || s->range.cols() > m || p < 1 || p > m ||
      !s->y.allFinite() || !s->range.allFinite() || !s->rotation.allFinite() || !s->best_y.allFinite() ||
      ipm_iterations < 0) {
    return DataLossError(in.what() + ": does not fit this problem");
  }
  return OkStatus();
}

// The result's certificate, iterate and stop: the best certified iterate
// `y` after `rounds` rounds.
void Finish(const QsdpResult& cert, const Eigen::MatrixXd& y, Termination why, int rounds, const Stopwatch& watch,
            QsdpSubspaceResult* result) {
  result->y = y;
  result->objective = cert.objective;
  result->stats.certificate = cert.stats.certificate;
  result->rank = cert.rank;
  result->stats.termination = why;
  result->stats.iterations = rounds;
  result->stats.final_objective = cert.objective;
  result->stats.solve_seconds = watch.Seconds();
}

// The result of the direct path (one IPM solve of the whole problem) as one round.
void FullSystemResult(const QsdpIpmResult& r, int m, const Stopwatch& watch, QsdpSubspaceResult* result) {
  QsdpSubspaceRound round;
  round.dimension = m;
  round.ipm_iterations = r.stats.iterations;
  round.gap = r.stats.certificate.gap;
  round.seconds = r.stats.solve_seconds + r.stats.setup_seconds;
  result->rounds.push_back(round);
  result->ipm_iterations = r.stats.iterations;
  result->stats.objective_history = r.stats.objective_history;
  // Resumed from a "qsdp_ipm/1" checkpoint: in IPM iterations, as the progress events.
  result->stats.resumed_from_iteration = r.stats.resumed_from_iteration;
  result->stats.rows = r.stats.rows;
  QsdpResult cert;
  cert.objective = r.objective;
  cert.stats.certificate = r.stats.certificate;
  cert.rank = r.rank;
  Finish(cert, r.y, r.stats.termination, 1, watch, result);
}

// The round's face basis of dimension p (the identity when p >= m):
// U = orth[range(Y_{k−1}), eigenvectors of ∇f(Y_{k−1}) by ascending eigenvalue].
Eigen::MatrixXd FaceBasis(const Eigen::MatrixXd& grad, const Eigen::MatrixXd& range, const Eigen::MatrixXd& rotation,
                          int p) {
  const Eigen::Index m = grad.rows();
  Eigen::MatrixXd u;
  if (p >= m) {
    u = Eigen::MatrixXd::Identity(m, m);
  } else {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eg(0.5 * (grad + grad.transpose()));
    u = range;
    ExtendBasis(rotation, p, &u);
    ExtendBasis(eg.eigenvectors(), p, &u);
  }
  return u;
}

// After a round on the face U whose solution is y_face (Y = U y_face Uᵀ = y):
// the new range(Y), ∇f(Y) and rotation directions; returns the next face's
// dimension (grown when the gap did not shrink enough since previous_gap).
int NextFace(const QsdpProblem& problem, const QsdpSubspaceOptions& options, const Eigen::MatrixXd& u,
             const Eigen::MatrixXd& y_face, const Eigen::MatrixXd& y, double gap, double previous_gap,
             Eigen::MatrixXd* range, Eigen::MatrixXd* grad, Eigen::MatrixXd* rotation) {
  const int m = problem.dim();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(y_face);
  const double top = std::max(es.eigenvalues().maxCoeff(), 0.0);
  int rank = 0;
  while (rank < es.eigenvalues().size() &&
         es.eigenvalues()[es.eigenvalues().size() - 1 - rank] > options.range_threshold * top)
    ++rank;
  *range = u * es.eigenvectors().rightCols(rank);
  *grad = problem.Gradient(y);
  {
    Eigen::MatrixXd dirs(m, rank + rotation->cols());
    dirs << *grad * *range, *rotation;
    *rotation = dirs.leftCols(std::min<Eigen::Index>(dirs.cols(), options.margin + rank));
  }
  const int wanted = rank + options.margin;
  const bool progress = gap <= options.min_gap_reduction * previous_gap;
  const double grown = progress ? static_cast<double>(u.cols()) : options.growth * static_cast<double>(u.cols());
  return std::min(m, std::max(wanted, static_cast<int>(std::ceil(grown))));
}

}  // namespace

StatusOr<QsdpSubspaceResult> SolveQsdpSubspace(const QsdpProblem& problem, const QsdpSubspaceOptions& options,
                                               const SolveControl& control) {
  return GuardExceptions("SolveQsdpSubspace", [&]() -> StatusOr<QsdpSubspaceResult> {
    KLS_RETURN_IF_ERROR(problem.Validate().WithContext("QsdpProblem"));
    KLS_RETURN_IF_ERROR(options.Validate().WithContext("QsdpSubspaceOptions"));
    const int m = problem.dim();
    QsdpSubspaceResult result;
    Stopwatch watch;
    QsdpIpmOptions ipm = options.ipm;
    // The face solve must be tighter than the global target, or the global
    // certificate would be limited by the face's own sub-optimality.
    ipm.gap_tolerance = std::min(ipm.gap_tolerance, 0.1 * options.gap_tolerance);
    SolveControl inner = control;
    inner.progress = nullptr;  // one progress event per round, below
    // The face IPMs are not resumed or checkpointed themselves: the rounds are.
    inner.checkpoint = nullptr;
    inner.checkpoint_requested = nullptr;
    inner.resume_from = nullptr;

    const long long ns = static_cast<long long>(m) * (m + 1) / 2;
    if (std::min<long long>(ns, problem.num_terms()) <= options.full_system_size) {
      ipm.gap_tolerance = options.gap_tolerance;
      KLS_ASSIGN_OR_RETURN(QsdpIpmResult r, SolveQsdpInteriorPoint(problem, ipm, control));
      FullSystemResult(r, m, watch, &result);
      result.stats.certificate.CheckAgainst(options.gap_tolerance);
      return result;
    }

    Eigen::MatrixXd y = Eigen::MatrixXd::Zero(m, m);
    Eigen::MatrixXd range(m, 0);     // orthonormal basis of range(Y_{k−1})
    Eigen::MatrixXd rotation(m, 0);  // ∇f(Y_{k−1})·range(Y_{k−1}) of this and earlier rounds
    Eigen::MatrixXd grad = problem.Gradient(y);
    QsdpResult cert, best_cert;
    Eigen::MatrixXd best_y = y;
    best_cert.stats.certificate.gap = std::numeric_limits<double>::infinity();
    Termination why = Termination::kIterationLimit;
    int p = std::min(m, options.initial_dimension);
    double previous_gap = std::numeric_limits<double>::infinity();
    int round_index = 0;
    // The fingerprint costs O(K m + m²): only computed when checkpoints are used.
    const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kCheckpointTag);
    const uint64_t fingerprint = use_checkpoints ? CheckpointFingerprint(problem, options) : 0;
    if (const Checkpoint* c = control.ResumeFrom(kCheckpointTag)) {
      ResumeState state;
      if (DecodeCheckpoint(*c, fingerprint, m, &state).ok()) {
        round_index = c->iteration;
        y = std::move(state.y);
        range = std::move(state.range);
        rotation = std::move(state.rotation);
        grad = problem.Gradient(y);
        p = state.p;
        previous_gap = state.previous_gap;
        best_cert = state.best_cert;
        best_y = std::move(state.best_y);
        result.ipm_iterations = state.ipm_iterations;
        result.rounds = std::move(state.rounds);
        result.stats.objective_history = std::move(state.objective_history);
        result.stats.resumed_from_iteration = round_index;
      }  // otherwise not this run's checkpoint: start afresh
    }
    CheckpointTimer checkpoints(control);
    for (; round_index < options.max_rounds; ++round_index) {
      Termination stop;
      if (control.ShouldStop(&stop)) {
        why = stop;
        break;
      }
      Stopwatch round_watch;
      const bool last = round_index + 1 == options.max_rounds;
      if (last) p = m;  // the cap forces the exact full problem
      const Eigen::MatrixXd u = FaceBasis(grad, range, rotation, p);
      const QsdpProblem face = RestrictToFace(problem, u);
      KLS_ASSIGN_OR_RETURN(QsdpIpmResult r, SolveQsdpInteriorPoint(face, ipm, inner));
      result.ipm_iterations += r.stats.iterations;
      if (r.stats.termination == Termination::kCancelled || r.stats.termination == Termination::kTimeLimit) {
        why = r.stats.termination;
        break;
      }
      Eigen::MatrixXd yk = u * r.y * u.transpose();
      yk = (0.5 * (yk + yk.transpose())).eval();
      EvaluateCertificate(problem, yk, options.ipm.rank_threshold, &cert);
      result.stats.objective_history.push_back(cert.objective);
      QsdpSubspaceRound round;
      round.dimension = static_cast<int>(u.cols());
      round.ipm_iterations = r.stats.iterations;
      round.gap = cert.stats.certificate.gap;
      round.seconds = round_watch.Seconds();
      result.rounds.push_back(round);
      ReportIteration(control, CertificateRow(round_index + 1, cert, watch.Seconds()), options.max_rounds,
                      &result.stats);
      if (cert.stats.certificate.gap < best_cert.stats.certificate.gap) {
        best_cert = cert;
        best_y = yk;
      }
      if (cert.stats.certificate.gap <= options.gap_tolerance) {
        why = Termination::kConverged;
        ++round_index;
        break;
      }
      if (u.cols() >= m) {  // the full problem itself did not certify
        why = r.stats.termination == Termination::kConverged ? Termination::kNumericalIssue : r.stats.termination;
        ++round_index;
        break;
      }
      // Next face: range(Y_k) (face coordinates → m-space) plus a margin.
      y = yk;
      p = NextFace(problem, options, u, r.y, y, cert.stats.certificate.gap, previous_gap, &range, &grad, &rotation);
      previous_gap = cert.stats.certificate.gap;
      if (round_index + 1 < options.max_rounds) {
        const int done = round_index + 1;
        checkpoints.MaybeSave(kCheckpointTag, done, [&] {
          return EncodeCheckpoint(fingerprint, done, result, y, range, rotation, p, previous_gap, best_cert, best_y);
        });
      }
    }
    if (!std::isfinite(best_cert.stats.certificate.gap)) EvaluateCertificate(problem, best_y, options.ipm.rank_threshold, &best_cert);
    Finish(best_cert, best_y, why, round_index, watch, &result);
    result.stats.certificate.CheckAgainst(options.gap_tolerance);
    return result;
  });
}

}  // namespace kls
