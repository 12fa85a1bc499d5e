#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QStringList>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "offtune/gui/sweep_form.hpp"
#include "offtune/profiler/knob_text.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

QSpinBox* spin(QWidget* parent, int lo, int hi, int value) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  return s;
}

QSpinBox* spin(QWidget* parent, requests::Range range, int value) {
  return spin(parent, static_cast<int>(range.lo), static_cast<int>(range.hi), value);
}

QComboBox* combo(QWidget* parent, const std::vector<std::string>& items, bool editable) {
  auto* c = new QComboBox(parent);
  for (const auto& item : items) c->addItem(QString::fromStdString(item));
  c->setEditable(editable);
  return c;
}

std::string text_of(const QComboBox* c) { return c->currentText().trimmed().toStdString(); }
std::string text_of(const QLineEdit* e) { return e->text().trimmed().toStdString(); }

void set_text(QComboBox* c, const std::string& s) {
  const QString text = QString::fromStdString(s);
  const int i = c->findText(text);
  if (i >= 0) {
    c->setCurrentIndex(i);
  } else if (c->isEditable()) {
    c->setEditText(text);
  }
}

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// The knobs the form has a field for: those with a CLI flag, the grid's pair first (as the heatmap
// has them), then in the table's order.
std::vector<const Knob*> form_knobs() {
  std::vector<const Knob*> out;
  for (const Knob& k : knob_table()) {
    if (!k.flag.empty() && k.always_axis) out.push_back(&k);
  }
  for (const Knob& k : knob_table()) {
    if (!k.flag.empty() && !k.always_axis) out.push_back(&k);
  }
  return out;
}

std::vector<std::string> examples_of(const Knob& k) {
  return k.examples != nullptr ? k.examples() : std::vector<std::string>{};
}

// What a knob's list offers: the text it has by default, the knob's examples, and for a sweep axis
// whose examples hold no list, its first two examples as one ("none,all"), to start an axis from.
std::vector<std::string> knob_items(const Knob& k) {
  std::vector<std::string> items{pf::default_text(k, /*sweep=*/true)};
  const std::vector<std::string> examples = examples_of(k);
  for (const std::string& e : examples) {
    if (std::find(items.begin(), items.end(), e) == items.end()) items.push_back(e);
  }
  const bool has_list = std::any_of(examples.begin(), examples.end(), [](const std::string& e) {
    return e.find(',') != std::string::npos;
  });
  if (k.nest > 0 && !has_list && examples.size() >= 2) {
    const std::string list = examples[0] + "," + examples[1];
    if (std::find(items.begin(), items.end(), list) == items.end()) items.push_back(list);
  }
  return items;
}

// An emptied list's hint: the knob's examples.
QString knob_placeholder(const Knob& k) {
  QStringList examples;
  for (const std::string& e : examples_of(k)) examples << QString::fromStdString(e);
  if (examples.isEmpty()) return {};
  return QStringLiteral("e.g. %1").arg(examples.join(QStringLiteral(" or ")));
}

// A path as one word of /bin/sh: quoted when it holds anything the shell would split or expand.
QString shell_word(const QString& path) {
  static const QString plain =
      QStringLiteral("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%");
  if (!path.isEmpty() &&
      std::all_of(path.begin(), path.end(), [](QChar c) { return plain.contains(c); })) {
    return path;
  }
  QString quoted = path;
  quoted.replace(QStringLiteral("'"), QStringLiteral("'\\''"));
  return QStringLiteral("'%1'").arg(quoted);
}

// The command line that runs a chosen file: Python's and shell scripts through their interpreter
// (a script need not be executable), anything else as a program.
QString command_for(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QStringLiteral("py")) return QStringLiteral("python3 ") + shell_word(path);
  if (suffix == QStringLiteral("sh")) return QStringLiteral("sh ") + shell_word(path);
  return shell_word(path);
}

}  // namespace

