/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Thread safety as libibverbs promises it, and completion channels, on
 * rdgram-verbs: a plain verbs program (linked against libibverbs, run
 * under rdgram-verbs with two devices joined by a net_memif pair in one
 * process, rdg0 and rdg1).
 *   - one thread sends on rdg0 while two threads poll one CQ of rdg1 and
 *     post receives to one QP (as UCX's async thread and main thread do):
 *     every datagram arrives exactly once, in one of the two pollers;
 *   - ibv_get_cq_event on a non-blocking channel with no event: EAGAIN;
 *     poll(2) on its fd: not readable, then readable once an armed CQ got a
 *     completion; ibv_destroy_comp_channel with a CQ on it: EBUSY.
 * Prints "N passed, N failed". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define QKEY 0x11111111u
#define N 20000
#define WINDOW 256
#define MSG 256

static int passed, failed;
static void check(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	if (ok)
		passed++;
	else
		failed++;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static struct ibv_context *open_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = NULL;
	for (int i = 0; l != NULL && i < n; i++)
		if (strcmp(ibv_get_device_name(l[i]), name) == 0)
			c = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	return c;
}

static int setup(struct side *s, const char *dev, int nbufs, struct ibv_comp_channel *ch)
{
	s->ctx = open_dev(dev);
	if (s->ctx == NULL)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->buf = calloc((size_t)nbufs, MSG + 40);
	s->mr = ibv_reg_mr(s->pd, s->buf, (size_t)nbufs * (MSG + 40), IBV_ACCESS_LOCAL_WRITE);
	s->cq = ibv_create_cq(s->ctx, 4096, NULL, ch, 0);
	struct ibv_qp_init_attr ia = {.send_cq = s->cq, .recv_cq = s->cq,
				      .cap = {.max_send_wr = 512, .max_recv_wr = 1024, .max_send_sge = 1, .max_recv_sge = 1},
				      .qp_type = IBV_QPT_UD};
	s->qp = ibv_create_qp(s->pd, &ia);
	if (s->pd == NULL || s->mr == NULL || s->cq == NULL || s->qp == NULL)
		return -1;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY};
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int post_recv(struct side *s, int slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(s->buf + (size_t)slot * (MSG + 40)), .length = MSG + 40,
			      .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(s->qp, &wr, &bad);
}

static struct side a, b;
static struct ibv_ah *ah;
static atomic_int received, sent, seen[N];
static atomic_int dup_or_bad;

static void *poller(void *arg)
{
	(void)arg;
	struct ibv_wc wc[16];
	time_t end = time(NULL) + 30;
	while (atomic_load(&received) < N && time(NULL) < end) {
		int n = ibv_poll_cq(b.cq, 16, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV) {
				atomic_fetch_add(&dup_or_bad, 1);
				continue;
			}
			uint32_t seq;
			memcpy(&seq, b.buf + wc[i].wr_id * (MSG + 40) + 40, 4);
			if (seq >= N || atomic_fetch_add(&seen[seq], 1) != 0)
				atomic_fetch_add(&dup_or_bad, 1);
			atomic_fetch_add(&received, 1);
			post_recv(&b, (int)wc[i].wr_id);
		}
	}
	return NULL;
}

static void *sender(void *arg)
{
	(void)arg;
	struct ibv_wc wc[16];
	char msg[MSG];
	memset(msg, 0x5a, sizeof(msg));
	time_t end = time(NULL) + 30;
	for (uint32_t i = 0; i < N && time(NULL) < end;) {
		if ((int)i - atomic_load(&received) >= WINDOW) { /* the receiver's queue is 1024 deep */
			ibv_poll_cq(a.cq, 16, wc);
			continue;
		}
		memcpy(msg, &i, 4);
		struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = MSG, .lkey = 0};
		struct ibv_send_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_INLINE | ((i % 64) == 63 ? IBV_SEND_SIGNALED : 0)},
				   *bad;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = b.qp->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
		if (ibv_post_send(a.qp, &wr, &bad) == 0) {
			i++;
			atomic_fetch_add(&sent, 1);
		}
		ibv_poll_cq(a.cq, 16, wc);
	}
	return NULL;
}

