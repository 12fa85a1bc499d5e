#pragma once

#include <QAbstractItemModel>
#include <map>
#include <optional>
#include <vector>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

// The store's contents as a tree: "Sweeps" > each sweep > its points, and "Runs" > runs that belong
// to no sweep point (from `offtune run`). Columns: name, status, step time, peak memory. A run that
// is measuring a sweep's pending point (its label and config say which) shows as that point, under
// its sweep, not under "Runs". A point's other runs (a round of --repeat, a re-measured finalist's
// runs, the first run of a point measured again) are the point's children, as `offtune report`
// labels them: never loose under "Runs".
//
// Updates are incremental: a newer index of the same store is merged in (rows inserted, removed
// and changed one by one), and a point just measured is applied in place, so that a view keeps its
// expanded items, its selection and its scroll position while a sweep fills the store. Only a
// different store (or a sweep list that did not just grow) resets the model.
class StoreTreeModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { Name, Status, StepTime, Peak, ColumnCount };
  // Roles carrying what an item stands for, for the views that open it.
  enum Role { SweepIdRole = Qt::UserRole + 1, RunIdRole, PointIndexRole };

  explicit StoreTreeModel(QObject* parent = nullptr);
  void setIndex(StoreIndexPtr index);
  // The index last set (points applied since are in the tree, not in it).
  const StoreIndexPtr& storeIndex() const { return index_; }
  // A point of a sweep in the tree, just measured: its row is updated (or inserted) in place.
  void applyPoint(const profiler::PointRecord& point);

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  // The item of a sweep or a standalone run, for selecting it programmatically.
  QModelIndex sweepIndex(profiler::SweepId id) const;
  QModelIndex runIndex(profiler::RunId id) const;

 private:
  struct SweepItem {
    SweepData data;
    // Runs measuring a pending point now (or left running by a crash), by point index.
    std::vector<std::pair<int64_t, profiler::RunRecord>> live;
    MetricDecimals decimals;  // of the sweep's figures, so that its rows print alike
    // What tells each point apart beyond its thresholds (variant_texts: the engine variant and
    // every other knob the sweep varies), by point index.
    std::map<int64_t, std::string> variants;
    // The point's runs other than its own (PointRecord::run), by point index, by run id.
    std::map<int64_t, std::vector<profiler::RunRecord>> others;
  };
  const std::vector<profiler::RunRecord>* otherRuns(const SweepItem& s, int64_t point_index) const;
  void mergeSweep(int row, SweepItem next);
  void mergeRuns(std::vector<profiler::RunRecord> next);
  void setPoint(int sweep_row, const profiler::PointRecord& point);
  const profiler::RunRecord* liveRun(const SweepItem& s, int64_t point_index) const;

  StoreIndexPtr index_;
  std::vector<SweepItem> sweeps_;
  std::vector<profiler::RunRecord> runs_;  // runs of no sweep point, by id
};

}  // namespace offtune::gui
