// Small labelled data sets for the server suites: `n` points of tests/data's
// iris spread evenly over its three classes, with or without the KL-ADMM
// protocol's pairs. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/data/constraint_generators.h"
#include "core/data/csv_reader.h"
#include "core/data/dataset.h"
#include "server/store/store.h"

namespace kls::testing {

/// Points 0, 150/n, 2·150/n, ... of iris (features and labels).
inline Dataset IrisRows(int n) {
  auto iris = ReadCsvFile(std::string(KLS_TEST_DATA_DIR) + "/iris.csv");
  EXPECT_TRUE(iris.ok()) << iris.status();
  Dataset d;
  if (!iris.ok()) return d;
  d.features.resize(n, iris->dim());
  for (int i = 0; i < n; ++i) {
    const int src = static_cast<int>(static_cast<int64_t>(i) * iris->num_points() / n);
    d.features.row(i) = iris->features.row(src);
    d.labels.push_back(iris->labels[src]);
  }
  return d;
}

/// IrisRows(n) with the KL-ADMM protocol's constraints (seed 7).
inline store::StoredDataset IrisWithPairs(int n) {
  store::StoredDataset d;
  d.data = IrisRows(n);
  auto c = GenerateAdmmProtocol(d.data.labels, /*seed=*/7);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) d.constraints = *c;
  return d;
}

}  // namespace kls::testing
