// kls-bench: benchmarks and paper reproductions for KLS. Subcommands register
// themselves (KLS_BENCH_SUBCOMMAND in bench/*_bench.cc); `kls-bench --help`
// lists them. Examples:
//   kls-bench knn  --n 2000,20000 --dim 123 --json
//   kls-bench eval --data tests/data/iris.csv --json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>

#include "bench/bench_util.h"

int main(int argc, char** argv) {
  CLI::App app{"kls-bench: benchmarks and reproductions for the kernel learning service"};
  app.require_subcommand(1);
  bool json = false;
  app.add_flag("--json", json, "print one JSON object");
  auto subcommands = kls::bench::Subcommands();
  std::sort(subcommands.begin(), subcommands.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::map<CLI::App*, kls::bench::Runner> runners;
  for (const auto& s : subcommands) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    sub->add_flag("--json", json, "print one JSON object");
    runners[sub] = s.registrar(*sub, &json);
  }
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return 2;
}
