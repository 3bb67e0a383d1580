// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Bandwidth benchmark: RDMA WRITEs of the whole buffer into the peer's
 * sink, keeping txdepth of them in flight, as perftest's ib_write_bw.
 * The client writes; with duplex=1 the server writes too, at the same
 * time. The figure is bytes completed over the time from the first post
 * to the last completion.
 *
 * Like perftest, only every bw_every-th WRITE (and the last) asks for a
 * completion: an RC send queue completes in order, so one completion
 * stands for the unsignaled WRITEs before it, and the stats count them
 * all then.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

static void krping_bw_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = &run->sess->stats;
	u32 count = run->opts->count;
	int n = run->bw_every;

	if (!krping_wc_ok(run, wc, "RDMA WRITE"))
		return;
	/* The last WRITE of a counted run closes a shorter batch. */
	if (count)
		n = min_t(u32, n, count - run->rdma_count);
	atomic64_add(n, &st->write_msgs);
	atomic64_add((u64)n * run->rdma_len, &st->write_bytes);
	krping_heard(run);
	krping_count_add(&run->rdma_count, n);
	krping_wake(run);
}

int krping_bench_bw(struct krping_run *run)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = &run->sess->stats;
	u64 start, done;
	u32 i;
	int ret = 0;

	if (o->role != KRPING_ROLE_CLIENT && !o->duplex)
		return 0;

	/* A quarter of the queue per completion keeps the queue flowing. */
	run->bw_every = max_t(u32, o->txdepth / 4, 1);
	run->bw_cqe.done = krping_bw_done;

	start = ktime_get_ns();
	for (i = 0; !o->count || i < o->count; i++) {
		bool last = i + 1 == o->count;

		ret = krping_bench_post(run, IB_WR_RDMA_WRITE, &run->bw_cqe,
					last || (i + 1) % run->bw_every == 0);
		if (ret)
			break;
	}
	if (!ret)
		ret = krping_wait_count(run, &run->rdma_count,
					run->rdma_posted);

	/* What completed counts, also when the run was cut short. */
	done = krping_read_count(&run->rdma_count);
	run->bw_bytes = done * o->size;
	run->bw_ns = ktime_get_ns() - start;
	atomic64_set(&st->iterations, done);
	return ret;
}
