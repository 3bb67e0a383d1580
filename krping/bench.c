// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the benchmarks share: each side registers its buffers once and
 * advertises its sink to the peer (one SEND each way), the test runs, and
 * a closing SEND each way tells both sides that the other has finished,
 * so that the client's disconnect never cuts off the server's last work.
 *
 * The client speaks first both times and the server only answers: a SEND
 * must never arrive before its receive is posted. RoCE and InfiniBand
 * would retry it (RNR), but iWARP has no such retry and terminates the
 * connection. The server posts the receive for the client's closing SEND
 * before it answers the advertisement, and the client posts the receive
 * for the server's closing SEND before its test starts.
 *
 * The sink (rdma_buf) is what the peer writes into or reads from; the
 * source (start_buf) is the local end of every transfer.
 *
 * A run does warmup + count iterations (krping_bench_next()); the warm-up
 * is not measured. In a timed run (duration_ms) the client alone decides
 * when the measured part ends, and its closing message tells the server,
 * which is timed too (its own duration_ms, or its client's: see
 * krping_plan_follow()): a timed server ends its loop when
 * that message has arrived (krping_bench_peer_done()) instead of after
 * count iterations. slat and sbw take it into a data receive, so a timed
 * client sends it empty (fin_empty), which fits a receive of any size.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

/* How long a client that has finished waits for the server to leave. */
#define KRPING_BENCH_LINGER	(30 * HZ)

/*
 * The local end (start_buf) of a transfer: through its registration in
 * reg mode, whose iova is an offset, not the buffer's address.
 */
static void krping_bench_local(const struct krping_run *run,
			       struct ib_sge *sge)
{
	if (run->io.start_mr.mr) {
		sge->addr = run->io.start_mr.mr->iova;
		sge->lkey = run->io.start_mr.mr->lkey;
	} else {
		sge->addr = run->io.start_buf.dma;
		sge->lkey = run->conn.pd->local_dma_lkey;
	}
}

static int krping_bench_setup(struct krping_run *run)
{
	const struct krping_options *o = run->opts;
	u64 addr = run->io.rdma_buf.dma;
	u32 rkey = run->conn.pd->unsafe_global_rkey;
	int local = IB_ACCESS_LOCAL_WRITE;
	int ret;

	/* iWARP places READ responses into the sink like WRITEs. */
	if (rdma_protocol_iwarp(run->conn.pd->device,
				run->conn.conn_id->port_num))
		local |= IB_ACCESS_REMOTE_WRITE;

	if (o->mem_mode == KRPING_MEM_REG) {
		ret = krping_post_reg(run, &run->io.start_mr, local);
		if (!ret)
			ret = krping_post_reg(run, &run->io.rdma_mr,
					      IB_ACCESS_LOCAL_WRITE |
					      IB_ACCESS_REMOTE_READ |
					      IB_ACCESS_REMOTE_WRITE);
		if (ret)
			return ret;
		addr = run->io.rdma_mr.mr->iova;
		rkey = run->io.rdma_mr.mr->rkey;
	}

	if (o->role == KRPING_ROLE_CLIENT) {
		ret = krping_send_msg(run, addr, rkey, o->size, 0);
		if (ret)
			return ret;
	}
	ret = krping_wait_count(run, &run->counts.recv,
				++run->counts.recv_expected);
	if (ret)
		return ret;
	run->bench.peer_addr = be64_to_cpu(run->io.rx.buf);
	run->bench.peer_rkey = be32_to_cpu(run->io.rx.rkey);
	/* Both sides must run the same size; a smaller sink cannot take it. */
	if (be32_to_cpu(run->io.rx.size) < o->size)
		return -EMSGSIZE;
	/* The SEND benchmarks post receives of their own (bench_send.c). */
	if (o->test == KRPING_TEST_SLAT || o->test == KRPING_TEST_SBW)
		ret = krping_bench_send_setup(run);
	else
		ret = krping_post_recv(run);
	if (ret || o->role == KRPING_ROLE_CLIENT)
		return ret;
	return krping_send_msg(run, addr, rkey, o->size, 0);
}

/*
 * Tell the peer we are done and wait until it is done too: the client
 * first, the server when it has the client's word (see the top).
 */
