// Running a sweep from the dashboard: SweepRunner runs offtune's sweep (the same code, store layout
// and resume key as `offtune sweep`) on a worker thread and reports each measured point by a
// queued signal; SweepForm is the form for the workload and the grid, with progress and cancel.
// The workload is a built-in model (or a TorchScript file) measured in this process, or the user's
// own training script, run once per point in a fresh process (profiler/script_point.hpp).
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QWidget>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "offtune/knobs.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/requests/request.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QTimer;
class QPushButton;
class QRadioButton;
class QSpinBox;
class QCheckBox;

namespace offtune::gui {

// What to sweep: the request layer's, with the CLI's defaults and checks (offtune/requests).
using SweepRequest = requests::SweepRequest;

// Checks what can be checked without running (requests::check(), and that a store is chosen);
// returns the number of points including the baseline, or throws std::invalid_argument with the
// first bad field's message (requests::RequestError has them all).
int64_t validate_sweep_request(const SweepRequest& request);

// Runs one sweep at a time on its own thread. Signals are emitted from that thread and reach
// receivers on the GUI thread queued. Destroying the runner cancels the sweep and waits for the
// point in progress to finish, so that the store is never left with a half-written point.
class SweepRunner : public QObject {
  Q_OBJECT

 public:
  explicit SweepRunner(QObject* parent = nullptr);
  ~SweepRunner() override;

  // Starts the sweep; false (with *error set) for an invalid request or when one is running.
  bool start(const SweepRequest& request, QString* error = nullptr);
  // Stops after the point in progress (a script's point is stopped at once, its process group sent
  // SIGTERM, then SIGKILL after a grace period, and left pending); finished() follows with
  // interrupted set.
  void cancel();
  bool running() const { return running_.load(); }

 Q_SIGNALS:
  void progress(qint64 done, qint64 total);
  void pointFinished(const offtune::profiler::PointRecord& point);
  // What the user should know before the points run (a script sweep's identity: a changed script
  // starts a new sweep; a command that names no file is its own identity). One line.
  void notice(const QString& message);
  // ok: the sweep ran to its end (points may have failed, in band). interrupted: cancelled; the
  // same request resumes it. message: one line for the status bar.
  void finished(bool ok, bool interrupted, const QString& message);

 private:
  // Runs the request start() checked: nothing is checked or read again on the thread.
  void work(requests::ValidSweep request);

  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> cancel_{false};
};

class SweepForm : public QWidget {
  Q_OBJECT

 public:
  explicit SweepForm(QWidget* parent = nullptr);
  ~SweepForm() override;  // stops the sweep (after its current point) before the widgets go

  void setStorePath(const QString& path);
  SweepRequest request() const;
  void setRequest(const SweepRequest& request);
  SweepRunner* runner() const { return runner_; }
  // Whether the form sweeps the user's training script (a command line run once per point) rather
  // than a model. In script mode the fields that a script sweep refuses
  // (requests::script_refused_flags()) are disabled and request() sends their defaults; in model
  // mode the script's fields are disabled and sent empty.
  bool scriptMode() const;
  void setScriptMode(bool script);

  // Validates the form and starts the sweep; false with the error shown in the form otherwise.
  bool startSweep();
  void cancelSweep();

 Q_SIGNALS:
  void sweepStarted(const QString& store_path);
  void pointFinished(const offtune::profiler::PointRecord& point);
  void sweepFinished(bool ok, bool interrupted, const QString& message);

 private:
  void updatePointCount();
  void setRunning(bool running);
  // Whether a field's value goes into the request: not when a script sweep refuses its flag.
  bool applies(const QWidget* field) const;

  SweepRunner* runner_ = nullptr;
  QLineEdit* db_ = nullptr;
  QLineEdit* name_ = nullptr;
  QRadioButton* use_model_ = nullptr;
  QRadioButton* use_script_ = nullptr;
  QLineEdit* script_ = nullptr;
  QPushButton* browse_script_ = nullptr;
  QLineEdit* timeout_ = nullptr;
  QComboBox* model_ = nullptr;
  QPushButton* browse_model_ = nullptr;
  QLineEdit* input_spec_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QSpinBox* seq_ = nullptr;
  QComboBox* dtype_ = nullptr;
  QSpinBox* steps_ = nullptr;
  QSpinBox* warmup_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QComboBox* backend_ = nullptr;
  QComboBox* device_model_ = nullptr;
  QSpinBox* lora_rank_ = nullptr;
  // One field per knob with a CLI flag (offtune/knobs.hpp), the grid's pair first, then the
  // table's order, each named by the knob's key and holding its flag in the property "flag": an
  // editable list taking what the flag takes (a value, or for a sweep axis a list), or a check box
  // for a plain flag (--verify). request() writes each into SweepRequest::knobs by key.
  struct KnobField {
    const Knob* knob = nullptr;
    QWidget* widget = nullptr;
    QComboBox* list = nullptr;  // or
    QCheckBox* check = nullptr;
  };
  std::vector<KnobField> knob_fields_;
  QSpinBox* repeat_ = nullptr;
  QCheckBox* predict_first_ = nullptr;
  QLineEdit* capacity_ = nullptr;
  QLabel* points_ = nullptr;
  QPushButton* run_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  // The fields a script sweep refuses (their CLI flag in script_refused_flags()), each widget with
  // its flag in the property "flag".
  std::vector<QWidget*> refused_for_script_;
  // The last progress of the sweep running or just ended: points of its grid finished / total,
  // the count the tree and the sweep heading show (sweep_counts) while the sweep fills the store.
  qint64 done_ = -1, total_ = -1;
  qint64 reported_done_ = -1;    // the count the point clock last restarted at
  bool running_script_ = false;  // the sweep running or just ended sweeps a script
  bool cancelling_ = false;      // cancelled, not yet ended: the status says so until it ends
  bool outcome_shown_ = false;   // the progress and status show how the last sweep ended
  // How long the point in progress has run: said in the status each second while a sweep runs
  // (issue 43: a script point of minutes showed nothing moving).
  QTimer* tick_ = nullptr;
  QElapsedTimer point_clock_;
  QString base_status_;  // the status without the point's time
  void showRunningStatus(const QString& base);
  void refreshRunningStatus();
};

}  // namespace offtune::gui

Q_DECLARE_METATYPE(offtune::profiler::PointRecord)
