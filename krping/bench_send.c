// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * SEND benchmarks.
 *
 * slat: SEND/RECV ping-pong, as perftest's ib_send_lat. The client SENDs
 * its whole buffer into a receive the server posted on its sink; the
 * server answers with a SEND of the same size into the client's. A
 * sample is half a round trip: the client times SEND to answer, the
 * server answer to next SEND (so it has one sample fewer), as in wlat.
 *
 * A SEND must never find its receive missing: iWARP has no RNR retry and
 * ends the connection. So each side posts the receive for the peer's
 * next message before it sends the message that the peer answers: the
 * first data receive in place of the setup's receive for the closing
 * message (krping_bench_send_setup()), the closing message's own receive
 * before the last data SEND (server) or before the closing SEND
 * (client). A receive queue is consumed in order, and with these rules
 * there is never more than one receive of the test posted.
 *
 * sbw: a stream of SENDs from the client into receives the server keeps
 * posted, as ib_send_bw (krping_bench_stream()). perftest only hopes
 * that its receiver reposts in time, which iWARP punishes with the end
 * of the connection; here the client SENDs only into receives the server
 * granted. The server keeps sbw_depth data receives posted, reposts one
 * in the completion handler of each that fills (so its thread's
 * scheduling does not matter), posts the closing message's receive after
 * the count-th, and RDMA WRITEs the number of receives it has posted so
 * far (a grant) into the first eight bytes of the client's sink: once
 * before it answers the advertisement, then whenever a quarter of the
 * depth or the last receive has been posted since, one WRITE in flight
 * at a time. The client reads the grant before each SEND and waits while
 * it has used all of it. The grant only grows and is written whole (one
 * aligned eight-byte WRITE); the client keeps the highest it has read,
 * at most its count, and a client that has used up its grant always gets
 * another: the server has then received everything, and posted depth or
 * the rest of the count past it. The grant WRITEs are flow control, not
 * test traffic: stats/ does not count them.
 *
 * Their state (struct krping_send_bench) is slat's and sbw's member of the
 * run's union; only this file touches it, and other files reach it
 * through the functions at the end of this one, which check the test.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

/* How long an sbw client that has used up its grant naps between looks. */
#define KRPING_GRANT_NAP_NS	(20 * NSEC_PER_USEC)

/* Count a data receive that completed; false if it failed the run. */
static bool krping_data_recv_ok(struct krping_run *run, struct ib_wc *wc)
{
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, KRPING_WR_RECV))
		return false;
	if (wc->byte_len != run->opts->size) {
		krping_fail(run, -EPROTO);
		return false;
	}
	atomic64_inc(&st->recv_msgs);
	atomic64_add(wc->byte_len, &st->recv_bytes);
	krping_heard(run);
	return true;
}

/*
 * The client of a timed run closes with an empty SEND, which the server
 * takes into its next data receive: count it as the closing message
 * (krping_bench_peer_done()), and wake a wait for more data.
 */
static bool krping_data_recv_fin(struct krping_run *run, struct ib_wc *wc)
{
	if (!run->bench.fin_empty || wc->status != IB_WC_SUCCESS ||
	    wc->byte_len)
		return false;
	atomic64_inc(&run->stats->recv_msgs);
	krping_heard(run);
	krping_count_inc(&run->counts.recv);
	krping_count_inc(&run->send_bench.data_count);
	krping_wake(run);
	return true;
}

static void krping_data_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	if (krping_data_recv_fin(run, wc) || !krping_data_recv_ok(run, wc))
		return;
	krping_count_inc(&run->send_bench.data_count);
	krping_wake(run);
}

static void krping_data_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, KRPING_WR_SEND))
		return;
	atomic64_inc(&st->send_msgs);
	atomic64_add(run->io.rdma_len, &st->send_bytes);
	krping_heard(run);
	krping_count_inc(&run->counts.rdma);
	krping_wake(run);
}

/*
 * Post a receive for one data SEND of the peer, into our sink (rdma_buf,
 * through its registration in reg mode); it completes on data_recv_cqe.
 */
