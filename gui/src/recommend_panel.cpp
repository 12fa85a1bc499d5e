#include "offtune/gui/recommend_panel.hpp"

#include <QApplication>
#include <QButtonGroup>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFontDatabase>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "offtune/gui/models.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {
enum Mode { kDefault = 0, kBudget = 1, kSlowdown = 2 };

// A size as a field shows it: "8 GiB" when that is exact, else the bytes (a rounded "1.48 MiB" is
// not the budget asked for, and is no whole number of bytes).
std::string exact_size_text(int64_t bytes) {
  const std::string text = pf::format_size(bytes);
  try {
    if (pf::parse_size(text) == bytes) return text;
  } catch (const pf::ParseError&) {
  }
  return std::to_string(bytes);
}
}  // namespace

RecommendPanel::RecommendPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);

  auto* box = new QGroupBox(QStringLiteral("Constraint"), this);
  auto* grid = new QGridLayout(box);
  mode_ = new QButtonGroup(this);
  auto* by_default =
      new QRadioButton(QStringLiteral("default (slowdown at most %1x)")
                           .arg(QString::fromStdString(pf::default_max_slowdown_text())),
                       box);
  auto* by_budget = new QRadioButton(QStringLiteral("memory budget"), box);
  auto* by_slowdown = new QRadioButton(QStringLiteral("max slowdown"), box);
  mode_->addButton(by_default, kDefault);
  mode_->addButton(by_budget, kBudget);
  mode_->addButton(by_slowdown, kSlowdown);
  by_default->setChecked(true);
  budget_ = new QLineEdit(box);
  budget_->setPlaceholderText(QStringLiteral("peak device memory, e.g. 8GiB"));
  budget_->setObjectName(QStringLiteral("budget"));
  // The figure a budget is checked against and the front is drawn on: the device total by
  // default, as `offtune recommend` does (what the GPU runs out of).
  figure_ = new QComboBox(box);
  figure_->setObjectName(QStringLiteral("budgetFigure"));
  for (const pf::MemoryFigure f :
       {pf::MemoryFigure::Total, pf::MemoryFigure::Reserved, pf::MemoryFigure::Allocated}) {
    figure_->addItem(QString::fromLatin1(metric_label(memory_metric(f))), static_cast<int>(f));
  }
  figure_->setToolTip(QStringLiteral(
      "the peak a memory budget is checked against and the Pareto front is drawn on: the device "
      "total (peak reserved plus the CUDA context and libraries) is what the GPU runs out of; "
      "peak reserved is what torch's allocator holds; peak allocated leaves out both"));
  host_budget_ = new QLineEdit(box);
  host_budget_->setObjectName(QStringLiteral("hostBudget"));
  host_budget_->setPlaceholderText(QStringLiteral("none, or e.g. 64GiB"));
  host_budget_->setToolTip(QStringLiteral(
      "host memory per process, checked against what the run held: the process's peak where "
      "measured, else offtune's pinned pool or its host copies at their peak"));
  slowdown_ = new QDoubleSpinBox(box);
  slowdown_->setRange(1.0, 100.0);
  slowdown_->setSingleStep(0.05);
  slowdown_->setDecimals(2);
  slowdown_->setSuffix(QStringLiteral("x"));
  slowdown_->setValue(pf::kDefaultMaxSlowdown);
  grid->addWidget(by_default, 0, 0, 1, 2);
  grid->addWidget(by_budget, 1, 0);
  grid->addWidget(budget_, 1, 1);
  // Beside (under) the field it is about: what does not parse in the budget. The rest of the
  // panel keeps the last valid constraint's answer meanwhile.
  // Across both columns and wrapped: before, the field's column cut it to one clipped line.
  const auto error_label = [box](const char* name) {
    auto* label = new QLabel(box);
    label->setObjectName(QLatin1String(name));
    label->setWordWrap(true);
    label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Minimum);
    label->setStyleSheet(QStringLiteral("color: #b00020;"));
    label->hide();
    return label;
  };
  budget_error_ = error_label("budgetError");
  host_budget_error_ = error_label("hostBudgetError");
  grid->addWidget(budget_error_, 2, 0, 1, 2);
  grid->addWidget(by_slowdown, 3, 0);
  grid->addWidget(slowdown_, 3, 1);
  grid->addWidget(new QLabel(QStringLiteral("checked against"), box), 4, 0);
  grid->addWidget(figure_, 4, 1);
  grid->addWidget(new QLabel(QStringLiteral("host budget"), box), 5, 0);
  grid->addWidget(host_budget_, 5, 1);
  grid->addWidget(host_budget_error_, 6, 0, 1, 2);
  layout->addWidget(box);

  result_ = new QLabel(this);
  result_->setObjectName(QStringLiteral("result"));
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont big = result_->font();
  big.setPointSizeF(big.pointSizeF() * 1.2);
  big.setBold(true);
  result_->setFont(big);
  // Wrapped labels must not widen the panel (and the window) to their longest line.
  result_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(result_);
  rationale_ = new QLabel(this);
  rationale_->setWordWrap(true);
  rationale_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  rationale_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(rationale_);

  front_label_ = new QLabel(this);
  front_label_->setObjectName(QStringLiteral("frontLabel"));
  layout->addWidget(front_label_);
  front_ = new QTableView(this);
  front_model_ = new PointsTableModel(this);
  front_->setModel(front_model_);
  front_->verticalHeader()->hide();
  front_->setSelectionBehavior(QAbstractItemView::SelectRows);
  // The columns that decide the choice, with short headers: the panel is narrow and a clipped
  // header says nothing. The rest is in the sweep view's table.
  front_model_->setCompactHeaders(true);
  front_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  front_->horizontalHeader()->setStretchLastSection(true);
  // The figures one chooses by (step, peak) before the variant, which takes the room left and is
  // elided (whole in its tooltip): a long variant never pushes them out of the narrow panel.
  QHeaderView* header = front_->horizontalHeader();
  header->moveSection(header->visualIndex(PointsTableModel::Variant), header->count() - 1);
  header->setSectionResizeMode(PointsTableModel::Variant, QHeaderView::Stretch);
  for (int c : {PointsTableModel::Error, PointsTableModel::Status, PointsTableModel::Choice,
                PointsTableModel::StepInterval, PointsTableModel::Slowdown,
                PointsTableModel::HiddenCopy, PointsTableModel::PredictedStep,
                PointsTableModel::PredictedPeak, PointsTableModel::PredictionErr}) {
    front_->setColumnHidden(c, true);
  }
  front_->verticalHeader()->setDefaultSectionSize(front_->fontMetrics().height() + 6);
  front_->setMinimumHeight(110);
  layout->addWidget(front_, 1);
  connect(front_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) {
    if (const auto* p = front_model_->point(idx.row())) Q_EMIT pointActivated(p->index);
  });

  snippets_ = new QTabWidget(this);
  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  const char* names[] = {"C++", "TRL", "Axolotl"};
  for (int i = 0; i < 3; ++i) {
    snippet_text_[i] = new QPlainTextEdit(snippets_);
    snippet_text_[i]->setReadOnly(true);
    snippet_text_[i]->setFont(mono);
    // Wrapped, not cut at the panel's edge: each line is still one statement to paste.
    snippet_text_[i]->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    snippet_text_[i]->setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    snippets_->addTab(snippet_text_[i], QString::fromLatin1(names[i]));
  }
  layout->addWidget(snippets_, 1);

  auto* buttons = new QHBoxLayout;
  auto* copy = new QPushButton(QStringLiteral("Copy snippet"), this);
  copy->setObjectName(QStringLiteral("copySnippet"));
  export_chrome_ = new QPushButton(QStringLiteral("Export Chrome trace\u2026"), this);
  export_chrome_->setToolTip(
      QStringLiteral("the chosen point's run, for Perfetto / chrome://tracing"));
  export_csv_ = new QPushButton(QStringLiteral("Export CSV\u2026"), this);
  export_csv_->setToolTip(QStringLiteral("every point of the sweep"));
  // Copy on a row of its own, the exports on the next: the three side by side made the panel
  // (and the window) wider than 1280x800 leaves it.
  buttons->addWidget(copy);
  buttons->addStretch(1);
  layout->addLayout(buttons);
  auto* exports = new QHBoxLayout;
  exports->addStretch(1);
  exports->addWidget(export_chrome_);
  exports->addWidget(export_csv_);
  layout->addLayout(exports);
  export_status_ = new QLabel(this);
  export_status_->setWordWrap(true);
  layout->addWidget(export_status_);

  connect(copy, &QPushButton::clicked, this, [this, copy] {
    QApplication::clipboard()->setText(snippet(snippets_->currentIndex()));
    // Say it happened: the button reads "Copied" for a moment.
    copy->setText(QStringLiteral("Copied \u2713"));
    QTimer::singleShot(1500, copy, [copy] { copy->setText(QStringLiteral("Copy snippet")); });
  });
  connect(export_chrome_, &QPushButton::clicked, this, [this] { chooseExport(true); });
  connect(export_csv_, &QPushButton::clicked, this, [this] { chooseExport(false); });
  connect(mode_, &QButtonGroup::idClicked, this, [this] { recompute(); });
  // Applied as typed (before: only on Enter, while a stale error stayed under a valid value).
  connect(budget_, &QLineEdit::textChanged, this, [this] {
    mode_->button(kBudget)->setChecked(true);
    recompute();
  });
  connect(host_budget_, &QLineEdit::textChanged, this, [this] { recompute(); });
  connect(figure_, &QComboBox::currentIndexChanged, this, [this] { recompute(); });
  connect(slowdown_, &QDoubleSpinBox::valueChanged, this, [this] {
    mode_->button(kSlowdown)->setChecked(true);
    recompute();
  });
  recompute();
}

