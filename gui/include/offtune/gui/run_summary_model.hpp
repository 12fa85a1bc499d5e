#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

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
  void addPeakRows(const RunData& run);
  std::vector<std::pair<QString, QString>> rows_;
};

}  // namespace offtune::gui
