// kls-bench: benchmarks and paper reproductions for KLS.
//   kls-bench knn  --n 2000,20000 --dim 123 --json
//   kls-bench eval --data tests/data/iris.csv --json
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>

#include "bench/bench_util.h"

int main(int argc, char** argv) {
  CLI::App app{"kls-bench: benchmarks and reproductions for the kernel learning service"};
  app.require_subcommand(1);
  bool json = false;
  app.add_flag("--json", json, "print one JSON object");
  std::map<CLI::App*, kls::bench::Runner> runners;
  auto add = [&](const char* name, const char* help, auto reg) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->add_flag("--json", json, "print one JSON object");
    runners[sub] = reg(*sub, &json);
  };
  add("knn", "exact k-NN graph + Laplacian time vs n", kls::bench::RegisterKnn);
  add("eval", "kernel k-means on an embedding: pair accuracy, NMI, time", kls::bench::RegisterEval);
  add("repro", "reproduce a paper's clustering table row (NPKL solvers)", kls::bench::RegisterRepro);
  add("scale", "one NPKL solve on adult-like data of size n: time, memory", kls::bench::RegisterScale);
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return 2;
}
