#include "bench/bench_util.h"

#include <fstream>
#include <iostream>
#include <thread>

#include "core/data/csv_reader.h"
#include "core/data/synthetic.h"

namespace kls::bench {

std::vector<Subcommand>& Subcommands() {
  static std::vector<Subcommand> all;
  return all;
}

double ProcStatusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) / 1024.0;  // kB
  }
  return 0.0;
}

double PeakRssMb() { return ProcStatusMb("VmHWM:"); }

nlohmann::json MachineInfo() {
  std::string model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return {{"cpu", model}, {"hardware_threads", std::thread::hardware_concurrency()}};
}

namespace {
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

StatusOr<Dataset> LoadOrGenerate(const std::string& data_path, const std::string& synthetic, int n,
                                 uint64_t seed) {
  if (!data_path.empty() && !synthetic.empty()) {
    return InvalidArgumentError("give either --data or --synthetic, not both");
  }
  if (!data_path.empty()) {
    if (EndsWith(data_path, ".svm") || EndsWith(data_path, ".libsvm") || EndsWith(data_path, ".txt")) {
      return ReadLibsvmFile(data_path);
    }
    return ReadCsvFile(data_path);
  }
  if (synthetic.empty()) return InvalidArgumentError("one of --data or --synthetic is required");
  return MakeSyntheticByName(synthetic, n, seed);
}

void Emit(const nlohmann::json& result, bool json) {
  if (json) {
    std::cout << result.dump() << std::endl;
    return;
  }
  for (auto it = result.begin(); it != result.end(); ++it) {
    std::cout << it.key() << ": " << it.value().dump() << "\n";
  }
  std::cout.flush();
}

int Fail(const Status& status) {
  std::cerr << status.ToString() << std::endl;
  return 1;
}

}  // namespace kls::bench
