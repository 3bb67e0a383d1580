// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: connection ids on the link, and the control
 * messages (CM messages, answers to the peer's, a QP's CLOSE) that wait
 * for room in the peer's rings, bounded.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/slab.h>
#include <linux/workqueue.h>

#include "link_transport.h"

/*
 * Answers to the peer's CM messages (a REJECT of its request, the CLOSE
 * of a connection this host does not know) waiting to be sent, at most:
 * the peer decides how many it provokes, and while it frees no slot of
 * its ring they wait. One more is dropped, and counted; the peer's
 * request then ends by its own timeout.
 */
#define ROPCIE_LX_ANSWERS_MAX	64

/**
 * ropcie_lx_conn_add() - give @qp an id on the link
 * @x: the link's transport
 * @gen: the generation the connection is made in
 * @qp: the QP, held by the link from now on
 * @conn: its id, on success
 *
 * Context: task, holding ropcie_lx_life for reading.
 * Return: 0, -ENOTCONN when the link is no longer in @gen, -ENOMEM,
 * -EBUSY when every id is taken.
 */
int ropcie_lx_conn_add(struct ropcie_xport *x, u32 gen, struct ropcie_qp *qp,
		       u32 *conn)
{
	unsigned long flags;
	int ret;

	ropcie_qp_get(qp);
	/* Ids go round: a stale id of the peer names nothing for long. */
	ret = xa_alloc_cyclic_irq(&x->conns, conn, qp,
				  XA_LIMIT(1, ROPCIE_WIRE_MAX_QPN), &x->conn_next,
				  GFP_KERNEL);
	if (ret < 0) {
		ropcie_qp_put(qp);
		return ret;
	}
	/* A down that ran meanwhile did not see it: undo. */
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	ret = ropcie_lx_alive(x, gen) ? 0 : -ENOTCONN;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (ret)
		ropcie_lx_conn_del(x, *conn, qp);
	return ret;
}

/**
 * ropcie_lx_conn_del() - end connection @conn of @qp on the link
 * @x: the link's transport
 * @conn: the id
 * @qp: its owner, whose reference the link drops
 *
 * Nothing happens when @conn is not @qp's (any more): a stale caller
 * never ends the connection that took its id since.
 *
 * Context: any.
 */
void ropcie_lx_conn_del(struct ropcie_xport *x, u32 conn, struct ropcie_qp *qp)
{
	unsigned long flags;
	void *was;

	xa_lock_irqsave(&x->conns, flags);
	was = __xa_cmpxchg(&x->conns, conn, qp, NULL, GFP_ATOMIC);
	xa_unlock_irqrestore(&x->conns, flags);
	if (was == qp)
		ropcie_qp_put(qp);
}

/*
 * The QP of connection dst, held, if the descriptor comes from its peer
 * QP in this generation; else NULL (an old or closed connection).
 */
struct ropcie_qp *ropcie_lx_conn_qp(struct ropcie_xport *x, u32 gen,
				    u32 dst, u32 src)
{
	struct ropcie_qp *qp;
	unsigned long flags;
	bool ok;

	xa_lock_irqsave(&x->conns, flags);
	qp = xa_load(&x->conns, dst);
	if (qp)
		ropcie_qp_get(qp);
	xa_unlock_irqrestore(&x->conns, flags);
	if (!qp)
		return NULL;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	ok = qp->lx.x == x && qp->lx.gen == gen && qp->lx.conn == dst &&
	     qp->lx.peer_conn == src && src;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (!ok) {
		ropcie_qp_put(qp);
		return NULL;
	}
	return qp;
}

struct ropcie_lx_ctrl *ropcie_lx_ctrl_alloc(gfp_t gfp)
{
	return kzalloc(sizeof(struct ropcie_lx_ctrl), gfp);
}

static void ropcie_lx_ctrl_add(struct ropcie_xport *x, u32 gen,
			       struct ropcie_lx_ctrl *msg)
{
	unsigned long flags;
	bool queued = false;

	msg->gen = gen;
	spin_lock_irqsave(&x->lock, flags);
	if (x->up && x->gen == gen && !x->dead &&
	    (!msg->answer || x->answers < ROPCIE_LX_ANSWERS_MAX)) {
		list_add_tail(&msg->list, &x->ctrl);
		if (msg->answer)
			WRITE_ONCE(x->answers, x->answers + 1);
		queued = true;
	} else if (x->up && x->gen == gen && !x->dead) {
		atomic64_inc(&x->stats.answers_dropped);
	}
	spin_unlock_irqrestore(&x->lock, flags);
	if (queued)
		queue_work(system_wq, &x->ctrl_work);
	else
		kfree(msg);
}

/**
 * ropcie_lx_answer_cm() - answer the other host with a CM message
 * @x: the link's transport
 * @gen: the generation it belongs to (dropped in any other)
 * @cm: what to send (a REJECT)
 *
 * Queued for the control work, which sends it once the peer's ring has
 * room; dropped (and counted) when memory or ROPCIE_LX_ANSWERS_MAX
 * answers do not let it wait. Context: task; not under the fabric lock.
 */
void ropcie_lx_answer_cm(struct ropcie_xport *x, u32 gen,
			 const struct ropcie_wire_cm_msg *cm)
{
	struct ropcie_lx_ctrl *msg = ropcie_lx_ctrl_alloc(GFP_KERNEL);

	if (!msg) {
		atomic64_inc(&x->stats.answers_dropped);
		return;
	}
	msg->answer = true;
	msg->cm = *cm;
	ropcie_lx_ctrl_add(x, gen, msg);
}

