// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie loopback backend: the transport of one work request between two
 * QPs on this host. The initiator's worker resolves its own SGEs, checks
 * the target's key, PD, access rights and bounds, and copies the data.
 * Every check comes before the first byte moves: a refused request
 * touches no memory.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sizes.h>
#include <linux/string.h>

#include "ropcie.h"

/* A resolved piece of a transfer: a range of an MR (NULL: local DMA). */
struct ropcie_seg {
	struct ropcie_mr *mr;
	u64 addr;
	u64 len;
};

struct ropcie_segs {
	struct ropcie_seg seg[ROPCIE_MAX_SGE];
	u32 n;
	u64 total;
};

static void ropcie_segs_put(struct ropcie_segs *s)
{
	u32 i;

	for (i = 0; i < s->n; i++)
		if (s->seg[i].mr)
			ropcie_mr_leave(s->seg[i].mr);
	s->n = 0;
}

/*
 * Resolve local SGEs of @qp: lkey, PD, bounds and, for a sink, local
 * write access. Return: IB_WC_SUCCESS with @s filled (put it), or the
 * error status with nothing held.
 */
static enum ib_wc_status ropcie_segs_get(struct ropcie_qp *qp,
					 const struct ib_sge *sge, u32 num,
					 bool sink, struct ropcie_segs *s)
{
	struct ropcie_dev *dev = qp->dev;
	u32 i;

	s->n = 0;
	s->total = 0;
	for (i = 0; i < num; i++) {
		struct ropcie_seg *seg = &s->seg[s->n];
		struct ropcie_mr *mr = NULL;

		if (!sge[i].length)
			continue;
		if (sge[i].lkey != dev->ibdev.local_dma_lkey) {
			mr = ropcie_mr_access(dev, sge[i].lkey, qp->ibqp.pd,
					      sge[i].addr, sge[i].length,
					      sink ? IB_ACCESS_LOCAL_WRITE : 0);
			if (!mr)
				goto err;
		}
		seg->mr = mr;
		seg->addr = sge[i].addr;
		seg->len = sge[i].length;
		s->n++;
		s->total += sge[i].length;
	}
	if (s->total > ROPCIE_MAX_MSG) {
		ropcie_segs_put(s);
		return IB_WC_LOC_LEN_ERR;
	}
	return IB_WC_SUCCESS;
err:
	ropcie_segs_put(s);
	return IB_WC_LOC_PROT_ERR;
}

/*
 * The target side of a READ or WRITE: @rkey must name a valid MR of the
 * peer's PD with @access that covers [addr, addr + len). Return: the MR,
 * held and entered (ropcie_mr_leave()), or NULL (a remote access error).
 */
static struct ropcie_mr *ropcie_remote_mr(struct ropcie_qp *peer, u32 rkey,
					  u64 addr, u64 len, int access)
{
	return ropcie_mr_access(peer->dev, rkey, peer->ibqp.pd, addr, len,
				access);
}

/* A cursor over a list of segments. */
struct ropcie_cursor {
	const struct ropcie_seg *seg;
	u32 n, i;
	u64 off;
};

/* Kernel address of the cursor and the bytes contiguous from it. */
static void *ropcie_cursor_va(const struct ropcie_cursor *c, u64 *contig)
{
	const struct ropcie_seg *seg = &c->seg[c->i];
	u64 left = seg->len - c->off;
	void *va;

	if (seg->mr) {
		va = ropcie_mr_va(seg->mr, seg->addr + c->off, contig);
	} else {
		va = (void *)(uintptr_t)(seg->addr + c->off);
		*contig = U64_MAX;
	}
	*contig = min(*contig, left);
	return va;
}

static void ropcie_cursor_advance(struct ropcie_cursor *c, u64 len)
{
	c->off += len;
	if (c->off == c->seg[c->i].len) {
		c->i++;
		c->off = 0;
	}
}

/*
 * The most a copy moves between two chances to reschedule: a message
 * may be 2 GiB of one contiguous DMA MR.
 */
#define ROPCIE_COPY_CHUNK	SZ_64K

/*
 * Copy @len bytes; both sides were checked to hold them. @may_sleep:
 * reschedule between chunks. Return: false if a range did not translate
 * (an MR changed under us): the work request fails.
 */
