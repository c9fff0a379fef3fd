// The one retry rule of core's implicitly restarted Lanczos runs (Spectra's
// SymEigsSolver / SymEigsShiftSolver): one attempt at the Krylov dimension
// ncv = min(n, max(2·nev + 1, nev + margin)) and, when it fails — no
// convergence within the restarts, fewer or non-finite eigenpairs, an
// exception from the operator — one more at twice that dimension. What a
// caller does after both fail is its own (a dense eigensolver, or "nothing
// certified").
//
//     const bool ok = LanczosWithRetry(n, nev, /*margin=*/20, [&](int ncv) {
//       Spectra::SymEigsSolver<Op> eigs(op, nev, ncv);
//       eigs.init();
//       if (!ComputeEigenpairs(eigs, nev, rule, max_restarts, tolerance, sorting, &operations)) return false;
//       ...take eigs.eigenvalues(), eigs.eigenvectors()...
//       return true;
//     });
#pragma once

#include <Spectra/Util/CompInfo.h>
#include <Spectra/Util/SelectionRule.h>

#include <algorithm>
#include <exception>

namespace kls {

/// Calls attempt(ncv) (→ bool: the attempt's result was taken) at the first
/// Krylov dimension and, if it returns false, at twice it; true when one did.
template <typename Attempt>
bool LanczosWithRetry(int n, int nev, int margin, Attempt attempt) {
  const int base = std::max(2 * nev + 1, nev + margin);
  for (int k = 0; k < 2; ++k) {
    if (attempt(std::min(n, k == 0 ? base : 2 * base))) return true;
  }
  return false;
}

/// Runs an initialized Spectra solver's compute(selection, max_restarts,
/// tolerance, sorting). True when it converged with `nev` finite eigenvalues
/// and eigenvectors; an exception counts as a failed run. The operator
/// applications of a run that returned are added to *operations (if not null).
template <typename Solver>
bool ComputeEigenpairs(Solver& eigs, int nev, Spectra::SortRule selection, int max_restarts, double tolerance,
                       Spectra::SortRule sorting, long long* operations = nullptr) {
  try {
    eigs.compute(selection, max_restarts, tolerance, sorting);
  } catch (const std::exception&) {
    return false;
  }
  if (operations != nullptr) *operations += eigs.num_operations();
  if (eigs.info() != Spectra::CompInfo::Successful) return false;
  return eigs.eigenvalues().size() == nev && eigs.eigenvalues().allFinite() && eigs.eigenvectors().allFinite();
}

}  // namespace kls
