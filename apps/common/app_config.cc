/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "app_config.h"

namespace rdgram::apps {

app_config_file::app_config_file(const std::string &path, const app_layout &l, app_common &c,
				 rdma_device_config *rdma)
	: doc_(std::make_unique<toml::table>(parse_config_file(path))),
	  root_(std::make_unique<table_reader>(*doc_, "", path))
{
	if (table_reader *t = table("eal")) {
		c.eal_args = t->get_string_array("args");
		c.capture = t->get_enum("capture", c.capture, {"auto", "on", "off"});
	}
	if (table_reader *t = table(l.table))
		c.driver = t->get_enum("driver", c.driver, {"soft", "verbs", "mlx5", "efa"});
	if (table_reader *t = table(l.workers_table != nullptr ? l.workers_table : l.table))
		c.workers = uint32_t(t->get_int("workers", c.workers, 1, l.max_workers));
	if (rdma != nullptr)
		if (table_reader *t = table("rdma"))
			read_rdma_keys(*t, *rdma, l.min_gid_index);
}

app_config_file::~app_config_file() = default;

table_reader *app_config_file::table(const char *name)
{
	auto it = tables_.find(name);
	if (it == tables_.end())
		it = tables_.emplace(name, root_->get_table(name)).first;
	return it->second ? &*it->second : nullptr;
}

void app_config_file::finish()
{
	for (auto &[name, t] : tables_)
		if (t)
			t->finish();
	root_->finish();
}

} // namespace rdgram::apps
