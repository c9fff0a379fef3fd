// A full disk: the data directory on an 8 MiB tmpfs mounted by the test (needs
// root and mount(8); skipped with the reason otherwise). Uploads, imports and a
// job commit that do not fit fail with RESOURCE_EXHAUSTED naming the data
// directory; what was stored before keeps answering identically and checks
// clean; once space is freed the same server stores again, with no restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "core/data/constraint_generators.h"
#include "core/data/synthetic.h"
#include "server/kls_server.h"
#include "server/store/store.h"
#include "temp_dir.h"
#include "tests/test_util/time_scale.h"

namespace kls::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

/// A tmpfs of `megabytes` at a fresh directory; unmounted on destruction.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(int megabytes) : path_(dir_.Sub("small")) {
    fs::create_directories(path_);
    if (::geteuid() != 0) {
      why_not_ = "mounting a size-limited tmpfs needs root";
      return;
    }
    const std::string cmd = "mount -t tmpfs -o size=" + std::to_string(megabytes) + "m kls-disk-full-test '" + path_ +
                            "' 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      why_not_ = "mount -t tmpfs failed (no mount permission in this environment)";
      return;
    }
    mounted_ = true;
  }
  ~SmallFilesystem() {
    if (mounted_) (void)std::system(("umount -l '" + path_ + "' 2>/dev/null").c_str());
  }
  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return path_; }

 private:
  kls::testing::TempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string why_not_;
};

LearnedKernel::Embedding RandomEmbedding(int n, int dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  LearnedKernel::Embedding v(n, dim);
  for (Eigen::Index t = 0; t < v.size(); ++t) v.data()[t] = normal(rng);
  return v;
}

Dataset RandomDataset(int n, int dim, uint64_t seed) {
  Dataset d;
  d.features = RandomEmbedding(n, dim, seed);
  for (int i = 0; i < n; ++i) d.labels.push_back(i % 2);
  return d;
}

TEST(DiskFullTest, WritesThatDoNotFitFailCleanlyAndTheServerRecoversWithoutARestart) {
  SmallFilesystem small(8);
  if (!small.mounted()) {
    GTEST_SKIP() << small.why_not();
  }
  const std::string data_dir = small.path() + "/data";
  {  // 1 MB of something else on the same file system, removed later to free space
    std::ofstream ballast(small.path() + "/ballast", std::ios::binary);
    ballast << std::string(1 << 20, 'b');
    ASSERT_TRUE(ballast.good());
  }
  ServerConfig config;
  config.listen = "127.0.0.1:0";
  config.data_dir = data_dir;
  config.workers = 1;
  config.log_level = "off";
  KlsServer server(config);
  ASSERT_TRUE(server.Start().ok());
  ClientOptions options;
  options.target = server.target();
  Client client(options);

  // Stored before the disk fills: a data set, a kernel, and their answers.
  auto moons = MakeTwoMoons(400, 0.05, 4);  // its learned kernel is ~100 KB
  ASSERT_TRUE(moons.ok());
  auto pairs = GenerateAdmmProtocol(moons->labels, 4);
  ASSERT_TRUE(pairs.ok());
  UploadOptions upload;
  upload.name = "before";
  auto before = client.UploadDataset(*moons, *pairs, upload);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(client.ImportKernel("kept", RandomEmbedding(200, 8, 1)).ok());
  auto kept_answer = client.Similarity(kls::ParseKernelRef("kept").value(), {{0, 1}, {7, 150}});
  ASSERT_TRUE(kept_answer.ok()) << kept_answer.status();

  // Fill it: data sets of 1.6 MB, then ever smaller ones, until not even 64 KB
  // fits (the job's record still does; its ~100 KB kernel does not).
  std::vector<std::string> filler;
  Status full = OkStatus();
  int seed = 100;
  for (int rows : {10000, 2000, 400}) {
    for (int i = 0; i < 40; ++i) {
      UploadOptions o;
      o.name = "filler-" + std::to_string(seed);
      auto r = client.UploadDataset(RandomDataset(rows, 20, seed++), PairwiseConstraints{}, o);
      if (!r.ok()) {
        if (full.ok()) full = r.status();  // the first refusal
        break;
      }
      filler.push_back(r->id());
    }
  }
  ASSERT_FALSE(filler.empty()) << "not even one filler fitted";
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr(data_dir));
  EXPECT_THAT(full.message(), HasSubstr("no space left"));

  // An import and a job commit do not fit either.
  const Status import = client.ImportKernel("too-big", RandomEmbedding(20000, 16, 2)).status();
  EXPECT_EQ(import.code(), StatusCode::kResourceExhausted) << import;
  EXPECT_THAT(import.message(), HasSubstr(data_dir));
  kls::v1::SubmitJobRequest submit;
  submit.set_dataset_id(before->id());
  submit.set_kernel_name("learned");
  submit.mutable_kl_admm()->set_max_iterations(5);
  auto job = client.SubmitJob(submit);
  if (job.ok()) {  // the submit itself may not fit
    auto done = client.WatchJob(job->id(), [](const kls::v1::Job&) {}, 60 * kls::testing::TimeScale());
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), kls::v1::FAILED) << kls::v1::JobState_Name(done->state());
    EXPECT_THAT(done->error(), HasSubstr("no space left"));
    EXPECT_THAT(done->error(), HasSubstr(data_dir));
  } else {
    EXPECT_EQ(job.status().code(), StatusCode::kResourceExhausted) << job.status();
  }

  // Nothing stored before was damaged, and the server still answers.
  auto kept_again = client.Similarity(kls::ParseKernelRef("kept").value(), {{0, 1}, {7, 150}});
  ASSERT_TRUE(kept_again.ok()) << kept_again.status();
  EXPECT_EQ(*kept_again, *kept_answer);
  EXPECT_TRUE(client.GetDataset(before->id()).ok());
  EXPECT_EQ(*client.CheckHealth(""), ServingStatus::kServing);

  // Free space as an operator would (a file beside the data directory): the
  // same server stores again, and deletes work.
  fs::remove(small.path() + "/ballast");
  for (const std::string& id : filler) ASSERT_TRUE(client.DeleteDataset(id).ok());
  UploadOptions again;
  again.name = "after";
  auto after = client.UploadDataset(RandomDataset(2000, 20, 7), PairwiseConstraints{}, again);
  EXPECT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(client.ImportKernel("after", RandomEmbedding(500, 8, 3)).ok());
  server.Stop();

  // The directory checks clean.
  auto report = store::CheckDataDirectory(data_dir);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->problems.empty()) << (report->problems.empty() ? "" : report->problems.front());
}

}  // namespace
}  // namespace kls::server
