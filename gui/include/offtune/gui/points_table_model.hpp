#pragma once

#include <QAbstractTableModel>
#include <map>
#include <optional>
#include <vector>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

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
    // Memory, each figure named as what it is (data.hpp's memory metrics): peak allocated with its
    // prediction beside it, peak reserved, the peak device total, and the host memory held.
    PeakAllocated,
    PredictedPeak,
    PeakReserved,
    PeakTotal,
    HostHeld,
    HiddenCopy,
    Error,
    ColumnCount
  };
  enum Role { SortRole = Qt::UserRole + 1, PointIndexRole, RunIdRole };

  explicit PointsTableModel(QObject* parent = nullptr);
  // The column of a memory metric (kMemoryMetrics); -1 for another metric.
  static int memoryColumn(SweepMetric m);
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
  // A memory column's tooltip: the exact bytes and what the figure is made of; empty for the
  // other columns.
  QString memoryTooltip(int column, const profiler::RunSummary& s) const;

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

}  // namespace offtune::gui
