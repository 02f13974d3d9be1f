/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/version.h — the version of the headers, and of the library at run
/// time.
///
/// kdag follows semantic versioning. While the major version is 0, a new
/// minor version may change the API and the ABI; the shared library's SONAME
/// carries major.minor (libkdag.so.0.2), so a program runs only against the
/// minor version it was built with. From 1.0 on, the SONAME carries the
/// major version alone. This file is the single source of the version: the
/// build, kdagConfigVersion.cmake and kdag.pc read it.
#ifndef KDAG_VERSION_H
#define KDAG_VERSION_H

#include "kdag/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KD_VERSION_MAJOR 0 ///< incompatible API or ABI changes (from 1.0 on)
#define KD_VERSION_MINOR 2 ///< added features; while the major is 0, also breaking changes
#define KD_VERSION_PATCH 0 ///< fixes only

/// One number that orders versions: 0.2.0 is 2000, 1.4.12 is 1004012.
#define KD_VERSION_ENCODE(major, minor, patch) ((major) * 1000000u + (minor) * 1000u + (patch))
/// The headers' version as one number (kd_version() gives the library's).
#define KD_VERSION KD_VERSION_ENCODE(KD_VERSION_MAJOR, KD_VERSION_MINOR, KD_VERSION_PATCH)

/// The loaded library's KD_VERSION, which differs from the headers' when a
/// program runs against another build than it was compiled with. Never
/// fails; thread-safe.
KD_API unsigned kd_version(void);

/// The loaded library's version as text, "0.2.0". Static storage; never
/// fails; thread-safe.
KD_API const char *kd_version_string(void);

#ifdef __cplusplus
}
#endif
#endif /* KDAG_VERSION_H */
