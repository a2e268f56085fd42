// sandlet.hpp alone, compiled as C++17 and C++20 (ctest abi-header-*): it must compile without a warning
// under -Wall -Wextra -pedantic -Werror. (Each part under sandlet/cxx/ is compiled alone the same way.)
// Only compiled, never run.
#include "sandlet/sandlet.hpp"

int sandlet_header_check();
int sandlet_header_check() { return static_cast<int>(sandlet::abi_version()); }
