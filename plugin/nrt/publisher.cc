#include "publisher.h"

#include "topology/common/json_fields.h"

#include "nrt_object.h"

namespace topology::nrt {

namespace {

using nlohmann::json;

constexpr int kConflictAttempts = 5;

json Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? json(nullptr) : *it;
}

json Owners(const json& object) {
  return Member(Member(object, "metadata"), "ownerReferences");
}

}  // namespace

bool Publisher::SameContent(const json& a, const json& b) {
  for (const char* key : {"topologyPolicies", "attributes", "zones"}) {
    if (Member(a, key) != Member(b, key)) return false;
  }
  // An owner reference the server completed (blockOwnerDeletion unset)
  // compares by the fields we send.
  const json want = Owners(a);
  const json have = Owners(b);
  if (want.is_null()) return true;
  if (!have.is_array() || have.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    for (const auto& [key, value] : want[i].items()) {
      if (Member(have[i], key.c_str()) != value) return false;
    }
  }
  return true;
}

json Publisher::Updated(json current, const json& object) {
  // The stored object with our fields: its resourceVersion (the update is
  // refused if it moved), and what others set (labels, annotations).
  for (const char* key : {"topologyPolicies", "attributes", "zones"}) {
    current[key] = object[key];
  }
  if (object["metadata"].contains("ownerReferences")) {
    current["metadata"]["ownerReferences"] =
        object["metadata"]["ownerReferences"];
  }
  current["metadata"].erase("managedFields");
  return current;
}

Status Publisher::Publish(const json& object) {
  if (!stored_.empty() &&
      SameContent(object, json::parse(stored_, nullptr, false))) {
    return OkStatus();
  }
  return Write(object);
}

Status Publisher::Update(const std::string& path, const json& current,
                         const json& object) {
  auto put = client_->Request("PUT", path, Updated(current, object).dump());
  if (!put.ok()) return put.status();
  Status status = draplugin::StatusOf(*put, "update " + path);
  if (status.ok()) {
    ++stats_.updates;
    stored_ = std::move(put->body);
    return status;
  }
  stored_.clear();
  if (status.code() == StatusCode::kAborted) ++stats_.conflicts;
  return status;
}

Status Publisher::Write(const json& object) {
  const std::string name = object["metadata"]["name"].get<std::string>();
  const std::string path = std::string(kCollectionPath) + "/" + name;
  Status last = OkStatus();
  // What the server held after our last write is most likely what it
  // holds now: updated on its resourceVersion without reading it first; a
  // conflict (or a deleted object) reads it again below.
  if (json stored = json::parse(stored_, nullptr, false); stored.is_object()) {
    last = Update(path, stored, object);
    if (last.ok() || (last.code() != StatusCode::kAborted &&
                      last.code() != StatusCode::kNotFound)) {
      return last;
    }
  }
  for (int attempt = 0; attempt < kConflictAttempts; ++attempt) {
    auto got = client_->Request("GET", path, {}, {},
                                {.max_body = draplugin::kMaxObjectBytes});
    if (!got.ok()) return got.status();
    if (got->status == 404) {
      auto created = client_->Request("POST", kCollectionPath, object.dump());
      if (!created.ok()) return created.status();
      last = draplugin::StatusOf(*created, "create " + path, /*create=*/true);
      if (last.ok()) {
        ++stats_.creates;
        stored_ = std::move(created->body);
        return OkStatus();
      }
      if (last.code() == StatusCode::kAlreadyExists) continue;  // raced
      return last;
    }
    if (Status status = draplugin::StatusOf(*got, "get " + path);
        !status.ok()) {
      return status;
    }
    json current = json::parse(got->body, nullptr, false);
    if (!current.is_object() || !current["metadata"].is_object()) {
      return InvalidArgumentError("get " + path + ": not an object");
    }
    if (SameContent(object, current)) {
      ++stats_.unchanged;
      stored_ = std::move(got->body);
      return OkStatus();
    }
    last = Update(path, current, object);
    // A conflict: read again, write again.
    if (last.code() != StatusCode::kAborted) return last;
  }
  return last;
}

}  // namespace topology::nrt
