#include "topology/cpu_set.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <string>

#include "kernel_text.h"

namespace topology {
namespace {

using internal::QuoteText;

StatusOr<int> ParseCpuId(std::string_view token, std::string_view whole) {
  int value = 0;
  auto [ptr, ec] =
      std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || ec != std::errc() ||
      ptr != token.data() + token.size()) {
    return InvalidArgumentError("bad CPU id " + QuoteText(token) +
                                " in cpulist " + QuoteText(whole));
  }
  if (value < 0 || value >= CpuSet::kMaxCpus) {
    return InvalidArgumentError("CPU id " + std::to_string(value) +
                                " out of range in cpulist " + QuoteText(whole));
  }
  return value;
}

}  // namespace

StatusOr<CpuSet> CpuSet::ParseList(std::string_view text) {
  const std::string_view whole = internal::TrimKernelText(text);
  CpuSet set;
  std::string_view rest = whole;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view()
                                           : rest.substr(comma + 1);
    if (comma != std::string_view::npos && rest.empty()) {
      return InvalidArgumentError("trailing comma in cpulist " +
                                  QuoteText(whole));
    }
    // "a-b:used/group" (the kernel's bitmap_parselist form): the first
    // `used` CPUs of every `group` in the range.
    int used = 1;
    int group = 1;
    const size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      const std::string_view spec = item.substr(colon + 1);
      item = item.substr(0, colon);
      const size_t slash = spec.find('/');
      if (slash == std::string_view::npos) {
        return InvalidArgumentError("stride " + QuoteText(spec) +
                                    " lacks '/group' in cpulist " +
                                    QuoteText(whole));
      }
      auto parsed_used = ParseCpuId(spec.substr(0, slash), whole);
      if (!parsed_used.ok()) return parsed_used.status();
      auto parsed_group = ParseCpuId(spec.substr(slash + 1), whole);
      if (!parsed_group.ok()) return parsed_group.status();
      used = *parsed_used;
      group = *parsed_group;
      if (used == 0 || group == 0 || used > group) {
        return InvalidArgumentError("bad stride " + QuoteText(spec) +
                                    " in cpulist " + QuoteText(whole));
      }
    }
    const size_t dash = item.find('-');
    auto first = ParseCpuId(item.substr(0, dash), whole);
    if (!first.ok()) return first.status();
    int last = *first;
    if (dash != std::string_view::npos) {
      auto parsed_last = ParseCpuId(item.substr(dash + 1), whole);
      if (!parsed_last.ok()) return parsed_last.status();
      last = *parsed_last;
      if (last < *first) {
        return InvalidArgumentError("descending range " + QuoteText(item) +
                                    " in cpulist " + QuoteText(whole));
      }
    } else if (colon != std::string_view::npos) {
      return InvalidArgumentError("stride without a range in cpulist " +
                                  QuoteText(whole));
    }
    for (int base = *first; base <= last; base += group) {
      for (int cpu = base; cpu < base + used && cpu <= last; ++cpu) {
        set.Add(cpu);
      }
    }
  }
  return set;
}

StatusOr<CpuSet> CpuSet::ParseMask(std::string_view text) {
  const std::string_view whole = internal::TrimKernelText(text);
  CpuSet set;
  if (whole.empty()) return set;
  // Words are most-significant first; walk them from the end.
  std::vector<std::string_view> words;
  std::string_view rest = whole;
  while (true) {
    const size_t comma = rest.find(',');
    words.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (words.size() * 32 > static_cast<size_t>(kMaxCpus)) {
    return InvalidArgumentError("cpumask wider than " +
                                std::to_string(kMaxCpus) +
                                " CPUs: " + QuoteText(whole));
  }
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view word = words[words.size() - 1 - i];
    if (i == words.size() - 1 && word.size() > 2 && word[0] == '0' &&
        (word[1] == 'x' || word[1] == 'X')) {
      word.remove_prefix(2);
    }
    uint32_t value = 0;
    auto [ptr, ec] =
        std::from_chars(word.data(), word.data() + word.size(), value, 16);
    if (word.empty() || word.size() > 8 || ec != std::errc() ||
        ptr != word.data() + word.size()) {
      return InvalidArgumentError("bad cpumask word " + QuoteText(word) +
                                  " in " + QuoteText(whole));
    }
    for (int bit = 0; bit < 32; ++bit) {
      if ((value >> bit) & 1U) set.Add(static_cast<int>(i) * 32 + bit);
    }
  }
  return set;
}

CpuSet CpuSet::Of(const std::vector<int>& ids) {
  CpuSet set;
  for (int id : ids) set.Add(id);
  return set;
}

void CpuSet::Add(int cpu) {
  const auto word = static_cast<size_t>(cpu) / 64;
  if (words_.size() <= word) words_.resize(word + 1, 0);
  words_[word] |= uint64_t{1} << (static_cast<unsigned>(cpu) % 64);
}

bool CpuSet::Contains(int cpu) const {
  if (cpu < 0) return false;
  const auto word = static_cast<size_t>(cpu) / 64;
  return word < words_.size() &&
         ((words_[word] >> (static_cast<unsigned>(cpu) % 64)) & 1U) != 0;
}

bool CpuSet::empty() const { return words_.empty(); }

int CpuSet::Count() const {
  int count = 0;
  for (uint64_t w : words_) count += std::popcount(w);
  return count;
}

bool CpuSet::Intersects(const CpuSet& other) const {
  const size_t n = std::min(words_.size(), other.words_.size());
  for (size_t i = 0; i < n; ++i) {
    if ((words_[i] & other.words_[i]) != 0) return true;
  }
  return false;
}

bool CpuSet::IsSubsetOf(const CpuSet& other) const {
  for (size_t i = 0; i < words_.size(); ++i) {
    const uint64_t theirs = i < other.words_.size() ? other.words_[i] : 0;
    if ((words_[i] & ~theirs) != 0) return false;
  }
  return true;
}

CpuSet CpuSet::Union(const CpuSet& other) const {
  CpuSet out = words_.size() >= other.words_.size() ? *this : other;
  const CpuSet& small = words_.size() >= other.words_.size() ? other : *this;
  for (size_t i = 0; i < small.words_.size(); ++i) {
    out.words_[i] |= small.words_[i];
  }
  return out;
}

CpuSet CpuSet::Intersection(const CpuSet& other) const {
  CpuSet out;
  const size_t n = std::min(words_.size(), other.words_.size());
  out.words_.resize(n);
  for (size_t i = 0; i < n; ++i) out.words_[i] = words_[i] & other.words_[i];
  out.Trim();
  return out;
}

std::vector<int> CpuSet::Ids() const {
  std::vector<int> ids;
  for (size_t w = 0; w < words_.size(); ++w) {
    uint64_t bits = words_[w];
    while (bits != 0) {
      const int bit = std::countr_zero(bits);
      ids.push_back(static_cast<int>(w * 64) + bit);
      bits &= bits - 1;
    }
  }
  return ids;
}

std::string CpuSet::ToList() const {
  std::string out;
  const std::vector<int> ids = Ids();
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(ids[j]);
    }
    i = j + 1;
  }
  return out;
}

void CpuSet::Trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

bool operator==(const CpuSet& a, const CpuSet& b) {
  return a.words_ == b.words_;
}

}  // namespace topology
