// `heteroflow simulate`: the offline simulator's command line.
#ifndef HF_SIM_SIMULATE_COMMAND_H_
#define HF_SIM_SIMULATE_COMMAND_H_

namespace hf::sim {

// Parses flags, runs the simulation, prints the result. Returns the process
// exit code: 0 on success, 2 on bad input (with a message naming the file and
// line on stderr).
int RunSimulateCommand(int argc, char** argv);

}  // namespace hf::sim

#endif  // HF_SIM_SIMULATE_COMMAND_H_
