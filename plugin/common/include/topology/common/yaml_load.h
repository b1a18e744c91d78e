// The project's one way to read YAML from outside (the plugin's
// configuration, Pod manifests, kubeconfigs, CDI specs): yaml-cpp parses,
// then two checks yaml-cpp does not make run before any reader walks the
// tree.
//
// - Alias expansion is bounded. yaml-cpp keeps an alias as a second
//   reference to its anchor's node, so a "billion laughs" document of a
//   few hundred bytes parses at once into a tree whose walk never ends. The
//   nodes a reader would visit, aliases expanded, are counted by a walk that
//   stops at the bound; a document over it is refused (as go-yaml refuses
//   "excessive aliasing" for the API server).
// - A mapping that gives one key twice is refused, as the API server refuses
//   it ("mapping key already defined") and YAML 1.2 forbids it; yaml-cpp
//   keeps both entries and a lookup silently takes the first.
//
// Nesting depth is bounded by yaml-cpp's parser itself (DeepRecursion).
// Header-only: the installed frameworks use it in their sources without
// installing it. Thread-safe (no shared state).
#ifndef TOPOLOGY_COMMON_YAML_LOAD_H_
#define TOPOLOGY_COMMON_YAML_LOAD_H_

#include <cstddef>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "topology/status.h"

namespace topology::yaml {

// Nodes a document (or a stream) may hold with its aliases expanded: far
// above any configuration, manifest, kubeconfig or CDI spec we read, and a
// walk of a fraction of a second at most.
inline constexpr size_t kMaxExpandedNodes = size_t{1} << 20;

// OK when `node`, aliases expanded, has at most `max_nodes` nodes (keys,
// values and items each count); else INVALID_ARGUMENT naming `where`. Visits
// at most max_nodes + 1 nodes, whatever the document. With `counted`, the
// number of nodes is stored there when OK.
inline Status CheckExpansion(const YAML::Node& node, std::string_view where,
                             size_t max_nodes = kMaxExpandedNodes,
                             size_t* counted = nullptr) {
  std::vector<YAML::Node> pending{node};
  size_t visited = 0;
  while (!pending.empty()) {
    const YAML::Node current = std::move(pending.back());
    pending.pop_back();
    if (++visited > max_nodes) {
      return InvalidArgumentError(
          std::string(where) + ": more than " + std::to_string(max_nodes) +
          " nodes with its aliases expanded (excessive aliasing)");
    }
    if (current.IsMap()) {
      for (const auto& entry : current) {
        pending.push_back(entry.first);
        pending.push_back(entry.second);
      }
    } else if (current.IsSequence()) {
      for (const auto& item : current) pending.push_back(item);
    }
  }
  if (counted != nullptr) *counted = visited;
  return OkStatus();
}

// OK when no mapping in `node` (at any depth) gives a key twice; else
// INVALID_ARGUMENT "<where>: <path>: key \"k\" is given twice (lines a and
// b)". Scalar keys are compared by their text; a complex key (a mapping used
// as a key) is left alone, as no reader here looks one up.
// REQUIRES: CheckExpansion(node) is OK (the walk follows aliases).
inline Status CheckNoDuplicateKeys(const YAML::Node& node,
                                   std::string_view where) {
  std::vector<std::pair<YAML::Node, std::string>> pending{{node, ""}};
  while (!pending.empty()) {
    auto [current, path] = std::move(pending.back());
    pending.pop_back();
    if (current.IsMap()) {
      std::map<std::string, int> seen;  // key -> line (from 1)
      for (const auto& entry : current) {
        const bool scalar = entry.first.IsScalar();
        if (scalar) {
          const int line = entry.first.Mark().line + 1;
          const auto [it, inserted] = seen.emplace(entry.first.Scalar(), line);
          if (!inserted) {
            return InvalidArgumentError(
                std::string(where) + ": " + (path.empty() ? "(top)" : path) +
                ": key \"" + entry.first.Scalar().substr(0, 64) +
                "\" is given twice (lines " + std::to_string(it->second) +
                " and " + std::to_string(line) + ")");
          }
        }
        pending.emplace_back(
            entry.second,
            scalar ? (path.empty() ? "" : path + ".") + entry.first.Scalar()
                   : path);
      }
    } else if (current.IsSequence()) {
      for (size_t i = 0; i < current.size(); ++i) {
        pending.emplace_back(current[i], path + "[" + std::to_string(i) + "]");
      }
    }
  }
  return OkStatus();
}

// Both checks.
inline Status CheckDocument(const YAML::Node& node, std::string_view where) {
  if (Status expansion = CheckExpansion(node, where); !expansion.ok()) {
    return expansion;
  }
  return CheckNoDuplicateKeys(node, where);
}

// "<where>[:line:column]: <what>" of a yaml-cpp exception.
inline Status ParseError(std::string_view where, const std::exception& e) {
  std::string at(where);
  std::string what = e.what();
  if (const auto* yaml = dynamic_cast<const YAML::Exception*>(&e)) {
    if (!yaml->mark.is_null()) {
      at += ":" + std::to_string(yaml->mark.line + 1) + ":" +
            std::to_string(yaml->mark.column + 1);
    }
    what = yaml->msg;
  }
  return InvalidArgumentError(at + ": " + what.substr(0, 200));
}

// One document, parsed and checked; INVALID_ARGUMENT naming `where` when it
// is not YAML or fails a check.
inline StatusOr<YAML::Node> Load(std::string_view text,
                                 std::string_view where) {
  YAML::Node node;
  try {
    node = YAML::Load(std::string(text));
    if (Status checked = CheckDocument(node, where); !checked.ok()) {
      return checked;
    }
  } catch (const std::exception& e) {
    return ParseError(where, e);
  }
  return node;
}

// Every document of a stream, each checked ("<where> (document N)").
inline StatusOr<std::vector<YAML::Node>> LoadAll(std::string_view text,
                                                 std::string_view where) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
    size_t total = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      const std::string at =
          std::string(where) + " (document " + std::to_string(i + 1) + ")";
      // The bound is for the whole stream, not for each document.
      size_t counted = 0;
      Status expansion =
          CheckExpansion(docs[i], at, kMaxExpandedNodes - total, &counted);
      if (!expansion.ok()) return expansion;
      total += counted;
      if (Status keys = CheckNoDuplicateKeys(docs[i], at); !keys.ok()) {
        return keys;
      }
    }
  } catch (const std::exception& e) {
    return ParseError(where, e);
  }
  return docs;
}

}  // namespace topology::yaml

#endif  // TOPOLOGY_COMMON_YAML_LOAD_H_
