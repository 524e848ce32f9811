// health_test_server: serves only grpc.health.v1.Health/Check ("" SERVING)
// on the Unix socket given as its one argument until killed; for the tests
// of berth-health-probe and tools/devlib.
#include <cstdio>
#include <memory>
#include <string>

#include "grpc_health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

class Health final : public grpc::health::v1::Health::Service {
  grpc::Status Check(grpc::ServerContext*,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override {
    if (!request->service().empty()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: health_test_server SOCKET [IGNORED...]\n");
    return 2;
  }
  Health health;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("unix:") + argv[1],
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "health_test_server: cannot serve on %s\n", argv[1]);
    return 1;
  }
  server->Wait();
  return 0;
}