static bool ropcie_copy(const struct ropcie_seg *dst, u32 nd,
			const struct ropcie_seg *src, u32 ns, u64 len,
			bool may_sleep)
{
	struct ropcie_cursor d = { .seg = dst, .n = nd };
	struct ropcie_cursor s = { .seg = src, .n = ns };

	while (len && d.i < d.n && s.i < s.n) {
		u64 dc, sc, chunk;
		void *dva = ropcie_cursor_va(&d, &dc);
		void *sva = ropcie_cursor_va(&s, &sc);

		chunk = min3(dc, sc, len);
		if (!dva || !sva || !chunk) {
			pr_debug("QP copy: a checked range did not translate\n");
			return false;
		}
		chunk = min_t(u64, chunk, ROPCIE_COPY_CHUNK);
		memcpy(dva, sva, chunk);
		if (may_sleep)
			cond_resched();
		ropcie_cursor_advance(&d, chunk);
		ropcie_cursor_advance(&s, chunk);
		len -= chunk;
	}
	return !len;
}

/*
 * Push the receive completion of @peer's RQE while the caller holds
 * peer->rq_cons_lock: a flush of later receives (and ib_drain_rq's
 * marker) takes that lock too, so completions keep the RQ's order.
 * Return: what ropcie_recv_signal() must do once the lock is dropped.
 */
static unsigned long ropcie_recv_push(struct ropcie_qp *peer, u64 wr_id,
				      enum ib_wc_status status, u32 len,
				      u32 inv_rkey, bool solicited)
{
	struct ib_wc wc = {
		.wr_id = wr_id,
		.status = status,
		.opcode = IB_WC_RECV,
		.byte_len = len,
		.qp = &peer->ibqp,
	};

	lockdep_assert_held(&peer->rq_cons_lock);
	if (inv_rkey && status == IB_WC_SUCCESS) {
		wc.wc_flags = IB_WC_WITH_INVALIDATE;
		wc.ex.invalidate_rkey = inv_rkey;
	}
	return ropcie_cq_push(peer->rcq, &wc, solicited);
}

static void ropcie_recv_signal(struct ropcie_qp *peer, unsigned long todo,
			       enum ib_wc_status status)
{
	if (ropcie_cq_signal(peer->rcq, todo, false) ||
	    status != IB_WC_SUCCESS)
		ropcie_qp_set_error(peer);
}

