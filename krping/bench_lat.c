// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Latency benchmarks.
 *
 * wlat: RDMA WRITE ping-pong, as perftest's ib_write_lat. Each side
 * writes its whole buffer into the peer's sink and spins on the last byte
 * of its own sink for the peer's answer; the byte carries a tag that
 * changes every iteration (krping_wlat_tag()). A sample is half a round
 * trip: the client times write to answer, the server answer to next write
 * (so it has one sample fewer).
 *
 * rlat: RDMA READ of the server's sink by the client, one at a time, as
 * ib_read_lat; a sample is the full round trip. With poll=1 the client
 * busy-polls the CQ, else it sleeps until the completion handler wakes it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

/* Busy loops check for stop, errors and the peer this often. */
#define KRPING_SPIN_CHECK	256
/* krping_spin_tag(): the client of a timed run has finished instead. */
#define KRPING_PEER_DONE	1

/*
 * Spin until the last byte of our sink holds @tag. Return: 0, the errno
 * that ends the run, or KRPING_PEER_DONE.
 */
static int krping_spin_tag(struct krping_run *run, u8 tag)
{
	u32 last = run->opts->size - 1;
	const u8 *p = (const u8 *)run->io.rdma_buf.addr + last;
	struct ib_device *dev = run->conn.pd->device;
	unsigned int n = 0;
	int ret;

	for (;;) {
		ib_dma_sync_single_for_cpu(dev, run->io.rdma_buf.dma + last, 1,
					   DMA_BIDIRECTIONAL);
		if (READ_ONCE(*p) == tag)
			return 0;
		if (++n % KRPING_SPIN_CHECK)
			continue;
		ret = krping_check(run);
		if (ret)
			return ret;
		if (krping_bench_peer_done(run))
			return KRPING_PEER_DONE;
		krping_spin_yield();
	}
}

/* Write our buffer, tagged, into the peer's sink. */
static int krping_wlat_write(struct krping_run *run, u8 tag)
{
	u32 last = run->opts->size - 1;

	((u8 *)run->io.start_buf.addr)[last] = tag;
	ib_dma_sync_single_for_device(run->conn.pd->device,
				      run->io.start_buf.dma + last, 1,
				      DMA_BIDIRECTIONAL);
	return krping_bench_post(run, IB_WR_RDMA_WRITE, &run->io.rdma_cqe,
				 true);
}

int krping_bench_wlat(struct krping_run *run)
{
	bool client = run->opts->role == KRPING_ROLE_CLIENT;
	struct krping_stats *st = run->stats;
	u64 t_write = 0, now, i;
	int ret;

	for (i = 0; krping_bench_next(run, i); i++) {
		u8 tag = krping_wlat_tag(i);

		if (client) {
			t_write = ktime_get_ns();
			ret = krping_wlat_write(run, tag);
			if (!ret)
				ret = krping_spin_tag(run, tag);
			if (ret)
				return ret;
			krping_bench_sample(run, i,
					    (ktime_get_ns() - t_write) / 2);
		} else {
			ret = krping_spin_tag(run, tag);
			if (ret == KRPING_PEER_DONE)
				break;
			if (ret)
				return ret;
			now = ktime_get_ns();
			if (i)
				krping_bench_sample(run, i, (now - t_write) / 2);
			t_write = now;
			ret = krping_wlat_write(run, tag);
			if (ret)
				return ret;
		}
		atomic64_inc(&st->iterations);
		krping_bench_progress(run, i, 1, run->opts->size);
	}
	/* Every write completed before the closing message. */
	return krping_wait_count(run, &run->counts.rdma,
				 run->bench.rdma_posted);
}

/*
 * The next READ is posted as soon as the last one completed, and the
 * last one's sample is recorded while the next is in flight. On rxe a
 * post that follows the completion quickly enough is taken up by the
 * work item still running that completion; a later one queues work of
 * its own, often on another CPU (see Documentation/krping.rst, "Comparing
 * with perftest").
 */
int krping_bench_rlat(struct krping_run *run)
{
	struct krping_stats *st = run->stats;
	u64 start, now, i;
	bool more;
	int ret;

	/* The server only lends its buffer. */
	if (run->opts->role != KRPING_ROLE_CLIENT || !krping_bench_next(run, 0))
		return 0;

	start = ktime_get_ns();
	ret = krping_bench_post(run, IB_WR_RDMA_READ, &run->io.rdma_cqe, true);
	for (i = 0; !ret; i++) {
		ret = krping_wait_count(run, &run->counts.rdma,
					run->bench.rdma_posted);
		if (ret)
			break;
		now = ktime_get_ns();
		more = krping_bench_next(run, i + 1);
		if (more)
			ret = krping_bench_post(run, IB_WR_RDMA_READ,
						&run->io.rdma_cqe, true);
		krping_bench_sample(run, i, now - start);
		atomic64_inc(&st->iterations);
		krping_bench_progress(run, i, 1, run->opts->size);
		if (!more)
			break;
		start = now;
	}
	return ret;
}
