/* The library's version, so an embedder can compare it with its headers'. */
#include "altar/version.h"

const char *altar_version(void) { return ALTAR_VERSION; }