void RecommendPanel::setSweep(SweepDataPtr sweep, const std::string& store_path) {
  // "Wrote x.csv" was about the sweep before; another sweep (or store) starts with no message.
  if (store_path != store_path_ || !sweep || !sweep_ || sweep->sweep.id != sweep_->sweep.id) {
    export_status_->clear();
  }
  sweep_ = std::move(sweep);
  store_path_ = store_path;
  recompute();
}

std::optional<pf::Constraint> RecommendPanel::constraint(QString* error,
                                                         bool* host_at_fault) const {
  if (host_at_fault) *host_at_fault = false;
  pf::Constraint c;
  c.memory = static_cast<pf::MemoryFigure>(figure_->currentData().toInt());
  if (const std::string host = host_budget_->text().trimmed().toStdString(); !host.empty()) {
    try {
      // The CLI's rule for --host-budget.
      c.host_budget = requests::parse_memory_budget("host budget", host);
    } catch (const std::exception& e) {
      if (error) *error = QString::fromStdString(e.what());
      if (host_at_fault) *host_at_fault = true;
      return std::nullopt;
    }
  }
  switch (mode_->checkedId()) {
    case kBudget:
      try {
        // The CLI's rule for --memory-budget (offtune/requests).
        c.memory_budget =
            requests::parse_memory_budget("memory budget", budget_->text().trimmed().toStdString());
      } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return std::nullopt;
      }
      break;
    case kSlowdown:
      c.max_slowdown = slowdown_->value();
      break;
    default:
      break;
  }
  return c;
}