SweepForm::SweepForm(QWidget* parent) : QWidget(parent), runner_(new SweepRunner(this)) {
  auto* outer = new QVBoxLayout(this);
  // The fields scroll, the buttons and the progress stay in view: the form has more rows than a
  // 1280x800 window is tall, and would otherwise push the window past the screen.
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName(QStringLiteral("fields"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* fields = new QWidget(scroll);
  auto* form = new QFormLayout(fields);
  form->setContentsMargins(0, 0, 0, 0);
  scroll->setWidget(fields);
  outer->addWidget(scroll, 1);

  auto* db_row = new QHBoxLayout;
  db_ = new QLineEdit(this);
  db_->setPlaceholderText(QStringLiteral("store file (created if absent)"));
  auto* browse_db = new QPushButton(QStringLiteral("\u2026"), this);
  db_row->addWidget(db_, 1);
  db_row->addWidget(browse_db);
  form->addRow(QStringLiteral("Store"), db_row);
  name_ = new QLineEdit(this);
  name_->setPlaceholderText(QStringLiteral("optional label (empty: %1)")
                                .arg(QString::fromStdString(SweepRequest{}.name)));
  form->addRow(QStringLiteral("Name"), name_);

  // What is swept: a model measured in this process, or the user's own training script run once
  // per point in a fresh process (docs/script-sweeps.md).
  auto* source_row = new QHBoxLayout;
  use_model_ = new QRadioButton(QStringLiteral("a built-in or TorchScript model"), this);
  use_model_->setObjectName(QStringLiteral("useModel"));
  use_script_ = new QRadioButton(QStringLiteral("your training script"), this);
  use_script_->setObjectName(QStringLiteral("useScript"));
  use_script_->setToolTip(QStringLiteral(
      "each point runs the command once, in a fresh process, its settings in OFFTUNE_POINT; the "
      "offtune Python package in the script reads them and records the steps "
      "(docs/script-sweeps.md)"));
  auto* source = new QButtonGroup(this);
  source->addButton(use_model_);
  source->addButton(use_script_);
  use_model_->setChecked(true);
  source_row->addWidget(use_model_);
  source_row->addWidget(use_script_);
  source_row->addStretch(1);
  form->addRow(QStringLiteral("Sweep"), source_row);

  auto* script_row = new QHBoxLayout;
  script_ = new QLineEdit(this);
  script_->setObjectName(QStringLiteral("script"));
  script_->setPlaceholderText(QStringLiteral("python3 train.py --max-steps 8"));
  script_->setToolTip(QStringLiteral(
      "the command that runs your training (/bin/sh -c COMMAND, in the dashboard's working "
      "directory); the sweep's identity is the command and a hash of the script file it names"));
  browse_script_ = new QPushButton(QStringLiteral("Script\u2026"), this);
  browse_script_->setObjectName(QStringLiteral("browseScript"));
  timeout_ = new QLineEdit(this);
  timeout_->setObjectName(QStringLiteral("timeoutPerPoint"));
  timeout_->setPlaceholderText(QStringLiteral("no bound"));
  timeout_->setToolTip(QStringLiteral(
      "seconds a point may run; then its process group gets SIGTERM, SIGKILL 10 s later, and the "
      "point is recorded as failed (empty: no bound)"));
  timeout_->setMaximumWidth(110);
  script_row->addWidget(script_, 1);
  script_row->addWidget(browse_script_);
  script_row->addWidget(new QLabel(QStringLiteral("timeout per point (s)"), this));
  script_row->addWidget(timeout_);
  form->addRow(QStringLiteral("Script"), script_row);

  auto* model_row = new QHBoxLayout;
  model_ = combo(this, requests::model_names(), true);
  model_->setToolTip(QStringLiteral("a built-in model, or the path of a TorchScript file (.pt)"));
  browse_model_ = new QPushButton(QStringLiteral("TorchScript\u2026"), this);
  model_row->addWidget(model_, 1);
  model_row->addWidget(browse_model_);
  form->addRow(QStringLiteral("Model"), model_row);
  input_spec_ = new QLineEdit(this);
  input_spec_->setObjectName(QStringLiteral("inputSpec"));
  form->addRow(QStringLiteral("Input spec"), input_spec_);
  // Ranges, lists and starting values from the request layer: the form offers what the CLI takes.
  const SweepRequest defaults;
  batch_ = spin(this, requests::kBatchRange, static_cast<int>(defaults.workload.batch));
  seq_ = spin(this, requests::kSeqRange, static_cast<int>(defaults.workload.seq));
  dtype_ = combo(this, requests::dtype_names(), false);
  steps_ = spin(this, requests::kStepsRange, static_cast<int>(defaults.workload.steps));
  warmup_ = spin(this, requests::kWarmupRange, static_cast<int>(defaults.workload.warmup));
  seed_ = spin(this, 0, std::numeric_limits<int>::max(), 0);
  form->addRow(QStringLiteral("Batch"), batch_);
  form->addRow(QStringLiteral("Sequence length"), seq_);
  form->addRow(QStringLiteral("Dtype"), dtype_);
  form->addRow(QStringLiteral("Measured steps"), steps_);
  form->addRow(QStringLiteral("Warm-up steps"), warmup_);
  form->addRow(QStringLiteral("Seed"), seed_);
  lora_rank_ = spin(this, requests::kLoraRankRange, static_cast<int>(defaults.workload.lora_rank));
  lora_rank_->setObjectName(QStringLiteral("loraRank"));
  lora_rank_->setSpecialValueText(QStringLiteral("0 (full fine-tuning)"));
  lora_rank_->setToolTip(QStringLiteral(
      "built-in decoders: LoRA adapters of this rank, the base frozen (what layer offloading "
      "moves); 0 = every weight trains"));
  form->addRow(QStringLiteral("LoRA rank"), lora_rank_);
  backend_ = combo(this, requests::backend_names(), false);
  device_model_ = combo(this, requests::device_model_names(), true);
  device_model_->lineEdit()->setPlaceholderText(QStringLiteral("none: time as this CPU does"));
  device_model_->setToolTip(QStringLiteral(
      "host-sim: time each step as this GPU would (h100-sxm, h200, a100-80gb, l4, rtx4090, or a "
      "JSON file); empty: as this CPU does"));
  capacity_ = new QLineEdit(this);
  capacity_->setPlaceholderText(
      QStringLiteral("host-sim device memory, e.g. 2GiB (empty: unlimited)"));
  form->addRow(QStringLiteral("Backend"), backend_);
  form->addRow(QStringLiteral("Device model"), device_model_);
  form->addRow(QStringLiteral("Device capacity"), capacity_);
  // The engine's knobs, one field each from the knob table (form_knobs()), under their keys.
  auto* knobs_heading = new QLabel(
      QStringLiteral("Knobs: one value each, or a list for a sweep axis (the grid crosses every "
                     "list)"),
      this);
  knobs_heading->setWordWrap(true);
  form->addRow(knobs_heading);
  for (const Knob* k : form_knobs()) {
    const QString key = qs(k->key);
    KnobField f;
    f.knob = k;
    if (k->plain_flag()) {
      f.check = new QCheckBox(this);
      f.widget = f.check;
    } else {
      f.list = combo(this, knob_items(*k), true);
      f.list->lineEdit()->setPlaceholderText(knob_placeholder(*k));
      f.widget = f.list;
    }
    f.widget->setObjectName(key);
    f.widget->setToolTip(qs(k->help));
    form->addRow(key, f.widget);
    knob_fields_.push_back(f);
  }
  repeat_ = spin(this, requests::kRepeatRange, static_cast<int>(defaults.repeat));
  repeat_->setObjectName(QStringLiteral("repeat"));
  repeat_->setToolTip(QStringLiteral(
      "measure each point this many times, in rounds over the whole grid; a point's step time "
      "covers all its runs"));
  form->addRow(QStringLiteral("Repeat"), repeat_);
  predict_first_ =
      new QCheckBox(QStringLiteral("predict every point, measure only those that matter"), this);
  predict_first_->setObjectName(QStringLiteral("predictFirst"));
  predict_first_->setToolTip(QStringLiteral(
      "replay a recorded step for every point (host-sim: on the device model's clock, or on this "
      "CPU's), then measure the baseline, the predicted front and its neighbours"));
  form->addRow(QStringLiteral("Predict first"), predict_first_);
  points_ = new QLabel(this);
  points_->setObjectName(QStringLiteral("points"));
  // A long error wraps inside the form instead of widening the window past the screen.
  points_->setWordWrap(true);
  points_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  points_->setMinimumWidth(100);
  // Below the scrolling fields: the count (or what is wrong) stays in view as the grid is typed.
  auto* points_row = new QHBoxLayout;
  points_row->addWidget(new QLabel(QStringLiteral("Points"), this));
  points_row->addWidget(points_, 1);
  outer->addLayout(points_row);

  // Each field by the CLI flag it stands for; those a script sweep refuses are disabled in script
  // mode. The rule's one home is the request layer (script_refused_flags(), checked by check()).
  std::vector<std::pair<std::string, QWidget*>> flags = {
      {"--name", name_},
      {"--model", model_},
      {"--model", browse_model_},
      {"--input-spec", input_spec_},
      {"--batch", batch_},
      {"--seq", seq_},
      {"--dtype", dtype_},
      {"--steps", steps_},
      {"--warmup", warmup_},
      {"--seed", seed_},
      {"--lora-rank", lora_rank_},
      {"--backend", backend_},
      {"--device-model", device_model_},
      {"--device-capacity", capacity_},
      {"--repeat", repeat_},
      {"--predict-first", predict_first_},
      {"--script", script_},
      {"--script", browse_script_},
      {"--timeout-per-point", timeout_},
  };
  for (const KnobField& f : knob_fields_) flags.emplace_back(std::string(f.knob->flag), f.widget);
  const auto refused = requests::script_refused_flags();
  for (const auto& [flag, widget] : flags) {
    widget->setProperty("flag", QString::fromStdString(flag));
    if (std::find(refused.begin(), refused.end(), flag) != refused.end()) {
      refused_for_script_.push_back(widget);
    }
  }

  auto* buttons = new QHBoxLayout;
  run_ = new QPushButton(QStringLiteral("Run sweep"), this);
  run_->setDefault(true);
  cancel_ = new QPushButton(QStringLiteral("Cancel"), this);
  buttons->addWidget(run_);
  buttons->addWidget(cancel_);
  buttons->addStretch(1);
  outer->addLayout(buttons);
  progress_ = new QProgressBar(this);
  outer->addWidget(progress_);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("status"));
  status_->setWordWrap(true);
  status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(status_);

  setRequest(SweepRequest{});
  setRunning(false);

  for (QLineEdit* e : {db_, capacity_, input_spec_, script_, timeout_}) {
    connect(e, &QLineEdit::textChanged, this, &SweepForm::updatePointCount);
  }
  connect(model_, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  connect(device_model_, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  for (const KnobField& f : knob_fields_) {
    if (f.list != nullptr) {
      connect(f.list, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
    } else {
      connect(f.check, &QCheckBox::toggled, this, &SweepForm::updatePointCount);
    }
  }
  connect(lora_rank_, &QSpinBox::valueChanged, this, &SweepForm::updatePointCount);
  connect(predict_first_, &QCheckBox::toggled, this, &SweepForm::updatePointCount);
  connect(use_script_, &QRadioButton::toggled, this, &SweepForm::updatePointCount);
  connect(browse_db, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, QStringLiteral("Store"), db_->text(),
                                     QStringLiteral("offtune store (*.db);;All files (*)"), nullptr,
                                     QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) db_->setText(path);
  });
  connect(browse_model_, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, QStringLiteral("TorchScript model"), QString(),
                                     QStringLiteral("TorchScript (*.pt *.pth);;All files (*)"));
    if (!path.isEmpty()) model_->setEditText(path);
  });
  connect(browse_script_, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, QStringLiteral("Training script"), QString(),
                                     QStringLiteral("Python (*.py);;Shell (*.sh);;All files (*)"));
    // The command that runs it; the user adds the script's own arguments after it.
    if (!path.isEmpty()) script_->setText(command_for(path));
  });
  connect(run_, &QPushButton::clicked, this, &SweepForm::startSweep);
  connect(cancel_, &QPushButton::clicked, this, &SweepForm::cancelSweep);
  tick_ = new QTimer(this);
  tick_->setInterval(1000);
  connect(tick_, &QTimer::timeout, this, &SweepForm::refreshRunningStatus);
  connect(runner_, &SweepRunner::progress, this, [this](qint64 done, qint64 total) {
    done_ = done;
    total_ = total;
    progress_->setRange(0, static_cast<int>(total));
    progress_->setValue(static_cast<int>(done));
    progress_->setFormat(QStringLiteral("%1/%2 measured").arg(done).arg(total));
    // Cancelling stays said until the sweep ends (before: the next count replaced it).
    if (done != reported_done_) point_clock_.restart();  // the next point starts now
    reported_done_ = done;
    if (!cancelling_)
      showRunningStatus(QStringLiteral("%1/%2 measured\u2026").arg(done).arg(total));
  });
  connect(runner_, &SweepRunner::pointFinished, this, &SweepForm::pointFinished);
  connect(runner_, &SweepRunner::notice, this, [this](const QString& message) {
    if (done_ < 0) showRunningStatus(message);  // until the first point reports
  });
  connect(runner_, &SweepRunner::finished, this,
          [this](bool ok, bool interrupted, const QString& message) {
            tick_->stop();
            point_clock_.invalidate();
            setRunning(false);
            cancelling_ = false;
            outcome_shown_ = true;
            // Ended (or cancelled): the count as the tree and the heading give it, then the
            // outcome.
            const QString count =
                total_ >= 0 ? QStringLiteral("%1/%2 measured. ").arg(done_).arg(total_) : QString();
            status_->setText(ok || interrupted ? count + message
                                               : QStringLiteral("error: %1").arg(message));
            Q_EMIT sweepFinished(ok, interrupted, message);
          });
}

