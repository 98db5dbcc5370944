/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The settings every app reads the same way (docs/APPS.md, "Settings
 * every app shares"), read once, here:
 *
 *   [eal]    args, capture
 *   [<app>]  driver, workers   (the app's own table: [perf], [fwd], [job],
 *                               [mcast], [ah]; rdgram-coll's workers are
 *                               in [poll])
 *   [rdma]   device, port, gid_index (rdma_config.h)
 *
 * An app's loader opens its file through app_config_file, reads only its
 * own keys from the tables it hands out, and calls finish():
 *
 *   apps::app_config_file f(path, {.table = "fwd", .max_workers = 64}, c, &c.rdma);
 *   if (auto *t = f.table("fwd"))
 *           c.mode = t->get_enum("mode", c.mode, {"reflect", "forward"});
 *   if (auto *t = f.table("rdma"))
 *           c.rdma.qkey = ...;
 *   f.finish();
 *
 * Errors are config_error with file:line:column and the key
 * (rdgram/config.h). (Main thread, before the EAL.)
 */
#ifndef RDGRAM_APPS_APP_CONFIG_H
#define RDGRAM_APPS_APP_CONFIG_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rdgram/config.h"
#include "rdma_config.h"

namespace rdgram::apps {

/* The fields behind the keys above; each app's config derives from it. */
struct app_common {
	std::vector<std::string> eal_args; /* [eal] args: used when none on the command line */
	std::string capture = "auto";     /* [eal] capture: auto | on | off (runtime.h capture_mode) */
	std::string driver = "soft";      /* soft | verbs | mlx5 | efa (driver.h) */
	uint32_t workers = 1;             /* poll threads (--workers) */
};

/* Where an app keeps driver and workers, and their bounds. */
struct app_layout {
	const char *table;                  /* the app's own table (driver; workers too by default) */
	uint32_t max_workers;
	const char *workers_table = nullptr; /* nullptr: table */
	int min_gid_index = 0;              /* [rdma] gid_index's lower bound (-1: may say "not given") */
};

class app_config_file {
public:
	/* Parses path and reads the shared keys into c (and [rdma]'s into
	 * rdma, when the app has an RDMA device). Throws config_error. */
	app_config_file(const std::string &path, const app_layout &l, app_common &c,
			rdma_device_config *rdma = nullptr);
	app_config_file(const app_config_file &) = delete;
	app_config_file &operator=(const app_config_file &) = delete;
	~app_config_file();

	/* The file's top level, for the app's tables of its own, and the
	 * document itself (for tables whose keys the user names). */
	table_reader &root() { return *root_; }
	const toml::table &doc() const { return *doc_; }
	/* The table name, for the app's own keys (nullptr when the file has
	 * none); the same reader each time, so that finish() knows what was
	 * read. */
	table_reader *table(const char *name);
	/* Every key the app did not read, in any table handed out and at the
	 * top level, is an error (the first one throws). */
	void finish();

private:
	std::unique_ptr<toml::table> doc_;
	std::unique_ptr<table_reader> root_;
	std::map<std::string, std::optional<table_reader>> tables_;
};

} // namespace rdgram::apps

#endif
