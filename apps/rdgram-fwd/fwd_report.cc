/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "fwd_report.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <algorithm>
#include <map>

#include "rdgram/config.h"

namespace rdgram::fwd {

namespace {

using u64 = unsigned long long;

/* Totals over every port and QP, drops keyed by reason. */
struct totals {
	uint64_t frames = 0, delivered = 0, to_control = 0, reflected = 0, forwarded = 0;
	/* Steering between the workers' queues (soft, drivers/soft/soft_steer.h):
	 * frames this worker's queues handed to another worker's, those it
	 * took from the others, and group copies it made. */
	uint64_t handed_out = 0, handed_in = 0, copies = 0;
	uint64_t sent = 0, tx_pkts = 0, waiting = 0, dropped = 0;
	std::map<std::string, uint64_t> drops;
};

/* Adds one worker's counters to t. */
void add(totals &t, const fwd_config &c, const snapshot &s)
{
	auto drop = [&](const std::string &name, uint64_t v) {
		t.drops[name] += v;
		t.dropped += v;
	};
	for (size_t p = 0; p < c.ports.size(); p++) {
		const auto &ps = s.port[p];
		const uint64_t to_control = ps.drv.get("rx_to_control");
		const uint64_t out = ps.drv.get("rx_handoff_out"), in = ps.drv.get("rx_handoff_in");
		const uint64_t copies = ps.drv.get("rx_group_copies");
		/* What the queue took from the port: its own work, plus what it
		 * handed on, less what others handed it and its own copies. */
		t.frames += ps.drv.get("rx_pkts") + to_control + ps.drv.rx_drops() + out - in - copies;
		t.handed_out += out;
		t.handed_in += in;
		t.copies += copies;
		t.delivered += ps.drv.get("rx_pkts");
		t.to_control += to_control;
		t.tx_pkts += ps.drv.get("tx_pkts");
		t.waiting += ps.waiting;
		ps.drv.for_each([&](const xstat_name &n, uint64_t v) {
			if (n.kind == counter_kind::drop)
				drop(n.name, v);
		});
		for (unsigned i = 0; i < ps.nqp; i++) {
			t.reflected += ps.qc[i].reflected;
			t.forwarded += ps.qc[i].forwarded;
			t.sent += ps.reply[i].hits + ps.reply[i].flushed;
			drop("fwd_no_rule", ps.qc[i].fwd_no_rule);
			drop("reply_bad_wc", ps.qc[i].reply_bad_wc);
			drop("tx_full", ps.qc[i].tx_full);
#define X(name, desc) drop(#name, ps.reply[i].name);
			RDGRAM_PEND_DROPS(X)
#undef X
		}
	}
}

totals sum(const fwd_config &c, const std::vector<worker_view> &w)
{
	totals t;
	for (const worker_view &v : w)
		add(t, c, *v.snap);
	return t;
}

/* A port's driver counters summed over the workers' queues. */
drv_snap port_drv(const std::vector<worker_view> &w, size_t p)
{
	drv_snap d;
	for (const worker_view &v : w)
		d += v.snap->port[p].drv;
	return d;
}

std::string hex(uint32_t v)
{
	char b[16];
	snprintf(b, sizeof(b), "0x%x", v);
	return b;
}

std::string json_str(const std::string &s)
{
	std::string o = "\"";
	for (char ch : s) {
		if (ch == '"' || ch == '\\')
			o += '\\', o += ch;
		else if (uint8_t(ch) < 0x20) {
			char b[8];
			snprintf(b, sizeof(b), "\\u%04x", ch);
			o += b;
		} else
			o += ch;
	}
	return o + "\"";
}

void json_totals(FILE *f, const totals &t, const char *indent)
{
	fprintf(f,
		"{\"frames_received\": %llu, \"delivered\": %llu, \"to_control\": %llu, "
		"\"handed_out\": %llu, \"handed_in\": %llu, \"group_copies\": %llu, "
		"\"reflected\": %llu, \"forwarded\": %llu, \"handed_to_driver\": %llu, \"tx_pkts\": %llu, "
		"\"waiting\": %llu, \"dropped\": %llu,\n%s\"drops\": {",
		u64(t.frames), u64(t.delivered), u64(t.to_control), u64(t.handed_out), u64(t.handed_in), u64(t.copies),
		u64(t.reflected), u64(t.forwarded), u64(t.sent), u64(t.tx_pkts), u64(t.waiting), u64(t.dropped), indent);
	bool first = true;
	for (const auto &[k, v] : t.drops) {
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", k.c_str(), u64(v));
		first = false;
	}
	fprintf(f, "}}");
}

void json_drv(FILE *f, const drv_snap &d)
{
	fprintf(f, "{");
	bool first = true;
	d.for_each([&](const xstat_name &n, uint64_t v) {
		fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", n.name, u64(v));
		first = false;
	});
	fprintf(f, "}");
}

} // namespace

void write_json(FILE *f, const fwd_config &c, const std::vector<worker_view> &w,
		const std::vector<port_report> &ports, const char *why)
{
	double elapsed = 0;
	for (const worker_view &v : w)
		elapsed = std::max(elapsed, v.snap->elapsed_s);
	fprintf(f,
		"{\n  \"app\": \"rdgram-fwd\",\n  \"driver\": %s,\n  \"workers\": %zu,\n  \"mode\": %s,\n"
		"  \"elapsed_s\": %.6f,\n  \"stopped\": %s,\n",
		json_str(c.driver).c_str(), w.size(), json_str(c.mode).c_str(), elapsed, json_str(why).c_str());
	fprintf(f, "  \"ports\": [\n");
	for (size_t p = 0; p < ports.size(); p++) {
		const port_report &pr = ports[p];
		fprintf(f, "    {\"name\": %s, \"device\": %s, \"port_id\": %u,\n", json_str(pr.cfg->name).c_str(),
			json_str(pr.device).c_str(), pr.port_id);
		if (pr.have_eth)
			fprintf(f,
				"     \"ethdev\": {\"ipackets\": %llu, \"opackets\": %llu, \"ibytes\": %llu, "
				"\"obytes\": %llu, \"imissed\": %llu, \"ierrors\": %llu, \"oerrors\": %llu, "
				"\"rx_nombuf\": %llu},\n",
				u64(pr.eth.ipackets), u64(pr.eth.opackets), u64(pr.eth.ibytes), u64(pr.eth.obytes),
				u64(pr.eth.imissed), u64(pr.eth.ierrors), u64(pr.eth.oerrors), u64(pr.eth.rx_nombuf));
		fprintf(f,
			"     \"ah_service\": {\"requests\": %llu, \"answered_cached\": %llu, \"created\": %llu, "
			"\"failed\": %llu, \"neigh_waits\": %llu, \"app_creates\": %llu, \"app_destroys\": %llu},\n",
			u64(pr.ahs.requests), u64(pr.ahs.answered_cached), u64(pr.ahs.created), u64(pr.ahs.failed),
			u64(pr.ahs.neigh_waits), u64(pr.ahs.app_creates), u64(pr.ahs.app_destroys));
		if (pr.have_neigh) {
			fprintf(f, "     \"neighbours\": {");
			bool nfirst = true;
			pr.neigh.for_each([&](const char *name, uint64_t v) {
				fprintf(f, "%s\"%s\": %llu", nfirst ? "" : ", ", name, u64(v));
				nfirst = false;
			});
			fprintf(f, "},\n");
		}
		if (pr.mbufs_out >= 0)
			fprintf(f, "     \"mbufs_out_at_close\": %lld,\n", (long long)pr.mbufs_out);
		/* The driver's counters summed over the workers' queues. */
		fprintf(f, "     \"driver\": ");
		json_drv(f, port_drv(w, p));
		uint64_t waiting = 0;
		for (const worker_view &v : w)
			waiting += v.snap->port[p].waiting;
		fprintf(f, ",\n     \"waiting\": %llu,\n     \"qps\": [\n", u64(waiting));
		bool qfirst = true;
		for (size_t wi = 0; wi < w.size(); wi++) {
			const auto &ps = w[wi].snap->port[p];
			for (unsigned i = 0; i < ps.nqp; i++) {
				const auto &q = ps.qc[i];
				fprintf(f, "%s       {\"qpn\": %u, \"qkey\": %u, \"worker\": %zu", qfirst ? "" : ",\n",
					ps.qpn[i], ps.qkey[i], wi);
				qfirst = false;
#define X(name, desc) fprintf(f, ", \"%s\": %llu", #name, u64(q.name));
				RDGRAM_FWD_QP_COUNTERS(X)
#undef X
				const auto &r = ps.reply[i];
				fprintf(f, ",\n        \"send_path\": {\"hits\": %llu, \"misses\": %llu, \"requests\": %llu, "
					"\"flushed\": %llu, \"reply_bad_wc\": %llu",
					u64(r.hits), u64(r.misses), u64(r.requests), u64(r.flushed), u64(r.reply_bad_wc));
#define X(name, desc) fprintf(f, ", \"%s\": %llu", #name, u64(r.name));
				RDGRAM_PEND_DROPS(X)
#undef X
				fprintf(f, "}}");
			}
		}
		fprintf(f, "\n     ]}%s\n", p + 1 < ports.size() ? "," : "");
	}
	/* Each worker: its queue of every port and its own totals, which
	 * close by themselves. */
	fprintf(f, "  ],\n  \"per_worker\": [\n");
	for (size_t wi = 0; wi < w.size(); wi++) {
		const snapshot &s = *w[wi].snap;
		fprintf(f, "    {\"worker\": %zu, \"lcore\": %u, \"cpu\": %u, \"elapsed_s\": %.6f, \"stopped\": %s, "
			"\"loops\": %llu,\n     \"queues\": [",
			wi, w[wi].lcore, w[wi].cpu, s.elapsed_s, json_str(w[wi].why).c_str(), u64(s.loops));
		for (size_t p = 0; p < ports.size(); p++) {
			const auto &ps = s.port[p];
			fprintf(f, "%s\n       {\"port\": %s, \"queue\": %zu, \"waiting\": %u, \"qpns\": [", p ? "," : "",
				json_str(ports[p].cfg->name).c_str(), wi, ps.waiting);
			for (unsigned i = 0; i < ps.nqp; i++)
				fprintf(f, "%s%u", i ? ", " : "", ps.qpn[i]);
			fprintf(f, "], \"driver\": ");
			json_drv(f, ps.drv);
			fprintf(f, "}");
		}
		fprintf(f, "],\n     \"rule_hits\": [");
		for (size_t r = 0; r < c.rules.size(); r++)
			fprintf(f, "%s%llu", r ? ", " : "", u64(s.rule_hits[r]));
		totals t;
		add(t, c, s);
		fprintf(f, "],\n     \"totals\": ");
		json_totals(f, t, "      ");
		fprintf(f, "}%s\n", wi + 1 < w.size() ? "," : "");
	}
	fprintf(f, "  ],\n  \"rules\": [\n");
	for (size_t r = 0; r < c.rules.size(); r++) {
		const rule_config &ru = c.rules[r];
		uint64_t hits = 0;
		for (const worker_view &v : w)
			hits += v.snap->rule_hits[r];
		fprintf(f, "    {\"index\": %zu, \"to\": %s", r, json_str(ru.to).c_str());
		if (ru.match_qpn)
			fprintf(f, ", \"match_qpn\": %u", *ru.match_qpn);
		if (ru.match_qkey)
			fprintf(f, ", \"match_qkey\": %u", *ru.match_qkey);
		if (ru.rewrite_qkey)
			fprintf(f, ", \"rewrite_qkey\": %u", *ru.rewrite_qkey);
		fprintf(f, ", \"hits\": %llu}%s\n", u64(hits), r + 1 < c.rules.size() ? "," : "");
	}
	fprintf(f, "  ],\n  \"totals\": ");
	json_totals(f, sum(c, w), "    ");
	fprintf(f, "\n}\n");
}

void print_table(FILE *f, const fwd_config &c, const std::vector<worker_view> &w,
		 const std::vector<port_report> &ports, const char *why)
{
	double elapsed = 0;
	for (const worker_view &v : w)
		elapsed = std::max(elapsed, v.snap->elapsed_s);
	fprintf(f, " rdgram-fwd: %s mode, %.3f s, %s\n", c.mode.c_str(), elapsed, why);
	for (size_t p = 0; p < ports.size(); p++) {
		const port_report &pr = ports[p];
		const drv_snap drv = port_drv(w, p);
		fprintf(f, " port %s (%s driver, %s, port %u)\n", pr.cfg->name.c_str(), c.driver.c_str(), pr.device.c_str(),
			pr.port_id);
		if (pr.have_eth)
			fprintf(f,
				"   ethdev   ipackets %llu  opackets %llu  ibytes %llu  obytes %llu  imissed %llu  "
				"ierrors %llu  oerrors %llu  rx_nombuf %llu\n",
				u64(pr.eth.ipackets), u64(pr.eth.opackets), u64(pr.eth.ibytes), u64(pr.eth.obytes),
				u64(pr.eth.imissed), u64(pr.eth.ierrors), u64(pr.eth.oerrors), u64(pr.eth.rx_nombuf));
		fprintf(f, "   AH path  miss requests %llu  AHs created on a miss %llu (failed %llu)  created ahead %llu  "
			   "neighbour waits %llu",
			u64(pr.ahs.requests), u64(pr.ahs.created), u64(pr.ahs.failed), u64(pr.ahs.app_creates),
			u64(pr.ahs.neigh_waits));
		if (pr.have_neigh)
			fprintf(f, "  neighbours learned %llu  ARP/ND replies sent %llu", u64(pr.neigh.learned),
				u64(pr.neigh.replies_sent));
		fprintf(f, "\n   driver   rx_pkts %llu  tx_pkts %llu  rx_to_control %llu  tx_control %llu%s\n",
			u64(drv.get("rx_pkts")), u64(drv.get("tx_pkts")), u64(drv.get("rx_to_control")),
			u64(drv.get("tx_control")), w.size() > 1 ? "  (all queues)" : "");
		if (pr.mbufs_out >= 0)
			fprintf(f, "   mbufs    %lld out of the pool once the queues closed%s\n", (long long)pr.mbufs_out,
				pr.mbufs_out == 0 ? " (every one back)" : " (the PMD's receive ring, until the port stops)");
		drv.for_each([&](const xstat_name &n, uint64_t v) {
			if (v != 0 && n.kind != counter_kind::traffic && strcmp(n.name, "rx_to_control") &&
			    strcmp(n.name, "tx_control"))
				fprintf(f, "   %-22s %10llu  %s\n", n.name, u64(v), n.desc);
		});
		for (size_t wi = 0; wi < w.size(); wi++) {
			const auto &ps = w[wi].snap->port[p];
			for (unsigned i = 0; i < ps.nqp; i++) {
				const auto &q = ps.qc[i];
				const auto &r = ps.reply[i];
				fprintf(f,
					"   qp 0x%06x (worker %zu)  rx %llu  reflected %llu  forwarded %llu  fwd_no_rule %llu  "
					"reply_bad_wc %llu  tx_full %llu\n",
					ps.qpn[i], wi, u64(q.rx), u64(q.reflected), u64(q.forwarded), u64(q.fwd_no_rule),
					u64(q.reply_bad_wc), u64(q.tx_full));
				fprintf(f, "     send path: cache hits %llu  misses %llu  AH requests %llu  flushed %llu\n",
					u64(r.hits), u64(r.misses), u64(r.requests), u64(r.flushed));
#define X(name, desc)                                                                           \
	if (r.name != 0)                                                                         \
		fprintf(f, "     %-22s %10llu  %s\n", #name, u64(r.name), desc);
				RDGRAM_PEND_DROPS(X)
#undef X
			}
		}
	}
	for (size_t r = 0; r < c.rules.size(); r++) {
		const rule_config &ru = c.rules[r];
		uint64_t hits = 0;
		for (const worker_view &v : w)
			hits += v.snap->rule_hits[r];
		std::string m;
		if (ru.match_qpn)
			m += " qpn=" + hex(*ru.match_qpn);
		if (ru.match_qkey)
			m += " qkey=" + hex(*ru.match_qkey);
		if (m.empty())
			m = " any";
		fprintf(f, " rule %zu:%s -> %s%s: %llu hits\n", r, m.c_str(), ru.to.c_str(),
			ru.rewrite_qkey ? (", Q_Key := " + hex(*ru.rewrite_qkey)).c_str() : "", u64(hits));
	}
	auto line = [&](const char *who, const totals &t) {
		fprintf(f,
			" %s: frames %llu = delivered %llu + to control %llu + driver RX drops + handed to other "
			"workers %llu - handed in %llu - group copies %llu; delivered -> "
			"reflected %llu, forwarded %llu; sent %llu, waiting %llu; dropped %llu\n",
			who, u64(t.frames), u64(t.delivered), u64(t.to_control), u64(t.handed_out), u64(t.handed_in),
			u64(t.copies), u64(t.reflected), u64(t.forwarded), u64(t.tx_pkts), u64(t.waiting), u64(t.dropped));
	};
	if (w.size() > 1)
		for (size_t wi = 0; wi < w.size(); wi++) {
			totals t;
			add(t, c, *w[wi].snap);
			char who[96];
			snprintf(who, sizeof(who), "worker %zu (lcore %u, %s)", wi, w[wi].lcore, w[wi].why);
			line(who, t);
		}
	const totals t = sum(c, w);
	line("totals", t);
	for (const auto &[k, v] : t.drops)
		if (v != 0)
			fprintf(f, "   drop %-20s %llu\n", k.c_str(), u64(v));
	fflush(f);
}

int report(const fwd_config &c, const std::vector<worker_view> &w, const std::vector<port_report> &pr,
	   const char *why)
{
	print_table(stdout, c, w, pr, why);
	if (c.stats_json.empty())
		return 0;
	const std::string tmp = c.stats_json + ".tmp";
	FILE *f = fopen(tmp.c_str(), "w");
	if (f == nullptr) {
		fprintf(stderr, "rdgram-fwd: cannot write %s: %s\n", tmp.c_str(), strerror(errno));
		return 1;
	}
	write_json(f, c, w, pr, why);
	if (fclose(f) != 0 || rename(tmp.c_str(), c.stats_json.c_str()) != 0) {
		fprintf(stderr, "rdgram-fwd: cannot write %s: %s\n", c.stats_json.c_str(), strerror(errno));
		return 1;
	}
	return 0;
}

} // namespace rdgram::fwd