SweepForm::~SweepForm() {
  tick_->stop();
  delete runner_;  // joins the sweep thread while this form can still receive its signals
  runner_ = nullptr;
}

void SweepForm::setStorePath(const QString& path) {
  if (runner_->running()) return;
  // Another store opened: the last sweep's progress and outcome ("5/5 measured. ...") were about
  // the store before, and go.
  if (path != db_->text()) {
    done_ = total_ = -1;
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setFormat(QStringLiteral("%p%"));
    status_->clear();
  }
  db_->setText(path);
}

bool SweepForm::scriptMode() const { return use_script_->isChecked(); }

void SweepForm::setScriptMode(bool script) {
  (script ? use_script_ : use_model_)->setChecked(true);
}

bool SweepForm::applies(const QWidget* field) const {
  return !scriptMode() || std::find(refused_for_script_.begin(), refused_for_script_.end(),
                                    field) == refused_for_script_.end();
}

SweepRequest SweepForm::request() const {
  // The defaults, then each field that applies: a field a script sweep refuses keeps its default
  // (what the CLI sends without the flag), whatever the disabled widget still holds.
  SweepRequest r;
  r.db = text_of(db_);
  r.name = text_of(name_);
  if (r.name.empty()) r.name = SweepRequest{}.name;  // the placeholder's promise
  if (scriptMode()) {
    r.script = text_of(script_);
    // An empty command would be a sweep of the model to the request layer: a blank one gets the
    // request layer's own refusal ("--script takes the command that runs your training ...").
    if (r.script.empty()) r.script = " ";
    r.timeout_per_point = text_of(timeout_);
  }
  if (applies(model_)) r.workload.model = text_of(model_);
  if (applies(batch_)) r.workload.batch = batch_->value();
  if (applies(seq_)) r.workload.seq = seq_->value();
  if (applies(dtype_)) r.workload.dtype = text_of(dtype_);
  if (applies(seed_)) r.workload.seed = static_cast<uint64_t>(seed_->value());
  if (applies(steps_)) r.workload.steps = steps_->value();
  if (applies(warmup_)) r.workload.warmup = warmup_->value();
  // A built-in model takes no input spec (the field is disabled): send the default, as the CLI
  // does when --input-spec is not given.
  if (applies(input_spec_) && input_spec_->isEnabled()) {
    r.workload.input_spec = text_of(input_spec_);
  }
  r.backend.backend = text_of(backend_);
  r.backend.device_model = text_of(device_model_);
  if (applies(capacity_)) r.backend.device_capacity = text_of(capacity_);
  if (applies(lora_rank_)) r.workload.lora_rank = lora_rank_->value();
  for (const KnobField& f : knob_fields_) {
    if (!applies(f.widget)) continue;  // the knob's default text (SweepRequest::knob_text)
    r.knobs[std::string(f.knob->key)] =
        f.check != nullptr ? plain_text(f.check->isChecked(), f.knob->kind) : text_of(f.list);
  }
  r.repeat = repeat_->value();
  if (applies(predict_first_)) r.predict_first = predict_first_->isChecked();
  return r;
}

