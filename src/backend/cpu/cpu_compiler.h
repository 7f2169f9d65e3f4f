/* cpu_compiler.h — running the host C++ compiler for the CPU backend.
 *
 * The compiler is ALLOY_CXX (a command that may carry arguments, split on
 * spaces, e.g. "clang++ -march=native") or "c++". It runs through
 * posix_spawnp (no shell), with stdout and stderr captured. */
#ifndef ALLOY_CPU_COMPILER_H
#define ALLOY_CPU_COMPILER_H

#include "alloy/status.h"

/* The compiler command as configured ("c++" or ALLOY_CXX). */
const char *alloy_cpu_compiler_command(void);

/* First line of `<cxx> --version`, or NULL when the compiler cannot be run.
 * Computed once (thread-safe). */
const char *alloy_cpu_compiler_version(void);

/* "<command> | <version line> | <arch>": part of every cache key, so that a
 * different compiler, version, flag in ALLOY_CXX or architecture never
 * reuses another's objects. Computed once (thread-safe). */
const char *alloy_cpu_compiler_identity(void);

/* The architecture this library runs on: "x86_64" or "aarch64". */
const char *alloy_cpu_arch(void);

/* Compiles the C++ file src_path into the shared object out_path.
 * ALLOY_ERROR_COMPILER_MISSING (message set) when the compiler cannot be
 * started; ALLOY_ERROR_COMPILE with the compiler's output in *log (malloc'd,
 * no message set: the core formats it) when it fails; the compiler's output
 * is discarded on success. */
alloy_status alloy_cpu_compile_file(const char *src_path, const char *out_path, char **log);

#endif
