// `heteroflow agent`: parses the flags, builds the inventory and runs the
// agent (agent.h) until SIGINT or SIGTERM. See docs/AGENT.md.
//
// Exit codes: 0 after a signal, 1 when the server refuses the token or the
// node, or the inventory cannot be read, 2 for bad usage.
#ifndef HF_AGENT_AGENT_COMMAND_H_
#define HF_AGENT_AGENT_COMMAND_H_

namespace hf::agent {

// argv[0] is "agent".
int RunAgentCommand(int argc, char** argv);

}  // namespace hf::agent

#endif  // HF_AGENT_AGENT_COMMAND_H_
