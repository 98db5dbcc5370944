/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The only translation unit that includes CLI11 (cli.h says why).
 */
#include "cli.h"

#include <cstdio>
#include <stdexcept>

#include <CLI/CLI.hpp>

namespace rdgram::cli {

namespace {

template <typename T>
option add_bound(CLI::App *app, const char *name, T &value, const char *description)
{
	return option(app->add_option(name, value, description));
}

} // namespace

option &option::range(uint32_t lo, uint32_t hi)
{
	o_->check(CLI::Range(lo, hi));
	return *this;
}

option &option::range(int32_t lo, int32_t hi)
{
	o_->check(CLI::Range(lo, hi));
	return *this;
}

option &option::range(uint64_t lo, uint64_t hi)
{
	o_->check(CLI::Range(lo, hi));
	return *this;
}

option &option::range(int64_t lo, int64_t hi)
{
	o_->check(CLI::Range(lo, hi));
	return *this;
}

option &option::range(double lo, double hi)
{
	o_->check(CLI::Range(lo, hi));
	return *this;
}

option &option::one_of(std::initializer_list<const char *> names)
{
	o_->check(CLI::IsMember(std::vector<std::string>(names.begin(), names.end())));
	return *this;
}

option &option::required()
{
	o_->required();
	return *this;
}

option command::add(const char *name, std::string &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, uint32_t &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, int32_t &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, uint64_t &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, int64_t &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, double &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::add(const char *name, std::vector<std::string> &value, const char *description)
{
	return add_bound(app_, name, value, description);
}

option command::flag(const char *name, bool &value, const char *description)
{
	return option(app_->add_flag(name, value, description));
}

command command::subcommand(const char *name, const char *description)
{
	return command(app_->add_subcommand(name, description));
}

void command::fallthrough()
{
	app_->fallthrough();
}

void command::require_subcommand(int n)
{
	app_->require_subcommand(n);
}

bool command::parsed() const
{
	return app_->parsed();
}

size_t command::count(const char *name) const
{
	return app_->count(name);
}

parser::parser(const char *name, const std::string &description, size_t column_width)
	: command(nullptr), owned_(std::make_unique<CLI::App>(description, name)), name_(name)
{
	app_ = owned_.get();
	app_->get_formatter()->column_width(column_width);
}

parser::~parser() = default;

option parser::config(const char *name, const char *description, config_loader load)
{
	load_ = std::move(load);
	return add(name, config_path_, description);
}

int parser::parse(const std::vector<std::string> &args)
{
	if (int rc = parse_once(args); rc >= 0)
		return rc;
	if (config_path_.empty() || !load_)
		return -1;
	/* The options wrote their fields; the file goes over them, then the
	 * options again over the file. */
	try {
		load_(config_path_);
	} catch (const std::runtime_error &e) {
		fprintf(stderr, "%s: %s\n", name_.c_str(), e.what());
		return 2;
	}
	return parse_once(args);
}

int parser::parse_once(const std::vector<std::string> &args)
{
	/* CLI11 takes the arguments last first and consumes them. A second
	 * parse clears the first one's results (CLI::App::parse does too). */
	std::vector<std::string> rev(args.rbegin(), args.rend());
	try {
		if (app_->parsed())
			app_->clear();
		app_->parse(rev);
	} catch (const CLI::CallForHelp &e) {
		return app_->exit(e);
	} catch (const CLI::CallForAllHelp &e) {
		return app_->exit(e);
	} catch (const CLI::ParseError &e) {
		fprintf(stderr, "%s: %s (see --help)\n", name_.c_str(), e.what());
		return 2;
	}
	return -1;
}

} // namespace rdgram::cli
