/* kernel_file.h — the body-only kernel file format (`//! name:`, `//! inputs:`,
 * `//! outputs:`, `//! template:`, `//! header:`, `//! body:`; see
 * examples/README.md) as the CLI reads it.
 *
 * Why a wrapper: there must be ONE parser for the format, shared by the tests
 * and the CLI. It lives header-only in tests/example_loader.h (public API
 * only); this header is the single place the tools include it from, so moving
 * the loader later means changing one line here. */
#ifndef ALLOY_TOOLS_KERNEL_FILE_H
#define ALLOY_TOOLS_KERNEL_FILE_H

#include "../tests/example_loader.h"

#endif
