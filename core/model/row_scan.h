// The float64 row scorer shared by LearnedKernel's exact scan and TopKIndex's
// re-scoring, so both assign every row the same bits (internal to core/model;
// tests include it to build brute-force references with identical arithmetic).
#pragma once

namespace kls {

/// out[t] = v_t · q for rows t in [0, rows) of the row-major block `v`
/// (rows × r). Each row's summation order is fixed and independent of the
/// other rows, so ScoreRows(v_j, 1, ...) equals the value the row gets inside
/// any block. Error: |out[t] − v_t·q| ≤ γ_r Σ_c |v_tc q_c| (+ r·2⁻¹⁰⁷⁴ under
/// underflow), γ_r = r·2⁻⁵³/(1 − r·2⁻⁵³) — the bound TopKIndex budgets for.
void ScoreRows(const double* v, int rows, int r, const double* q, double* out);

}  // namespace kls
