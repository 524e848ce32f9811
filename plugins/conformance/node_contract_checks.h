// The checks of what berth-node relies on of a driver beyond each call
// (plugins/DRIVERS.md): task directory, output files and their rotation,
// work_dir, network modes, an exit while the driver is down, 100 tasks
// waited on at once, Shutdown with calls open.

#ifndef PLUGINS_CONFORMANCE_NODE_CONTRACT_CHECKS_H_
#define PLUGINS_CONFORMANCE_NODE_CONTRACT_CHECKS_H_

#include <vector>

#include "plugins/conformance/suite.h"

namespace berth::conformance {

// In the order they run, after the checks of each call.
std::vector<Check> NodeContractChecks();

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_NODE_CONTRACT_CHECKS_H_
