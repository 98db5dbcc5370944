/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * apps/common/cli.h's bind-and-parse, as every app uses it: options bound
 * to the config's fields, the -c file loaded by rdgram's TOML reader, and
 * defaults < file < command line.
 */
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli.h"
#include "rdgram/config.h"

using namespace rdgram;

namespace {

struct toy_config {
	uint32_t size = 64;
	double rate = 1.5;
	std::string mode = "both";
	std::vector<std::string> names = {"default"};
	bool json = false;
};

void load_toy(const std::string &path, toy_config &c)
{
	toml::table root = parse_config_file(path);
	table_reader r(root, "", path);
	if (auto t = r.get_table("toy")) {
		c.size = uint32_t(t->get_int("size", c.size, 1, 4096));
		c.rate = t->get_double("rate", c.rate, 0, 1e9);
		c.mode = t->get_enum("mode", c.mode, {"pub", "sub", "both"});
		if (t->has("names"))
			c.names = t->get_string_array("names");
		c.json = t->get_bool("json", c.json);
		t->finish();
	}
	r.finish();
}

/* A parser over c, as an app builds one; extra: an option that is no
 * field (applied after parse by the caller). */
struct toy_app {
	toy_config c;
	uint64_t extra = 0;
	cli::parser app{"rdgram-toy", "rdgram-toy: the test's app", 30};

	toy_app()
	{
		app.config("-c,--config", "TOML config file", [this](const std::string &p) { load_toy(p, c); });
		app.add("-s,--size", c.size, "bytes").range(1u, 4096u);
		app.add("--rate", c.rate, "per second").range(0.0, 1e9);
		app.add("--mode", c.mode, "pub, sub or both").one_of({"pub", "sub", "both"});
		app.add("--name", c.names, "a name; repeat for several");
		app.flag("--json", c.json, "JSON");
		app.add("--extra", extra, "not a field");
	}
	int parse(const std::vector<std::string> &args) { return app.parse(args); }
};

struct tmp_file {
	std::string path;
	explicit tmp_file(const std::string &text)
	{
		char p[] = "/tmp/rdgram_cli_XXXXXX";
		const int fd = mkstemp(p);
		EXPECT_GE(fd, 0);
		FILE *f = fdopen(fd, "w");
		fputs(text.c_str(), f);
		fclose(f);
		path = p;
	}
	~tmp_file() { remove(path.c_str()); }
};

} // namespace

/* No file: the options over the defaults. */
TEST(Cli, OptionsOverDefaults)
{
	toy_app a;
	ASSERT_EQ(a.parse({"--size", "128", "--json"}), -1);
	EXPECT_EQ(a.c.size, 128u);
	EXPECT_TRUE(a.c.json);
	EXPECT_EQ(a.c.rate, 1.5);
	EXPECT_EQ(a.c.mode, "both");
	EXPECT_EQ(a.c.names, std::vector<std::string>{"default"});
	EXPECT_EQ(a.app.config_path(), "");
}

/* defaults < file < command line, key by key; the option that is no
 * field is left to the caller, and count() tells the last parse's. */
TEST(Cli, FileOverDefaultsOptionsOverFile)
{
	tmp_file f("[toy]\nsize = 256\nrate = 7.0\nnames = [\"f1\", \"f2\"]\n");
	toy_app a;
	ASSERT_EQ(a.parse({"--rate", "9", "-c", f.path, "--extra", "5", "--mode", "pub"}), -1);
	EXPECT_EQ(a.c.size, 256u);    /* the file's */
	EXPECT_EQ(a.c.rate, 9.0);     /* the option's, over the file's */
	EXPECT_EQ(a.c.mode, "pub");   /* the option's, no key in the file */
	EXPECT_FALSE(a.c.json);       /* the default */
	EXPECT_EQ(a.c.names, (std::vector<std::string>{"f1", "f2"}));
	EXPECT_EQ(a.extra, 5u);
	EXPECT_EQ(a.app.count("--extra"), 1u);
	EXPECT_EQ(a.app.count("--size"), 0u);
	EXPECT_EQ(a.app.config_path(), f.path);
}

/* A repeated option collects into the vector field, replacing the file's
 * list and not doubled by the second parse. */
TEST(Cli, RepeatedOptionOverFileList)
{
	tmp_file f("[toy]\nnames = [\"f1\", \"f2\", \"f3\"]\njson = true\n");
	toy_app a;
	ASSERT_EQ(a.parse({"--name", "a", "-c", f.path, "--name", "b"}), -1);
	EXPECT_EQ(a.c.names, (std::vector<std::string>{"a", "b"}));
	EXPECT_TRUE(a.c.json); /* the file's flag stays when the option is not given */
	EXPECT_EQ(a.app.count("--name"), 2u);
}

/* A config error: one line, file:line:column and the key, exit 2. */
TEST(Cli, ConfigErrorLine)
{
	tmp_file f("[toy]\nsize = 5000\n");
	toy_app a;
	testing::internal::CaptureStderr();
	EXPECT_EQ(a.parse({"-c", f.path, "--size", "100"}), 2);
	const std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(err.rfind("rdgram-toy: " + f.path + ":2:8: key 'toy.size'", 0), 0u) << err;
	EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

	tmp_file g("[toy]\nsize = 8\nunknown = 1\n");
	toy_app b;
	testing::internal::CaptureStderr();
	EXPECT_EQ(b.parse({"--config", g.path}), 2);
	const std::string e2 = testing::internal::GetCapturedStderr();
	EXPECT_EQ(e2.rfind("rdgram-toy: " + g.path + ":", 0), 0u) << e2;
	EXPECT_NE(e2.find("unknown key 'toy.unknown'"), std::string::npos) << e2;

	toy_app m;
	testing::internal::CaptureStderr();
	EXPECT_EQ(m.parse({"-c", "/nonexistent/rdgram-toy.toml"}), 2);
	EXPECT_NE(testing::internal::GetCapturedStderr().find("rdgram-toy: /nonexistent/rdgram-toy.toml"),
		  std::string::npos);
}

/* --help: on stdout, exit 0, the file never read. */
TEST(Cli, HelpExitsZero)
{
	toy_app a;
	testing::internal::CaptureStdout();
	EXPECT_EQ(a.parse({"--help", "-c", "/nonexistent/x.toml"}), 0);
	const std::string out = testing::internal::GetCapturedStdout();
	EXPECT_NE(out.find("rdgram-toy: the test's app"), std::string::npos) << out;
	EXPECT_NE(out.find("--name"), std::string::npos) << out;
}

/* A bad option, a value out of range or not a member: one line, exit 2,
 * before the file is read. */
TEST(Cli, BadOptionExitsTwo)
{
	for (const std::vector<std::string> &args :
	     {std::vector<std::string>{"--no-such-option"}, {"--size", "0"}, {"--mode", "all"}, {"--rate", "x"}}) {
		toy_app a;
		testing::internal::CaptureStderr();
		EXPECT_EQ(a.parse(args), 2) << args[0];
		const std::string err = testing::internal::GetCapturedStderr();
		EXPECT_EQ(err.rfind("rdgram-toy: ", 0), 0u) << err;
		EXPECT_NE(err.find("(see --help)\n"), std::string::npos) << err;
	}
	/* The file's values are not in when the command line is wrong. */
	tmp_file f("[toy]\nsize = 9\n");
	toy_app b;
	testing::internal::CaptureStderr();
	EXPECT_EQ(b.parse({"-c", f.path, "--bogus"}), 2);
	testing::internal::GetCapturedStderr();
	EXPECT_EQ(b.c.size, 64u);
}
