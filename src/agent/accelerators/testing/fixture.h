// Tests' access to the vendor tools' sample outputs in
// src/agent/testdata/accelerators/<vendor>/ (README.md there): each file is
// a header of "# " lines naming its source, a "#---" line, then the output
// as the tool printed it.
#ifndef HF_AGENT_ACCELERATORS_TESTING_FIXTURE_H_
#define HF_AGENT_ACCELERATORS_TESTING_FIXTURE_H_

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace hf::agent::accel::testing {

// The output part of testdata/accelerators/<path>; fails the test when the
// file is missing or has no "#---" line.
inline std::string Fixture(const std::string& path) {
  const std::string full = std::string(HF_AGENT_TESTDATA) + "/accelerators/" + path;
  std::ifstream in(full, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << full;
  std::ostringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  const size_t mark = text.find("\n#---\n");
  EXPECT_NE(mark, std::string::npos) << full << " has no #--- line";
  return mark == std::string::npos ? std::string() : text.substr(mark + 6);
}

}  // namespace hf::agent::accel::testing

#endif  // HF_AGENT_ACCELERATORS_TESTING_FIXTURE_H_
