// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: the requester. A QP's worker writes the
 * fragments of a SEND or WRITE into the peer's request ring, a slot
 * each, or asks for a READ, and waits for the verdict; WRITEs and SENDs
 * it may also post (up to ROPCIE_LX_POSTED in flight, nothing behind a
 * SEND the peer's credit does not cover) and take their verdicts in
 * order later.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/sched.h>

#include "link_transport.h"

/* A request without an answer for this long fails its QP. */
unsigned long ropcie_lx_request_timeout(void)
{
	return msecs_to_jiffies(4 * READ_ONCE(ropcie_link_timeout_ms));
}

static bool ropcie_lx_wait_over(struct ropcie_qp *qp, struct ropcie_lx_wait *w)
{
	return READ_ONCE(w->done) || READ_ONCE(qp->state) == IB_QPS_ERR ||
	       kthread_should_stop();
}

/*
 * Fill the slot @tx with bytes [@off, @off + @flen) of a message of @len
 * bytes from @local, and produce it; rescheduling between chunks only
 * when @may_sleep (never in the poster's context, which may hold a
 * spinlock). Return: as ropcie_lx_tx_commit(), or -EFAULT when @local
 * cannot be read (nothing produced).
 */
static int ropcie_lx_send_frag(struct ropcie_lx_tx *tx,
			       const struct ropcie_segs *local, u64 off,
			       u64 flen, u64 len, struct ropcie_wire_msg *m,
			       bool may_sleep)
{
	struct ropcie_seg dst = {
		.addr = (uintptr_t)tx->data,
		.len = flen,
	};
	u64 t_copy = flen ? ropcie_prof_now() : 0;

	if (flen && !ropcie_copy_at(&dst, 1, 0, local->seg, local->n, off,
				    flen, may_sleep)) {
		ropcie_lx_tx_abort(tx);
		return -EFAULT;
	}
	if (t_copy)
		ropcie_prof_add(ROPCIE_PROF_LX_COPY, ktime_get_ns() - t_copy);
	m->flags &= ~(ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST);
	if (!off)
		m->flags |= ROPCIE_WIRE_FIRST;
	if (off + flen == len)
		m->flags |= ROPCIE_WIRE_LAST;
	m->len = flen;
	m->offset = off;
	return ropcie_lx_tx_commit(tx, m);
}

/* Send a SEND or WRITE in fragments of a slot each. */
static int ropcie_lx_send_data(struct ropcie_xport *x, u32 gen,
			       const struct ropcie_req *req,
			       const struct ropcie_segs *local,
			       struct ropcie_wire_msg *m)
{
	u64 slot = x->link->gout.slot_size, off = 0;

	for (;;) {
		u64 flen = min(slot, req->len - off);
		struct ropcie_lx_tx tx;
		int ret;

		ret = ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, &tx);
		if (!ret)
			ret = ropcie_lx_send_frag(&tx, local, off, flen,
						  req->len, m, true);
		if (ret)
			return ret;
		off += flen;
		if (off == req->len)
			return 0;
	}
}

/*
 * ropcie_transport_ops.transfer over a link: the request goes into the
 * peer's request ring, the verdict (and a READ's data) comes back through
 * the response consumer. Context: the QP's worker; sleeps.
 */
static int ropcie_lx_transfer(struct ropcie_qp *qp,
			      const struct ropcie_req *req,
			      const struct ropcie_segs *local, bool may_sleep,
			      enum ib_wc_status *status)
{
	struct ropcie_lx_wait w = {};
	struct ropcie_wire_msg m = {};
	unsigned long flags, timeout = ropcie_lx_request_timeout();
	u64 t_begin = ropcie_prof_now(), t_sent = 0;
	struct ropcie_xport *x;
	u32 gen;
	int ret;

	if (WARN_ON_ONCE(!may_sleep)) {
		*status = IB_WC_LOC_QP_OP_ERR;
		return 0;
	}
	down_read(&ropcie_lx_life);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	x = qp->lx.x;
	gen = qp->lx.gen;
	m.dst_qpn = qp->lx.peer_conn;
	m.src_qpn = qp->lx.conn;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (!x || !m.dst_qpn) {
		up_read(&ropcie_lx_life);
		*status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}