static int krping_bench_finish(struct krping_run *run)
{
	bool client = run->opts->role == KRPING_ROLE_CLIENT;
	int ret = 0;

	/* A passive side waits here the whole test: do not spin. */
	run->wait.lazy = true;
	if (client)
		ret = krping_post_fin(run);
	if (!ret)
		ret = krping_wait_count(run, &run->counts.recv,
					++run->counts.recv_expected);
	if (ret)
		return ret;
	/*
	 * The server is done once its answer has completed, and its teardown
	 * disconnects. The client leaves only then: had it disconnected on
	 * receipt, the server's SEND could be flushed before its ACK counted.
	 */
	if (!client)
		return krping_send_msg(run, 0, 0, 0, 0);
	/*
	 * The answer has come: both sides have counted everything, and how
	 * the server's leaving shows here does not change that (a
	 * disconnect, a flush, an error). A siw client once failed with
	 * ECONNRESET here, its counters and the server's complete, under the
	 * debug kernel (a fatal QP event is the likely source; not
	 * reproduced in 48 runs). Only a stop ends the run otherwise.
	 */
	ret = krping_wait_disconnect(run, KRPING_BENCH_LINGER);
	return ret == -EINTR ? ret : 0;
}

/*
 * The run's measured part has ended, before the closing exchange and the
 * wait for the peer to leave: progress/elapsed_ns stops here, for a group
 * at the latest end of its runs, once the last has ended.
 */
static void krping_bench_ended(struct krping_run *run)
{
	struct krping_group *grp = run->grp;
	u64 end;
	u32 i;

	run->bench.measured_end_ns = ktime_get_ns();
	end = run->bench.measured_end_ns;
	if (grp) {
		/* Fully ordered: the last run sees every other's end. */
		if (atomic_inc_return(&grp->measured) != grp->n)
			return;
		for (i = 0; i < grp->n; i++)
			end = max(end, grp->runs[i]->bench.measured_end_ns);
	}
	WRITE_ONCE(run->sess->progress.end_ns, end);
}

/**
 * krping_bench() - run one of the benchmarks over a connected run
 * @run: the run
 *
 * Return: 0 or the negative errno that ended the run.
 */
int krping_bench(struct krping_run *run)
{
	const struct krping_plan *plan = &run->conn.plan;
	struct krping_bench_state *b = &run->bench;
	const struct krping_options *o = run->opts;
	int ret;

	/*
	 * krping_options_validate() and krping_plan_follow() keep count +
	 * warmup within 32 bits.
	 */
	b->warmup = plan->warmup;
	b->total = plan->count ? plan->count + plan->warmup : 0;
	b->timed = plan->duration_ms;
	b->fin_empty = b->timed && (o->test == KRPING_TEST_SLAT ||
				    o->test == KRPING_TEST_SBW);

	ret = krping_bench_setup(run);
	if (!ret)
		ret = krping_group_barrier(run);
	if (ret)
		return ret;

	switch (run->opts->test) {
	case KRPING_TEST_WLAT:
		ret = krping_bench_wlat(run);
		break;
	case KRPING_TEST_RLAT:
		ret = krping_bench_rlat(run);
		break;
	case KRPING_TEST_BW:
		ret = krping_bench_bw(run);
		break;
	case KRPING_TEST_FR:
		ret = krping_bench_fr(run);
		break;
	case KRPING_TEST_SLAT:
		ret = krping_bench_slat(run);
		break;
	case KRPING_TEST_SBW:
		ret = krping_bench_sbw(run);
		break;
	default:
		ret = -EOPNOTSUPP;
		break;
	}
	krping_bench_ended(run);
	if (ret)
		return ret;
	return krping_bench_finish(run);
}

/**
 * krping_bench_post() - post one RDMA READ, WRITE or SEND of the whole buffer
 * @run: the run
 * @opcode: IB_WR_RDMA_READ, IB_WR_RDMA_WRITE or IB_WR_SEND
 * @cqe: completion handler; run->io.rdma_cqe counts one operation
 * @signaled: ask for a completion (errors complete anyway)
 *
 * Between start_buf and the peer's sink (a SEND: the receive the peer
 * posted; remote_addr and rkey are not used). Keeps at most txdepth operations
 * in flight, waiting for completions when the send queue is full.
 *
 * Return: 0 or a negative errno.
 */