/**
 * ropcie_lx_answer_close() - tell the other host a connection is unknown
 * @x: the link's transport
 * @gen: the generation it named
 * @conn: the id it gave this host's side (in no QP's hands here)
 * @peer_conn: the other host's id of its QP, which must end
 *
 * As ropcie_lx_answer_cm(), bounded the same way. Context: task.
 */
void ropcie_lx_answer_close(struct ropcie_xport *x, u32 gen, u32 conn,
			    u32 peer_conn)
{
	struct ropcie_lx_ctrl *msg = ropcie_lx_ctrl_alloc(GFP_KERNEL);

	if (!msg) {
		atomic64_inc(&x->stats.answers_dropped);
		return;
	}
	msg->answer = true;
	msg->close = true;
	msg->conn = conn;
	msg->peer_conn = peer_conn;
	ropcie_lx_ctrl_add(x, gen, msg);
}

/**
 * ropcie_lx_close_queue() - tell the other host that a connection ends
 * @x: the link's transport
 * @gen: the generation of the connection
 * @msg: the QP's own, from ropcie_lx_ctrl_alloc() when it connected;
 *	the queue owns it from now on
 * @conn: this host's id of the connection's QP
 * @peer_conn: the other host's
 *
 * Never dropped while the link is in @gen: each QP has one.
 * Context: any; the fabric lock may be held.
 */
void ropcie_lx_close_queue(struct ropcie_xport *x, u32 gen,
			   struct ropcie_lx_ctrl *msg, u32 conn, u32 peer_conn)
{
	msg->close = true;
	msg->conn = conn;
	msg->peer_conn = peer_conn;
	ropcie_lx_ctrl_add(x, gen, msg);
}

static int ropcie_lx_cm_produce(struct ropcie_lx_tx *tx,
				const struct ropcie_wire_cm_msg *cm)
{
	struct ropcie_wire_msg m = {
		.type = ROPCIE_WIRE_CM,
		.flags = ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST,
		.len = sizeof(struct ropcie_wire_cm),
		.msg_len = sizeof(struct ropcie_wire_cm),
	};
	struct ropcie_wire_cm w;

	ropcie_wire_cm_encode(&w, cm);
	memcpy(tx->data, &w, sizeof(w));
	return ropcie_lx_tx_commit(tx, &m);
}

/**
 * ropcie_lx_cm_begin() - take a request slot for a CM message
 * @x: the link's transport
 * @gen: its generation
 * @tx: filled on success
 *
 * Whatever the caller does between this and ropcie_lx_cm_commit() comes
 * before any request of its QPs on the link: an acceptor announces its
 * connection to its own ULP there, and the ULP's first SEND must reach
 * the peer after the acceptance does.
 *
 * Context: task, holding ropcie_lx_life for reading.
 * Return: as ropcie_lx_tx_begin().
 */
int ropcie_lx_cm_begin(struct ropcie_xport *x, u32 gen,
		       struct ropcie_lx_tx *tx)
{
	return ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, tx);
}

int ropcie_lx_cm_commit(struct ropcie_lx_tx *tx,
			const struct ropcie_wire_cm_msg *cm)
{
	return ropcie_lx_cm_produce(tx, cm);
}

void ropcie_lx_cm_abort(struct ropcie_lx_tx *tx)
{
	ropcie_lx_tx_abort(tx);
}

/* Send a CM message now. Context: task, holding ropcie_lx_life. */
int ropcie_lx_cm_send(struct ropcie_xport *x, u32 gen,
		      const struct ropcie_wire_cm_msg *cm)
{
	struct ropcie_lx_tx tx;
	int ret;

	ret = ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, &tx);
	if (ret)
		return ret;
	return ropcie_lx_cm_produce(&tx, cm);
}

/* Queued CM messages and RECV_POSTED notices, in task context. */
void ropcie_lx_ctrl_work(struct work_struct *work)
{
	struct ropcie_xport *x = container_of(work, struct ropcie_xport,
					      ctrl_work);
	struct ropcie_lx_ctrl *msg;
	struct ropcie_qp *qp;
	unsigned long flags, id;

	for (;;) {
		spin_lock_irqsave(&x->lock, flags);
		msg = list_first_entry_or_null(&x->ctrl, struct ropcie_lx_ctrl,
					       list);
		if (msg) {
			list_del(&msg->list);
			if (msg->answer)
				WRITE_ONCE(x->answers, x->answers - 1);
		}
		spin_unlock_irqrestore(&x->lock, flags);
		if (!msg)
			break;
		if (msg->close)
			ropcie_lx_answer(x, msg->gen, NULL, ROPCIE_WIRE_CLOSE,
					 msg->peer_conn, msg->conn, 0, 0);
		else
			ropcie_lx_cm_send(x, msg->gen, &msg->cm);
		kfree(msg);
	}

	xa_lock_irqsave(&x->conns, flags);
	xa_for_each_marked(&x->conns, id, qp, ROPCIE_LX_NOTIFY) {
		struct ropcie_wire_msg m = { .type = ROPCIE_WIRE_RECV_POSTED };
		struct ropcie_lx_tx tx;
		u32 gen;

		__xa_clear_mark(&x->conns, id, ROPCIE_LX_NOTIFY);
		ropcie_qp_get(qp);
		xa_unlock_irqrestore(&x->conns, flags);

		spin_lock_irqsave(&ropcie_fabric_lock, flags);
		m.dst_qpn = qp->lx.x == x ? qp->lx.peer_conn : 0;
		m.src_qpn = id;
		gen = qp->lx.gen;
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		if (m.dst_qpn && !ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, &tx))
			ropcie_lx_tx_commit(&tx, &m);
		ropcie_qp_put(qp);

		xa_lock_irqsave(&x->conns, flags);
	}
	xa_unlock_irqrestore(&x->conns, flags);
}
