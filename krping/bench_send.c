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
 * message (krping_bench_setup()), the closing message's own receive
 * before the last data SEND (server) or before the closing SEND
 * (client). A receive queue is consumed in order, and with these rules
 * there is never more than one receive of the test posted.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>

#include "run.h"

static void krping_data_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = &run->sess->stats;

	if (!krping_wc_ok(run, wc, "data RECV"))
		return;
	if (wc->byte_len != run->opts->size) {
		krping_fail(run, -EPROTO);
		return;
	}
	atomic64_inc(&st->recv_msgs);
	atomic64_add(wc->byte_len, &st->recv_bytes);
	krping_heard(run);
	krping_count_inc(&run->data_count);
	krping_wake(run);
}

static void krping_data_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = &run->sess->stats;

	if (!krping_wc_ok(run, wc, "data SEND"))
		return;
	atomic64_inc(&st->send_msgs);
	atomic64_add(run->rdma_len, &st->send_bytes);
	krping_heard(run);
	krping_count_inc(&run->rdma_count);
	krping_wake(run);
}

/**
 * krping_bench_post_data_recv() - post a receive of a whole buffer
 * @run: the run
 *
 * Into our sink (rdma_buf, through its registration in reg mode), for
 * one data SEND of the peer.
 *
 * Return: 0 or a negative errno.
 */
int krping_bench_post_data_recv(struct krping_run *run)
{
	struct ib_sge sge = { .length = run->opts->size };
	struct ib_recv_wr wr = {
		.wr_cqe = &run->data_recv_cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	run->data_recv_cqe.done = krping_data_recv_done;
	if (run->rdma_mr.mr) {
		sge.addr = run->rdma_mr.mr->iova;
		sge.lkey = run->rdma_mr.mr->lkey;
	} else {
		sge.addr = run->rdma_buf.dma;
		sge.lkey = run->pd->local_dma_lkey;
	}
	return ib_post_recv(run->qp, &wr, NULL);
}

/* SEND our buffer; its completion counts in rdma_count. */
static int krping_slat_send(struct krping_run *run)
{
	run->data_send_cqe.done = krping_data_send_done;
	return krping_bench_post(run, IB_WR_SEND, &run->data_send_cqe, true);
}

int krping_bench_slat(struct krping_run *run)
{
	bool client = run->opts->role == KRPING_ROLE_CLIENT;
	struct krping_stats *st = &run->sess->stats;
	u32 count = run->opts->count;
	u64 t_send = 0, now;
	u32 i;
	int ret;

	/* The first data receive was posted by krping_bench_setup(). */
	for (i = 0; !count || i < count; i++) {
		bool last = count && i + 1 == count;

		if (client) {
			if (i) {
				ret = krping_bench_post_data_recv(run);
				if (ret)
					return ret;
			}
			t_send = ktime_get_ns();
			ret = krping_slat_send(run);
			if (!ret)
				ret = krping_wait_count(run, &run->data_count,
							i + 1);
			if (ret)
				return ret;
			krping_lat_add(&run->lat,
				       (ktime_get_ns() - t_send) / 2);
		} else {
			ret = krping_wait_count(run, &run->data_count, i + 1);
			if (ret)
				return ret;
			now = ktime_get_ns();
			if (i)
				krping_lat_add(&run->lat, (now - t_send) / 2);
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
	}
	/* The client's closing message needs the server's answer's receive. */
	if (client) {
		ret = krping_post_recv(run);
		if (ret)
			return ret;
	}
	/* Every SEND completed before the closing message. */
	return krping_wait_count(run, &run->rdma_count, run->rdma_posted);
}