static int krping_bench_post_data_recv(struct krping_run *run)
{
	struct ib_sge sge = { .length = run->opts->size };
	struct ib_recv_wr wr = {
		.wr_cqe = &run->send_bench.data_recv_cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	if (run->io.rdma_mr.mr) {
		sge.addr = run->io.rdma_mr.mr->iova;
		sge.lkey = run->io.rdma_mr.mr->lkey;
	} else {
		sge.addr = run->io.rdma_buf.dma;
		sge.lkey = run->conn.pd->local_dma_lkey;
	}
	return ib_post_recv(run->conn.qp, &wr, NULL);
}

/* SEND our buffer; its completion counts in counts.rdma. */
static int krping_slat_send(struct krping_run *run)
{
	struct ib_cqe *cqe = &run->send_bench.data_send_cqe;

	cqe->done = krping_data_send_done;
	return krping_bench_post(run, IB_WR_SEND, cqe, true);
}

int krping_bench_slat(struct krping_run *run)
{
	bool client = run->opts->role == KRPING_ROLE_CLIENT;
	atomic64_t *data_count = &run->send_bench.data_count;
	struct krping_stats *st = run->stats;
	u64 t_send = 0, now, i;
	int ret;

	/* The first data receive was posted by krping_bench_send_setup(). */
	for (i = 0; krping_bench_next(run, i); i++) {
		/* A timed run's closing message comes into a data receive. */
		bool last = !run->bench.timed && i + 1 == run->bench.total;

		if (client) {
			if (i) {
				ret = krping_bench_post_data_recv(run);
				if (ret)
					return ret;
			}
			t_send = ktime_get_ns();
			ret = krping_slat_send(run);
			if (!ret)
				ret = krping_wait_count(run, data_count, i + 1);
			if (ret)
				return ret;
			krping_bench_sample(run, i,
					    (ktime_get_ns() - t_send) / 2);
		} else {
			ret = krping_wait_count(run, data_count, i + 1);
			if (ret)
				return ret;
			if (krping_bench_peer_done(run))
				break;
			now = ktime_get_ns();
			if (i)
				krping_bench_sample(run, i, (now - t_send) / 2);
			t_send = now;
			/* The peer's next message: data, or after the last the closing one. */
			ret = last ? krping_post_recv(run) :
				     krping_bench_post_data_recv(run);
			if (!ret)
				ret = krping_slat_send(run);
			if (ret)
				return ret;
		}
		atomic64_inc(&st->iterations);
		krping_bench_progress(run, i, 1, run->opts->size);
	}
	/* The client's closing message needs the server's answer's receive. */
	if (client) {
		ret = krping_post_recv(run);
		if (ret)
			return ret;
	}
	/* Every SEND completed before the closing message. */
	return krping_wait_count(run, &run->counts.rdma,
				 run->bench.rdma_posted);
}

/*
 * sbw: the data receives the server posts in all, 0 for no limit: the
 * run's total, and one more for a timed run's closing message, which the
 * client SENDs empty into a data receive (it may end before the total).
 */
static u64 krping_sbw_limit(const struct krping_run *run)
{
	if (!run->bench.total)
		return 0;
	return (u64)run->bench.total + (run->bench.fin_empty ? 1 : 0);
}

/*
 * Tell the client how many data receives it may fill: all posted so far,
 * when a quarter of the depth or the last of the count is posted since
 * the last grant and no grant is in flight (its completion looks again).
 * Called by the thread before any data can arrive, then only by the CQ's
 * handlers, which never run at once.
 */
static int krping_sbw_grant(struct krping_run *run)
{
	struct krping_send_bench *snd = &run->send_bench;
	u64 grant = snd->sbw_posted, *src = snd->grant_buf.addr;
	u64 limit = krping_sbw_limit(run);
	struct ib_sge sge = {
		.addr = snd->grant_buf.dma,
		.length = sizeof(__be64),
		.lkey = run->conn.pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = &snd->grant_cqe,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = run->bench.peer_addr,
		.rkey = run->bench.peer_rkey,
	};
	int ret;

	if (snd->sbw_granting || grant == snd->sbw_granted)
		return 0;
	if (grant - snd->sbw_granted < max_t(u32, snd->sbw_depth / 4, 1) &&
	    !(limit && grant == limit))
		return 0;
	*src = cpu_to_be64(grant);
	ib_dma_sync_single_for_device(run->conn.pd->device, snd->grant_buf.dma,
				      sizeof(__be64), DMA_TO_DEVICE);
	snd->sbw_granting = true;
	ret = ib_post_send(run->conn.qp, &wr.wr, NULL);
	if (ret) {
		snd->sbw_granting = false;
		return ret;
	}
	snd->sbw_granted = grant;
	return 0;
}

static void krping_sbw_grant_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	int ret;

	if (!krping_wc_ok(run, wc, KRPING_WR_RDMA_WRITE))
		return;
	krping_heard(run);
	run->send_bench.sbw_granting = false;
	ret = krping_sbw_grant(run);
	if (ret)
		krping_fail(run, ret);
}

