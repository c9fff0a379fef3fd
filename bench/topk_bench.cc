// kls-bench topk: the cost of one TopK query over an n × dim embedding — the
// code path the server runs (TopKIndex::TopKByVector: an int8 screening scan
// with rigorous per-row error bounds, then exact float64 re-scoring of the
// few rows that can still make the top k; one query at a time, on the
// handler's thread) — against yardsticks measured in the same run on the
// same data:
//   bandwidth_limit_seconds  one read of the float64 embedding (n·dim·8 bytes)
//                            at the memory read bandwidth this process gets
//                            from one thread: a vectorized streaming sum over
//                            the same matrix (median of the timed passes; the
//                            best pass gives read_bandwidth_gb_per_s), i.e. the
//                            floor for any exact scan of the float64 rows;
//   exact_scan_seconds_per_query  LearnedKernel::TopKByVector, the fused
//                            float64 scan (the answer the index must equal);
//   faiss_seconds_per_query  FAISS IndexFlatIP (exact inner-product search,
//                            Debian libfaiss-dev), one query at a time, one
//                            OpenMP thread. FAISS only stores float32, so it
//                            searches the embedding rounded to float32 (half the
//                            bytes) — reported with its recall against the exact
//                            float64 answer.
// The index is built once before the loop (index_build_seconds, index_bytes).
//
//   kls-bench topk --n 100000 --dim 128 --k 10 --queries 30 --json
//
// Large n (issue 41, "serve ten million"):
//
//   kls-bench topk --n 10000000 --dim 64 --queries 1000 --yardstick-queries 100 --load --json
//
// --yardstick-queries Y: only the first Y queries also time the bandwidth
// pass and FAISS and run the brute-force reference (which sorts all n scores);
// every query times the index and the exact float64 scan, and its answer must
// equal the scan's bit for bit. recall_at_k = mean over all queries of the
// fraction of the exact scan's k items the index returned (1.0 iff every
// answer is exact). The ratios over the bandwidth limit and FAISS use the
// index's median over all queries; the *_interleaved fields use only the
// first Y (timed in the same loop as the yardsticks).
// --load: the stored-kernel path of the server (sqlite store): the kernel is
// written as a store artifact (store::EncodeKernelArtifact + WriteArtifact),
// dropped, and loaded back the way the server's kernel cache does it
// (MappedArtifact::Open: mmap + CRC-32 of every byte; DecodeKernelArtifact:
// copy into a LearnedKernel), first from a cold page cache
// (posix_fadvise DONTNEED after fsync) — load_seconds_cold — then warm —
// load_seconds; the warm copy is the one queried; then TopKIndex::Build
// (index_build_seconds). load_plus_index_seconds = the time until the first
// query can be served from a warm file. peak_rss_mb (VmHWM) covers the whole
// process (the load holds the mapping and the copy at once); rss_serving_mb is
// the resident size with the kernel, its index and FAISS's float32 copy.
//
// Batches and filters (--batch B, --selectivity s1,s2,...): B query vectors
// searched as one TopKIndex::Search batch under a random filter passing a
// fraction s of the items (one shared bitmap), against FAISS IndexFlatIP
// searching the same B queries in one call with an IDSelectorBitmap for the
// same filter (SearchParameters::sel), both with --threads threads (default
// one per core; single queries stay on one thread). The JSON gains
//   filtered: [{selectivity, passing, seconds_per_query, faiss_seconds_per_query,
//               faiss_over_kls, faiss_recall_at_k, exact_answers}, ...]
//   batch_over_single: one unfiltered batch of B / B single queries (time ratio)
// Every batched answer must equal the same query searched alone, and match a
// brute-force reference over the passing items.
//
//   kls-bench topk --n 1000000 --dim 64 --batch 100 --selectivity 0.0001,0.01,0.1,0.5,1 --json
//
// The measurements are interleaved per query (sum, index query, exact scan,
// FAISS query, next query ...) so a load change on a shared machine hits all
// alike; medians are reported (means and bests too). Every index answer must
// equal the exact scan's bit for bit and match a brute-force float64
// reference (naive dot products, full sort) item for item.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>

