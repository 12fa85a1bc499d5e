#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <limits>

#include "offtune/gui/sweep_form.hpp"

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

}  // namespace

SweepForm::SweepForm(QWidget* parent) : QWidget(parent), runner_(new SweepRunner(this)) {
  auto* outer = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  outer->addLayout(form);

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

  auto* model_row = new QHBoxLayout;
  model_ = combo(this, requests::model_names(), true);
  model_->setToolTip(QStringLiteral("a built-in model, or the path of a TorchScript file (.pt)"));
  auto* browse_model = new QPushButton(QStringLiteral("TorchScript\u2026"), this);
  model_row->addWidget(model_, 1);
  model_row->addWidget(browse_model);
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
  link_ = combo(this, requests::link_names(), true);
  link_->setToolTip(
      QStringLiteral("host-sim link model: pcie4, pcie5, nvlink-c2c, none, or GBPS:LATENCY_US"));
  device_model_ = combo(this, requests::device_model_names(), true);
  device_model_->lineEdit()->setPlaceholderText(QStringLiteral("none: time as this CPU does"));
  device_model_->setToolTip(QStringLiteral(
      "host-sim: time each step as this GPU would (h100-sxm, h200, a100-80gb, l4, rtx4090, or a "
      "JSON file); empty: as this CPU does"));
  capacity_ = new QLineEdit(this);
  capacity_->setPlaceholderText(
      QStringLiteral("host-sim device memory, e.g. 2GiB (empty: unlimited)"));
  form->addRow(QStringLiteral("Backend"), backend_);
  form->addRow(QStringLiteral("Link"), link_);
  form->addRow(QStringLiteral("Device model"), device_model_);
  form->addRow(QStringLiteral("Device capacity"), capacity_);
  sizes_ = new QLineEdit(this);
  sizes_->setToolTip(QStringLiteral("sizes and ranges, e.g. 1KiB,1MiB or 1KiB:64MiB:x4"));
  windows_ = new QLineEdit(this);
  windows_->setToolTip(QStringLiteral("integers and ranges, e.g. 1,2,5 or 1:8"));
  form->addRow(QStringLiteral("min_offload_size"), sizes_);
  form->addRow(QStringLiteral("max_fwd_stash_size"), windows_);
  semantics_ = combo(this, {"offtune", "trl", "trl,offtune"}, true);
  semantics_->setToolTip(QStringLiteral(
      "whose rules the engine follows: offtune, trl (what TRL's knobs mean), or both as an axis"));
  form->addRow(QStringLiteral("Semantics"), semantics_);
  checkpoint_ = combo(this, {"none", "all", "every:2", "none,all"}, true);
  checkpoint_->setObjectName(QStringLiteral("checkpoint"));
  checkpoint_->setToolTip(QStringLiteral(
      "gradient checkpointing of the model's blocks: none, all, every:K, or a list as an axis"));
  form->addRow(QStringLiteral("Checkpointing"), checkpoint_);
  offload_set_ = combo(this, {"all", "boundaries", "all,boundaries"}, true);
  offload_set_->setObjectName(QStringLiteral("offload_set"));
  offload_set_->setToolTip(QStringLiteral(
      "what may be offloaded: all, or boundaries (checkpointed blocks' inputs only; needs "
      "checkpointing), or both as an axis"));
  form->addRow(QStringLiteral("Offload"), offload_set_);
  tier_ = combo(this, {"host", "disk", "auto", "host,disk"}, true);
  tier_->setObjectName(QStringLiteral("tier"));
  tier_->setToolTip(QStringLiteral(
      "where offloaded copies live: host memory, disk, auto (host, spilling to disk), or a list"));
  form->addRow(QStringLiteral("Tier"), tier_);
  layer_offload_ = combo(this, {"off", "on:1", "on:2", "off,on:1"}, true);
  layer_offload_->setObjectName(QStringLiteral("layer_offload"));
  layer_offload_->setToolTip(QStringLiteral(
      "layer offloading of the blocks' frozen weights (needs a LoRA rank): off, on:DEPTH (blocks "
      "copied ahead), or a list as an axis"));
  form->addRow(QStringLiteral("Layer offload"), layer_offload_);
  prefetch_ = spin(this, 0, static_cast<int>(requests::kMaxPrefetch),
                   static_cast<int>(defaults.engine.prefetch));
  prefetch_->setObjectName(QStringLiteral("prefetch"));
  prefetch_->setToolTip(QStringLiteral("backward reloads ahead of use, every point alike"));
  form->addRow(QStringLiteral("Prefetch"), prefetch_);
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
      "replay one recorded step for every point, then measure the baseline, the predicted front "
      "and its neighbours (needs a device model)"));
  form->addRow(QStringLiteral("Predict first"), predict_first_);
  points_ = new QLabel(this);
  points_->setObjectName(QStringLiteral("points"));
  // A long error wraps inside the form instead of widening the window past the screen.
  points_->setWordWrap(true);
  points_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  points_->setMinimumWidth(100);
  form->addRow(QStringLiteral("Points"), points_);

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
  outer->addStretch(1);

  setRequest(SweepRequest{});
  setRunning(false);

  for (QLineEdit* e : {db_, sizes_, windows_, capacity_, input_spec_}) {
    connect(e, &QLineEdit::textChanged, this, &SweepForm::updatePointCount);
  }
  connect(model_, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  connect(link_, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  connect(device_model_, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  for (QComboBox* c : {semantics_, checkpoint_, offload_set_, tier_, layer_offload_}) {
    connect(c, &QComboBox::currentTextChanged, this, &SweepForm::updatePointCount);
  }
  connect(lora_rank_, &QSpinBox::valueChanged, this, &SweepForm::updatePointCount);
  connect(predict_first_, &QCheckBox::toggled, this, &SweepForm::updatePointCount);
  connect(browse_db, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, QStringLiteral("Store"), db_->text(),
                                     QStringLiteral("offtune store (*.db);;All files (*)"), nullptr,
                                     QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) db_->setText(path);
  });
  connect(browse_model, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, QStringLiteral("TorchScript model"), QString(),
                                     QStringLiteral("TorchScript (*.pt *.pth);;All files (*)"));
    if (!path.isEmpty()) model_->setEditText(path);
  });
  connect(run_, &QPushButton::clicked, this, &SweepForm::startSweep);
  connect(cancel_, &QPushButton::clicked, this, &SweepForm::cancelSweep);
  connect(runner_, &SweepRunner::progress, this, [this](qint64 done, qint64 total) {
    done_ = done;
    total_ = total;
    progress_->setRange(0, static_cast<int>(total));
    progress_->setValue(static_cast<int>(done));
    progress_->setFormat(QStringLiteral("%1/%2 measured").arg(done).arg(total));
    status_->setText(QStringLiteral("%1/%2 measured\u2026").arg(done).arg(total));
  });
  connect(runner_, &SweepRunner::pointFinished, this, &SweepForm::pointFinished);
  connect(runner_, &SweepRunner::finished, this,
          [this](bool ok, bool interrupted, const QString& message) {
            setRunning(false);
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
  delete runner_;  // joins the sweep thread while this form can still receive its signals
  runner_ = nullptr;
}

void SweepForm::setStorePath(const QString& path) {
  if (!runner_->running()) db_->setText(path);
}

SweepRequest SweepForm::request() const {
  SweepRequest r;
  r.db = text_of(db_);
  r.name = text_of(name_);
  if (r.name.empty()) r.name = SweepRequest{}.name;  // the placeholder's promise
  r.workload.model = text_of(model_);
  r.workload.batch = batch_->value();
  r.workload.seq = seq_->value();
  r.workload.dtype = text_of(dtype_);
  r.workload.seed = static_cast<uint64_t>(seed_->value());
  r.workload.steps = steps_->value();
  r.workload.warmup = warmup_->value();
  // A built-in model takes no input spec (the field is disabled): send the default, as the CLI
  // does when --input-spec is not given.
  r.workload.input_spec =
      input_spec_->isEnabled() ? text_of(input_spec_) : std::string(requests::kDefaultInputSpec);
  r.min_offload_sizes = text_of(sizes_);
  r.max_fwd_stash_sizes = text_of(windows_);
  r.backend.backend = text_of(backend_);
  r.backend.link = text_of(link_);
  r.backend.device_model = text_of(device_model_);
  r.engine.semantics = text_of(semantics_);
  r.engine.checkpoint = text_of(checkpoint_);
  r.engine.offload_set = text_of(offload_set_);
  r.engine.tier = text_of(tier_);
  r.engine.layer_offload = text_of(layer_offload_);
  r.workload.lora_rank = lora_rank_->value();
  r.engine.prefetch = prefetch_->value();
  r.repeat = repeat_->value();
  r.predict_first = predict_first_->isChecked();
  r.backend.device_capacity = text_of(capacity_);
  return r;
}

void SweepForm::setRequest(const SweepRequest& r) {
  db_->setText(QString::fromStdString(r.db));
  name_->setText(QString::fromStdString(r.name));
  set_text(model_, r.workload.model);
  batch_->setValue(static_cast<int>(r.workload.batch));
  seq_->setValue(static_cast<int>(r.workload.seq));
  set_text(dtype_, r.workload.dtype);
  seed_->setValue(static_cast<int>(r.workload.seed));
  steps_->setValue(static_cast<int>(r.workload.steps));
  warmup_->setValue(static_cast<int>(r.workload.warmup));
  input_spec_->setText(QString::fromStdString(r.workload.input_spec));
  sizes_->setText(QString::fromStdString(r.min_offload_sizes));
  windows_->setText(QString::fromStdString(r.max_fwd_stash_sizes));
  set_text(backend_, r.backend.backend);
  set_text(link_, r.backend.link);
  set_text(device_model_, r.backend.device_model);
  set_text(semantics_, r.engine.semantics);
  set_text(checkpoint_, r.engine.checkpoint);
  set_text(offload_set_, r.engine.offload_set);
  set_text(tier_, r.engine.tier);
  set_text(layer_offload_, r.engine.layer_offload);
  lora_rank_->setValue(static_cast<int>(r.workload.lora_rank));
  prefetch_->setValue(static_cast<int>(r.engine.prefetch));
  repeat_->setValue(static_cast<int>(r.repeat));
  predict_first_->setChecked(r.predict_first);
  capacity_->setText(QString::fromStdString(r.backend.device_capacity));
  updatePointCount();
}

void SweepForm::updatePointCount() {
  // The input spec belongs to a TorchScript model; a built-in model has its own input, so the
  // field is shown (with the default it would get) but not editable.
  const auto builtin = requests::model_names();
  const bool torchscript =
      std::find(builtin.begin(), builtin.end(), text_of(model_)) == builtin.end();
  input_spec_->setEnabled(torchscript);
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
  done_ = total_ = -1;
  progress_->setRange(0, 0);  // busy until the first point reports the total
  status_->setText(QStringLiteral("Preparing the workload\u2026"));
  Q_EMIT sweepStarted(QString::fromStdString(r.db));
  return true;
}

void SweepForm::cancelSweep() {
  if (!runner_->running()) return;
  runner_->cancel();
  status_->setText(QStringLiteral("Cancelling after the point in progress\u2026"));
}

void SweepForm::setRunning(bool running) {
  run_->setEnabled(!running);
  cancel_->setEnabled(running);
  if (!running && progress_->maximum() == 0) progress_->setRange(0, 1);
}

}  // namespace offtune::gui
