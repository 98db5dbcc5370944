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
 * The one way an app lays its command line over its config file:
 *
 *   app_config c;                                  // the built-in defaults
 *   cli::parser app{"rdgram-x", "...", 34};
 *   app.config("-c,--config", "TOML config file; options override it",
 *              [&](const std::string &path) { load_x_config(path, c); });
 *   app.add("--size", c.size, "...");              // bound to the field itself
 *   if (int rc = app.parse(sa.app); rc >= 0)
 *           return rc;                             // 0: --help, 2: error
 *
 * parse() gives defaults < file < command line: the options write their
 * fields, the file named by the config option (when given) is loaded into
 * the same struct, and the arguments are parsed again so that the options
 * given win over the file's keys. An option that is no field of the config
 * (one value setting two fields, a value to convert, a command-line-only
 * setting) is bound to a local and applied by the app after parse(): the
 * file is in by then, so it overrides the file too; count() says whether
 * it was given.
 *
 * Cold path: called once from main(), before the EAL starts.
 * (NOT thread safe)
 */
#ifndef RDGRAM_APPS_CLI_H
#define RDGRAM_APPS_CLI_H

#include <cstddef>
#include <cstdint>
#include <functional>
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

	/* Reads the file a path names into the struct the options are bound
	 * to, over what it holds; throws a std::runtime_error (rdgram's
	 * config_error) whose what() is the one line to print, with
	 * file:line:column and the key. */
	using config_loader = std::function<void(const std::string &path)>;

	/* The option naming the config file ("-c,--config"), and how parse()
	 * loads it. At most one per parser. */
	option config(const char *name, const char *description, config_loader load);

	/* Parses the app's arguments (after the EAL's "--": split_args::app)
	 * and, when the config option was given, loads its file and parses
	 * again (defaults < file < command line: the header comment).
	 * Returns -1 when the app goes on; otherwise main() returns the value:
	 * 0 after --help was printed on stdout, 2 after one line on stderr:
	 * a parse error as "<name>: <error> (see --help)", a config error as
	 * "<name>: <what the loader threw>". count() and parsed() then tell
	 * the last parse's. */
	int parse(const std::vector<std::string> &args);

	/* The config file given, or "". */
	const std::string &config_path() const { return config_path_; }

private:
	int parse_once(const std::vector<std::string> &args);

	std::unique_ptr<CLI::App> owned_;
	std::string name_;
	std::string config_path_;
	config_loader load_;
};

} // namespace rdgram::cli

#endif