void SweepForm::setRequest(const SweepRequest& r) {
  db_->setText(QString::fromStdString(r.db));
  name_->setText(QString::fromStdString(r.name));
  setScriptMode(!r.script.empty());
  script_->setText(QString::fromStdString(r.script));
  timeout_->setText(QString::fromStdString(r.timeout_per_point));
  set_text(model_, r.workload.model);
  batch_->setValue(static_cast<int>(r.workload.batch));
  seq_->setValue(static_cast<int>(r.workload.seq));
  set_text(dtype_, r.workload.dtype);
  seed_->setValue(static_cast<int>(r.workload.seed));
  steps_->setValue(static_cast<int>(r.workload.steps));
  warmup_->setValue(static_cast<int>(r.workload.warmup));
  input_spec_->setText(QString::fromStdString(r.workload.input_spec));
  set_text(backend_, r.backend.backend);
  set_text(device_model_, r.backend.device_model);
  lora_rank_->setValue(static_cast<int>(r.workload.lora_rank));
  for (const KnobField& f : knob_fields_) {
    const std::string text = r.knob_text(f.knob->key);
    if (f.check != nullptr) {
      f.check->setChecked(text == plain_text(true, f.knob->kind));
    } else {
      set_text(f.list, text);
    }
  }
  repeat_->setValue(static_cast<int>(r.repeat));
  predict_first_->setChecked(r.predict_first);
  capacity_->setText(QString::fromStdString(r.backend.device_capacity));
  updatePointCount();
}

