/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The apps' command lines, behind a small non-template interface so that
 * CLI11 (header-only, ~10 s of compile time per translation unit that
 * includes it) is compiled once, in cli.cc, instead of once per app.
 *
 * Only what the apps use: options bound to the value types below, flags,
 * range and set-membership checks, required and positional arguments,
 * subcommands. The help text and the error messages are CLI11's own: each
 * call below is the CLI11 call of the same name with the same types.
 *
 * Cold path: called once from main(), before the EAL starts.
 * (NOT thread safe)
 */
#ifndef RDGRAM_APPS_CLI_H
#define RDGRAM_APPS_CLI_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
} // namespace CLI

namespace rdgram::cli {

/* One option or positional argument; refines it in place (chainable). The
 * command that made it owns it. */
class option {
public:
	explicit option(CLI::Option *o) : o_(o) {}
	/* CLI::Range(lo, hi): the value, read as the bound type of the range,
	 * must lie in [lo, hi]. The range type shows in --help ("UINT in
	 * [1 - 64]"), so it is the caller's, not widened here. */
	option &range(uint32_t lo, uint32_t hi);
	option &range(int32_t lo, int32_t hi);
	option &range(uint64_t lo, uint64_t hi);
	option &range(int64_t lo, int64_t hi);
	option &range(double lo, double hi);
	/* CLI::IsMember: the value must be one of these strings. */
	option &one_of(std::initializer_list<const char *> names);
	option &required();

private:
	CLI::Option *o_;
};

/* The app or one of its subcommands. */
class command {
public:
	/* add_option(name, value, description): "-s,--size" for an option,
	 * a bare name ("N") for a positional argument. CLI11 writes value
	 * while parsing; a vector collects repeated options. */
	option add(const char *name, std::string &value, const char *description);
	option add(const char *name, uint32_t &value, const char *description);
	option add(const char *name, int32_t &value, const char *description);
	option add(const char *name, uint64_t &value, const char *description);
	option add(const char *name, int64_t &value, const char *description);
	option add(const char *name, double &value, const char *description);
	option add(const char *name, std::vector<std::string> &value, const char *description);
	/* add_flag: value becomes true when the flag is given. */
	option flag(const char *name, bool &value, const char *description);

	command subcommand(const char *name, const char *description);
	/* The app's options are also accepted after this subcommand. */
	void fallthrough();
	/* Exactly n subcommands must be given. */
	void require_subcommand(int n);
	/* True when this subcommand was on the command line. */
	bool parsed() const;
	/* How many times the named option was given ("--size"). */
	size_t count(const char *name) const;

protected:
	explicit command(CLI::App *a) : app_(a) {}
	CLI::App *app_;
};

/* The app's command line: owns the CLI11 app and its subcommands. */
class parser : public command {
public:
	/* name prefixes each error message; description heads --help, whose
	 * option names are padded to column_width. */
	parser(const char *name, const std::string &description, size_t column_width);
	~parser();
	parser(const parser &) = delete;
	parser &operator=(const parser &) = delete;

	/* Parses the app's arguments (after the EAL's "--": split_args::app).
	 * Returns -1 when the app goes on; otherwise main() returns the value:
	 * 0 after --help was printed on stdout, 2 after a parse error was
	 * printed on stderr as one line, "<name>: <error> (see --help)".
	 * May be called again, e.g. after a config file was applied to the
	 * bound values, so that the options given override it: the values
	 * bound are kept, the previous parse's counts are cleared. */
	int parse(const std::vector<std::string> &args);

private:
	std::unique_ptr<CLI::App> owned_;
	std::string name_;
};

} // namespace rdgram::cli

#endif
