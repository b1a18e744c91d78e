// A streaming pre-scan of an hwloc XML document, before hwloc sees it.
// hwloc's importer recurses once per nesting level (a few tens of thousands
// of nested objects overflow the stack), inserts each object among its
// siblings by a linear search (tens of thousands of siblings take minutes),
// sizes bitmaps by the largest PU or NUMA node index (an index of 2^32 costs
// half a gigabyte) and allocates a distance matrix by its declared object
// count before reading a value. None of this is bounded by the file's size,
// so the shape is checked first, in one pass with constant stack.
#ifndef TOPOLOGY_SRC_HWLOC_XML_LIMITS_H_
#define TOPOLOGY_SRC_HWLOC_XML_LIMITS_H_

#include <cstdint>
#include <string_view>

#include "topology/status.h"

namespace topology::internal {

struct HwlocXmlLimits {
  // Elements open at once. A real export nests about a dozen CPU levels and
  // a PCIe chain of a few bridges under them.
  uint32_t max_depth = 128;
  // <object> elements in all: the largest machines Linux runs (8,192 CPUs
  // with caches and cores) and thousands of SR-IOV functions stay below.
  uint32_t max_objects = 65536;
  // Elements of any kind in all (objects, infos, page types, distances).
  uint32_t max_elements = 262144;
  // Direct children of one element: a PF's VFs are siblings, and no device
  // offers more than a few thousand.
  uint32_t max_children = 4096;
  // Largest os_index of a PU or NUMANode: Linux numbers at most 8,192 CPUs
  // and 1,024 nodes.
  uint64_t max_os_index = 65535;
  // Objects of one distance matrix (nbobjs): at most every NUMA node.
  uint64_t max_distance_objects = 1024;
};

// OK when `text` stays within `limits`; else INVALID_ARGUMENT naming the
// limit, the line and the byte offset. Also refuses what hwloc never writes
// and a parser could expand: a DOCTYPE with an internal subset (entity
// declarations), and unterminated tags, comments or attribute values.
Status CheckHwlocXmlLimits(std::string_view text,
                           const HwlocXmlLimits& limits = {});

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_HWLOC_XML_LIMITS_H_
