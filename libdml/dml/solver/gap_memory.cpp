#include "dml/solver/gap_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dml/util/status.hpp"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

// Dual models: z_i = gap_i(alpha_i, x_i . w) / n.
template <class Obj>
struct DualMeasure {
  struct Snap {
    int64_t version = 0;
    std::vector<double> w, alpha;
  };
  const Dataset& data;
  int64_t size() const { return data.x.rows(); }
  int64_t shared_size() const { return data.x.cols(); }
  std::shared_ptr<const Snap> Prepare(int64_t version, std::vector<double> shared,
                                      std::vector<double> coords) const {
    auto s = std::make_shared<Snap>();
    s->version = version;
    s->w = std::move(shared);
    s->alpha = std::move(coords);
    return s;
  }
  double Gap(const Snap& s, int64_t i) const {
    const SparseView r = data.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += static_cast<double>(r.value[k]) * s.w[r.index[k]];
    return Obj::CoordinateGap(data.y[i], s.alpha[i], z) / static_cast<double>(data.x.rows());
  }
};

// Primal models: z_j = the bounded-support gap of feature j at a_j^T u,
// u_i = loss'(y_i, v_i) / n (EvaluatePrimal's terms).
template <class Obj>
struct PrimalMeasure {
  struct Snap {
    int64_t version = 0;
    std::vector<double> w, u;
    Obj obj;
  };
  const Dataset& data;
  ModelSpec model;
  std::shared_ptr<const CscMatrix> cols;  // data.x as CSC, maybe shared with the caller
  int64_t size() const { return data.x.cols(); }
  int64_t shared_size() const { return data.x.rows(); }
  std::shared_ptr<const Snap> Prepare(int64_t version, std::vector<double> shared,
                                      std::vector<double> coords) const {
    auto s = std::make_shared<Snap>();
    s->version = version;
    const int64_t n = data.x.rows();
    s->u.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double value, derivative;
      Obj::ValueAndDerivative(data.y[i], shared[i], &value, &derivative);
      s->u[i] = derivative / static_cast<double>(n);
    }
    double w_max = 0.0;
    for (double wj : coords) w_max = std::max(w_max, std::abs(wj));
    s->obj = Obj::Make(model, data.y, w_max);
    s->w = std::move(coords);
    return s;
  }
  double Gap(const Snap& s, int64_t j) const {
    const SparseView c = cols->outer(j);
    double g = 0.0;
    for (std::size_t k = 0; k < c.size; ++k) g += static_cast<double>(c.value[k]) * s.u[c.index[k]];
    return s.obj.CoordinateGap(s.w[j], g);
  }
};

template <class Measure>
class Memory final : public GapMemory {
 public:
  using Snap = typename Measure::Snap;
  Memory(Measure m, int threads)
      : m_(std::move(m)),
        z_(static_cast<std::size_t>(m_.size())),
        ver_(static_cast<std::size_t>(m_.size())) {
    for (auto& z : z_) z.store(std::numeric_limits<double>::infinity(), std::memory_order_relaxed);
    for (auto& v : ver_) v.store(0, std::memory_order_relaxed);
    const int64_t n = m_.size();
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
      pool_.emplace_back([this, begin, end] { Run(begin, end); });
    }
  }
  ~Memory() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : pool_) t.join();
  }

  absl::StatusOr<int64_t> Publish(std::vector<double> shared, std::vector<double> coords) override {
    if (static_cast<int64_t>(shared.size()) != m_.shared_size() ||
        static_cast<int64_t>(coords.size()) != m_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gap memory: a state of ", shared.size(), " shared and ", coords.size(),
          " coordinate values; expected ", m_.shared_size(), " and ", m_.size()));
    }
    int64_t v;
    {
      std::lock_guard<std::mutex> lock(mu_);
      v = next_version_++;
    }
    std::shared_ptr<const Snap> s = m_.Prepare(v, std::move(shared), std::move(coords));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!snap_ || snap_->version < v) snap_ = std::move(s);
    }
    cv_.notify_all();
    return v;
  }

  void RefreshAll() override {
    std::shared_ptr<const Snap> s = Latest();
    if (!s) return;
    for (int64_t i = 0; i < m_.size(); ++i) Store(*s, i);
  }

  void Refresh(const std::vector<int64_t>& ids) override {
    std::shared_ptr<const Snap> s = Latest();
    if (!s) return;
    for (int64_t i : ids) {
      if (i >= 0 && i < m_.size()) Store(*s, i);
    }
  }

  int64_t size() const override { return m_.size(); }
  int64_t version() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return snap_ ? snap_->version : 0;
  }
  std::vector<double> Values() const override {
    std::vector<double> out(z_.size());
    for (std::size_t i = 0; i < z_.size(); ++i) out[i] = z_[i].load(std::memory_order_relaxed);
    return out;
  }
  std::vector<int64_t> Versions() const override {
    std::vector<int64_t> out(ver_.size());
    for (std::size_t i = 0; i < ver_.size(); ++i) out[i] = ver_[i].load(std::memory_order_relaxed);
    return out;
  }
  int64_t refreshed() const override { return refreshed_.load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<const Snap> Latest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return snap_;
  }
  void Store(const Snap& s, int64_t i) {
    z_[i].store(m_.Gap(s, i), std::memory_order_relaxed);
    ver_[i].store(s.version, std::memory_order_relaxed);
    refreshed_.fetch_add(1, std::memory_order_relaxed);
  }
  // Sweeps [begin, end) against the newest state, switching to a newer one
  // as soon as it appears; sleeps once its range is fresh.
  void Run(int64_t begin, int64_t end) {
    int64_t done_version = 0;  // the version this range is fresh for
    for (;;) {
      std::shared_ptr<const Snap> s;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (snap_ && snap_->version > done_version); });
        if (stop_) return;
        s = snap_;
      }
      bool superseded = false;
      for (int64_t i = begin; i < end; ++i) {
        Store(*s, i);
        if ((i & 255) == 255 && (stopping() || newer_than(s->version))) {
          superseded = true;
          break;
        }
      }
      if (!superseded) done_version = s->version;
    }
  }
  bool stopping() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  bool newer_than(int64_t v) const {
    std::lock_guard<std::mutex> lock(mu_);
    return snap_ && snap_->version > v;
  }

  Measure m_;
  std::vector<std::atomic<double>> z_;
  std::vector<std::atomic<int64_t>> ver_;
  std::atomic<int64_t> refreshed_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const Snap> snap_;
  int64_t next_version_ = 1;
  bool stop_ = false;
  std::vector<std::thread> pool_;
};

