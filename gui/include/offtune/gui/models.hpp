// Item models of the dashboard, over immutable snapshots (data.hpp). Each swaps its snapshot
// between beginResetModel() and endResetModel(), so a view never sees a half-updated model; none
// reads the store.
#pragma once

#include <QAbstractItemModel>
#include <QAbstractTableModel>
#include <optional>
#include <vector>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

// The store's contents as a tree: "Sweeps" > each sweep > its points, and "Runs" > runs that belong
// to no sweep point (from `offtune run`). Columns: name, status, step time, peak memory.
class StoreTreeModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { Name, Status, StepTime, Peak, ColumnCount };
  // Roles carrying what an item stands for, for the views that open it.
  enum Role { SweepIdRole = Qt::UserRole + 1, RunIdRole, PointIndexRole };

  explicit StoreTreeModel(QObject* parent = nullptr);
  void setIndex(StoreIndexPtr index);
  const StoreIndexPtr& storeIndex() const { return index_; }

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
  StoreIndexPtr index_;
  std::vector<const profiler::RunRecord*> standalone_;  // runs of no sweep point, into *index_
};

// A sweep's points as a table (one row per point). Sortable through a QSortFilterProxyModel: the
// sort role gives numbers, not text.
class PointsTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    Index,
    Status,
    MinOffloadSize,
    MaxFwdStashSize,
    StepTime,
    Slowdown,
    Peak,
    HiddenCopy,
    Error,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1, PointIndexRole, RunIdRole };

  explicit PointsTableModel(QObject* parent = nullptr);
  // Shows `points` (all of the sweep's when empty) of `sweep`; `highlight` is drawn bold.
  void setSweep(SweepDataPtr sweep, std::optional<std::vector<profiler::PointRecord>> subset = {},
                int64_t highlight = -1);
  const profiler::PointRecord* point(int row) const;
  int rowOfPoint(int64_t point_index) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  SweepDataPtr sweep_;
  std::vector<profiler::PointRecord> rows_;
  int64_t highlight_ = -1;
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
