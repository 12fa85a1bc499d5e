#include "offtune/gui/run_view.hpp"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "offtune/gui/models.hpp"
#include "offtune/gui/run_charts.hpp"
#include "offtune/gui/timeline.hpp"
#include "offtune/gui/timeline_range.hpp"
#include "offtune/profiler/export.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

// What a run-view job hands over: the run and its timeline index, both immutable.
struct LoadedRun {
  RunDataPtr run;
  std::shared_ptr<const TimelineIndex> index;
  PeakBreakdown peak;  // a scan of every event: on the job thread, as the index
};

}  // namespace

RunView::RunView(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  auto* header = new QHBoxLayout;
  title_ = new QLabel(QStringLiteral("No run open"), this);
  title_->setObjectName(QStringLiteral("runTitle"));
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  // A long heading (a run's label, a store's name) wraps instead of widening the window: before,
  // it grew the window past 1280 px and squeezed the tree.
  title_->setWordWrap(true);
  title_->setMinimumWidth(120);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  header->addWidget(title_, 1);
  header->addWidget(new QLabel(QStringLiteral("wheel: zoom \u00b7 drag: pan \u00b7 shift+drag: "
                                              "measure \u00b7 click: follow a tensor \u00b7 "
                                              "double-click: whole run"),
                               this));
  auto* reset = new QPushButton(QStringLiteral("Whole run"), this);
  header->addWidget(reset);
  outer->addLayout(header);
  // Lines under the heading, shown while they have something to say: what a stretch selected on
  // the timeline (shift+drag) held, and the story of the tensor followed (a click on its event).
  const auto info_line = [this, outer](const char* name) {
    auto* label = new QLabel(this);
    label->setObjectName(QLatin1String(name));
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    label->hide();
    outer->addWidget(label);
    return label;
  };
  range_ = info_line("rangeStats");
  tensor_ = info_line("tensorStory");

  auto* split = new QSplitter(Qt::Horizontal, this);
  split_ = split;
  auto* charts = new QSplitter(Qt::Vertical, split);
  axis_ = new TimeAxis(this);
  timeline_ = new TimelineWidget(charts);
  occupancy_ = new RunChart(RunChart::Occupancy, charts);
  memory_ = new RunChart(RunChart::DeviceMemory, charts);
  host_ = new RunChart(RunChart::HostMemory, charts);
  timeline_->setAxis(axis_);
  occupancy_->setAxis(axis_);
  memory_->setAxis(axis_);
  host_->setAxis(axis_);
  occupancy_->setMinimumHeight(70);
  memory_->setMinimumHeight(70);
  host_->setMinimumHeight(70);
  // The lanes share the timeline's height (timeline.hpp), so the handle beneath them sizes them:
  // half the height for the lanes when the view is first shown (showEvent), a sixth for each
  // chart, and a resize keeps those shares (stretch 2:1:1:1, near enough). None of them can be
  // dragged shut.
  charts_split_ = charts;
  charts->setChildrenCollapsible(false);
  charts->setHandleWidth(6);
  charts->setStretchFactor(0, 2);
  charts->setStretchFactor(1, 1);
  charts->setStretchFactor(2, 1);
  charts->setStretchFactor(3, 1);

  table_ = new QTableView(split);
  summary_ = new RunSummaryModel(this);
  table_->setModel(summary_);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  table_->setMinimumWidth(220);
  // A value longer than the pane (the settings of a variant) wraps onto more lines of its row.
  table_->setWordWrap(true);
  table_->setTextElideMode(Qt::ElideNone);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 1);
  outer->addWidget(split, 1);

  connect(reset, &QPushButton::clicked, axis_, &TimeAxis::resetView);
  connect(timeline_, &TimelineWidget::selectionChanged, this, &RunView::showSelection);
  connect(timeline_, &TimelineWidget::followedTensorChanged, this, [this] {
    const QString story = timeline_->index()
                              ? describe_tensor(*timeline_->index(), timeline_->followedTensor())
                              : QString();
    tensor_->setText(story);
    tensor_->setVisible(!story.isEmpty());
  });
}

