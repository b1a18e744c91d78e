// hwloc XML format 3.0 (hwloc 3.x) read through hwloc 2.x, which reads only
// formats 1.x and 2.0: the text is rewritten to 2.0 the way hwloc 3's own
// "--export-xml-flags 2" writes it.
#ifndef TOPOLOGY_SRC_HWLOC_XML_V3_H_
#define TOPOLOGY_SRC_HWLOC_XML_V3_H_

#include <string>
#include <string_view>

#include "topology/status.h"

namespace topology::internal {

// The value of the version attribute of the <topology> element ("2.0",
// "3.0"), looked for in the first 4 KiB; INVALID_ARGUMENT when there is no
// <topology> element there (not an hwloc XML export).
StatusOr<std::string> HwlocXmlVersion(std::string_view text);

// Rewrites a format 3.0 document as format 2.0: the version, object "id"
// attributes dropped, OS device types from 3.0's flags (storage 1, memory 2,
// GPU 4, coprocessor 8, network 16, OpenFabrics 32, DMA 64) to 2.0's
// enumeration (block 0, GPU 1, network 2, OpenFabrics 3, DMA 4, coprocessor
// 5), and the topology-level <info> elements that 2.0 keeps in the root
// object dropped. INVALID_ARGUMENT naming the offset on malformed tags.
StatusOr<std::string> ConvertHwlocXml3To2(std::string_view text);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_HWLOC_XML_V3_H_
