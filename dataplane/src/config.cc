/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/config.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <sstream>

namespace rdgram {

namespace {
std::string pos(const std::string &file, const toml::source_region &r)
{
	return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

std::string describe(const toml::node &n)
{
	std::ostringstream o;
	switch (n.type()) {
	case toml::node_type::string:
		o << '"' << n.as_string()->get() << '"';
		break;
	case toml::node_type::table:
		o << "a table";
		break;
	case toml::node_type::array:
		o << "an array";
		break;
	default:
		n.visit([&](auto &&v) {
			if constexpr (toml::is_value<decltype(v)>)
				o << *v;
			else
				o << "a value";
		});
	}
	return o.str();
}
} // namespace

toml::table parse_config_text(std::string_view text, const std::string &name)
{
	try {
		return toml::parse(text, name);
	} catch (const toml::parse_error &e) {
		throw config_error(pos(name, e.source()) + ": " + std::string(e.description()));
	}
}

toml::table parse_config_file(const std::string &path)
{
	FILE *f = fopen(path.c_str(), "rb");
	if (f == nullptr)
		throw config_error(path + ": cannot open: " + strerror(errno));
	std::string text;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		text.append(buf, n);
	fclose(f);
	return parse_config_text(text, path);
}

table_reader::table_reader(const toml::table &t, std::string path, std::string file)
	: t_(t), path_(std::move(path)), file_(std::move(file))
{
}

std::string table_reader::full(const char *key) const
{
	return path_.empty() ? std::string(key) : path_ + "." + key;
}

std::string table_reader::where(const toml::node *n) const
{
	if (n != nullptr && n->source().begin.line != 0)
		return pos(file_, n->source());
	if (t_.source().begin.line != 0)
		return pos(file_, t_.source());
	return file_ + ":1:1";
}

const toml::node *table_reader::node(const char *key)
{
	seen_.insert(key);
	return t_.get(key);
}

void table_reader::fail(const char *key, const std::string &expected) const
{
	const toml::node *n = t_.get(key);
	std::string got = n != nullptr ? ", got " + describe(*n) : "";
	throw config_error(where(n) + ": key '" + full(key) + "': expected " + expected + got);
}

int64_t table_reader::get_int(const char *key, int64_t def, int64_t min, int64_t max)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return def;
	/* The type first: toml++ 3.3's value<int64_t>() converts a float with an
	 * unchecked cast, undefined beyond int64's range (found by fuzz_config). */
	auto v = n->is_integer() ? n->value<int64_t>() : std::nullopt;
	if (!v || *v < min || *v > max)
		fail(key, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
	return *v;
}

bool table_reader::get_bool(const char *key, bool def)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return def;
	if (!n->is_boolean())
		fail(key, "true or false");
	return n->as_boolean()->get();
}

double table_reader::get_double(const char *key, double def, double min, double max)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return def;
	auto v = n->value<double>();
	if (!(n->is_floating_point() || n->is_integer()) || !v || *v < min || *v > max)
		fail(key, "a number from " + std::to_string(min) + " to " + std::to_string(max));
	return *v;
}

std::string table_reader::get_string(const char *key, const std::string &def)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return def;
	if (!n->is_string())
		fail(key, "a string");
	return n->as_string()->get();
}

std::string table_reader::get_enum(const char *key, const std::string &def,
				   const std::vector<std::string> &choices)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return def;
	std::string all;
	for (const auto &c : choices)
		all += (all.empty() ? "\"" : ", \"") + c + "\"";
	if (!n->is_string())
		fail(key, "one of " + all);
	std::string v = n->as_string()->get();
	for (const auto &c : choices)
		if (c == v)
			return v;
	fail(key, "one of " + all);
}

std::vector<std::string> table_reader::get_string_array(const char *key)
{
	std::vector<std::string> out;
	const toml::node *n = node(key);
	if (n == nullptr)
		return out;
	if (!n->is_array())
		fail(key, "an array of strings");
	for (const auto &e : *n->as_array()) {
		if (!e.is_string())
			throw config_error(where(&e) + ": key '" + full(key) + "': expected an array of strings, got " +
					   describe(e));
		out.push_back(e.as_string()->get());
	}
	return out;
}