/*
 * Post the server's data receives up to sbw_depth ahead of what arrived
 * (but no more than krping_sbw_limit()), the closing message's receive
 * after the last (but in a timed run), and grant them.
 */
static int krping_sbw_post_recvs(struct krping_run *run)
{
	struct krping_send_bench *snd = &run->send_bench;
	u64 target = krping_read_count(&snd->data_count) + snd->sbw_depth;
	u64 limit = krping_sbw_limit(run);
	int ret = 0;

	if (limit)
		target = min(target, limit);
	while (snd->sbw_posted < target) {
		ret = krping_bench_post_data_recv(run);
		if (ret)
			return ret;
		snd->sbw_posted++;
		if (!run->bench.fin_empty && limit && snd->sbw_posted == limit)
			ret = krping_post_recv(run);
		if (ret)
			return ret;
	}
	return krping_sbw_grant(run);
}

static void krping_sbw_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	/* Only the CQ's handlers, one at a time, write the counter. */
	u64 i = atomic64_read(&run->send_bench.data_count);
	int ret;

	if (krping_data_recv_fin(run, wc) || !krping_data_recv_ok(run, wc))
		return;
	/* The server's measured part begins with the first measured SEND. */
	if (krping_bench_begins(i, run->bench.warmup))
		krping_bench_started(run, ktime_get_ns());
	krping_bench_progress(run, i, 1, wc->byte_len);
	krping_count_inc(&run->send_bench.data_count);
	ret = krping_sbw_post_recvs(run);
	if (ret)
		krping_fail(run, ret);
	krping_wake(run);
}

/* The highest grant the server has written, at most krping_sbw_limit(). */
static u64 krping_sbw_read_grant(struct krping_run *run)
{
	struct krping_send_bench *snd = &run->send_bench;
	const struct krping_buf *b = &run->io.rdma_buf;
	u64 limit = krping_sbw_limit(run);
	u64 grant;

	ib_dma_sync_single_for_cpu(run->conn.pd->device, b->dma, sizeof(__be64),
				   b->dir);
	grant = be64_to_cpu(READ_ONCE(*(__be64 *)b->addr));
	if (limit)
		grant = min(grant, limit);
	snd->sbw_seen = max(snd->sbw_seen, grant);
	return snd->sbw_seen;
}

/**
 * krping_sbw_wait_grant() - wait until the server granted another SEND
 * @run: the run (an sbw client)
 * @sent: the data SENDs posted so far
 *
 * A grant is a WRITE, which completes nothing here: between looks at it
 * the thread naps KRPING_GRANT_NAP_NS (or yields, when the run polls),
 * waking early on any completion.
 *
 * Return: 0, or the errno that ends the run.
 */
int krping_sbw_wait_grant(struct krping_run *run, u64 sent)
{
	int seen, ret;

	for (;;) {
		seen = atomic_read(&run->wait.events);
		if (sent < krping_sbw_read_grant(run))
			return 0;
		ret = krping_check(run);
		if (ret)
			return ret;
		if (run->wait.poll) {
			krping_spin_yield();
			continue;
		}
		wait_event_interruptible_hrtimeout(run->wait.wq,
						   krping_woken(run, seen),
						   ns_to_ktime(KRPING_GRANT_NAP_NS));
	}
}

/**
 * krping_bench_send_setup() - the SEND benchmarks' receives before the test
 * @run: the run, its peer's sink known
 *
 * slat: the first data receive. sbw: the server's data receives and its
 * first grant; the client's receive for the closing message.
 *
 * Return: 0 or a negative errno.
 */
