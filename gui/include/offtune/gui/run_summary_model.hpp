#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <optional>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/gui/run_peak.hpp"

namespace offtune::gui {

// A run's summary figures as (figure, value) rows.
class RunSummaryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  explicit RunSummaryModel(QObject* parent = nullptr);
  // `peak`: the run's peak_breakdown when the caller computed it off the GUI thread (a scan of
  // every event); computed here when not given.
  void setRun(RunDataPtr run, std::optional<PeakBreakdown> peak = std::nullopt);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  void addPeakRows(const RunData& run, const PeakBreakdown& peak);
  std::vector<std::pair<QString, QString>> rows_;
};

}  // namespace offtune::gui
