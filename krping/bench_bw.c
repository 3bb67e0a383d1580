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
 * Like perftest, only every stream->every-th operation (and the last)
 * asks for a completion: an RC send queue completes in order, so one
 * completion stands for the unsignaled ones before it, and the stats
 * count them all then.
 *
 * The stream's state (struct krping_stream) is bw's member of the run's
 * union, and an sbw client's is in its send state; only this file
 * touches either.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

/*
 * The operations a signaled completion stands for: those after the
 * @done completed ones up to the next signaled one (krping_bw_batch_end();
 * the stream's total is set before the run's last one is posted). At
 * most the stream's every.
 */
static u32 krping_bw_batch(const struct krping_run *run,
			   const struct krping_stream *stream, u64 done)
{
	return krping_bw_batch_end(done, stream->every, run->bench.warmup,
				   atomic64_read(&stream->total)) - done;
}

static void krping_bw_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stream *stream = container_of(wc->wr_cqe,
						    struct krping_stream, cqe);
	struct krping_stats *st = run->stats;
	bool send = wc->opcode == IB_WC_SEND;
	/* Only the CQ's handlers, one at a time, write the counter. */
	u64 done = atomic64_read(&run->counts.rdma);
	u32 n;

	if (!krping_wc_ok(run, wc, send ? KRPING_WR_SEND :
					  KRPING_WR_RDMA_WRITE))
		return;
	n = krping_bw_batch(run, stream, done);
	atomic64_add(n, send ? &st->send_msgs : &st->write_msgs);
	atomic64_add((u64)n * run->io.rdma_len,
		     send ? &st->send_bytes : &st->write_bytes);
	krping_bench_progress(run, done, n, run->io.rdma_len);
	krping_heard(run);
	WRITE_ONCE(stream->last_ns, ktime_get_ns());
	krping_count_add(&run->counts.rdma, n);
	krping_wake(run);
}

/* Does operation @i ask for a completion (see krping_bw_batch())? */
static bool krping_bw_signaled(const struct krping_run *run,
			       const struct krping_stream *stream, u64 i)
{
	return krping_bw_signaled_at(i, stream->every, run->bench.warmup,
				     atomic64_read(&stream->total));
}

/**
 * krping_bench_stream() - stream operations of the whole buffer
 * @run: the run
 * @stream: its stream: run->bw (bw), or run->send_bench.stream (an sbw client)
 * @opcode: IB_WR_RDMA_WRITE (bw) or IB_WR_SEND (sbw: each waits for the
 *	server's grant first)
 *
 * The warm-up's operations complete before the measured ones are posted.
 * A run that ends early (a timed run) ends with one more operation, which
 * asks for a completion as the run's last, unless the last one posted
 * did. Publishes the bytes of the
 * measured operations completed and the time they took, also when the
 * run was cut short.
 *
 * Return: 0 or the negative errno that ended the run.
 */
int krping_bench_stream(struct krping_run *run, struct krping_stream *stream,
			enum ib_wr_opcode opcode)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = run->stats;
	u64 start = 0, done, i;
	int ret = 0;

	/* A quarter of the queue per completion keeps the queue flowing. */
	stream->every = max_t(u32, o->txdepth / 4, 1);
	atomic64_set(&stream->total, run->bench.total);
	stream->cqe.done = krping_bw_done;

	/*
	 * The index has 64 bits: a run without a count never meets warmup
	 * again, which would wait for the queue to empty and restart the
	 * clock.
	 */
	for (i = 0; ; i++) {
		if (i && krping_bench_begins(i, run->bench.warmup)) {
			ret = krping_wait_count(run, &run->counts.rdma,
						run->bench.rdma_posted);
			if (ret)
				break;
		}
		if (!krping_bench_next(run, i)) {
			/*
			 * An early end (the time is up, or the client of a
			 * timed run finished): the last one posted must ask
			 * for a completion, else one more does.
			 */
			if (!i || krping_bw_signaled(run, stream, i - 1))
				break;
			atomic64_set(&stream->total, i + 1);
		}
		if (krping_bench_begins(i, run->bench.warmup))
			start = ktime_get_ns();
		if (opcode == IB_WR_SEND)
			ret = krping_sbw_wait_grant(run, i);
		if (!ret)
			ret = krping_bench_post(run, opcode, &stream->cqe,
						krping_bw_signaled(run, stream,
								   i));
		if (ret || i + 1 == atomic64_read(&stream->total))
			break;
	}
	if (!ret) {
		run->wait.draining = true;
		ret = krping_wait_count(run, &run->counts.rdma,
					run->bench.rdma_posted);
		run->wait.draining = false;
	}

	/*
	 * What completed counts, also when the run was cut short, up to the
	 * time its last completion was seen.
	 */
	done = krping_read_count(&run->counts.rdma);
	if (start && done > run->bench.warmup) {
		struct krping_bw_result *res = &stream->result;

		res->msgs = done - run->bench.warmup;
		res->bytes = res->msgs * o->size;
		res->ns = max(READ_ONCE(stream->last_ns), start + 1) - start;
		res->start_ns = start;
	}
	atomic64_set(&st->iterations, done);
	return ret;
}

int krping_bench_bw(struct krping_run *run)
{
	const struct krping_options *o = run->opts;

	if (o->role != KRPING_ROLE_CLIENT && !o->duplex)
		return 0;
	return krping_bench_stream(run, &run->bw, IB_WR_RDMA_WRITE);
}

/**
 * krping_bench_bw_result() - the bandwidth figure of a run
 * @run: the run, ended
 * @res: where to put the figure
 *
 * Only a stream has one: bw's, and an sbw client's. Any other run,
 * whose union member is not a stream, and a stream that did not reach
 * its measured part, give zeroes.
 */
void krping_bench_bw_result(const struct krping_run *run,
			    struct krping_bw_result *res)
{
	switch (run->opts->test) {
	case KRPING_TEST_BW:
		*res = run->bw.result;
		break;
	case KRPING_TEST_SBW:
		/* An sbw server's stream stays zero (the run is kzalloc'ed). */
		*res = run->send_bench.stream.result;
		break;
	default:
		memset(res, 0, sizeof(*res));
		break;
	}
}
