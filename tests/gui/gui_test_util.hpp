// Helpers shared by the GUI suites: the fixture store (copied to a temporary directory, so the
// source tree is never written), and a check that an image is not blank.
#pragma once

#include <QDir>
#include <QFile>
#include <QImage>
#include <QSet>
#include <QTemporaryDir>
#include <string>

namespace offtune::gui::test {

// A copy of tests/data/gui/fixture.db in `dir`; see tests/data/gui/README.md for what it holds.
inline std::string fixture_copy(const QTemporaryDir& dir, const QString& name = "fixture.db") {
  const QString src = QStringLiteral(OFFTUNE_TEST_DATA_DIR "/gui/fixture.db");
  const QString dst = dir.filePath(name);
  QFile::remove(dst);
  if (!QFile::copy(src, dst)) return {};
  QFile::setPermissions(dst, QFile::ReadOwner | QFile::WriteOwner);
  return dst.toStdString();
}

// The number of distinct colours in the image: a blank or single-colour render has 1 or 2, a
// rendered chart or table dozens to thousands (antialiasing, text).
inline int distinct_colors(const QImage& image) {
  const QImage img = image.convertToFormat(QImage::Format_ARGB32);
  QSet<QRgb> colors;
  for (int y = 0; y < img.height(); y += 2) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); x += 2) colors.insert(line[x]);
  }
  return static_cast<int>(colors.size());
}

}  // namespace offtune::gui::test
