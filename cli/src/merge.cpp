// `offtune merge`: sharded stores into one.
#include <iostream>

#include "cli.hpp"

namespace offtune::cli {
namespace {

class MergeCommand final : public StoreCommand {
 public:
  explicit MergeCommand(CLI::App& parent)
      : StoreCommand(parent, "merge", "merge sharded stores into --db", StoreUse::Writes) {
    app_->add_option("inputs", inputs_, "stores to merge")->required()->check(CLI::ExistingFile);
  }

  int run() override {
    if (inputs_.empty()) throw UsageError("merge needs input stores");
    // Every input is opened (and refused if it is not a store) before the target is created.
    std::vector<std::unique_ptr<pf::Store>> sources;
    for (const auto& in : inputs_) sources.push_back(pf::open_sqlite_store_readonly(in));
    auto dst = open_store(common_, /*write=*/true);
    int64_t copied = 0;
    for (auto& src : sources) copied += pf::merge_stores(*dst, *src);
    if (!common_.quiet) std::cout << "merged " << copied << " point(s) into " << common_.db << "\n";
    return kOk;
  }

 private:
  std::vector<std::string> inputs_;
};

}  // namespace

std::unique_ptr<Command> add_merge_command(CLI::App& app) {
  return std::make_unique<MergeCommand>(app);
}

}  // namespace offtune::cli