void SweepForm::updatePointCount() {
  // The last sweep's progress and outcome are about the request it ran: once a field changes,
  // the bar is empty again and the outcome is named as the last sweep's (before: it stayed as if
  // about the request on screen).
  if (!runner_->running() && outcome_shown_) {
    outcome_shown_ = false;
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setFormat(QStringLiteral("%p%"));
    if (!status_->text().isEmpty() && !status_->text().startsWith(QStringLiteral("error: "))) {
      status_->setText(QStringLiteral("Last sweep: %1").arg(status_->text()));
    }
  }
  // Script mode: the script's fields instead of those the request refuses for a script (each
  // keeps what it holds, for a switch back).
  const bool script = scriptMode();
  for (QWidget* w : refused_for_script_) w->setEnabled(!script);
  script_->setEnabled(script);
  browse_script_->setEnabled(script);
  timeout_->setEnabled(script);
  // The input spec belongs to a TorchScript model; a built-in model has its own input, so the
  // field is shown (with the default it would get) but not editable.
  const auto builtin = requests::model_names();
  const bool torchscript =
      std::find(builtin.begin(), builtin.end(), text_of(model_)) == builtin.end();
  input_spec_->setEnabled(torchscript && applies(input_spec_));
  input_spec_->setToolTip(
      torchscript
          ? QStringLiteral("input of the TorchScript model: NAME:int64[B,T]:vocab=V or "
                           "NAME:float32[B,N], e.g. x:float32[B,64]")
          : QStringLiteral("only for a TorchScript model (.pt): a built-in model makes its own "
                           "input"));
  try {
    SweepRequest r = request();
    if (r.db.empty()) r.db = "-";  // the count does not depend on the store
    points_->setText(QStringLiteral("%1 (baseline included)").arg(validate_sweep_request(r)));
    // An error of an earlier Run sweep is about input that is fixed now.
    if (!runner_->running() && status_->text().startsWith(QStringLiteral("error: "))) {
      status_->clear();
    }
  } catch (const std::exception& e) {
    points_->setText(QStringLiteral("invalid: %1").arg(QString::fromStdString(e.what())));
    // An error of an earlier Run sweep may be about a field fixed since: the status says what is
    // wrong now (the first bad field), not what was.
    if (!runner_->running() && status_->text().startsWith(QStringLiteral("error: "))) {
      status_->setText(QStringLiteral("error: %1").arg(QString::fromStdString(e.what())));
    }
  }
}

