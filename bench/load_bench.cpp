// Times the LIBSVM loader (1 and N threads, median of R runs) on the given
// files and prints MB/s; bench/load_bench.sh runs it beside sklearn and
// LIBLINEAR. With --generate it first writes a synthetic file of ~N MB.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"

ABSL_FLAG(std::string, files, "", "comma-separated LIBSVM files to time");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated thread counts");
ABSL_FLAG(int, repeat, 3, "runs per setting; the median is printed");
ABSL_FLAG(std::string, generate, "", "write a synthetic file of --generate_mb MB here first");
ABSL_FLAG(int, generate_mb, 1024, "size of the generated file in MB");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string gen = absl::GetFlag(FLAGS_generate);
  if (!gen.empty()) {
    // ~100 nonzeros per row at ~12 bytes each: ~1.2 KB a line.
    dml::SyntheticOptions o;
    o.cols = 1000000;
    o.nnz_per_row = 100;
    o.rows = int64_t{absl::GetFlag(FLAGS_generate_mb)} * 1000 * 1000 / 1250;
    o.task = dml::Task::kClassification;
    o.noise = 0.1;
    auto s = dml::GenerateSynthetic(o);
    if (!s.ok()) {
      std::fprintf(stderr, "generate: %s\n", std::string(s.status().message()).c_str());
      return 1;
    }
    if (auto st = dml::WriteLibsvm(s->data, gen); !st.ok()) {
      std::fprintf(stderr, "write: %s\n", std::string(st.message()).c_str());
      return 1;
    }
  }
  std::vector<int> threads;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    threads.push_back(std::stoi(std::string(t)));
  }
  std::printf("%-40s %8s %10s %10s %12s\n", "file", "threads", "MB", "median_s", "MB/s");
  for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_files), ',', absl::SkipEmpty())) {
    const std::string path(f);
    auto text = dml::ReadFileContents(path);
    if (!text.ok()) {
      std::fprintf(stderr, "%s\n", std::string(text.status().message()).c_str());
      return 1;
    }
    const double mb = static_cast<double>(text->size()) / 1e6;
    for (int t : threads) {
      std::vector<double> secs;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
        dml::LibsvmOptions opt;
        opt.threads = t;
        opt.binarize_threshold = 0.0;  // any labels (news20 has 20 classes)
        const auto t0 = std::chrono::steady_clock::now();
        // Parse from memory: decompression is not the parser's speed.
        auto d = dml::ParseLibsvm(*text, opt, path);
        secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!d.ok()) {
          std::fprintf(stderr, "%s\n", std::string(d.status().message()).c_str());
          return 1;
        }
      }
      std::sort(secs.begin(), secs.end());
      const double med = secs[secs.size() / 2];
      std::printf("%-40s %8d %10.1f %10.3f %12.1f\n", path.c_str(), t, mb, med, mb / med);
    }
  }
  return 0;
}
