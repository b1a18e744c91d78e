#include "hwloc_xml_limits.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace topology::internal {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '-' || c == '.';
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Scanner {
 public:
  Scanner(std::string_view text, const HwlocXmlLimits& limits)
      : text_(text), limits_(limits) {}

  Status Run() {
    size_t pos = 0;
    while ((pos = text_.find('<', pos)) != std::string_view::npos) {
      const std::string_view rest = text_.substr(pos);
      if (rest.starts_with("<!--")) {
        pos = Skip(pos, "-->", "comment");
      } else if (rest.starts_with("<![CDATA[")) {
        pos = Skip(pos, "]]>", "CDATA section");
      } else if (rest.starts_with("<?")) {
        pos = Skip(pos, "?>", "processing instruction");
      } else if (rest.starts_with("<!")) {
        pos = Declaration(pos);
      } else if (rest.starts_with("</")) {
        pos = EndTag(pos);
      } else {
        pos = StartTag(pos);
      }
      if (!error_.ok()) return error_;
    }
    return OkStatus();
  }

 private:
  // INVALID_ARGUMENT naming the line and offset of `at`.
  size_t Fail(size_t at, const std::string& what) {
    const auto line =
        std::count(text_.begin(), text_.begin() + static_cast<ptrdiff_t>(at),
                   '\n') +
        1;
    error_ = InvalidArgumentError("hwloc XML: " + what + " (line " +
                                  std::to_string(line) + ", offset " +
                                  std::to_string(at) + ")");
    return std::string_view::npos;
  }

  size_t Skip(size_t at, std::string_view end, const char* what) {
    const size_t found = text_.find(end, at);
    if (found == std::string_view::npos) {
      return Fail(at, std::string("unterminated ") + what);
    }
    return found + end.size();
  }

  // <!DOCTYPE ...>: hwloc names its DTD; an internal subset could declare
  // entities that expand without limit.
  size_t Declaration(size_t at) {
    size_t i = at + 2;
    while (i < text_.size() && text_[i] != '>') {
      if (text_[i] == '[') {
        return Fail(at,
                    "a DOCTYPE with an internal subset (entity declarations) "
                    "is not an hwloc export");
      }
      ++i;
    }
    if (i == text_.size()) return Fail(at, "unterminated declaration");
    return i + 1;
  }

  size_t EndTag(size_t at) {
    const size_t end = text_.find('>', at);
    if (end == std::string_view::npos) return Fail(at, "unterminated end tag");
    if (children_.empty()) return Fail(at, "end tag without a start tag");
    children_.pop_back();
    return end + 1;
  }

  size_t StartTag(size_t at) {
    size_t i = at + 1;
    const size_t name_begin = i;
    while (i < text_.size() && IsNameChar(text_[i])) ++i;
    if (i == name_begin) return Fail(at, "'<' that starts no tag");
    const std::string_view name = text_.substr(name_begin, i - name_begin);
    if (++elements_ > limits_.max_elements) {
      return Fail(at, "more than " + std::to_string(limits_.max_elements) +
                          " elements");
    }
    if (!children_.empty() && ++children_.back() > limits_.max_children) {
      return Fail(at, "an element with more than " +
                          std::to_string(limits_.max_children) + " children");
    }
    const bool object = name == "object";
    if (object && ++objects_ > limits_.max_objects) {
      return Fail(
          at, "more than " + std::to_string(limits_.max_objects) + " objects");
    }
    std::string_view type;
    std::string_view os_index;
    // Attributes up to '>' or "/>", values quoted with " or '.
    bool self_closing = false;
    while (true) {
      while (i < text_.size() && IsSpace(text_[i])) ++i;
      if (i >= text_.size())
        return Fail(at, "unterminated tag <" + std::string(name) + ">");
      if (text_[i] == '>') break;
      if (text_[i] == '/' && i + 1 < text_.size() && text_[i + 1] == '>') {
        self_closing = true;
        ++i;
        break;
      }
      const size_t attr_begin = i;
      while (i < text_.size() && IsNameChar(text_[i])) ++i;
      const std::string_view attr = text_.substr(attr_begin, i - attr_begin);
      while (i < text_.size() && IsSpace(text_[i])) ++i;
      if (attr.empty() || i + 1 >= text_.size() || text_[i] != '=') {
        return Fail(i, "malformed attribute in <" + std::string(name) + ">");
      }
      ++i;
      while (i < text_.size() && IsSpace(text_[i])) ++i;
      if (i >= text_.size() || (text_[i] != '"' && text_[i] != '\'')) {
        return Fail(i,
                    "unquoted attribute value in <" + std::string(name) + ">");
      }
      const size_t close = text_.find(text_[i], i + 1);
      if (close == std::string_view::npos) {
        return Fail(i, "unterminated attribute value");
      }
      const std::string_view value = text_.substr(i + 1, close - i - 1);
      i = close + 1;
      if (attr == "type") type = value;
      if (attr == "os_index") os_index = value;
      if (attr == "nbobjs" && !Within(value, limits_.max_distance_objects)) {
        return Fail(attr_begin,
                    "a distance matrix of " + Shown(value) +
                        " objects (at most " +
                        std::to_string(limits_.max_distance_objects) + ")");
      }
    }
    if (object && (type == "PU" || type == "NUMANode") &&
        !Within(os_index, limits_.max_os_index)) {
      return Fail(at, std::string(type) + " os_index " + Shown(os_index) +
                          " (at most " + std::to_string(limits_.max_os_index) +
                          ")");
    }
    if (!self_closing) {
      if (children_.size() >= limits_.max_depth) {
        return Fail(at, "elements nested deeper than " +
                            std::to_string(limits_.max_depth));
      }
      children_.push_back(0);
    }
    return i + 1;
  }

  // Whether `value` is absent or a decimal number up to `max`. hwloc reads
  // these with strtoul, which takes "-1" as the largest value: anything but
  // digits is refused here.
  static bool Within(std::string_view value, uint64_t max) {
    if (value.empty()) return true;
    uint64_t n = 0;
    const auto [ptr, ec] =
        std::from_chars(value.data(), value.data() + value.size(), n);
    return ec == std::errc() && ptr == value.data() + value.size() && n <= max;
  }

  static std::string Shown(std::string_view value) {
    return std::string(value.substr(0, 24)) + (value.size() > 24 ? "..." : "");
  }

  std::string_view text_;
  const HwlocXmlLimits& limits_;
  Status error_ = OkStatus();
  // Per open element, its children so far (the stack of open elements).
  std::vector<uint32_t> children_;
  uint32_t elements_ = 0;
  uint32_t objects_ = 0;
};

}  // namespace

Status CheckHwlocXmlLimits(std::string_view text,
                           const HwlocXmlLimits& limits) {
  return Scanner(text, limits).Run();
}

}  // namespace topology::internal
