// Item models of the dashboard, over immutable snapshots (data.hpp). Each swaps its snapshot
// between beginResetModel() and endResetModel(), so a view never sees a half-updated model; none
// reads the store.
#pragma once

#include <QAbstractItemModel>
#include <QAbstractTableModel>
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

// A sweep's points as a table (one row per point). Sortable through a QSortFilterProxyModel: the
// sort role gives numbers, not text.
class PointsTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    Index,
    Status,
    Choice,  // "recommended", or "= within noise" for a point the recommender cannot tell apart
    MinOffloadSize,
    MaxFwdStashSize,
    Variant,  // checkpointing, what is offloaded, the tier ("" for plain offloading)
    // A predict-first sweep's predictions (predicted.hpp) sit beside the figures they predict;
    // views hide their columns for other sweeps.
    StepTime,
    PredictedStep,
    PredictionErr,  // "step +0.3 %, peak -1.2 %" for a point both predicted and measured
    StepInterval,   // the median's interval, "exact (modelled)" with a device model
    Slowdown,
    Peak,
    PredictedPeak,
    HiddenCopy,
    Error,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1, PointIndexRole, RunIdRole };

  explicit PointsTableModel(QObject* parent = nullptr);
  // Shows `points` (all of the sweep's when empty) of `sweep`; `highlight` (the recommended point)
  // is drawn bold, and `ties` (points equal to it within noise) are marked. All of a predict-first
  // sweep's points are its measured ones and, with status "predicted", those it only predicted.
  void setSweep(SweepDataPtr sweep, std::optional<std::vector<profiler::PointRecord>> subset = {},
                int64_t highlight = -1, std::vector<int64_t> ties = {});
  const profiler::PointRecord* point(int row) const;
  int rowOfPoint(int64_t point_index) const;
  // Short headers ("min size", "stash", "step", "peak"; the knob names in their tooltips) for a
  // table in a narrow panel.
  void setCompactHeaders(bool compact);
  // Whether the row is a grid point that was predicted and not measured.
  bool isPredictedOnly(int row) const;
  // Whether the sweep shown has predictions (the prediction columns say something).
  bool hasPredictions() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  // The prediction columns' cells, and the status of a row only predicted.
  QVariant predictionData(int column, const profiler::PointRecord& p, bool predicted_only,
                          int role) const;
  QString variantText(const profiler::PointRecord& p) const;

  SweepDataPtr sweep_;
  std::vector<profiler::PointRecord> rows_;
  std::vector<bool> predicted_only_;  // by row
  int64_t highlight_ = -1;
  std::vector<int64_t> ties_;
  std::map<int64_t, std::string> variant_texts_;  // the Variant column by point index
  MetricDecimals decimals_;
  bool exact_ = false;  // every measured step time exact (a device model): ties are exact ties
  bool compact_ = false;
};

// A run's summary figures as (figure, value) rows.
class RunSummaryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  explicit RunSummaryModel(QObject* parent = nullptr);
  void setRun(RunDataPtr run);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<std::pair<QString, QString>> rows_;
};

}  // namespace offtune::gui
