// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fast-registration stress: the client registers random lengths of its
 * buffer (REG_MR) and invalidates them again (LOCAL_INV), with up to
 * txdepth/2 such pairs in flight on as many MRs. Each completed pair is
 * one iteration. Nothing crosses the wire but the benchmark handshake;
 * the server only keeps the connection up.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "run.h"

/* More MRs than this add no stress, only memory. */
#define KRPING_FR_MAX_MRS	64

static void krping_fr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	if (!krping_wc_ok(run, wc, KRPING_WR_LOCAL_INV))
		return;
	krping_count_inc(&run->fr.count);
	krping_wake(run);
}

/* Post REG_MR of a random length of start_buf, then LOCAL_INV of it. */
static int krping_fr_post(struct krping_run *run, struct krping_mr *m)
{
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	struct scatterlist sg;
	u32 len = get_random_u32() % m->buf->size + 1;
	int n;

	ib_update_fast_reg_key(m->mr, (u8)ib_inc_rkey(m->mr->rkey));
	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = m->buf->dma;
	sg_dma_len(&sg) = len;
	n = ib_map_mr_sg(m->mr, &sg, 1, NULL, m->page_size);
	if (n != 1)
		return n < 0 ? n : -EINVAL;

	/* Unsignaled: a failure still completes, and the INV reports. */
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.wr_cqe = &run->io.reg_cqe;
	reg.wr.next = &inv;
	reg.mr = m->mr;
	reg.key = m->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE;

	inv.opcode = IB_WR_LOCAL_INV;
	inv.wr_cqe = &run->fr.cqe;
	inv.send_flags = IB_SEND_SIGNALED;
	inv.ex.invalidate_rkey = m->mr->rkey;
	return ib_post_send(run->conn.qp, &reg.wr, NULL);
}

int krping_bench_fr(struct krping_run *run)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = run->stats;
	u32 nmrs = clamp_t(u32, o->txdepth / 2, 1, KRPING_FR_MAX_MRS);
	u64 end, done = 0;
	u32 i, batch;
	int ret;

	if (o->role != KRPING_ROLE_CLIENT)
		return 0;

	run->fr.cqe.done = krping_fr_done;
	run->fr.mrs = kcalloc(nmrs, sizeof(*run->fr.mrs), GFP_KERNEL);
	if (!run->fr.mrs)
		return -ENOMEM;
	for (run->fr.nmrs = 0; run->fr.nmrs < nmrs; run->fr.nmrs++) {
		ret = krping_mr_alloc(run, &run->fr.mrs[run->fr.nmrs],
				      &run->io.start_buf);
		if (ret)
			return ret;
	}

	/*
	 * Waves of nmrs pairs: an MR is mapped again only once it is free.
	 * A wave ends at the end of the warm-up too.
	 */
	while (krping_bench_next(run, done)) {
		end = done + nmrs;
		if (done < run->bench.warmup)
			end = min_t(u64, end, run->bench.warmup);
		if (run->bench.total)
			end = min_t(u64, end, run->bench.total);
		batch = end - done;
		for (i = 0; i < batch; i++) {
			ret = krping_fr_post(run, &run->fr.mrs[i]);
			if (ret)
				return ret;
		}
		ret = krping_wait_count(run, &run->fr.count, done + batch);
		if (ret)
			return ret;
		atomic64_add(batch, &st->iterations);
		krping_bench_progress(run, done, batch, 0);
		done += batch;
	}
	return 0;
}

/**
 * krping_bench_fr_release() - deregister and free fr's MRs
 * @run: the run, its QP drained and destroyed (krping_teardown())
 *
 * Any test's teardown calls it, also after a failed or partial setup:
 * the state it frees is fr's member of the run's union, so nothing
 * is done unless the run is an fr one.
 */
void krping_bench_fr_release(struct krping_run *run)
{
	struct krping_fr *fr = &run->fr;

	if (run->opts->test != KRPING_TEST_FR)
		return;
	while (fr->nmrs)
		ib_dereg_mr(fr->mrs[--fr->nmrs].mr);
	kfree(fr->mrs);
	fr->mrs = NULL;
}