bool SweepForm::startSweep() {
  QString error;
  const SweepRequest r = request();
  if (!runner_->start(r, &error)) {
    status_->setText(QStringLiteral("error: %1").arg(error));
    return false;
  }
  setRunning(true);
  cancelling_ = false;
  outcome_shown_ = false;
  running_script_ = !r.script.empty();
  done_ = total_ = -1;
  progress_->setRange(0, 0);  // busy until the first point reports the total
  reported_done_ = -1;
  point_clock_.start();
  tick_->start();
  showRunningStatus(r.script.empty() ? QStringLiteral("Preparing the workload\u2026")
                                     : QStringLiteral("Starting the script\u2026"));
  Q_EMIT sweepStarted(QString::fromStdString(r.db));
  return true;
}

void SweepForm::cancelSweep() {
  if (!runner_->running()) return;
  runner_->cancel();
  cancelling_ = true;
  // A script's point is stopped with its process group (SIGTERM, then SIGKILL) and measured again
  // on resume; a model's point in this process runs to its end.
  status_->setText(running_script_
                       ? QStringLiteral("Cancelling: stopping the script's process group\u2026")
                       : QStringLiteral("Cancelling after the point in progress\u2026"));
}

void SweepForm::showRunningStatus(const QString& base) {
  base_status_ = base;
  refreshRunningStatus();
}

void SweepForm::refreshRunningStatus() {
  if (cancelling_ || runner_ == nullptr || !runner_->running()) return;
  QString text = base_status_;
  // From the first whole second: a point of a few milliseconds does not flicker a time.
  if (point_clock_.isValid() && point_clock_.elapsed() >= 1000) {
    const qint64 s = point_clock_.elapsed() / 1000;
    text += QStringLiteral(" \u00b7 point in progress for %1:%2")
                .arg(s / 60)
                .arg(s % 60, 2, 10, QLatin1Char('0'));
  }
  status_->setText(text);
}

void SweepForm::setRunning(bool running) {
  run_->setEnabled(!running);
  cancel_->setEnabled(running);
  if (!running && progress_->maximum() == 0) progress_->setRange(0, 1);
}

}  // namespace offtune::gui
