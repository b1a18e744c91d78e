#include "hwloc_xml_v3.h"

#include <charconv>
#include <optional>
#include <string>

namespace topology::internal {
namespace {

constexpr size_t kHeadBytes = 4096;

// The value of attribute `name` inside one tag's text, or nullopt.
std::optional<std::string_view> Attribute(std::string_view tag,
                                          std::string_view name) {
  size_t at = 0;
  while ((at = tag.find(name, at)) != std::string_view::npos) {
    const bool starts = at > 0 && (tag[at - 1] == ' ' || tag[at - 1] == '\t' ||
                                   tag[at - 1] == '\n');
    const size_t eq = at + name.size();
    if (starts && eq + 1 < tag.size() && tag[eq] == '=' && tag[eq + 1] == '"') {
      const size_t end = tag.find('"', eq + 2);
      if (end == std::string_view::npos) return std::nullopt;
      return tag.substr(eq + 2, end - eq - 2);
    }
    at = eq;
  }
  return std::nullopt;
}

// 3.0's OS device type flags to 2.0's enumeration. A device with several
// flags (a CUDA GPU is GPU|coprocessor) takes the type 2.0 gave it.
int OsdevType2From3(unsigned flags) {
  if (flags & 8U) return 5;   // coprocessor
  if (flags & 4U) return 1;   // GPU
  if (flags & 32U) return 3;  // OpenFabrics
  if (flags & 16U) return 2;  // network
  if (flags & 64U) return 4;  // DMA
  return 0;                   // storage and memory were "block" in 2.0
}

// Rewrites one <object ...> tag.
StatusOr<std::string> ConvertObjectTag(std::string_view tag, size_t offset) {
  std::string out;
  out.reserve(tag.size());
  size_t i = 0;
  while (i < tag.size()) {
    const bool boundary = i > 0 && tag[i - 1] == ' ';
    if (boundary && tag.substr(i).starts_with("id=\"")) {
      const size_t end = tag.find('"', i + 4);
      if (end == std::string_view::npos) {
        return InvalidArgumentError(
            "hwloc XML: unterminated id attribute at "
            "offset " +
            std::to_string(offset + i));
      }
      out.pop_back();  // the space before it
      i = end + 1;
      continue;
    }
    if (boundary && tag.substr(i).starts_with("osdev_type=\"")) {
      const size_t from = i + 12;
      const size_t end = tag.find('"', from);
      unsigned flags = 0;
      const auto [ptr, ec] =
          end == std::string_view::npos
              ? std::from_chars_result{nullptr, std::errc::invalid_argument}
              : std::from_chars(tag.data() + from, tag.data() + end, flags);
      if (ec != std::errc() || ptr != tag.data() + end) {
        return InvalidArgumentError(
            "hwloc XML: osdev_type is not a number at offset " +
            std::to_string(offset + i));
      }
      out += "osdev_type=\"" + std::to_string(OsdevType2From3(flags)) + "\"";
      i = end + 1;
      continue;
    }
    out += tag[i++];
  }
  return out;
}

}  // namespace

StatusOr<std::string> HwlocXmlVersion(std::string_view text) {
  const std::string_view head = text.substr(0, kHeadBytes);
  const size_t at = head.find("<topology");
  if (at == std::string_view::npos) {
    return InvalidArgumentError(
        "not an hwloc XML export (no <topology> element in the first " +
        std::to_string(kHeadBytes) + " bytes)");
  }
  const size_t end = head.find('>', at);
  if (end == std::string_view::npos) {
    return InvalidArgumentError(
        "not an hwloc XML export (unterminated "
        "<topology> element)");
  }
  const auto version = Attribute(head.substr(at, end - at), "version");
  // hwloc 1.x wrote no version attribute.
  return std::string(version.value_or("1.0"));
}

StatusOr<std::string> ConvertHwlocXml3To2(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const size_t root_end = text.rfind("</object>");
  size_t i = 0;
  bool version_done = false;
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    if (lt == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, lt - i));
    const size_t gt = text.find('>', lt);
    if (gt == std::string_view::npos) {
      return InvalidArgumentError("hwloc XML: unterminated tag at offset " +
                                  std::to_string(lt));
    }
    const std::string_view tag = text.substr(lt, gt + 1 - lt);
    if (!version_done && tag.starts_with("<topology")) {
      const size_t v = tag.find("version=\"");
      const size_t close =
          v == std::string_view::npos ? v : tag.find('"', v + 9);
      if (close == std::string_view::npos) {
        return InvalidArgumentError("hwloc XML: <topology> has no version");
      }
      out.append(tag.substr(0, v + 9));
      out.append("2.0");
      out.append(tag.substr(close));
      version_done = true;
    } else if (tag.starts_with("<object ") || tag.starts_with("<object\t")) {
      auto converted = ConvertObjectTag(tag, lt);
      if (!converted.ok()) return converted.status();
      out.append(*converted);
    } else if (root_end != std::string_view::npos && lt > root_end &&
               tag.starts_with("<info ")) {
      // Topology-level infos (format 3.0 only): dropped, with the line's
      // indentation.
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) {
        out.pop_back();
      }
      size_t next = gt + 1;
      if (next < text.size() && text[next] == '\n') ++next;
      i = next;
      continue;
    } else {
      out.append(tag);
    }
    i = gt + 1;
  }
  if (!version_done) {
    return InvalidArgumentError("hwloc XML: no <topology> element");
  }
  return out;
}

}  // namespace topology::internal