int main(void)
{
	if (setup(&a, "rdg0", 1, NULL) || setup(&b, "rdg1", 1024, NULL)) {
		fprintf(stderr, "set-up failed: %s\n", strerror(errno));
		return 2;
	}
	for (int i = 0; i < 1024; i++)
		post_recv(&b, i);
	union ibv_gid g;
	ibv_query_gid(b.ctx, 1, 1, &g);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = g, .sgid_index = 1, .hop_limit = 64}};
	ah = ibv_create_ah(a.pd, &aa);
	check(ah != NULL, "ibv_create_ah across the memif pair (ARP resolved)");
	if (ah == NULL)
		return 1;

	pthread_t t[3];
	pthread_create(&t[0], NULL, sender, NULL);
	pthread_create(&t[1], NULL, poller, NULL);
	pthread_create(&t[2], NULL, poller, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	char what[160];
	snprintf(what, sizeof(what), "one sender, two pollers of one CQ: %d sent, %d received, %d duplicate or bad",
		 atomic_load(&sent), atomic_load(&received), atomic_load(&dup_or_bad));
	check(atomic_load(&sent) == N && atomic_load(&received) == N && atomic_load(&dup_or_bad) == 0, what);

	/* Completion channels. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(b.ctx);
	struct ibv_cq *ecq = ch ? ibv_create_cq(b.ctx, 16, (void *)0x1234, ch, 0) : NULL;
	check(ch != NULL && ecq != NULL, "ibv_create_comp_channel, and a CQ on it");
	if (ecq == NULL)
		return 1;
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_cq *evcq;
	void *evctx;
	errno = 0;
	check(ibv_get_cq_event(ch, &evcq, &evctx) == -1 && errno == EAGAIN,
	      "ibv_get_cq_event on a non-blocking channel without events: EAGAIN");
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	check(poll(&pfd, 1, 0) == 0, "poll(2) on the channel's fd: nothing yet");
	check(ibv_destroy_comp_channel(ch) == EBUSY, "ibv_destroy_comp_channel with a CQ on it: EBUSY");
	struct ibv_qp_init_attr ia = {.send_cq = ecq, .recv_cq = ecq, .cap = {.max_send_wr = 4, .max_recv_wr = 4,
				      .max_send_sge = 1, .max_recv_sge = 1}, .qp_type = IBV_QPT_UD};
	struct side e = b;
	e.qp = ibv_create_qp(b.pd, &ia);
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY};
	ibv_modify_qp(e.qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	qa.qp_state = IBV_QPS_RTR;
	ibv_modify_qp(e.qp, &qa, IBV_QP_STATE);
	post_recv(&e, 0);
	check(ibv_req_notify_cq(ecq, 0) == 0, "ibv_req_notify_cq");
	char msg[MSG] = "event";
	struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = MSG, .lkey = 0};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_INLINE}, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = e.qp->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ibv_post_send(a.qp, &wr, &bad);
	/* Nobody polls rdg1 now: the service thread must receive for the
	 * armed CQ and raise the event. */
	int pr = poll(&pfd, 1, 2000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	snprintf(what, sizeof(what), "poll(2) on the fd: readable %.0f us after the send", us);
	check(pr == 1 && (pfd.revents & POLLIN), what);
	check(ibv_get_cq_event(ch, &evcq, &evctx) == 0 && evcq == ecq && evctx == (void *)0x1234,
	      "ibv_get_cq_event: the CQ and its context");
	ibv_ack_cq_events(ecq, 1);
	struct ibv_wc wc;
	check(ibv_poll_cq(ecq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + MSG,
	      "its completion is there");
	check(ibv_get_cq_event(ch, &evcq, &evctx) == -1 && errno == EAGAIN, "one event per arming");
	ibv_destroy_qp(e.qp);
	check(ibv_destroy_cq(ecq) == 0 && ibv_destroy_comp_channel(ch) == 0, "destroy the CQ, then the channel");
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
