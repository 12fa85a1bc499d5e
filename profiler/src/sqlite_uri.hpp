// SQLite file URIs, shared by the store (sqlite_store.cpp) and the exporters that look into a file
// before replacing it (export_csv.cpp).
#pragma once

#include <string>

namespace offtune::profiler::detail {

// Percent-encodes a file name into an SQLite URI, so that any name (with '?', '#', '%') opens as
// itself and query parameters (immutable, mode) can be added. Open it with SQLITE_OPEN_URI.
std::string file_uri(const std::string& path);

}  // namespace offtune::profiler::detail
