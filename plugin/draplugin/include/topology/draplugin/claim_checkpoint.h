// The DRA runner's checkpoint of prepared claims: one JSON document,
// replaced atomically at every change (files::WriteFileAtomically, 0600).
//
//   {"version":1,"claims":[{"uid","namespace","name",["state":"unpreparing",]
//    "devices":[{"requests":[...],"pool","device","cdi":[...]}]}],
//    "checksum":"<FNV-1a 64 of claims>"}
//
// A claim being unprepared is written so before its handler undoes it, and
// removed after: a process killed in between finds it "unpreparing" and
// finishes the undo before answering for it again.
#ifndef TOPOLOGY_DRAPLUGIN_CLAIM_CHECKPOINT_H_
#define TOPOLOGY_DRAPLUGIN_CLAIM_CHECKPOINT_H_

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topology/draplugin/driver.h"
#include "topology/status.h"

namespace topology::draplugin {

inline constexpr char kClaimCheckpointFile[] = "prepared-claims.json";

struct PreparedClaim {
  ClaimRef ref = {};
  std::vector<PreparedDevice> devices = {};
  bool unpreparing = false;
};

// By claim UID.
using PreparedClaims = std::map<std::string, PreparedClaim>;

std::string EncodeClaims(const PreparedClaims& claims);
// DATA_LOSS naming what is wrong (not JSON, a missing or mistyped field, a
// checksum mismatch, a claim listed twice); never throws.
StatusOr<PreparedClaims> DecodeClaims(std::string_view text);

// NOT_FOUND when there is no file; DATA_LOSS or FAILED_PRECONDITION (a
// link, not a regular file, too large) naming the file otherwise.
StatusOr<PreparedClaims> LoadClaims(const std::filesystem::path& path);
Status SaveClaims(const std::filesystem::path& path,
                  const PreparedClaims& claims);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_CLAIM_CHECKPOINT_H_
