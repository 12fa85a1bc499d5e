// The store file itself, before and after SQLite has it open: what a file is before it is trusted
// (a missing, empty or SQLite file; then, through a connection that cannot write it, whether it is
// intact and an offtune store of a readable version), creating a new store file so that a failed
// open knows it is its own to remove, and folding away the empty -wal/-shm files that read-only
// connections leave behind.
#pragma once

#include <string>

#include "sqlite_schema.hpp"

namespace offtune::profiler::detail {

enum class FileState { Missing, Empty, Sqlite };

// Looks at the file itself before SQLite does: SQLite would happily treat some non-database files
// (e.g. an empty-looking one) as new databases and write to them.
FileState probe_file(const std::string& path);

// Checks an existing SQLite file (quick_check, then read_identity) without writing it or leaving
// side files where there were none.
Identity inspect_existing(const std::string& path, bool writable);

// Creates the store file, so that a failure later knows the file is this open's to remove: SQLite
// would create it as well, but would not say whether it did. false: it appeared meanwhile (another
// process is creating the same store), and is not ours.
bool create_store_file(const std::string& path);

// Removes a store file this process created and could not finish, with its side files, unless
// another process has meanwhile made it its own.
void remove_unfinished_store(const std::string& path) noexcept;

// Whether the store's -wal holds frames: a writer's (live, or crashed), never folded away.
bool wal_has_frames(const std::string& path);

// Folds away an empty -wal and the -shm beside it when no other connection has the store open.
void fold_side_files(const std::string& path) noexcept;

}  // namespace offtune::profiler::detail
