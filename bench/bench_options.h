// Option setup shared by kls-bench subcommands: the flags several subcommands
// declare alike (where the data set comes from; the random-split protocol of
// the classification benchmarks), declared here once together with the checks
// and the loading that go with them. A subcommand declares only what is its
// own; help texts that name a paper's setting stay the subcommand's.
#pragma once

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>

#include "core/common/status.h"
#include "core/data/dataset.h"

namespace kls::bench {

/// Where a subcommand's data set comes from: `--data FILE`, else a generated
/// set (`--synthetic NAME`, or `default_synthetic` when neither is given).
/// The size and seed of a generated set are the subcommand's flags (they
/// usually serve more than the data), passed to Load.
struct DataFlags {
  std::string data;               ///< --data FILE
  std::string synthetic;          ///< --synthetic NAME (a subcommand without the flag leaves it empty)
  std::string default_synthetic;  ///< generated when neither is given ("": one of them is required)
  bool csv_only = false;          ///< --data is CSV whatever its name (else LIBSVM for .svm/.libsvm/.txt)

  CLI::Option* AddData(CLI::App& app, const std::string& help) { return app.add_option("--data", data, help); }
  CLI::Option* AddSynthetic(CLI::App& app, const std::string& help) {
    return app.add_option("--synthetic", synthetic, help);
  }
  /// The data set: the file, or the generated set of n points from seed
  /// (LoadOrGenerate; both --data and --synthetic is an error).
  StatusOr<Dataset> Load(int n, uint64_t seed) const;
  /// Load, then "--data: the data set has no labels" unless it has labels.
  StatusOr<Dataset> LoadLabeled(int n, uint64_t seed) const;
  /// What a record names the data by: the file, else the generated set.
  std::string Name() const;
};

/// The random-split protocol of `mkl` and `onk`: `--data` (a labeled CSV,
/// required), `--train-frac`, `--runs`, `--seed`, `--folds`,
/// `--positive-class`; run r splits the points at random with seed + r.
struct SplitFlags {
  DataFlags source;
  double train_frac = 0.5;
  int runs = 20, folds = 5, positive_class = 1;
  uint64_t seed = 1;

  /// The help texts the subcommand words itself (they cite its paper's values).
  struct Help {
    std::string train_frac, runs, seed, folds;
  };
  explicit SplitFlags(double train_frac_default) : train_frac(train_frac_default) { source.csv_only = true; }
  void Add(CLI::App& app, const Help& help);

  /// The data set and its labels as ±1 (+1: --positive-class); fails on
  /// --runs < 1, an unreadable file or one without labels.
  struct Labeled {
    Dataset data;
    Eigen::VectorXd y;
  };
  StatusOr<Labeled> Load() const;

  /// Run r's split (seed + r): training and test rows and labels.
  struct Split {
    uint64_t seed;
    Eigen::MatrixXd x_train, x_test;
    Eigen::VectorXd y_train, y_test;
  };
  StatusOr<Split> Draw(const Labeled& labeled, int run) const;

  /// The protocol's keys of a result record: data, n, dim, train_frac, runs, seed.
  nlohmann::json Record(const Dataset& data) const;
};

}  // namespace kls::bench
