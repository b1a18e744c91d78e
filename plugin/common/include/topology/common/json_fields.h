// Checked reads of JSON that came from outside (files on disk, answers of
// another process): a missing key or a value of the wrong type is an
// exception naming the key, never undefined behaviour. nlohmann's const
// operator[] on a missing key is undefined (an assertion only in debug
// builds) and its get<int64_t>() of a float out of range is too, so code
// reading outside JSON uses these instead.
//
// Each function throws JsonFieldError (a std::invalid_argument) whose
// message is "<key>: <why>"; callers catch it where they turn the document
// into a Status.
#ifndef TOPOLOGY_COMMON_JSON_FIELDS_H_
#define TOPOLOGY_COMMON_JSON_FIELDS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace topology::json_fields {

class JsonFieldError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline const char* TypeName(const nlohmann::json& value) {
  return value.type_name();
}

[[noreturn]] inline void Fail(std::string_view key, std::string_view why) {
  throw JsonFieldError(std::string(key) + ": " + std::string(why));
}

// The member `key` of `object`; fails when `object` is not an object or
// lacks it.
inline const nlohmann::json& Field(const nlohmann::json& object,
                                   std::string_view key) {
  if (!object.is_object()) {
    Fail(key, std::string("read from a JSON ") + TypeName(object) +
                  ", not an object");
  }
  const auto it = object.find(key);
  if (it == object.end()) Fail(key, "missing");
  return *it;
}

// The member `key`, or nullptr when absent or null.
inline const nlohmann::json* OptionalField(const nlohmann::json& object,
                                           std::string_view key) {
  if (!object.is_object()) {
    Fail(key, std::string("read from a JSON ") + TypeName(object) +
                  ", not an object");
  }
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::string AsString(const nlohmann::json& value, std::string_view key) {
  if (!value.is_string()) {
    Fail(key, std::string("a ") + TypeName(value) + ", not a string");
  }
  return value.get<std::string>();
}

inline bool AsBool(const nlohmann::json& value, std::string_view key) {
  if (!value.is_boolean()) {
    Fail(key, std::string("a ") + TypeName(value) + ", not a boolean");
  }
  return value.get<bool>();
}

// An integer in [lo, hi]; a float (even 1.0) is refused, as the API server
// refuses it for an int64 field.
inline int64_t AsInt(const nlohmann::json& value, std::string_view key,
                     int64_t lo = std::numeric_limits<int64_t>::min(),
                     int64_t hi = std::numeric_limits<int64_t>::max()) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) Fail(key, "out of range");
    return static_cast<int64_t>(u);
  }
  if (!value.is_number_integer()) {
    Fail(key, std::string("a ") + TypeName(value) + ", not an integer");
  }
  const int64_t i = value.get<int64_t>();
  if (i < lo || i > hi) Fail(key, "out of range");
  return i;
}

// An unsigned 64-bit integer in [0, hi]: what a writer emitting uint64_t
// wrote reads back whole (AsInt stops at 2^63 - 1). A negative number or a
// float is refused.
inline uint64_t AsUint(const nlohmann::json& value, std::string_view key,
                       uint64_t hi = std::numeric_limits<uint64_t>::max()) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > hi) Fail(key, "out of range");
    return u;
  }
  if (value.is_number_integer()) Fail(key, "out of range");  // negative
  Fail(key, std::string("a ") + TypeName(value) + ", not an integer");
}

inline std::string String(const nlohmann::json& object, std::string_view key) {
  return AsString(Field(object, key), key);
}
inline bool Bool(const nlohmann::json& object, std::string_view key) {
  return AsBool(Field(object, key), key);
}
inline int64_t Int(const nlohmann::json& object, std::string_view key,
                   int64_t lo = std::numeric_limits<int64_t>::min(),
                   int64_t hi = std::numeric_limits<int64_t>::max()) {
  return AsInt(Field(object, key), key, lo, hi);
}

inline uint64_t Uint(const nlohmann::json& object, std::string_view key,
                     uint64_t hi = std::numeric_limits<uint64_t>::max()) {
  return AsUint(Field(object, key), key, hi);
}

// An optional member with a default when absent or null.
inline std::string StringOr(const nlohmann::json& object, std::string_view key,
                            std::string fallback) {
  const nlohmann::json* value = OptionalField(object, key);
  return value == nullptr ? fallback : AsString(*value, key);
}
inline bool BoolOr(const nlohmann::json& object, std::string_view key,
                   bool fallback) {
  const nlohmann::json* value = OptionalField(object, key);
  return value == nullptr ? fallback : AsBool(*value, key);
}

// The member `key`, which must be an array / an object.
inline const nlohmann::json& Array(const nlohmann::json& object,
                                   std::string_view key) {
  const nlohmann::json& value = Field(object, key);
  if (!value.is_array()) {
    Fail(key, std::string("a ") + TypeName(value) + ", not an array");
  }
  return value;
}
inline const nlohmann::json& Object(const nlohmann::json& object,
                                    std::string_view key) {
  const nlohmann::json& value = Field(object, key);
  if (!value.is_object()) {
    Fail(key, std::string("a ") + TypeName(value) + ", not an object");
  }
  return value;
}

inline std::vector<std::string> AsStringList(const nlohmann::json& list,
                                             std::string_view key) {
  if (!list.is_array()) {
    Fail(key, std::string("a ") + TypeName(list) + ", not an array");
  }
  std::vector<std::string> out;
  out.reserve(list.size());
  for (const nlohmann::json& item : list) out.push_back(AsString(item, key));
  return out;
}
inline std::vector<std::string> StringList(const nlohmann::json& object,
                                           std::string_view key) {
  return AsStringList(Field(object, key), key);
}

inline std::vector<int> IntList(const nlohmann::json& object,
                                std::string_view key, int lo, int hi) {
  std::vector<int> out;
  const nlohmann::json& list = Array(object, key);
  out.reserve(list.size());
  for (const nlohmann::json& item : list) {
    out.push_back(static_cast<int>(AsInt(item, key, lo, hi)));
  }
  return out;
}

// Whether the arrays and objects of `text` nest at most `max_depth` deep.
// One pass over the bytes, strings (and their escapes) skipped: exact for
// every text the parser accepts, and any other text is refused by it.
inline bool NestingWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// Parses `text` with nesting at most `max_depth` deep: a document nested
// deeper (a hostile answer of 100,000 brackets) is refused before the
// parser, or anything recursive (a copy, a dump), walks it. Returns a
// discarded value (is_discarded()) when the text is not JSON or too deep;
// never throws. The depth is checked by NestingWithin's one pass and the
// document built by the plain parser (a parser callback on every event
// costs more than the parse: restoring 10,000 pods took 1.7x as long).
inline nlohmann::json ParseBounded(std::string_view text, int max_depth = 64) {
  if (!NestingWithin(text, max_depth)) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  try {
    return nlohmann::json::parse(text, /*cb=*/nullptr,
                                 /*allow_exceptions=*/false);
  } catch (const std::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace topology::json_fields

#endif  // TOPOLOGY_COMMON_JSON_FIELDS_H_
