// The benchmarks' real API server: scripts/kube-cluster's control plane,
// started at first use in a directory of the run's own, stopped at exit.
#ifndef TOPOLOGY_TESTS_BENCHMARKS_API_SERVER_H_
#define TOPOLOGY_TESTS_BENCHMARKS_API_SERVER_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"

#include "build_paths.h"
#include "temp_dir.h"

namespace topology::benchmarks {

// The run's API server: started at first use, stopped at exit. `error`
// says why there is none.
class ApiServer {
 public:
  static ApiServer& Get() {
    static ApiServer server;
    return server;
  }
  ~ApiServer() {
    if (started_) {
      // The directory it was started in: the server and etcd stop, none
      // left running after the program.
      (void)std::system(("'" + Script() + "' stop '" +
                         (dir_.path() / "server").string() +
                         "' >/dev/null 2>&1")
                            .c_str());
    }
  }
  // The server, or nullptr with `state` skipped saying why there is none.
  static ApiServer* OrSkip(benchmark::State& state) {
    ApiServer& server = Get();
    if (server.error_.empty()) return &server;
    state.SkipWithError(server.error_.c_str());
    return nullptr;
  }
  // A client with the driver's credentials (the deployment's RBAC).
  std::unique_ptr<draplugin::KubeClient> DriverClient() const {
    auto config = draplugin::LoadKubeConfig(driver_kubeconfig_);
    if (!config.ok()) std::abort();
    return std::move(*draplugin::KubeClient::Create(*config));
  }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& driver_kubeconfig() const { return driver_kubeconfig_; }
  draplugin::KubeClient* admin() const { return admin_.get(); }

 private:
  static std::string Script() {
    return topology::testing::SourceDir() + "/scripts/kube-cluster";
  }
  ApiServer() {
    const std::string dir = dir_.path() / "server";
    if (std::system(("'" + Script() + "' fixture '" + dir +
                     "' --control-plane-only >/dev/null 2>&1")
                        .c_str()) != 0) {
      error_ = "scripts/kube-cluster could not start a cluster";
      return;
    }
    started_ = true;
    std::ifstream env(std::filesystem::path(dir) / "env");
    if (!env) {
      std::ifstream unavailable(std::filesystem::path(dir) / "unavailable");
      error_.assign(std::istreambuf_iterator<char>(unavailable), {});
      if (error_.empty()) error_ = "no Kubernetes cluster";
      return;
    }
    for (std::string line; std::getline(env, line);) {
      if (line.starts_with("KUBECONFIG=")) kubeconfig_ = line.substr(11);
      if (line.starts_with("KUBECONFIG_DRIVER=")) {
        driver_kubeconfig_ = line.substr(18);
      }
    }
    auto config = draplugin::LoadKubeConfig(kubeconfig_);
    if (!config.ok()) {
      error_ = config.status().ToString();
      return;
    }
    admin_ = std::move(*draplugin::KubeClient::Create(*config));
  }
  topology::testing::TempDir dir_;
  bool started_ = false;
  std::string error_;
  std::string kubeconfig_;
  std::string driver_kubeconfig_;
  std::unique_ptr<draplugin::KubeClient> admin_;
};

}  // namespace topology::benchmarks

#endif  // TOPOLOGY_TESTS_BENCHMARKS_API_SERVER_H_
