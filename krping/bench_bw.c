// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Bandwidth benchmarks: a stream of operations of the whole buffer,
 * keeping txdepth of them in flight. bw streams RDMA WRITEs into the
 * peer's sink, as perftest's ib_write_bw; the client writes, and with
 * duplex=1 the server writes too, at the same time. sbw streams SENDs
 * into receives the server keeps posted (bench_send.c), as ib_send_bw.
 * The figure is bytes completed over the time from the first post to the
 * last completion.
 *
 * Like perftest, only every bw_every-th operation (and the last) asks for
 * a completion: an RC send queue completes in order, so one completion
 * stands for the unsignaled ones before it, and the stats count them all
 * then.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

static void krping_bw_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = &run->sess->stats;
	bool send = wc->opcode == IB_WC_SEND;
	u32 count = run->opts->count;
	int n = run->bw_every;

	if (!krping_wc_ok(run, wc, send ? "SEND" : "RDMA WRITE"))
		return;
	/* The last operation of a counted run closes a shorter batch. */
	if (count)
		n = min_t(u32, n, count - run->rdma_count);
	atomic64_add(n, send ? &st->send_msgs : &st->write_msgs);
	atomic64_add((u64)n * run->rdma_len,
		     send ? &st->send_bytes : &st->write_bytes);
	krping_heard(run);
	krping_count_add(&run->rdma_count, n);
	krping_wake(run);
}

/**
 * krping_bench_stream() - stream count operations of the whole buffer
 * @run: the run
 * @opcode: IB_WR_RDMA_WRITE (bw) or IB_WR_SEND (sbw: each waits for the
 *	server's grant first)
 *
 * Publishes the bytes completed and the time they took, also when the run
 * was cut short.
 *
 * Return: 0 or the negative errno that ended the run.
 */
int krping_bench_stream(struct krping_run *run, enum ib_wr_opcode opcode)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = &run->sess->stats;
	u64 start, done;
	u32 i;
	int ret = 0;

	/* A quarter of the queue per completion keeps the queue flowing. */
	run->bw_every = max_t(u32, o->txdepth / 4, 1);
	run->bw_cqe.done = krping_bw_done;

	start = ktime_get_ns();
	for (i = 0; !o->count || i < o->count; i++) {
		bool last = i + 1 == o->count;

		if (opcode == IB_WR_SEND)
			ret = krping_sbw_wait_grant(run, i);
		if (!ret)
			ret = krping_bench_post(run, opcode, &run->bw_cqe,
						last ||
						(i + 1) % run->bw_every == 0);
		if (ret)
			break;
	}
	if (!ret)
		ret = krping_wait_count(run, &run->rdma_count,
					run->rdma_posted);

	done = krping_read_count(&run->rdma_count);
	run->bw_msgs = done;
	run->bw_bytes = done * o->size;
	run->bw_ns = ktime_get_ns() - start;
	atomic64_set(&st->iterations, done);
	return ret;
}

int krping_bench_bw(struct krping_run *run)
{
	const struct krping_options *o = run->opts;

	if (o->role != KRPING_ROLE_CLIENT && !o->duplex)
		return 0;
	return krping_bench_stream(run, IB_WR_RDMA_WRITE);
}