#include "bench/bench_util.h"
#include "core/common/parallel.h"
#include "core/common/solve_control.h"
#include "core/model/learned_kernel.h"
#include "core/model/topk_index.h"

#ifdef KLS_HAVE_STORE
#include "server/store/artifact.h"
#include "server/store/record_artifacts.h"
#endif

#ifdef KLS_HAVE_FAISS
#include <faiss/IndexFlat.h>
#include <faiss/impl/IDSelector.h>
#include <omp.h>
#endif

namespace kls::bench {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}
// Resident set size now (VmRSS), MiB.
double RssMb() { return ProcStatusMb("VmRSS:"); }

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Every item's score by a naive dot product, in item order.
std::vector<ScoredItem> NaiveScores(const LearnedKernel::Embedding& v, const Eigen::VectorXd& q) {
  std::vector<ScoredItem> all(v.rows());
  for (Eigen::Index i = 0; i < v.rows(); ++i) {
    double s = 0;
    for (Eigen::Index c = 0; c < v.cols(); ++c) s += v(i, c) * q(c);
    all[i] = {static_cast<int>(i), s};
  }
  return all;
}

// Exact reference: every score by a naive dot product, full sort (score
// descending, index ascending), the first k.
std::vector<ScoredItem> Reference(const LearnedKernel::Embedding& v, const Eigen::VectorXd& q, int k) {
  std::vector<ScoredItem> all = NaiveScores(v, q);
  std::sort(all.begin(), all.end(), [](const ScoredItem& a, const ScoredItem& b) {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  });
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(k)));
  return all;
}

// The same, sorting only the first k (the comparator is a total order, so the
// first k are those of the full sort).
std::vector<ScoredItem> PartialReference(const LearnedKernel::Embedding& v, const Eigen::VectorXd& q, int k) {
  std::vector<ScoredItem> all = NaiveScores(v, q);
  const size_t kk = std::min<size_t>(all.size(), static_cast<size_t>(k));
  std::partial_sort(all.begin(), all.begin() + kk, all.end(), [](const ScoredItem& a, const ScoredItem& b) {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  });
  all.resize(kk);
  return all;
}

// The same over the items `allowed` passes.
std::vector<ScoredItem> FilteredReference(const LearnedKernel::Embedding& v, const double* q, const ItemBitmap& allowed,
                                          int k) {
  std::vector<ScoredItem> all;
  for (Eigen::Index i = 0; i < v.rows(); ++i) {
    if (!allowed.Test(i)) continue;
    double s = 0;
    for (Eigen::Index c = 0; c < v.cols(); ++c) s += v(i, c) * q[c];
    all.push_back({static_cast<int>(i), s});
  }
  std::sort(all.begin(), all.end(), [](const ScoredItem& a, const ScoredItem& b) {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  });
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(k)));
  return all;
}

bool SameItems(const std::vector<ScoredItem>& got, const std::vector<ScoredItem>& ref) {
  if (got.size() != ref.size()) return false;
  for (size_t r = 0; r < ref.size(); ++r) {
    if (got[r].index != ref[r].index || std::abs(got[r].score - ref[r].score) > 1e-12 * (1.0 + std::abs(ref[r].score))) {
      return false;
    }
  }
  return true;
}

