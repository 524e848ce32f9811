// The checks of what a driver claims in DriverCapabilities.isolation
// (plugins/DRIVERS.md, "Isolation"): one per claim, each skipped, with the
// claim named, when the driver does not make it.

#ifndef PLUGINS_CONFORMANCE_ISOLATION_CHECKS_H_
#define PLUGINS_CONFORMANCE_ISOLATION_CHECKS_H_

#include <vector>

#include "plugins/conformance/suite.h"

namespace berth::conformance {

// In the order they run, after the checks of the node's contract.
std::vector<Check> IsolationChecks();

}  // namespace berth::conformance

#endif  // PLUGINS_CONFORMANCE_ISOLATION_CHECKS_H_