	w.msn = qp->lx.msn++;
	w.read = req->op == ROPCIE_OP_READ;
	w.sink = local;
	w.len = req->len;
	w.status = IB_WC_WR_FLUSH_ERR;
	mutex_lock(&qp->lx.wait_lock);
	qp->lx.wait = &w;
	/* A SEND sent again after RNR was counted when first posted. */
	if ((req->op == ROPCIE_OP_SEND || req->op == ROPCIE_OP_SEND_INV) &&
	    !qp->sq_resend)
		qp->lx.sends++;
	mutex_unlock(&qp->lx.wait_lock);

	m.msn = w.msn;
	m.msg_len = req->len;
	m.rkey = req->rkey;
	m.raddr = req->remote_addr;
	switch (req->op) {
	case ROPCIE_OP_SEND_INV:
		m.inv_rkey = req->inv_rkey;
		fallthrough;
	case ROPCIE_OP_SEND:
		m.type = req->op == ROPCIE_OP_SEND ? ROPCIE_WIRE_SEND :
						     ROPCIE_WIRE_SEND_INV;
		m.rkey = 0;
		m.raddr = 0;
		if (req->solicited)
			m.flags = ROPCIE_WIRE_SOLICITED;
		ret = ropcie_lx_send_data(x, gen, req, local, &m);
		break;
	case ROPCIE_OP_WRITE:
		m.type = ROPCIE_WIRE_WRITE;
		ret = ropcie_lx_send_data(x, gen, req, local, &m);
		break;
	case ROPCIE_OP_READ: {
		struct ropcie_lx_tx tx;

		m.type = ROPCIE_WIRE_READ;
		m.flags = ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST;
		ret = ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, &tx);
		if (!ret)
			ret = ropcie_lx_tx_commit(&tx, &m);
		break;
	}
	default:
		ret = -EINVAL;
	}
	if (t_begin && !ret) {
		t_sent = ktime_get_ns();
		ropcie_prof_add(ROPCIE_PROF_LX_SEND, t_sent - t_begin);
	}

	while (!ret) {
		unsigned long seen = READ_ONCE(w.progress);

		if (wait_event_timeout(qp->wq, ropcie_lx_wait_over(qp, &w),
				       timeout))
			break;
		if (READ_ONCE(w.progress) == seen) {
			ret = -ETIMEDOUT;
			break;
		}
	}

	mutex_lock(&qp->lx.wait_lock);
	qp->lx.wait = NULL;
	mutex_unlock(&qp->lx.wait_lock);
	up_read(&ropcie_lx_life);
	/* An answer taken before t_sent was stamped is left out. */
	if (t_sent && w.done && w.answered_at > t_sent) {
		ropcie_prof_add(ROPCIE_PROF_LX_WAIT, w.answered_at - t_sent);
		ropcie_prof_add(ROPCIE_PROF_LX_WAKE,
				ktime_get_ns() - w.answered_at);
	}

	if (ret == -EFAULT) {
		*status = IB_WC_LOC_PROT_ERR;
	} else if (ret == -ETIMEDOUT) {
		dev_dbg(&qp->dev->ibdev.dev, "QP %u: no answer to message %u\n",
			qp->ibqp.qp_num, w.msn);
		*status = IB_WC_RETRY_EXC_ERR;
	} else if (ret || !w.done) {
		*status = IB_WC_WR_FLUSH_ERR;
	} else if (!w.rnr) {
		*status = w.status;
	}
	return w.rnr && !ret ? -EAGAIN : 0;
}

