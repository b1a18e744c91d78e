#include "slice_versions.h"

#include <exception>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace topology::draplugin {
namespace {

using nlohmann::json;

// The names and resource versions of a list's items (items[].metadata),
// read without building the document: a resync's list, every 5 s, has the
// managed fields of every slice too. nullopt when it is not JSON.
class VersionsReader {
 public:
  explicit VersionsReader(std::function<bool(const std::string&)> keep)
      : keep_(std::move(keep)) {}
  using string_t = json::string_t;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool string(string_t& value) {
    if (InItemMetadata()) {
      if (key_ == "name") name_ = value;
      if (key_ == "resourceVersion") version_ = value;
    }
    return true;
  }
  bool key(string_t& key) {
    key_ = key;
    return true;
  }
  bool start_object(std::size_t) { return Open(false); }
  bool start_array(std::size_t) { return Open(true); }
  bool end_object() {
    // An item ends: ["$", "items", "[]"].
    if (path_.size() == 3 && path_[1] == "items" && !name_.empty() &&
        keep_(name_)) {
      versions_[name_] = version_;
    }
    if (path_.size() == 3) {
      name_.clear();
      version_.clear();
    }
    return Close();
  }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    return false;
  }
  std::map<std::string, std::string> versions() && {
    return std::move(versions_);
  }

 private:
  bool Open(bool array) {
    // Where the container is: its key in an object, "[]" in an array,
    // "$" at the top.
    path_.push_back(path_.empty() ? "$" : array_.back() ? "[]" : key_);
    array_.push_back(array);
    key_.clear();
    return true;
  }
  bool Close() {
    path_.pop_back();
    array_.pop_back();
    key_.clear();
    return true;
  }
  bool InItemMetadata() const {
    return path_.size() == 4 && path_[1] == "items" && path_[2] == "[]" &&
           path_[3] == "metadata";
  }

  std::function<bool(const std::string&)> keep_;
  std::vector<std::string> path_;
  std::vector<bool> array_;
  std::string key_;
  std::string name_;
  std::string version_;
  std::map<std::string, std::string> versions_;
};

}  // namespace

std::optional<std::map<std::string, std::string>> ListedVersions(
    const std::string& body, std::function<bool(const std::string&)> keep) {
  VersionsReader reader(std::move(keep));
  try {
    if (!json::sax_parse(body, &reader)) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return std::move(reader).versions();
}

}  // namespace topology::draplugin
