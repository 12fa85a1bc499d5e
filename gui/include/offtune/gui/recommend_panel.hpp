// The recommendation panel: a constraint (default, memory budget or maximum slowdown; the memory
// figure a budget is checked against; a host budget), the point
// the recommender picks under it and why, the Pareto front as a table, ready-to-paste settings
// (C++, TRL, Axolotl) with copy buttons, and the sweep's exports (Chrome trace of the chosen run,
// CSV of the points), written on a job thread.
#pragma once

#include <QWidget>
#include <functional>
#include <optional>
#include <string>

#include "offtune/gui/data.hpp"
#include "offtune/gui/jobs.hpp"
#include "offtune/profiler/recommend.hpp"

class QButtonGroup;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QTabWidget;
class QTableView;

namespace offtune::gui {

class PointsTableModel;

class RecommendPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RecommendPanel(QWidget* parent = nullptr);

  void setSweep(SweepDataPtr sweep, const std::string& store_path);
  const profiler::Recommendation& recommendation() const { return rec_; }
  // The constraint as the controls give it; empty optional and an error text when the budget field
  // does not parse. Then the panel keeps what it showed under the last constraint that parsed
  // (recommendation, front, snippets, exports) and shows the error beside the field.
  // `host_at_fault` says which field the error is of (the host budget's, else the memory
  // budget's).
  std::optional<profiler::Constraint> constraint(QString* error = nullptr,
                                                 bool* host_at_fault = nullptr) const;
  // Sets the controls (for tests and the command line): a budget, a slowdown, or neither; the
  // figure and the host budget.
  void setConstraint(const profiler::Constraint& c);

  // The exports, started on a job thread; exportFinished() reports the outcome.
  void exportChromeTrace(const QString& path);
  void exportCsv(const QString& path);
  PointsTableModel* frontModel() const { return front_model_; }
  QString snippet(int tab) const;  // 0 C++, 1 TRL, 2 Axolotl

 Q_SIGNALS:
  void recommendationChanged();
  void pointActivated(qint64 point_index);
  void exportFinished(bool ok, const QString& message);

 private:
  void recompute();
  void chooseExport(bool chrome);
  void startExport(std::function<void()> work, const QString& path);

  SweepDataPtr sweep_;
  std::string store_path_;
  profiler::Recommendation rec_;
  profiler::Constraint last_valid_;  // the constraint in force while the budget does not parse
  QButtonGroup* mode_ = nullptr;
  QLineEdit* budget_ = nullptr;
  QComboBox* figure_ = nullptr;  // the MemoryFigure a budget is checked against
  QLineEdit* host_budget_ = nullptr;
  QLabel* budget_error_ = nullptr;       // under the memory budget: what does not parse in it
  QLabel* host_budget_error_ = nullptr;  // under the host budget: the same for it
  QDoubleSpinBox* slowdown_ = nullptr;
  QLabel* result_ = nullptr;
  QLabel* rationale_ = nullptr;
  QLabel* front_label_ = nullptr;  // "Pareto front (step time vs peak device total):"
  QTableView* front_ = nullptr;
  PointsTableModel* front_model_ = nullptr;
  QTabWidget* snippets_ = nullptr;
  QPlainTextEdit* snippet_text_[3] = {};
  QPushButton* export_chrome_ = nullptr;
  QPushButton* export_csv_ = nullptr;
  QLabel* export_status_ = nullptr;
};

}  // namespace offtune::gui
