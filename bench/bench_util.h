// Shared helpers of kls-bench subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/data/dataset.h"

namespace kls::bench {

/// Peak resident set size of this process in MiB (VmHWM), 0 if unknown.
/// A "Key:" line of /proc/self/status in kB (VmRSS:, VmHWM:, ...), as MiB; 0 when absent.
double ProcStatusMb(const std::string& key);
double PeakRssMb();

/// Short description of this machine (CPU model, cores) for result records.
nlohmann::json MachineInfo();

/// Loads `--data FILE` (CSV, or LIBSVM when the name ends in .svm/.libsvm/.txt)
/// or generates `--synthetic NAME` with n points and `seed`.
StatusOr<Dataset> LoadOrGenerate(const std::string& data_path, const std::string& synthetic, int n,
                                 uint64_t seed);

/// Running mean and sample standard deviation of repeated measurements
/// (trials, runs, repetitions) for the JSON summaries.
struct MeanStd {
  double sum = 0, sum2 = 0;
  int n = 0;
  void Add(double x) {
    sum += x;
    sum2 += x * x;
    ++n;
  }
  double mean() const { return n ? sum / n : 0.0; }
  double std() const { return n > 1 ? std::sqrt(std::max(0.0, (sum2 - sum * sum / n) / (n - 1))) : 0.0; }
};

/// Prints `result` as one JSON object (json) or as "key: value" lines.
void Emit(const nlohmann::json& result, bool json);

/// Prints "<CODE>: message" to stderr and returns the process exit code 1.
int Fail(const Status& status);

/// A subcommand: registers its options on `app` and returns the callback
/// that runs it (exit code).
using Runner = std::function<int()>;
using Registrar = Runner (*)(CLI::App& app, bool* json);

/// One kls-bench subcommand. Each bench/*_bench.cc file adds itself with
/// KLS_BENCH_SUBCOMMAND, so a new benchmark touches no shared file but
/// bench/CMakeLists.txt.
struct Subcommand {
  const char* name;
  const char* help;
  Registrar registrar;
};

/// Every registered subcommand (static registration order is unspecified;
/// main sorts by name).
std::vector<Subcommand>& Subcommands();

struct SubcommandRegistration {
  SubcommandRegistration(const char* name, const char* help, Registrar registrar) {
    Subcommands().push_back({name, help, registrar});
  }
};

#define KLS_BENCH_SUBCOMMAND(name, help, registrar) \
  static const ::kls::bench::SubcommandRegistration kls_bench_registration_##registrar{name, help, registrar}

}  // namespace kls::bench
