#include "tests/test_util/sdp_oracle.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace kls::test_util {

int SdpOracle::AddBlock(int size) {
  block_sizes_.push_back(size);
  return static_cast<int>(block_sizes_.size()) - 1;
}

int SdpOracle::AddDiagonalBlock(int size) {
  block_sizes_.push_back(-size);
  return static_cast<int>(block_sizes_.size()) - 1;
}

int SdpOracle::AddConstraint(double rhs) {
  rhs_.push_back(rhs);
  return static_cast<int>(rhs_.size()) - 1;
}

void SdpOracle::AddObjective(int block, int i, int j, double value) {
  entries_.push_back({0, block, std::min(i, j), std::max(i, j), value});
}

void SdpOracle::AddCoefficient(int constraint, int block, int i, int j, double value) {
  entries_.push_back({constraint + 1, block, std::min(i, j), std::max(i, j), value});
}

bool CsdpAvailable() { return std::system("command -v csdp >/dev/null 2>&1") == 0; }

StatusOr<SdpOracle::Solution> SdpOracle::Solve() const {
  if (!CsdpAvailable()) return FailedPreconditionError("csdp is not installed (Debian package coinor-csdp)");
  char dir_template[] = "/tmp/kls-sdp-XXXXXX";
  if (!mkdtemp(dir_template)) return InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string in_path = dir + "/problem.dat-s", out_path = dir + "/solution.sol",
                    log_path = dir + "/csdp.log";
  {
    std::ofstream f(in_path);
    f << std::setprecision(17);
    f << rhs_.size() << "\n" << block_sizes_.size() << "\n";
    for (int s : block_sizes_) f << s << " ";
    f << "\n";
    for (double b : rhs_) f << b << " ";
    f << "\n";
    for (const Entry& e : entries_) {
      if (e.value == 0.0) continue;
      f << e.matrix << " " << e.block + 1 << " " << e.i + 1 << " " << e.j + 1 << " " << e.value << "\n";
    }
  }
  const std::string cmd = "cd " + dir + " && csdp problem.dat-s solution.sol > csdp.log 2>&1";
  const int raw = std::system(cmd.c_str());
  const int code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  Solution sol;
  {
    std::ifstream lf(log_path);
    std::stringstream ss;
    ss << lf.rdbuf();
    sol.log = ss.str();
  }
  if (code != 0 && code != 3 && !(code == 7 && accept_lack_of_progress_)) {
    return InternalError("csdp exited with code " + std::to_string(code) + ":\n" + sol.log);
  }
  sol.exit_code = code;
  {
    auto value_after = [&](const std::string& key) {
      const size_t at = sol.log.rfind(key);
      return at == std::string::npos ? std::nan("") : std::strtod(sol.log.c_str() + at + key.size(), nullptr);
    };
    const double pobj = value_after("Primal objective value:"), dobj = value_after("Dual objective value:");
    sol.relative_gap = std::abs(pobj - dobj) / (1.0 + std::abs(pobj) + std::abs(dobj));
  }
  std::ifstream sf(out_path);
  if (!sf) return InternalError("csdp wrote no solution file:\n" + sol.log);
  sol.y.resize(static_cast<Eigen::Index>(rhs_.size()));
  for (Eigen::Index k = 0; k < sol.y.size(); ++k) sf >> sol.y[k];
  for (int s : block_sizes_) {
    sol.blocks.push_back(s > 0 ? Eigen::MatrixXd::Zero(s, s) : Eigen::MatrixXd::Zero(-s, 1));
  }
  int matrix, block, i, j;
  double v;
  while (sf >> matrix >> block >> i >> j >> v) {
    if (matrix != 2) continue;  // 1 = dual slack Z, 2 = primal X
    Eigen::MatrixXd& b = sol.blocks[block - 1];
    if (block_sizes_[block - 1] < 0) {
      b(i - 1, 0) = v;
    } else {
      b(i - 1, j - 1) = v;
      b(j - 1, i - 1) = v;
    }
  }
  double obj = 0.0;
  for (const Entry& e : entries_) {
    if (e.matrix != 0) continue;
    const Eigen::MatrixXd& b = sol.blocks[e.block];
    if (block_sizes_[e.block] < 0) {
      obj += e.value * b(e.i, 0);
    } else {
      obj += e.value * b(e.i, e.j) * (e.i == e.j ? 1.0 : 2.0);
    }
  }
  sol.primal_objective = obj;
  std::system(("rm -rf " + dir).c_str());
  return sol;
}

}  // namespace kls::test_util