std::vector<double> ParseList(const std::string& text) {
  std::vector<double> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(std::stod(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

}  // namespace

Runner RegisterTopK(CLI::App& app, bool* json) {
  struct Args {
    int n = 100000, dim = 128, k = 10, queries = 30, batch = 0, repeats = 3, yardstick_queries = 0;
    bool no_vnni = false, load = false;
    int threads = 0;
    std::string selectivity;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--n", a->n, "items")->capture_default_str();
  app.add_option("--dim", a->dim, "embedding dimension (rank)")->capture_default_str();
  app.add_option("--k", a->k, "results per query")->capture_default_str();
  app.add_option("--queries", a->queries, "timed queries (each also times one bandwidth pass and one FAISS query)")
      ->capture_default_str();
  app.add_option("--yardstick-queries", a->yardstick_queries,
                 "time the bandwidth pass and FAISS and run the brute-force reference on the first Y queries only "
                 "(0: all); every query is still checked against the exact float64 scan")
      ->capture_default_str();
  app.add_flag("--load", a->load,
               "write the kernel as a store artifact and time loading it back (cold and warm page cache) the way "
               "the server does; the loaded copy is queried");
  app.add_option("--seed", a->seed, "seed of the Gaussian embedding and queries")->capture_default_str();
  app.add_option("--batch", a->batch, "queries per batch of the batch / filter measurements (0: none; 100 with --selectivity)")
      ->capture_default_str();
  app.add_option("--selectivity", a->selectivity,
                 "filters to measure, as fractions of the items that pass: '0.0001,0.01,0.1,0.5,1'");
  app.add_option("--threads", a->threads, "threads of a batch (0: one per core; FAISS gets as many)")
      ->capture_default_str();
  app.add_flag("--no-vnni", a->no_vnni, "screen with the AVX2 int16 kernel even where AVX-512 VNNI exists");
  app.add_option("--repeats", a->repeats, "timed repetitions of each batch (median reported)")->capture_default_str();
  return [a, json]() -> int {
    if (a->n < 1 || a->dim < 1 || int64_t{a->n} * a->dim > (int64_t{1} << 31)) {
      return Fail(InvalidArgumentError("--n = " + std::to_string(a->n) + ", --dim = " + std::to_string(a->dim) +
                                       ": need n, dim >= 1 and n × dim <= 2^31"));
    }
    if (a->k < 1 || a->k > a->n) {
      return Fail(InvalidArgumentError("--k = " + std::to_string(a->k) + " must be in [1, n]"));
    }
    if (a->queries < 1 || a->queries > 10000) {
      return Fail(InvalidArgumentError("--queries = " + std::to_string(a->queries) + " must be in [1, 10000]"));
    }
    const int yardsticks =
        a->yardstick_queries > 0 ? std::min(a->yardstick_queries, a->queries) : a->queries;
    std::mt19937_64 rng(a->seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    double generate_seconds = 0;
    std::shared_ptr<const LearnedKernel> kernel;
    std::vector<Eigen::VectorXd> queries(a->queries, Eigen::VectorXd(a->dim));
    {
      const Stopwatch w;
      LearnedKernel::Embedding gen(a->n, a->dim);
      for (Eigen::Index t = 0; t < gen.size(); ++t) gen.data()[t] = normal(rng);
      for (auto& q : queries)
        for (int c = 0; c < a->dim; ++c) q(c) = normal(rng);
      auto made = LearnedKernel::FromEmbedding(std::move(gen));  // no second copy of n × dim doubles
      if (!made.ok()) return Fail(made.status());
      kernel = std::make_shared<const LearnedKernel>(std::move(made).value());
      generate_seconds = w.Seconds();
    }
    nlohmann::json load_info = nullptr;
    if (a->load) {
#ifdef KLS_HAVE_STORE
      namespace fs = std::filesystem;
      const fs::path dir = fs::temp_directory_path() / ("kls-topk-bench-" + std::to_string(::getpid()));
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec) return Fail(InternalError("create " + dir.string() + ": " + ec.message()));
      const std::string path = (dir / "kernel.art").string();
      double write_seconds = 0;
      {
        const Stopwatch w;
        // What the server's store does on a job's success: encode, write atomically.
        StatusOr<std::string> image = store::EncodeKernelArtifact(*kernel, {});
        if (!image.ok()) return Fail(image.status());
        if (Status st = store::WriteFileAtomically(path, *image); !st.ok()) return Fail(st);
        write_seconds = w.Seconds();
      }
      const double file_bytes = double(fs::file_size(path));
      store::KernelRecord record;
      record.name = "bench";
      record.version = 1;
      record.num_points = a->n;
      record.rank = a->dim;
      const auto checksum = [&](const LearnedKernel& x) {
        return Eigen::Map<const Eigen::VectorXd>(x.embedding().data(), x.embedding().size()).sum();
      };
      const double expected = checksum(*kernel);
      kernel.reset();  // only the file holds the kernel now
      // One load as the sqlite store's LoadModel does it: map + verify, decode.
      const auto load_once = [&](double* seconds) -> StatusOr<std::shared_ptr<const LearnedKernel>> {
        const Stopwatch w;
        KLS_ASSIGN_OR_RETURN(auto mapped, store::MappedArtifact::Open(path));
        KLS_ASSIGN_OR_RETURN(store::StoredModel model, store::DecodeKernelArtifact(*mapped, record));
        mapped.reset();
        auto out = std::make_shared<const LearnedKernel>(std::move(model.kernel));
        *seconds = w.Seconds();
        return out;
      };
      double cold_seconds = 0, warm_seconds = 0;
      bool cold_evicted = false;
      {
        const int fd = ::open(path.c_str(), O_RDONLY);
        if (fd >= 0) {
          cold_evicted = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
          ::close(fd);
        }
        auto cold = load_once(&cold_seconds);
        if (!cold.ok()) return Fail(cold.status());
      }
      auto warm = load_once(&warm_seconds);
      if (!warm.ok()) return Fail(warm.status());
      kernel = std::move(warm).value();
      fs::remove_all(dir, ec);
      if (checksum(*kernel) != expected) return Fail(DataLossError("the loaded kernel differs from the written one"));
      load_info = {{"artifact_bytes", file_bytes},
                   {"write_seconds", write_seconds},
                   {"load_seconds_cold", cold_seconds},
                   {"cold_page_cache_evicted", cold_evicted},
                   {"load_seconds", warm_seconds},
                   {"load_gb_per_s", file_bytes / warm_seconds / 1e9},
                   {"load_gb_per_s_cold", file_bytes / cold_seconds / 1e9}};
#else
      return Fail(InvalidArgumentError("--load needs a build with the server's store (KLS_BUILD_SERVER)"));
#endif
    }
    const LearnedKernel::Embedding& v = kernel->embedding();
    double build_seconds = 0;
    StatusOr<TopKIndex> built = InvalidArgumentError("not built");
    {
      const Stopwatch w;
      TopKIndexOptions index_options;
      index_options.use_vnni = !a->no_vnni;
      built = TopKIndex::Build(kernel, index_options);
      build_seconds = w.Seconds();
    }
    if (!built.ok()) return Fail(built.status());
    const TopKIndex& index = *built;
    const double rss_kernel_and_index_mb = RssMb();
    const double bytes = 8.0 * double(a->n) * double(a->dim);

#ifdef KLS_HAVE_FAISS
    omp_set_num_threads(1);  // one query on one thread, like the KLS path
    faiss::IndexFlatIP faiss_index(a->dim);
    {
      // FAISS keeps its own float32 copy; the staging one is freed right after.
      std::vector<float> xf(v.size());
      for (Eigen::Index t = 0; t < v.size(); ++t) xf[t] = static_cast<float>(v.data()[t]);
      faiss_index.add(a->n, xf.data());
    }
    std::vector<float> qf(a->dim), faiss_d(a->k);
    std::vector<faiss::Index::idx_t> faiss_i(a->k);
#endif
    const double rss_serving_mb = RssMb();

    // Warm-up: one pass of each (page faults, caches, FAISS's first call).
    volatile double sink = Eigen::Map<const Eigen::VectorXd>(v.data(), v.size()).sum();
    (void)kernel->TopKByVector(queries[0], a->k);
    (void)index.TopKByVector(queries[0], a->k);

    std::vector<double> kls_s, scan_s, sum_s, faiss_s;
    int exact = 0, same_as_scan = 0, screened = 0;
    double rescored = 0, candidates = 0;
    double recall = 0, kls_recall = 0;
    const Stopwatch loop_watch;
    for (int t = 0; t < a->queries; ++t) {
      const bool yardstick = t < yardsticks;
      if (yardstick) {
        const Stopwatch w;
        sink = sink + Eigen::Map<const Eigen::VectorXd>(v.data(), v.size()).sum();
        sum_s.push_back(w.Seconds());
      }
      std::vector<ScoredItem> top;
      {
        const Stopwatch w;
        TopKQueryStats st;
        top = index.TopKByVector(queries[t], a->k, &st);
        kls_s.push_back(w.Seconds());
        rescored += double(st.rescored);
        candidates += double(st.candidates);
        screened += st.screened;
      }
      {
        const Stopwatch w;
        const std::vector<ScoredItem> scan = kernel->TopKByVector(queries[t], a->k);
        scan_s.push_back(w.Seconds());
        same_as_scan += scan == top;  // same items, order and score bits
        int hits = 0;
        for (const ScoredItem& r : scan) {
          hits += std::count_if(top.begin(), top.end(), [&](const ScoredItem& x) { return x.index == r.index; }) > 0;
        }
        kls_recall += scan.empty() ? 1.0 : double(hits) / double(scan.size());
      }
      if (!yardstick) continue;
      const std::vector<ScoredItem> ref =
          a->n > 1000000 ? PartialReference(v, queries[t], a->k) : Reference(v, queries[t], a->k);
      bool same = top.size() == ref.size();
      for (size_t r = 0; same && r < ref.size(); ++r) {
        // Same items in the same order; scores equal up to summation order.
        same = top[r].index == ref[r].index &&
               std::abs(top[r].score - ref[r].score) <= 1e-12 * (1.0 + std::abs(ref[r].score));
      }
      exact += same;
#ifdef KLS_HAVE_FAISS
      for (int c = 0; c < a->dim; ++c) qf[c] = static_cast<float>(queries[t](c));
      {
        const Stopwatch w;
        faiss_index.search(1, qf.data(), a->k, faiss_d.data(), faiss_i.data());
        faiss_s.push_back(w.Seconds());
      }
      int hits = 0;
      for (const ScoredItem& r : ref) hits += std::count(faiss_i.begin(), faiss_i.end(), r.index) > 0;
      recall += double(hits) / double(ref.size());
#endif
    }
    const double loop_seconds = loop_watch.Seconds();
    // Medians compare like with like under a fluctuating load (all three are
    // timed in the same interleaved loop); the best passes are reported too.
    const std::vector<double> kls_interleaved(kls_s.begin(), kls_s.begin() + yardsticks);
    const double spq_interleaved = Median(kls_interleaved);
    const double spq = Median(kls_s);
    const double spq_best = *std::min_element(kls_s.begin(), kls_s.end());
    const double limit = Median(sum_s);
    const double limit_best = *std::min_element(sum_s.begin(), sum_s.end());
    const double bandwidth = bytes / limit_best;  // best pass = what the memory system can deliver
    nlohmann::json out = {{"benchmark", "topk"},
                          {"n", a->n},
                          {"dim", a->dim},
                          {"k", a->k},
                          {"queries", a->queries},
                          {"yardstick_queries", yardsticks},
                          {"threads", 1},
                          {"generate_seconds", generate_seconds},
                          {"load", load_info},
                          {"load_plus_index_seconds",
                           load_info.is_null() ? nlohmann::json(nullptr)
                                               : nlohmann::json(load_info["load_seconds"].get<double>() + build_seconds)},
                          {"rss_kernel_and_index_mb", rss_kernel_and_index_mb},
                          {"rss_serving_mb", rss_serving_mb},
                          {"query_loop_seconds", loop_seconds},
                          {"embedding_bytes", bytes},
                          {"index_bytes", index.memory_bytes()},
                          {"index_over_embedding_bytes", double(index.memory_bytes()) / bytes},
                          {"index_build_seconds", build_seconds},
                          {"index_uses_avx2", index.uses_simd()},
                          {"index_uses_vnni", index.uses_vnni()},
                          {"screened_queries", screened},
                          {"rescored_rows_mean", rescored / a->queries},
                          {"candidates_mean", candidates / a->queries},
                          {"seconds_per_query", spq},
                          {"seconds_per_query_mean", Mean(kls_s)},
                          {"seconds_per_query_best", spq_best},
                          {"read_bandwidth_gb_per_s", bandwidth / 1e9},
                          {"read_bandwidth_gb_per_s_median", bytes / limit / 1e9},
                          {"bandwidth_limit_seconds", limit},
                          {"bandwidth_limit_seconds_best", limit_best},
                          {"seconds_per_query_over_bandwidth_limit", spq / limit},
                          {"seconds_per_query_interleaved", spq_interleaved},
                          {"interleaved_over_bandwidth_limit", spq_interleaved / limit},
                          {"best_over_best_bandwidth_limit", spq_best / limit_best},
                          {"exact_scan_seconds_per_query", Median(scan_s)},
                          {"exact_scan_seconds_per_query_best", *std::min_element(scan_s.begin(), scan_s.end())},
                          {"exact_scan_over_index", spq > 0 ? Median(scan_s) / spq : 0.0},
                          {"exact_answers", exact},
                          {"reference_checked_queries", yardsticks},
                          {"same_as_exact_scan", same_as_scan},
                          {"recall_at_k", kls_recall / a->queries},
                          {"machine", MachineInfo()}};
#ifdef KLS_HAVE_FAISS
    const double fspq = Median(faiss_s);
    out["faiss_seconds_per_query"] = fspq;
    out["faiss_seconds_per_query_mean"] = Mean(faiss_s);
    out["faiss_seconds_per_query_best"] = *std::min_element(faiss_s.begin(), faiss_s.end());
    out["faiss_bytes"] = 4.0 * double(a->n) * double(a->dim);
    out["faiss_recall_at_k"] = recall / yardsticks;
    out["faiss_recall_queries"] = yardsticks;
    out["faiss_over_kls"] = spq > 0 ? fspq / spq : 0.0;
    out["faiss_over_kls_interleaved"] = spq_interleaved > 0 ? fspq / spq_interleaved : 0.0;
#else
    out["faiss_seconds_per_query"] = nullptr;
    out["faiss_note"] = "built without FAISS (libfaiss-dev not found at configure time)";
#endif
    bool batch_ok = true;
    std::vector<double> selectivities;
    try {
      selectivities = ParseList(a->selectivity);
    } catch (const std::exception&) {
      return Fail(InvalidArgumentError("--selectivity = '" + a->selectivity + "': give fractions like 0.01,0.5,1"));
    }
    for (double sel : selectivities) {
      if (!(sel > 0 && sel <= 1)) {
        return Fail(InvalidArgumentError("--selectivity has " + std::to_string(sel) + "; each must be in (0, 1]"));
      }
    }
    const int batch = a->batch > 0 ? a->batch : selectivities.empty() ? 0 : 100;
    if (batch > 0) {
      std::vector<std::vector<double>> bq(batch, std::vector<double>(a->dim));
      for (auto& q : bq)
        for (double& x : q) x = normal(rng);
      // batch_over_single: the unfiltered batch against the same queries one by one.
      std::vector<TopKQuery> plain(batch);
      for (int t = 0; t < batch; ++t) plain[t].vector = bq[t].data();
      TopKSearchOptions options;
      options.k = a->k;
      options.threads = a->threads;  // the batch; single queries always run on one thread
      std::vector<double> batch_s, single_s;
      for (int rep = 0; rep < std::max(1, a->repeats); ++rep) {
        StatusOr<std::vector<std::vector<ScoredItem>>> all = InvalidArgumentError("unset");
        {
          const Stopwatch w;
          all = index.Search(plain, options);
          batch_s.push_back(w.Seconds());
        }
        if (!all.ok()) return Fail(all.status());
        const Stopwatch w;
        for (int t = 0; t < batch; ++t) {
          const auto one = index.Search({plain[t]}, options);
          if (!one.ok()) return Fail(one.status());
          batch_ok = batch_ok && (*one)[0] == (*all)[t];
        }
        single_s.push_back(w.Seconds());
      }
      out["batch"] = batch;
      out["batch_threads"] = ResolveThreadCount(a->threads);
      out["batch_seconds_per_query"] = Median(batch_s) / batch;
      out["single_seconds_per_query"] = Median(single_s) / batch;
      out["batch_over_single"] = Median(batch_s) / Median(single_s);
      nlohmann::json filtered = nlohmann::json::array();
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
#ifdef KLS_HAVE_FAISS
      std::vector<float> bqf(size_t(batch) * a->dim);
      for (int t = 0; t < batch; ++t)
        for (int c = 0; c < a->dim; ++c) bqf[size_t(t) * a->dim + c] = static_cast<float>(bq[t][c]);
      std::vector<float> fd(size_t(batch) * a->k);
      std::vector<faiss::Index::idx_t> fi(size_t(batch) * a->k);
#endif
#ifdef KLS_HAVE_FAISS
      omp_set_num_threads(ResolveThreadCount(a->threads));  // FAISS's batches get the threads KLS's get
#endif
      for (double sel : selectivities) {
        ItemBitmap allowed(a->n);
        std::vector<uint8_t> bytes_map((a->n + 7) / 8, 0);
        for (int i = 0; i < a->n; ++i) {
          if (uniform(rng) < sel) {
            allowed.Set(i);
            bytes_map[i >> 3] |= uint8_t(1u << (i & 7));
          }
        }
        std::vector<TopKQuery> qs = plain;
        for (auto& q : qs) q.allowed = &allowed;
        std::vector<double> kls_batch, faiss_batch;
        std::vector<std::vector<ScoredItem>> answers;
        for (int rep = 0; rep < std::max(1, a->repeats); ++rep) {
          const Stopwatch w;
          auto all = index.Search(qs, options);
          kls_batch.push_back(w.Seconds());
          if (!all.ok()) return Fail(all.status());
          answers = std::move(all).value();
#ifdef KLS_HAVE_FAISS
          faiss::IDSelectorBitmap selector(bytes_map.size(), bytes_map.data());
          faiss::SearchParameters params;
          params.sel = &selector;
          const Stopwatch wf;
          faiss_index.search(batch, bqf.data(), a->k, fd.data(), fi.data(), &params);
          faiss_batch.push_back(wf.Seconds());
#endif
        }
        int exact_answers = 0;
        double frecall = 0;
        for (int t = 0; t < batch; ++t) {
          const auto ref = FilteredReference(v, bq[t].data(), allowed, a->k);
          exact_answers += SameItems(answers[t], ref);
#ifdef KLS_HAVE_FAISS
          int hits = 0;
          for (const ScoredItem& r : ref) {
            hits += std::count(fi.begin() + size_t(t) * a->k, fi.begin() + size_t(t + 1) * a->k, r.index) > 0;
          }
          frecall += ref.empty() ? 1.0 : double(hits) / double(ref.size());
#endif
        }
        batch_ok = batch_ok && exact_answers == batch;
        nlohmann::json row = {{"selectivity", sel},
                              {"passing", allowed.Count()},
                              {"seconds_per_query", Median(kls_batch) / batch},
                              {"exact_answers", exact_answers}};
#ifdef KLS_HAVE_FAISS
        row["faiss_seconds_per_query"] = Median(faiss_batch) / batch;
        row["faiss_over_kls"] = Median(kls_batch) > 0 ? Median(faiss_batch) / Median(kls_batch) : 0.0;
        row["faiss_recall_at_k"] = frecall / batch;
#else
        row["faiss_seconds_per_query"] = nullptr;
#endif
        filtered.push_back(row);
      }
      if (!selectivities.empty()) out["filtered"] = filtered;
    }
    out["peak_rss_mb"] = PeakRssMb();
    Emit(out, *json);
    return exact == yardsticks && same_as_scan == a->queries && batch_ok ? 0 : 1;
  };
}

KLS_BENCH_SUBCOMMAND("topk", "one TopK query (TopKIndex) vs memory bandwidth, the float64 scan and FAISS IndexFlatIP", RegisterTopK);

}  // namespace kls::bench
