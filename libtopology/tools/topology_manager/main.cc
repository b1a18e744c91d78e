// topology-manager: the kubelet's topology manager, outside the kubelet.
//   topology-manager merge [CASE.json] [--engine fast|reference] [--explain]
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>

#include "merge_case.h"

namespace {

int RunMerge(const std::string& file, const std::string& engine, bool explain) {
  std::string text;
  if (file.empty() || file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(file);
    if (!in) {
      std::cerr << "topology-manager merge: cannot read " << file << "\n";
      return 2;
    }
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    std::cerr << "topology-manager merge: input: not valid JSON\n";
    return 2;
  }
  auto merge_case = topology::tools::ParseMergeCase(doc);
  if (!merge_case.ok()) {
    std::cerr << "topology-manager merge: " << merge_case.status().message()
              << "\n";
    return 2;
  }
  auto result = topology::tools::RunMergeCase(
      *merge_case,
      engine == "reference" ? topology::manager::MergeEngine::kReference
                            : topology::manager::MergeEngine::kFast,
      explain);
  if (!result.ok()) {
    std::cerr << "topology-manager merge: " << result.status().message()
              << "\n";
    return 2;
  }
  std::cout << result->dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The kubelet's Topology Manager, outside the kubelet."};
  app.require_subcommand(1);
  auto* merge = app.add_subcommand(
      "merge", "Merge one case of topology hints (JSON on stdin or in FILE)");
  std::string file;
  std::string engine = "fast";
  bool explain = false;
  merge->add_option("file", file, "JSON case file (default: stdin)");
  merge->add_option("--engine", engine, "Merge engine")
      ->check(CLI::IsMember({"fast", "reference"}))
      ->capture_default_str();
  merge->add_flag("--explain", explain, "Say why the merged hint won");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (merge->parsed()) return RunMerge(file, engine, explain);
  return 2;
}
