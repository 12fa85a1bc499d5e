// main() of the GUI suites: one QApplication for the whole process (widgets need it), on the
// offscreen platform unless the environment chose another, with settings (recent files) kept in
// Qt's test locations instead of the user's. A child process a test started (child_process.hpp)
// runs its role instead, without Qt.
#include <gtest/gtest.h>

#include <QApplication>
#include <QStandardPaths>

#include "child_process.hpp"
#include "suite_exit.hpp"

int main(int argc, char** argv) {
  if (const int code = offtune::test::run_child_role_if_asked(argc, argv); code >= 0) return code;
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QStandardPaths::setTestModeEnabled(true);
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("offtune-tests"));
  QApplication::setApplicationName(QStringLiteral("offtune-gui-tests"));
  ::testing::InitGoogleTest(&argc, argv);
  return offtune::test::suite_exit(RUN_ALL_TESTS());
}