bool parse_mac(const std::string &s, rte_ether_addr *out)
{
	unsigned b[6];
	char tail;
	if (sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
		return false;
	for (int i = 0; i < 6; i++) {
		if (b[i] > 0xff)
			return false;
		out->addr_bytes[i] = uint8_t(b[i]);
	}
	return true;
}

bool parse_ip(const std::string &s, wire::gid *out)
{
	in_addr a4;
	if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
		*out = wire::gid::from_v4(a4.s_addr);
		return true;
	}
	in6_addr a6;
	if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
		memcpy(out->raw, &a6, 16);
		return true;
	}
	return false;
}

std::string format_gid(const wire::gid &g)
{
	char buf[INET6_ADDRSTRLEN];
	if (g.is_v4_mapped())
		inet_ntop(AF_INET, g.raw + 12, buf, sizeof(buf));
	else
		inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
	return buf;
}

rte_ether_addr table_reader::get_mac(const char *key, const rte_ether_addr &def, bool *given)
{
	const toml::node *n = node(key);
	if (given != nullptr)
		*given = n != nullptr;
	if (n == nullptr)
		return def;
	rte_ether_addr m;
	if (!n->is_string() || !parse_mac(n->as_string()->get(), &m))
		fail(key, "a MAC address like \"02:00:00:00:00:01\"");
	return m;
}

std::optional<wire::gid> table_reader::get_ip(const char *key)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return std::nullopt;
	wire::gid g;
	if (!n->is_string() || !parse_ip(n->as_string()->get(), &g))
		fail(key, "an IPv4 or IPv6 address");
	return g;
}

std::vector<wire::gid> table_reader::get_ip_array(const char *key)
{
	std::vector<wire::gid> out;
	const toml::node *n = node(key);
	if (n == nullptr)
		return out;
	if (!n->is_array())
		fail(key, "an array of IPv4/IPv6 addresses");
	for (const auto &e : *n->as_array()) {
		wire::gid g;
		if (!e.is_string() || !parse_ip(e.as_string()->get(), &g))
			throw config_error(where(&e) + ": key '" + full(key) +
					   "': expected an IPv4 or IPv6 address, got " + describe(e));
		out.push_back(g);
	}
	return out;
}

std::optional<table_reader> table_reader::get_table(const char *key)
{
	const toml::node *n = node(key);
	if (n == nullptr)
		return std::nullopt;
	if (!n->is_table())
		fail(key, "a table");
	return table_reader(*n->as_table(), full(key), file_);
}

std::vector<table_reader> table_reader::get_table_array(const char *key)
{
	std::vector<table_reader> out;
	const toml::node *n = node(key);
	if (n == nullptr)
		return out;
	if (!n->is_array_of_tables())
		fail(key, "an array of tables ([[" + full(key) + "]])");
	size_t i = 0;
	for (const auto &e : *n->as_array())
		out.emplace_back(*e.as_table(), full(key) + "[" + std::to_string(i++) + "]", file_);
	return out;
}

std::vector<table_reader> table_reader::get_tables(const char *key)
{
	const toml::node *n = t_.get(key);
	if (n != nullptr && n->is_table()) {
		seen_.insert(key);
		return {table_reader(*n->as_table(), full(key), file_)};
	}
	if (n != nullptr && !n->is_array_of_tables())
		fail(key, "a table ([" + full(key) + "]) or an array of tables ([[" + full(key) + "]])");
	return get_table_array(key);
}

void table_reader::finish() const
{
	for (const auto &[k, v] : t_) {
		if (seen_.count(std::string(k.str())) == 0) {
			std::string where_ = k.source().begin.line != 0 ? pos(file_, k.source()) : where(&v);
			throw config_error(where_ + ": unknown key '" + full(std::string(k.str()).c_str()) + "'");
		}
	}
}

void table_reader::refuse_renamed(const char *key, const std::string &hint) const
{
	for (const auto &[k, v] : t_)
		if (k.str() == key) {
			std::string w = k.source().begin.line != 0 ? pos(file_, k.source()) : where(&v);
			throw config_error(w + ": unknown key '" + full(key) + "': " + hint);
		}
}

} // namespace rdgram