void RecommendPanel::setConstraint(const pf::Constraint& c) {
  const QSignalBlocker block_budget(budget_), block_slowdown(slowdown_), block_figure(figure_),
      block_host(host_budget_);
  figure_->setCurrentIndex(figure_->findData(static_cast<int>(c.memory)));
  host_budget_->setText(c.host_budget ? QString::fromStdString(exact_size_text(*c.host_budget))
                                      : QString());
  if (c.memory_budget) {
    budget_->setText(QString::fromStdString(exact_size_text(*c.memory_budget)));
    mode_->button(kBudget)->setChecked(true);
  } else if (c.max_slowdown) {
    slowdown_->setValue(*c.max_slowdown);
    mode_->button(kSlowdown)->setChecked(true);
  } else {
    mode_->button(kDefault)->setChecked(true);
  }
  recompute();
}

QString RecommendPanel::snippet(int tab) const {
  return tab >= 0 && tab < 3 ? snippet_text_[tab]->toPlainText() : QString();
}

void RecommendPanel::recompute() {
  QString error;
  bool host_at_fault = false;
  const auto parsed = constraint(&error, &host_at_fault);
  // A budget being typed (or mistyped) does not wipe the answer: the last constraint that parsed
  // stays in force, and the error shows beside its field until the text parses.
  budget_error_->setText(!parsed && !host_at_fault ? error : QString());
  budget_error_->setVisible(!parsed && !host_at_fault);
  host_budget_error_->setText(!parsed && host_at_fault ? error : QString());
  host_budget_error_->setVisible(!parsed && host_at_fault);
  if (parsed) last_valid_ = *parsed;
  const std::optional<pf::Constraint> c = last_valid_;
  error.clear();
  rec_ = {};
  if (!sweep_) {
    result_->setText(QStringLiteral("Open a sweep to get a recommendation."));
  } else {
    try {
      rec_ = pf::recommend(sweep_->points, *c);
    } catch (const std::exception& e) {
      rec_ = {};
      error = QString::fromStdString(e.what());
    }
    const SweepCounts counts = sweep_counts(*sweep_);
    if (!error.isEmpty()) {
      result_->setText(error);
    } else if (!rec_.chosen && counts.ok == 0 && counts.failed + counts.oom > 0) {
      // Nothing measured ok is not "nothing fits the budget" (before: it said so).
      result_->setText(
          QStringLiteral("No point was measured ok: %1 failed, %2 out of memory (their errors "
                         "are in the points table)")
              .arg(counts.failed)
              .arg(counts.oom));
    } else if (!rec_.chosen) {
      result_->setText(QStringLiteral("Nothing satisfies %1")
                           .arg(QString::fromStdString(rec_.constraint.describe())));
    } else if (!rec_.chosen->config.offload) {
      const std::string variant = pf::describe_variant(rec_.chosen->config);
      result_->setText(QStringLiteral("No offloading%1 (point #%2)")
                           .arg(variant.empty()
                                    ? QString()
                                    : QStringLiteral(", ") + QString::fromStdString(variant))
                           .arg(rec_.chosen->index));
    } else {
      const std::string variant = pf::describe_variant(rec_.chosen->config);
      result_->setText(
          QStringLiteral("min_offload_size %1, max_fwd_stash_size %2%3 (point #%4)")
              .arg(QString::fromStdString(pf::format_size(rec_.chosen->config.min_offload_size)))
              .arg(rec_.chosen->config.max_fwd_stash_size)
              .arg(variant.empty() ? QString()
                                   : QStringLiteral(", ") + QString::fromStdString(variant))
              .arg(rec_.chosen->index));
    }
  }
  rationale_->setText(QString::fromStdString(rec_.rationale));
  front_model_->setSweep(sweep_, sweep_ ? std::optional(rec_.front) : std::nullopt,
                         rec_.chosen ? rec_.chosen->index : -1);
  front_->setColumnHidden(PointsTableModel::Variant, !sweep_ || !has_variants(*sweep_));
  // The front's memory column is the figure it was judged on (and host memory under a host
  // budget): the narrow panel shows what decided, the sweep view's table every figure.
  const SweepMetric judged = memory_metric(rec_.constraint.memory);
  front_label_->setText(QStringLiteral("Pareto front (step time vs %1):")
                            .arg(QString::fromLatin1(metric_label(judged))));
  for (const SweepMetric m : kMemoryMetrics) {
    const bool shown = m == judged || (m == SweepMetric::HostHeld && rec_.constraint.host_budget);
    front_->setColumnHidden(PointsTableModel::memoryColumn(m), !shown);
  }
  snippet_text_[0]->setPlainText(QString::fromStdString(rec_.snippets.cpp));
  snippet_text_[1]->setPlainText(QString::fromStdString(rec_.snippets.trl));
  snippet_text_[2]->setPlainText(QString::fromStdString(rec_.snippets.axolotl));
  export_chrome_->setEnabled(rec_.chosen && rec_.chosen->run.valid() && !store_path_.empty());
  export_csv_->setEnabled(sweep_ != nullptr && !store_path_.empty());
  Q_EMIT recommendationChanged();
}

