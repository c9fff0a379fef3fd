// What every solver's Checkpoint::bytes begins with, and the fingerprint that
// ties a checkpoint to one (problem, options) pair (SolveControl::resume_from).
//
// Layout (ByteWriter, little-endian):
//     magic u32, version u32        the solver's format (ByteWriter::PutHeader)
//     fingerprint u64               Fingerprint of the problem and the options
//                                   that shape the iterates
//     iteration i32                 == Checkpoint::iteration
//     objective_history             iteration (+ extra_history_entries) doubles,
//                                   exact bit patterns (a solver whose history
//                                   is not per iteration: any length up to a
//                                   bound, GetCheckpointPrefixWithHistoryBound)
// then the solver's own state. A solver that cannot read a checkpoint (wrong
// format, fingerprint or shape, truncated or trailing bytes) ignores it and
// starts afresh: a checkpoint is an optimisation, never an input that can fail
// a solve.
//
// Thread safety: none (one writer / reader per thread).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/common/byte_io.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"

namespace kls {

/// A 64-bit FNV-1a hash of the values fed to it, in order. Not cryptographic:
/// it tells an honest mismatch (another problem, another γ) from a match.
/// Doubles are hashed by bit pattern, so −0.0 ≠ 0.0 and every NaN differs.
class Fingerprint {
 public:
  Fingerprint& Add(uint64_t x) {
    for (int k = 0; k < 8; ++k) {
      hash_ ^= (x >> (8 * k)) & 0xffu;
      hash_ *= 0x100000001b3ull;
    }
    return *this;
  }
  Fingerprint& AddInt(int64_t x) { return Add(static_cast<uint64_t>(x)); }
  Fingerprint& AddDouble(double x) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    return Add(bits);
  }
  Fingerprint& AddString(const std::string& s) {
    AddInt(static_cast<int64_t>(s.size()));
    for (unsigned char c : s) Add(c);
    return *this;
  }
  /// Shape, pattern and values of a sparse matrix. O(nnz).
  Fingerprint& AddSparse(const Eigen::SparseMatrix<double>& m) {
    AddInt(m.rows()).AddInt(m.cols()).AddInt(m.nonZeros());
    for (Eigen::Index k = 0; k < m.outerSize(); ++k)
      for (Eigen::SparseMatrix<double>::InnerIterator it(m, k); it; ++it)
        AddInt(it.row()).AddInt(it.col()).AddDouble(it.value());
    return *this;
  }
  /// Shape and values of a dense matrix. O(size).
  Fingerprint& AddDense(const Eigen::MatrixXd& m) {
    AddInt(m.rows()).AddInt(m.cols());
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < m.rows(); ++i) AddDouble(m(i, j));
    return *this;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

/// Writes the common prefix above.
inline void PutCheckpointPrefix(ByteWriter* w, uint32_t magic, uint32_t version, uint64_t fingerprint,
                                int iteration, const std::vector<double>& objective_history) {
  w->PutHeader(magic, version);
  w->Put<uint64_t>(fingerprint);
  w->Put<int32_t>(iteration);
  w->Put<uint64_t>(objective_history.size());
  for (double f : objective_history) w->Put<double>(f);
}

namespace checkpoint_internal {
// The prefix with the history length checked by `count_ok(iteration, count)`.
template <typename CountOk>
Status GetPrefix(ByteReader* r, const Checkpoint& c, uint32_t magic, uint32_t version, uint64_t fingerprint,
                 std::vector<double>* objective_history, CountOk count_ok) {
  KLS_RETURN_IF_ERROR(r->ReadHeader(magic, version));
  uint64_t fp = 0;
  KLS_RETURN_IF_ERROR(r->Get(&fp));
  if (fp != fingerprint) return FailedPreconditionError(r->what() + ": made for another problem or options");
  int32_t iteration = 0;
  KLS_RETURN_IF_ERROR(r->Get(&iteration));
  uint64_t count = 0;
  KLS_RETURN_IF_ERROR(r->Get(&count));
  if (iteration < 1 || iteration != c.iteration || !count_ok(static_cast<uint64_t>(iteration), count)) {
    return FailedPreconditionError(r->what() + ": inconsistent iteration count");
  }
  objective_history->clear();  // pushed one by one: a damaged count cannot allocate
  for (uint64_t k = 0; k < count; ++k) {
    double f = 0.0;
    KLS_RETURN_IF_ERROR(r->Get(&f));
    objective_history->push_back(f);
  }
  return OkStatus();
}
}  // namespace checkpoint_internal

/// Reads the common prefix of `c` and checks it against the running solve:
/// DATA_LOSS on a wrong magic / version / truncation, FAILED_PRECONDITION when
/// the fingerprint differs or the encoded iteration disagrees with
/// c.iteration or with the history length (iteration + extra_history_entries:
/// 1 for a solver that records its starting point in the history).
inline Status GetCheckpointPrefix(ByteReader* r, const Checkpoint& c, uint32_t magic, uint32_t version,
                                  uint64_t fingerprint, std::vector<double>* objective_history,
                                  int extra_history_entries = 0) {
  const uint64_t extra = static_cast<uint64_t>(extra_history_entries);
  return checkpoint_internal::GetPrefix(r, c, magic, version, fingerprint, objective_history,
                                        [extra](uint64_t iteration, uint64_t count) { return count == iteration + extra; });
}

/// GetCheckpointPrefix for a solver whose objective history is not one entry
/// per iteration (one per certificate check, per outer round, per K₀
/// update): any length up to `max_history_entries` is accepted; the solver
/// checks the rest of its bookkeeping itself.
inline Status GetCheckpointPrefixWithHistoryBound(ByteReader* r, const Checkpoint& c, uint32_t magic,
                                                  uint32_t version, uint64_t fingerprint,
                                                  std::vector<double>* objective_history,
                                                  uint64_t max_history_entries) {
  return checkpoint_internal::GetPrefix(r, c, magic, version, fingerprint, objective_history,
                                        [max_history_entries](uint64_t, uint64_t count) {
                                          return count <= max_history_entries;
                                        });
}

/// GetMatrix that also insists on the shape `rows` × `cols`.
inline Status GetMatrixOfShape(ByteReader* r, Eigen::Index rows, Eigen::Index cols, Eigen::MatrixXd* m) {
  KLS_RETURN_IF_ERROR(r->GetMatrix(m));
  if (m->rows() != rows || m->cols() != cols) {
    return FailedPreconditionError(r->what() + ": a " + std::to_string(m->rows()) + "×" +
                                   std::to_string(m->cols()) + " matrix where " + std::to_string(rows) + "×" +
                                   std::to_string(cols) + " was expected");
  }
  return OkStatus();
}

}  // namespace kls
