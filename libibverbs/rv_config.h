/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-verbs' configuration (rdgram-verbs(1), docs/VERBS.md): an optional
 * [eal] args, and one [[port]] per verbs device: the port table of every
 * app (soft_config_toml.h, docs/PORTS.md), named rdg0, rdg1, ... by
 * default (the verbs device name), with devargs and addresses required
 * (the GID table after the link-local GID).
 *
 * Read twice, by the same loader: by rdgram-verbs before it starts the
 * program (errors: "file:line:column: key ...", exit 2) and by the library
 * in the program's process. (NOT thread safe: cold path.)
 */
#ifndef RDGRAM_RV_CONFIG_H
#define RDGRAM_RV_CONFIG_H

#include <string>

#include "soft_config_toml.h"

namespace rdgram::rv {

/* One [[port]] (soft_config_toml.h): a verbs device. */
using rv_port_config = soft::port_config;
using rv_config = soft::port_file;

/* The environment variable rdgram-verbs sets to the config's path. */
inline constexpr const char *config_env = "RDGRAM_VERBS_CONFIG";

/* Reads path (soft::load_port_file with soft::verbs_port_rules); throws
 * config_error ("file:line:column: key ...: expected ...") at the first
 * bad or unknown key, and for a config without ports. */
inline rv_config load_config(const std::string &path)
{
	return soft::load_port_file(path, soft::verbs_port_rules());
}

} // namespace rdgram::rv

#endif