void RecommendPanel::chooseExport(bool chrome) {
  const QString path =
      chrome
          ? QFileDialog::getSaveFileName(
                this, QStringLiteral("Export Chrome trace"),
                QString::fromStdString(
                    rec_.chosen ? pf::default_trace_name({rec_.chosen->run}, &*rec_.chosen, ".json")
                                : std::string("offtune-trace.json")),
                QStringLiteral("Chrome trace (*.json *.json.gz)"))
          : QFileDialog::getSaveFileName(
                this, QStringLiteral("Export sweep points"),
                QString::fromStdString(sweep_ ? pf::default_points_name(sweep_->sweep.id)
                                              : std::string("offtune-points.csv")),
                QStringLiteral("CSV (*.csv)"));
  if (path.isEmpty()) return;
  chrome ? exportChromeTrace(path) : exportCsv(path);
}

void RecommendPanel::startExport(std::function<void()> work, const QString& path) {
  export_status_->setText(QStringLiteral("Exporting\u2026"));
  run_task(this, std::move(work), [this, path](const QString& error) {
    const QString msg = error.isEmpty() ? QStringLiteral("Wrote %1").arg(path)
                                        : QStringLiteral("Export failed: %1").arg(error);
    export_status_->setText(msg);
    Q_EMIT exportFinished(error.isEmpty(), msg);
  });
}

void RecommendPanel::exportChromeTrace(const QString& path) {
  if (!rec_.chosen || !rec_.chosen->run.valid() || store_path_.empty()) {
    Q_EMIT exportFinished(false, QStringLiteral("no chosen run to export"));
    return;
  }
  startExport(
      [db = store_path_, run = rec_.chosen->run, out = path.toStdString()] {
        auto store = pf::open_sqlite_store_readonly(db);
        pf::export_chrome_trace(*store, {run}, out);
      },
      path);
}

void RecommendPanel::exportCsv(const QString& path) {
  if (!sweep_ || store_path_.empty()) {
    Q_EMIT exportFinished(false, QStringLiteral("no sweep to export"));
    return;
  }
  startExport(
      [db = store_path_, sweep = sweep_->sweep.id, out = path.toStdString()] {
        auto store = pf::open_sqlite_store_readonly(db);
        pf::export_points_csv(*store, sweep, out);
      },
      path);
}

}  // namespace offtune::gui
