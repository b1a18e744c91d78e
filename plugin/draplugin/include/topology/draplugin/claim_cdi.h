// The CDI spec of one prepared claim, written with the device plugin
// framework's CDI writer (topology/common/cdi.h: validated names, the
// oldest cdiVersion that expresses the spec, an atomic 0644 file that never
// follows a planted link). One file per claim, so that Unprepare removes
// exactly it; device names carry the claim's UID, so that a runtime's cache
// never meets a stale name when the same device serves a later claim.
#ifndef TOPOLOGY_DRAPLUGIN_CLAIM_CDI_H_
#define TOPOLOGY_DRAPLUGIN_CLAIM_CDI_H_

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "topology/common/cdi.h"
#include "topology/status.h"

namespace topology::draplugin {

// "<driver>-<uid>.json".
std::string ClaimCdiFileName(const std::string& driver,
                             const std::string& claim_uid);

// Writes the claim's spec of `kind` in `dir`: each device named
// "<uid>-<device name>", and `claim_env` (the environment of the whole
// claim, as the device plugin's Allocate gives it for the same devices: one
// variable listing all of them) set on every device, so that whichever of
// them a container gets, it sees the same values. INVALID_ARGUMENT when a
// device sets a variable of `claim_env`, or two devices one variable, to
// different values (a runtime would keep one of them silently), or when
// the framework's writer refuses the spec. The fully qualified CDI ids, in
// the order of `devices`.
StatusOr<std::vector<std::string>> WriteClaimCdiSpec(
    const std::filesystem::path& dir, const std::string& driver,
    const std::string& kind, const std::string& claim_uid,
    std::vector<common::CdiDevice> devices,
    const std::map<std::string, std::string>& claim_env);

// Removes the claim's spec; OK when there is none.
Status RemoveClaimCdiSpec(const std::filesystem::path& dir,
                          const std::string& driver,
                          const std::string& claim_uid);

// Removes this driver's claim specs in `dir` whose claim is not in
// `prepared` (UIDs): what a Prepare interrupted before its claim was
// recorded, or a claim unprepared while its record was unreadable, left
// behind. Only files named "<driver>-<uid>.json" with a UID in the form the
// API server gives (a lower-case UUID) are touched, so that another
// driver's specs (a driver name that extends this one) stay. The UIDs
// removed; an error naming `dir` when it cannot be listed.
StatusOr<std::vector<std::string>> RemoveUnpreparedCdiSpecs(
    const std::filesystem::path& dir, const std::string& driver,
    const std::set<std::string>& prepared);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_CLAIM_CDI_H_