/* A receive was posted while a SEND of the peer waited: tell the peer. */
static void ropcie_lx_recv_posted(struct ropcie_qp *qp)
{
	struct ropcie_xport *x;
	unsigned long flags;
	u32 conn = 0;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	x = qp->lx.x;
	if (x) {
		conn = qp->lx.conn;
		xa_lock(&x->conns);
		if (xa_load(&x->conns, conn) == qp)
			__xa_set_mark(&x->conns, conn, ROPCIE_LX_NOTIFY);
		else
			conn = 0;
		xa_unlock(&x->conns);
		if (conn)
			queue_work(system_wq, &x->ctrl_work);
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
}

/*
 * The WRITE or SEND @m of @qp (numbered by the caller) as in flight,
 * before it is sent: its answer may come at once. Under the QP's
 * wait_lock.
 */
static struct ropcie_lx_posted *
ropcie_lx_posted_add(struct ropcie_qp_lx *lx, const struct ropcie_wire_msg *m)
{
	struct ropcie_lx_posted *p = &lx->posted[m->msn % ROPCIE_LX_POSTED];

	lockdep_assert_held(&lx->wait_lock);
	if (!lx->nposted)
		lx->posted_msn = m->msn;
	*p = (struct ropcie_lx_posted){
		.sent_at = jiffies,
		.status = IB_WC_WR_FLUSH_ERR,
		.send = m->type != ROPCIE_WIRE_WRITE,
	};
	if (p->send) {
		/* This connection's SEND number ++sends finds receive sends. */
		p->credited = (s32)(lx->peer_recvs - ++lx->sends) >= 0;
		lx->send_posted = !p->credited;
	}
	lx->nposted++;
	return p;
}

/* A posted request's send failed: that is its verdict. Under wait_lock. */
static void ropcie_lx_posted_fail(struct ropcie_lx_posted *p, int ret)
{
	if (!p->done) {
		p->status = ret == -EFAULT ? IB_WC_LOC_PROT_ERR :
					     IB_WC_WR_FLUSH_ERR;
		p->done = true;
	}
}

/*
 * The link and the header of a WRITE or SEND of @qp; ropcie_lx_life is
 * held for reading. Return: the transport, or NULL when the QP has no
 * connection.
 */
static struct ropcie_xport *ropcie_lx_post_msg(struct ropcie_qp *qp,
					       const struct ropcie_req *req,
					       u32 *gen,
					       struct ropcie_wire_msg *m)
{
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_xport *x;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	x = lx->x;
	*gen = lx->gen;
	m->dst_qpn = lx->peer_conn;
	m->src_qpn = lx->conn;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	m->msg_len = req->len;
	switch (req->op) {
	case ROPCIE_OP_SEND_INV:
		m->inv_rkey = req->inv_rkey;
		fallthrough;
	case ROPCIE_OP_SEND:
		m->type = req->op == ROPCIE_OP_SEND ? ROPCIE_WIRE_SEND :
						      ROPCIE_WIRE_SEND_INV;
		if (req->solicited)
			m->flags = ROPCIE_WIRE_SOLICITED;
		break;
	default:
		m->type = ROPCIE_WIRE_WRITE;
		m->rkey = req->rkey;
		m->raddr = req->remote_addr;
	}
	return x && m->dst_qpn ? x : NULL;
}

/*
 * A WRITE or SEND of one slot at most from the poster's context, which
 * may hold a spinlock: every lock is only tried, and the ring must have
 * room.
 * Return: as ropcie_lx_post(), -EAGAIN for "not now".
 */
static int ropcie_lx_post_now(struct ropcie_qp *qp,
			      const struct ropcie_req *req,
			      const struct ropcie_segs *local)
{
	struct ropcie_wire_msg m = {};
	u64 t_begin = ropcie_prof_now();
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_lx_posted *p;
	struct ropcie_xport *x;
	struct ropcie_lx_tx tx;
	int ret = -EAGAIN;
	u32 gen;

	if (!down_read_trylock(&ropcie_lx_life))
		return -EAGAIN;
	x = ropcie_lx_post_msg(qp, req, &gen, &m);
	if (!x || req->len > x->link->gout.slot_size)
		goto out;
	ret = ropcie_lx_tx_try(x, ROPCIE_WIRE_REQ, gen, &tx);
	if (ret)
		goto out;
	if (!mutex_trylock(&lx->wait_lock)) {
		ropcie_lx_tx_abort(&tx);
		ret = -EAGAIN;
		goto out;
	}
	m.msn = lx->msn++;
	p = ropcie_lx_posted_add(lx, &m);
	if (p->credited)
		atomic64_inc(&x->stats.sends_credited);
	/* Under wait_lock: the consumer takes the answer once it is all set. */
	ret = ropcie_lx_send_frag(&tx, local, 0, req->len, req->len, &m,
				  false);
	if (ret) {
		ropcie_lx_posted_fail(p, ret);
	} else if (t_begin) {
		p->t_sent = ktime_get_ns();
		ropcie_prof_add(ROPCIE_PROF_LX_SEND, p->t_sent - t_begin);
	}
	mutex_unlock(&lx->wait_lock);
	ret = 0;
out:
	up_read(&ropcie_lx_life);
	return ret;
}

/*
 * ropcie_transport_ops.post over a link: a WRITE or SEND into the peer's
 * request ring, registered as in flight before it is sent (its answer
 * may come at once). A send that fails makes its own verdict, taken in
 * order. A SEND goes behind anything; what goes behind a SEND depends on
 * the peer's credit: one the credit covers finds a receive, but nothing
 * goes behind one it does not cover, which may find none and be sent
 * again, and what follows it must not land first.
 * Context: the QP's worker, which sleeps for room in the ring; or, with
 * !@may_sleep, the poster (ropcie_lx_post_now()).
 */
static int ropcie_lx_post(struct ropcie_qp *qp, const struct ropcie_req *req,
			  const struct ropcie_segs *local, bool may_sleep)
{
	struct ropcie_wire_msg m = {};
	u64 t_begin = ropcie_prof_now();
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_lx_posted *p;
	struct ropcie_xport *x;
	u32 gen;
	int ret;

	if (lx->send_posted)
		return -EBUSY;
	if (lx->nposted >= ROPCIE_LX_POSTED) {
		if (may_sleep && !lx->limit_at)
			lx->limit_at = ropcie_prof_now();
		return -EBUSY;
	}
	if (!may_sleep)
		return ropcie_lx_post_now(qp, req, local);
	if (lx->limit_at) {
		ropcie_prof_add(ROPCIE_PROF_LX_LIMIT,
				ktime_get_ns() - lx->limit_at);
		lx->limit_at = 0;
	}
	down_read(&ropcie_lx_life);
	x = ropcie_lx_post_msg(qp, req, &gen, &m);
	if (!x) {
		up_read(&ropcie_lx_life);
		return -ENOTCONN;
	}
	m.msn = lx->msn++;
	mutex_lock(&lx->wait_lock);
	p = ropcie_lx_posted_add(lx, &m);
	mutex_unlock(&lx->wait_lock);
	if (p->credited)
		atomic64_inc(&x->stats.sends_credited);

	ret = ropcie_lx_send_data(x, gen, req, local, &m);
	up_read(&ropcie_lx_life);
	mutex_lock(&lx->wait_lock);
	if (ret)
		ropcie_lx_posted_fail(p, ret);
	if (t_begin && !ret) {
		p->t_sent = ktime_get_ns();
		ropcie_prof_add(ROPCIE_PROF_LX_SEND, p->t_sent - t_begin);
	}
	mutex_unlock(&lx->wait_lock);
	return 0;
}

/* ropcie_transport_ops.reap over a link: the oldest posted request. */
static int ropcie_lx_reap(struct ropcie_qp *qp, enum ib_wc_status *status)
{
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_lx_posted *p;
	int ret = -EINPROGRESS;

	mutex_lock(&lx->wait_lock);
	if (WARN_ON_ONCE(!lx->nposted)) {
		mutex_unlock(&lx->wait_lock);
		*status = IB_WC_WR_FLUSH_ERR;
		return 0;
	}
	p = &lx->posted[lx->posted_msn % ROPCIE_LX_POSTED];
	if (p->done && p->rnr) {
		ret = -EAGAIN;
	} else if (p->done) {
		*status = p->status;
		ret = 0;
		if (p->t_sent && p->answered_at > p->t_sent) {
			ropcie_prof_add(ROPCIE_PROF_LX_WAIT,
					p->answered_at - p->t_sent);
			ropcie_prof_add(ROPCIE_PROF_LX_WAKE,
					ktime_get_ns() - p->answered_at);
		}
	} else if (time_after(jiffies,
			      p->sent_at + ropcie_lx_request_timeout())) {
		dev_dbg(&qp->dev->ibdev.dev, "QP %u: no answer to message %u\n",
			qp->ibqp.qp_num, lx->posted_msn);
		ret = -ETIMEDOUT;
	}
	if (ret != -EINPROGRESS) {
		/* Nothing is posted behind a SEND without credit. */
		if (p->send && !p->credited)
			lx->send_posted = false;
		lx->posted_msn++;
		/* The next one's time runs from this answer. */
		if (--lx->nposted)
			lx->posted[lx->posted_msn % ROPCIE_LX_POSTED].sent_at =
				jiffies;
	}
	mutex_unlock(&lx->wait_lock);
	return ret;
}

/* ropcie_transport_ops.forget over a link. */
static void ropcie_lx_forget(struct ropcie_qp *qp)
{
	mutex_lock(&qp->lx.wait_lock);
	qp->lx.nposted = 0;
	qp->lx.send_posted = false;
	qp->lx.limit_at = 0;
	mutex_unlock(&qp->lx.wait_lock);
}

const struct ropcie_transport_ops ropcie_link_transport = {
	.name = "link",
	.transfer = ropcie_lx_transfer,
	.recv_posted = ropcie_lx_recv_posted,
	.inline_exec = false,
	.post = ropcie_lx_post,
	.reap = ropcie_lx_reap,
	.forget = ropcie_lx_forget,
};