template <class Obj>
std::unique_ptr<GapMemory> Dual(const Dataset& data, int threads) {
  return std::make_unique<Memory<DualMeasure<Obj>>>(DualMeasure<Obj>{data}, threads);
}
template <class Obj>
std::unique_ptr<GapMemory> Primal(const Dataset& data, const ModelSpec& model, int threads,
                                  std::shared_ptr<const CscMatrix> cols) {
  if (!cols) cols = std::make_shared<const CscMatrix>(data.x.Convert());
  return std::make_unique<Memory<PrimalMeasure<Obj>>>(
      PrimalMeasure<Obj>{data, model, std::move(cols)}, threads);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GapMemory>> GapMemory::Make(const Dataset& data,
                                                           const ModelSpec& model, int threads) {
  return MakeWith(data, model, threads, nullptr);
}

absl::StatusOr<std::unique_ptr<GapMemory>> GapMemory::Make(const Dataset& data,
                                                           const ModelSpec& model, int threads,
                                                           std::shared_ptr<const CscMatrix> cols) {
  if (FormulationOf(model.kind) != Formulation::kPrimal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gap memory: shared columns are for primal models, not ", AsAbsl(ModelName(model.kind))));
  }
  if (!cols || cols->rows() != data.x.rows() || cols->cols() != data.x.cols() ||
      cols->values().size() != data.x.values().size()) {
    return absl::InvalidArgumentError(
        "gap memory: the shared columns are not the data's (shape or nonzeros differ)");
  }
  return MakeWith(data, model, threads, std::move(cols));
}

absl::StatusOr<std::unique_ptr<GapMemory>> GapMemory::MakeWith(
    const Dataset& data, const ModelSpec& model, int threads, std::shared_ptr<const CscMatrix> cols) {
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gap memory: ", threads, " threads"));
  }
  // dml::Train's checks of the model, the data and its labels.
  DML_RETURN_IF_ERROR(CheckTrainInputs(data, model, SolverOptions{}));
  switch (model.kind) {
    case ModelKind::kRidge: return Dual<RidgeObjective>(data, threads);
    case ModelKind::kLogisticL2: return Dual<LogisticL2Objective>(data, threads);
    case ModelKind::kHingeSvm: return Dual<HingeSvmObjective>(data, threads);
    case ModelKind::kSquaredHingeSvm: return Dual<SquaredHingeSvmObjective>(data, threads);
    case ModelKind::kLasso: return Primal<LassoObjective>(data, model, threads, std::move(cols));
    case ModelKind::kElasticNet: return Primal<ElasticNetObjective>(data, model, threads, std::move(cols));
    case ModelKind::kLogisticL1: return Primal<LogisticL1Objective>(data, model, threads, std::move(cols));
  }
  return absl::InvalidArgumentError("gap memory: unknown model");
}

}  // namespace dml
