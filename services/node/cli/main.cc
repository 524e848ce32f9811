// berth: the command line of berth-node. See README.md.

#include <string>
#include <vector>

#include "services/node/cli/commands.h"

int main(int argc, char** argv) {
  const berth::cli::CliEnvironment env;
  return berth::cli::RunCli(std::vector<std::string>(argv + 1, argv + argc),
                            env);
}
