// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Bandwidth benchmark: RDMA WRITEs of the whole buffer into the peer's
 * sink, keeping txdepth of them in flight, as perftest's ib_write_bw.
 * The client writes; with duplex=1 the server writes too, at the same
 * time. The figure is bytes completed over the time from the first post
 * to the last completion.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

int krping_bench_bw(struct krping_run *run)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = &run->sess->stats;
	u64 start, done;
	u32 i;
	int ret = 0;

	if (o->role != KRPING_ROLE_CLIENT && !o->duplex)
		return 0;

	start = ktime_get_ns();
	for (i = 0; !o->count || i < o->count; i++) {
		ret = krping_bench_post(run, IB_WR_RDMA_WRITE);
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
