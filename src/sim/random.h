// Draws the simulator's generators share. std::mt19937_64 is specified bit
// for bit by the standard but its distributions are not; these are, so that
// a seed gives the same workload with any standard library.
#ifndef HF_SIM_RANDOM_H_
#define HF_SIM_RANDOM_H_

#include <random>

namespace hf::sim {

// A double in [0, 1) from the generator's top 53 bits.
inline double Uniform(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace hf::sim

#endif  // HF_SIM_RANDOM_H_
