/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * TOML configuration (toml++) with errors a user can act on: every bad key,
 * bad value or unknown key is reported as "file:line:column: key 'a.b':
 * expected ..., got ...", and parsing stops at the first.
 */
#ifndef RDGRAM_CONFIG_H
#define RDGRAM_CONFIG_H

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <rte_ether.h>
#include <toml++/toml.h>

#include "rdgram/wire.h"

namespace rdgram {

class config_error : public std::runtime_error {
public:
	using std::runtime_error::runtime_error;
};

/* Parses a file; throws config_error (with position) on a syntax error. */
toml::table parse_config_file(const std::string &path);
/* Parses text (tests); name stands for the file name in errors. */
toml::table parse_config_text(std::string_view text, const std::string &name);

/* Reads one table, remembering which keys were read so finish() can refuse
 * the others. */
class table_reader {
public:
	table_reader(const toml::table &t, std::string path, std::string file);

	int64_t get_int(const char *key, int64_t def, int64_t min, int64_t max);
	bool get_bool(const char *key, bool def);
	double get_double(const char *key, double def, double min, double max);
	std::string get_string(const char *key, const std::string &def);
	/* A string that must be one of choices. */
	std::string get_enum(const char *key, const std::string &def, const std::vector<std::string> &choices);
	std::vector<std::string> get_string_array(const char *key);
	rte_ether_addr get_mac(const char *key, const rte_ether_addr &def, bool *given = nullptr);
	/* An IPv4 or IPv6 address, as a GID (IPv4-mapped for IPv4). */
	std::optional<wire::gid> get_ip(const char *key);
	std::vector<wire::gid> get_ip_array(const char *key);
	std::optional<table_reader> get_table(const char *key);
	std::vector<table_reader> get_table_array(const char *key);
	/* One table ([key]: one reader) or an array of them ([[key]]). */
	std::vector<table_reader> get_tables(const char *key);
	bool has(const char *key) const { return t_.contains(key); }

	/* Throws for any key that was never read. */
	void finish() const;
	/* A key this table no longer takes: when t has it, throws
	 * "file:line:column: unknown key 'a.key': <hint>" (the hint names
	 * what replaced it). */
	void refuse_renamed(const char *key, const std::string &hint) const;
	/* "file:line:column" of the table itself, for an error found after
	 * loading (a key the table should have had). */
	std::string position() const { return where(nullptr); }

	[[noreturn]] void fail(const char *key, const std::string &expected) const;
	const std::string &path() const { return path_; }

private:
	const toml::node *node(const char *key);
	std::string where(const toml::node *n) const;
	std::string full(const char *key) const;

	const toml::table &t_;
	std::string path_, file_;
	std::set<std::string> seen_;
};

bool parse_mac(const std::string &s, rte_ether_addr *out);
bool parse_ip(const std::string &s, wire::gid *out);
std::string format_gid(const wire::gid &g);

} // namespace rdgram

#endif
