// Builds against the installed DRA framework alone and runs it: a driver
// with nothing to prepare serves its sockets under DIR, which exist while
// it runs and are gone after Stop. Exit 0 when all of that held.
//   draplugin-consumer DIR
#include <filesystem>
#include <iostream>
#include <vector>

#include "topology/draplugin/driver.h"

namespace {

class NoClaims : public topology::draplugin::ClaimSource {
 public:
  topology::StatusOr<topology::draplugin::Claim> Get(
      const topology::draplugin::ClaimRef& ref,
      const std::string& /*driver*/) override {
    return topology::NotFoundError("no claim " + ref.uid);
  }
};

class NoDevices : public topology::draplugin::DriverHandler {
 public:
  topology::StatusOr<std::vector<topology::draplugin::PreparedDevice>> Prepare(
      const topology::draplugin::Claim& /*claim*/) override {
    return std::vector<topology::draplugin::PreparedDevice>{};
  }
  topology::Status Unprepare(
      const topology::draplugin::ClaimRef& /*claim*/,
      const std::vector<topology::draplugin::PreparedDevice>& /*devices*/)
      override {
    return topology::OkStatus();
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: draplugin-consumer DIR\n";
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::absolute(argv[1]);
  NoClaims source;
  NoDevices handler;
  topology::draplugin::DriverOptions options;
  options.driver_name = "consumer.example.com";
  options.registry_dir = dir / "registry";
  options.plugin_dir = dir / "plugin";
  auto runner =
      topology::draplugin::DriverRunner::Create(options, &source, &handler);
  if (!runner.ok()) {
    std::cerr << runner.status().ToString() << "\n";
    return 1;
  }
  if (auto started = (*runner)->Start(); !started.ok()) {
    std::cerr << started.ToString() << "\n";
    return 1;
  }
  const bool serving =
      std::filesystem::exists((*runner)->dra_socket()) &&
      std::filesystem::exists((*runner)->registration_socket());
  (*runner)->Stop();
  const bool removed = !std::filesystem::exists((*runner)->dra_socket());
  std::cout << "serving: " << serving << ", removed: " << removed << "\n";
  return serving && removed ? 0 : 1;
}