static int ropcie_lo_send(struct ropcie_qp *qp, struct ropcie_qp *peer,
			  const struct ropcie_sqe *sqe, struct ib_wc *wc,
			  bool may_sleep)
{
	struct ropcie_segs src, dst;
	enum ib_wc_status st, rst = IB_WC_SUCCESS;
	struct ropcie_rqe *rqe;
	unsigned long todo;
	u32 inv = 0;

	st = ropcie_segs_get(qp, sqe->sge, sqe->num_sge, false, &src);
	if (st != IB_WC_SUCCESS) {
		wc->status = st;
		return 0;
	}
	if (!ropcie_qp_target_enter(peer)) {
		ropcie_segs_put(&src);
		wc->status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	mutex_lock(&peer->rq_cons_lock);
	WRITE_ONCE(qp->recv_wait, true);
	/* The flag, then the RQ: pairs with ropcie_post_recv(). */
	smp_mb();
	rqe = ropcie_ring_cons_slot(&peer->rq);
	if (!rqe) {
		/* Like an infinite RNR retry: wait for the peer's receive. */
		mutex_unlock(&peer->rq_cons_lock);
		ropcie_qp_target_leave(peer);
		ropcie_segs_put(&src);
		return -EAGAIN;
	}
	WRITE_ONCE(qp->recv_wait, false);
	st = ropcie_segs_get(peer, rqe->sge, rqe->num_sge, true, &dst);
	if (st != IB_WC_SUCCESS) {
		rst = st;
		st = IB_WC_REM_OP_ERR;
	} else if (dst.total < src.total) {
		rst = IB_WC_LOC_LEN_ERR;
		st = IB_WC_REM_INV_REQ_ERR;
	} else if (!ropcie_copy(dst.seg, dst.n, src.seg, src.n, src.total,
				may_sleep)) {
		rst = IB_WC_LOC_PROT_ERR;
		st = IB_WC_REM_OP_ERR;
	}
	ropcie_segs_put(&dst);
	/*
	 * Invalidate once the message is placed, as RDMAP does, and once
	 * our own hold on the receive's MRs is dropped: the key may name
	 * one of them, and the invalidation waits for every transfer in it.
	 */
	if (st == IB_WC_SUCCESS && sqe->opcode == IB_WR_SEND_WITH_INV) {
		if (ropcie_mr_invalidate(peer->dev, peer->ibqp.pd,
					 sqe->inv_rkey)) {
			rst = IB_WC_LOC_PROT_ERR;
			st = IB_WC_REM_ACCESS_ERR;
		} else {
			inv = sqe->inv_rkey;
		}
	}
	todo = ropcie_recv_push(peer, rqe->wr_id, rst, (u32)src.total, inv,
				sqe->send_flags & IB_SEND_SOLICITED);
	ropcie_ring_consume(&peer->rq);
	mutex_unlock(&peer->rq_cons_lock);
	ropcie_qp_target_leave(peer);
	ropcie_segs_put(&src);

	ropcie_recv_signal(peer, todo, rst);
	wc->status = st;
	return 0;
}

/*
 * The MR a READ_WITH_INV invalidates: its sink's, as siw and cxgb4 do.
 * rdma_rw fills in ex.invalidate_rkey when it builds the chain and bumps
 * the MR's key byte only when it posts it (rdma_rw_update_lkey()), so
 * the key it names is one generation old; only the index still matches.
 */
static u32 ropcie_read_inv_key(const struct ropcie_sqe *sqe)
{
	if (sqe->num_sge && (sqe->sge[0].lkey >> 8) == (sqe->inv_rkey >> 8))
		return sqe->sge[0].lkey;
	return sqe->inv_rkey;
}

static int ropcie_lo_rdma(struct ropcie_qp *qp, struct ropcie_qp *peer,
			  const struct ropcie_sqe *sqe, struct ib_wc *wc,
			  bool may_sleep)
{
	bool read = sqe->opcode != IB_WR_RDMA_WRITE;
	bool copied = true;
	struct ropcie_seg remote;
	struct ropcie_segs local;
	enum ib_wc_status st;

	/* On iWARP, a READ sink is written by the peer: local write access. */
	st = ropcie_segs_get(qp, sqe->sge, sqe->num_sge, read, &local);
	if (st != IB_WC_SUCCESS) {
		wc->status = st;
		return 0;
	}
	if (!ropcie_qp_target_enter(peer)) {
		ropcie_segs_put(&local);
		wc->status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	if (local.total) {
		remote.addr = sqe->remote_addr;
		remote.len = local.total;
		remote.mr = ropcie_remote_mr(peer, sqe->rkey, remote.addr,
					     remote.len,
					     read ? IB_ACCESS_REMOTE_READ :
						    IB_ACCESS_REMOTE_WRITE);
		if (!remote.mr) {
			ropcie_qp_target_leave(peer);
			ropcie_segs_put(&local);
			wc->status = IB_WC_REM_ACCESS_ERR;
			return 0;
		}
		if (read)
			copied = ropcie_copy(local.seg, local.n, &remote, 1,
					     local.total, may_sleep);
		else
			copied = ropcie_copy(&remote, 1, local.seg, local.n,
					     local.total, may_sleep);
		ropcie_mr_leave(remote.mr);
	}
	ropcie_qp_target_leave(peer);
	ropcie_segs_put(&local);
	if (!copied) {
		wc->status = IB_WC_LOC_PROT_ERR;
		return 0;
	}
	wc->byte_len = local.total;
	wc->status = IB_WC_SUCCESS;
	if (sqe->opcode == IB_WR_RDMA_READ_WITH_INV &&
	    ropcie_mr_invalidate(qp->dev, qp->ibqp.pd,
				 ropcie_read_inv_key(sqe)))
		wc->status = IB_WC_LOC_PROT_ERR;
	return 0;
}

static int ropcie_lo_execute(struct ropcie_qp *qp, struct ropcie_qp *peer,
			     const struct ropcie_sqe *sqe, struct ib_wc *wc,
			     bool may_sleep)
{
	switch (sqe->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_INV:
		return ropcie_lo_send(qp, peer, sqe, wc, may_sleep);
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		return ropcie_lo_rdma(qp, peer, sqe, wc, may_sleep);
	default:
		wc->status = IB_WC_LOC_QP_OP_ERR;
		return 0;
	}
}

const struct ropcie_backend_ops ropcie_loopback_ops = {
	.name = "loopback",
	.execute = ropcie_lo_execute,
};