int krping_bench_post(struct krping_run *run, enum ib_wr_opcode opcode,
		      struct ib_cqe *cqe, bool signaled)
{
	u32 depth = run->opts->txdepth;
	struct ib_sge sge = { .length = run->opts->size };
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = cqe,
			.opcode = opcode,
			.send_flags = signaled ? IB_SEND_SIGNALED : 0,
			.sg_list = &sge,
			.num_sge = 1,
		},
		.remote_addr = run->bench.peer_addr,
		.rkey = run->bench.peer_rkey,
	};
	int ret;

	krping_bench_local(run, &sge);
	if (run->bench.rdma_posted - krping_read_count(&run->counts.rdma) >=
	    depth) {
		run->wait.draining = true;
		ret = krping_wait_count(run, &run->counts.rdma,
					run->bench.rdma_posted - depth + 1);
		run->wait.draining = false;
		if (ret)
			return ret;
	}
	run->io.rdma_len = sge.length;
	run->io.rdma_opcode = opcode;
	ret = ib_post_send(run->conn.qp, &wr.wr, NULL);
	if (!ret)
		run->bench.rdma_posted++;
	return ret;
}

/**
 * krping_bench_started() - the run's measured part began at @now
 * @run: the run
 * @now: ktime_get_ns()
 *
 * progress/elapsed_ns counts from the first run of a group that began.
 */
void krping_bench_started(struct krping_run *run, u64 now)
{
	cmpxchg64(&run->sess->progress.start_ns, 0, now);
}

/* The measured part of the run begins now (progress/, a timed run's end). */
static void krping_bench_measure(struct krping_run *run)
{
	u64 now = ktime_get_ns();

	krping_bench_started(run, now);
	if (run->bench.timed && run->opts->role == KRPING_ROLE_CLIENT)
		run->bench.deadline_ns = now + (u64)run->conn.plan.duration_ms *
					       NSEC_PER_MSEC;
	WRITE_ONCE(run->bench.measuring, true);
}

/**
 * krping_bench_peer_done() - has the client of a timed run finished?
 * @run: the run (a server; always false for a client)
 *
 * The client's closing message has arrived: a receive completed beyond
 * those the thread has waited for (the data handlers of slat and sbw
 * count the client's empty closing SEND among them too).
 *
 * Return: true if the server should end its part now.
 */
bool krping_bench_peer_done(const struct krping_run *run)
{
	return run->bench.timed && run->opts->role != KRPING_ROLE_CLIENT &&
	       krping_read_count(&run->counts.recv) !=
	       run->counts.recv_expected;
}

/**
 * krping_bench_next() - does iteration @i run?
 * @run: the run
 * @i: the iteration, from 0, warm-up included
 *
 * The measured part begins at iteration warmup, and only there: @i has
 * 64 bits, so a run without a count never meets warmup again, which
 * would arm a timed client's deadline anew. A run ends after total
 * iterations, when a timed client's time is up, or when the client of a
 * timed run has finished (server).
 *
 * Return: true to run iteration @i.
 */
bool krping_bench_next(struct krping_run *run, u64 i)
{
	if (krping_bench_begins(i, run->bench.warmup))
		krping_bench_measure(run);
	if (!krping_bench_within(i, run->bench.total))
		return false;
	if (krping_bench_peer_done(run))
		return false;
	return !run->bench.deadline_ns ||
	       ktime_get_ns() < run->bench.deadline_ns;
}

/**
 * krping_bench_sample() - a latency sample of iteration @i
 * @run: the run
 * @i: the iteration, from 0, warm-up included
 * @ns: the sample
 *
 * Samples of the warm-up are dropped.
 */
void krping_bench_sample(struct krping_run *run, u64 i, u64 ns)
{
	if (!krping_bench_measured(i, run->bench.warmup))
		return;
	krping_lat_add(&run->lat, ns);
	atomic64_inc(&run->sess->progress.samples);
}

/**
 * krping_bench_progress() - operations @first.. @first + @n - 1 completed
 * @run: the run
 * @first: the first one's index, from 0, warm-up included
 * @n: how many
 * @bytes: bytes each moved on this side
 *
 * Those past the warm-up count in progress/. Called by the thread or by
 * a completion handler; stats/iterations is the caller's.
 */
void krping_bench_progress(struct krping_run *run, u64 first, u32 n,
			   u64 bytes)
{
	struct krping_progress *p = &run->sess->progress;
	u32 measured = krping_bench_measured_n(first, n, run->bench.warmup);

	if (!measured)
		return;
	atomic64_add(measured, &p->iterations);
	atomic64_add((u64)measured * bytes, &p->bytes);
}