int krping_bench_send_setup(struct krping_run *run)
{
	if (run->opts->test == KRPING_TEST_SLAT) {
		run->send_bench.data_recv_cqe.done = krping_data_recv_done;
		return krping_bench_post_data_recv(run);
	}
	if (run->opts->role == KRPING_ROLE_CLIENT)
		return krping_post_recv(run);
	run->send_bench.data_recv_cqe.done = krping_sbw_recv_done;
	run->send_bench.grant_cqe.done = krping_sbw_grant_done;
	return krping_sbw_post_recvs(run);
}

int krping_bench_sbw(struct krping_run *run)
{
	struct krping_send_bench *snd = &run->send_bench;
	u32 total = run->bench.total;
	int ret;

	if (run->opts->role == KRPING_ROLE_CLIENT) {
		ret = krping_bench_stream(run, &snd->stream, IB_WR_SEND);
		/* A timed run's empty closing SEND takes a receive too. */
		if (!ret && run->bench.fin_empty)
			ret = krping_sbw_wait_grant(run,
						    run->bench.rdma_posted);
		return ret;
	}
	/*
	 * The server's handler does the work, which with poll=1 runs only
	 * when this thread polls: no lazy wait here, as perftest's server
	 * busy-polls too. A timed run ends with the client's closing
	 * message; an endless one gets none (its receive is never posted)
	 * and ends when the client goes.
	 */
	if (run->bench.timed || !total)
		ret = krping_wait_count(run, &run->counts.recv,
					run->counts.recv_expected + 1);
	else
		ret = krping_wait_count(run, &snd->data_count, total);
	/* The closing message counted in data_count too. */
	atomic64_set(&run->stats->iterations,
		     krping_read_count(&snd->data_count) -
		     (krping_bench_peer_done(run) ? 1 : 0));
	return ret;
}

/**
 * krping_bench_send_set_depth() - decide the data receives a run keeps
 *	posted
 * @run: the run, being set up
 * @attr: its device's attributes
 *
 * An sbw server keeps twice the send queue posted, as perftest's
 * rx_depth is to its tx_depth, within what the device's queues and CQs
 * take beside the rest of the run; no other run keeps any. resources.c
 * sizes the run's CQ and receive queue by it.
 *
 * Return: the depth (0 but for an sbw server), or -EINVAL when the
 * device has no room for any.
 */
int krping_bench_send_set_depth(struct krping_run *run,
				const struct ib_device_attr *attr)
{
	const struct krping_options *o = run->opts;
	int depth = 2 * o->txdepth;

	if (o->test != KRPING_TEST_SBW || o->role == KRPING_ROLE_CLIENT)
		return 0;
	depth = min(depth, attr->max_qp_wr - KRPING_RECV_DEPTH - 1);
	depth = min(depth, attr->max_cqe - (int)o->txdepth -
			   KRPING_RECV_DEPTH - 4);
	if (depth <= 0)
		return -EINVAL;
	run->send_bench.sbw_depth = depth;
	return depth;
}

/**
 * krping_bench_send_alloc() - allocate an sbw server's grant buffer
 * @run: the run, being set up (krping_setup())
 *
 * Return: 0 (also for any other run, which has none) or -ENOMEM.
 */
int krping_bench_send_alloc(struct krping_run *run)
{
	const struct krping_options *o = run->opts;

	if (o->test != KRPING_TEST_SBW || o->role == KRPING_ROLE_CLIENT)
		return 0;
	return krping_buf_alloc(run, &run->send_bench.grant_buf, sizeof(__be64),
				DMA_TO_DEVICE);
}

/**
 * krping_bench_send_free() - free the grant buffer, if the run has one
 * @run: the run, its QP drained and destroyed, its PD still allocated
 *
 * Any test's teardown calls it, also after a failed or partial setup;
 * the buffer is in slat's and sbw's member of the run's union, so
 * nothing is done for another test.
 */
void krping_bench_send_free(struct krping_run *run)
{
	if (run->opts->test != KRPING_TEST_SBW)
		return;
	krping_buf_free(run, &run->send_bench.grant_buf);
}