void RunView::showSelection() {
  const auto range = timeline_->selection();
  if (!range || !timeline_->index() || range->first == range->second) {
    range_->hide();
    range_->clear();
    return;
  }
  // The run's modelled link for pinned copies (host-sim); a real GPU's link is not known here.
  const double link_gbps = run_ ? run_->run.config.link.model.pinned_gbps : 0.0;
  range_->setText(describe_range(
      timeline_range_stats(*timeline_->index(), range->first, range->second), link_gbps));
  range_->show();
}

void RunView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (split_sized_) return;
  split_sized_ = true;
  // Left to itself, QSplitter gives each widget its size hint and shares the rest by size policy,
  // which gave the lanes two thirds; the shares are set once, then left to the user.
  if (layout()) layout()->activate();
  const int h = charts_split_->height();
  if (h > 0) charts_split_->setSizes({h - 3 * (h / 6), h / 6, h / 6, h / 6});
  fitSummary();
}

void RunView::fitSummary() {
  if (!isVisible() || !run_) return;
  // The values were cut off at the table's edge (a config or a path is long): the pane takes the
  // width of its two columns, up to half the view; the timeline keeps the rest.
  const auto* view = static_cast<const QAbstractItemView*>(table_);
  const int needed =
      std::max(view->sizeHintForColumn(0), table_->horizontalHeader()->sectionSizeHint(0)) +
      std::max(view->sizeHintForColumn(1), table_->horizontalHeader()->sectionSizeHint(1)) +
      2 * table_->frameWidth() + table_->verticalScrollBar()->sizeHint().width() + 8;
  QList<int> sizes = split_->sizes();
  if (sizes.size() != 2) return;
  const int total = sizes[0] + sizes[1];
  const int width = std::min(needed, total / 2);
  if (width <= sizes[1]) return;
  split_->setSizes({total - width, width});
}

void RunView::showRun(const std::string& store_path, pf::RunId id) {
  const uint64_t job = jobs_.next();
  title_->setText(QStringLiteral("Loading run %1\u2026").arg(id.value));
  run_job<LoadedRun>(
      this,
      [store_path, id] {
        auto run = std::make_shared<const RunData>(load_run(store_path, id));
        auto index = build_timeline_index(*run);
        PeakBreakdown peak = peak_breakdown(*run);
        return LoadedRun{std::move(run), std::move(index), std::move(peak)};
      },
      [this, job, store_path](const JobResult<LoadedRun>& r) {
        if (!jobs_.is_current(job)) return;  // a newer run was asked for meanwhile
        if (!r.value) {
          title_->setText(QStringLiteral("Could not load the run: %1").arg(r.error));
          Q_EMIT loadFailed(r.error);
          return;
        }
        store_path_ = store_path;
        setRunData(r.value->run, r.value->index, r.value->peak);
        Q_EMIT loaded();
      });
}

void RunView::setRunData(RunDataPtr run, std::shared_ptr<const TimelineIndex> index,
                         std::optional<PeakBreakdown> peak) {
  run_ = std::move(run);
  if (run_) {
    // The index already holds the run's time bounds (built on the job thread); scanning a
    // million events again here would be GUI-thread work.
    const auto [lo, hi] =
        index ? std::pair{index->begin_ns, index->end_ns} : run_time_bounds(*run_);
    axis_->setBounds(lo, hi);
    // Named with its store: the window may have another store open by now (run_view.hpp), and
    // with its label, which names the sweep point it measured ("grid point 5 (sweep 2,
    // re-measured, round 1 of 3)"; before, the heading never named the point).
    const auto& label = run_->run.label;
    title_->setText(QStringLiteral("%1%2 \u2014 %3")
                        .arg(QString::fromStdString(pf::run_title(run_->run)),
                             label.empty()
                                 ? QString()
                                 : QStringLiteral(" \u2014 %1").arg(QString::fromStdString(label)),
                             QFileInfo(QString::fromStdString(store_path_)).fileName()));
    title_->setToolTip(QStringLiteral("store: %1").arg(QString::fromStdString(store_path_)));
  } else {
    title_->setText(QStringLiteral("No run open"));
  }
  timeline_->setIndex(std::move(index));
  occupancy_->setRun(run_);
  memory_->setRun(run_);
  host_->setRun(run_);
  summary_->setRun(run_, std::move(peak));
  fitSummary();
}

}  // namespace offtune::gui
