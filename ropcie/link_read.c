// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: answering the peer's READs. The request
 * consumer only queues a READ; the transport's read kthread answers the
 * queued ones a fragment at a time, round-robin, into the response
 * ring. So the request consumer never waits for room for READ data: the
 * other connections' requests go on while one connection's large READ
 * is answered, and several connections' READs share the response ring
 * fragment by fragment.
 *
 * A requester of this protocol asks for one READ at a time on a
 * connection and nothing else of it until the READ is answered, so a
 * connection has at most one READ queued: a second one is the peer's
 * fault and ends the connection. That bounds the queue by the number
 * of connections.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/slab.h>

#include "link_transport.h"

/**
 * struct ropcie_lx_read - a READ of the peer being answered
 * @list: in xport.reads, while it is
 * @gen: the connection's generation
 * @conn: this host's id of the connection
 * @peer_conn: the peer's id
 * @msn: the READ's message number
 * @req: what it asks: key, address, length
 * @off: bytes answered so far
 * @in: the responder's state of the message
 */
struct ropcie_lx_read {
	struct list_head list;
	u32 gen, conn, peer_conn, msn;
	struct ropcie_req req;
	u64 off;
	struct ropcie_inmsg in;
};

/* Is a READ of connection @conn of @gen queued? Under x->read_lock. */
static bool ropcie_lx_read_queued(struct ropcie_xport *x, u32 gen, u32 conn)
{
	struct ropcie_lx_read *rd;

	lockdep_assert_held(&x->read_lock);
	list_for_each_entry(rd, &x->reads, list)
		if (rd->gen == gen && rd->conn == conn)
			return true;
	return false;
}

/**
 * ropcie_lx_rx_read() - a READ of the peer, for @qp's connection
 * @x: the transport
 * @gen: the generation it came in
 * @m: the READ, checked
 * @qp: the QP its connection names, held
 *
 * An empty READ is answered at once; any other is queued for the read
 * kthread. Either is refused while a READ of the connection is queued.
 * Context: the request consumer, the only one that adds to the queue.
 * Return: 0, or -EPROTO when a READ of the connection is queued already
 * (the caller ends the connection).
 */
int ropcie_lx_rx_read(struct ropcie_xport *x, u32 gen,
		      const struct ropcie_wire_msg *m, struct ropcie_qp *qp)
{
	struct ropcie_lx_read *rd;
	bool busy;

	spin_lock(&x->read_lock);
	busy = ropcie_lx_read_queued(x, gen, m->dst_qpn);
	spin_unlock(&x->read_lock);
	if (busy)
		return -EPROTO;
	if (!m->msg_len) {
		struct ropcie_req req = { .op = ROPCIE_OP_READ,
					  .rkey = m->rkey,
					  .remote_addr = m->raddr };
		enum ib_wc_status st = IB_WC_SUCCESS;
		struct ropcie_inmsg in = {};
		struct ropcie_segs none = {};

		ropcie_respond_frag(qp, &req, &in, 0, &none, true, true, &st);
		ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, st);
		return 0;
	}
	rd = kzalloc(sizeof(*rd), GFP_KERNEL);
	if (!rd) {
		ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, IB_WC_REM_OP_ERR);
		return 0;
	}
	rd->gen = gen;
	rd->conn = m->dst_qpn;
	rd->peer_conn = m->src_qpn;
	rd->msn = m->msn;
	rd->req.op = ROPCIE_OP_READ;
	rd->req.rkey = m->rkey;
	rd->req.remote_addr = m->raddr;
	rd->req.len = m->msg_len;
	/* Only this consumer adds: the connection has none queued still. */
	spin_lock(&x->read_lock);
	list_add_tail(&rd->list, &x->reads);
	spin_unlock(&x->read_lock);
	wake_up(&x->read_wq);
	return 0;
}

/* Off the queue: the connection may ask again. */
static void ropcie_lx_read_done(struct ropcie_xport *x,
				struct ropcie_lx_read *rd)
{
	spin_lock(&x->read_lock);
	list_del(&rd->list);
	spin_unlock(&x->read_lock);
}

/*
 * Answer the next fragment of @rd, the queue's head, for @qp. Return:
 * true when @rd is done with (off the queue), false when it goes to
 * the queue's tail for its next fragment.
 */
static bool ropcie_lx_read_frag(struct ropcie_xport *x,
				struct ropcie_lx_read *rd, struct ropcie_qp *qp)
{
	u64 flen = min_t(u64, x->link->gout.slot_size, rd->req.len - rd->off);
	struct ropcie_wire_msg r = {
		.type = ROPCIE_WIRE_READ_DATA,
		.dst_qpn = rd->peer_conn,
		.src_qpn = rd->conn,
		.msn = rd->msn,
		.len = flen,
		.offset = rd->off,
		.msg_len = rd->req.len,
	};
	bool last = rd->off + flen == rd->req.len;
	struct ropcie_segs data = { .n = 1, .total = flen };
	enum ib_wc_status st = IB_WC_SUCCESS;
	struct ropcie_lx_tx tx;

	if (ropcie_lx_tx_begin(x, ROPCIE_WIRE_RSP, rd->gen, &tx)) {
		/* The link went down: the connection with it. */
		ropcie_lx_read_done(x, rd);
		return true;
	}
	data.seg[0].addr = (uintptr_t)tx.data;
	data.seg[0].len = flen;
	ropcie_respond_frag(qp, &rd->req, &rd->in, rd->off, &data, last, true,
			    &st);
	if (st != IB_WC_SUCCESS) {
		ropcie_lx_tx_abort(&tx);
		ropcie_lx_read_done(x, rd);
		ropcie_lx_answer(x, rd->gen, NULL, ROPCIE_WIRE_ACK,
				 rd->peer_conn, rd->conn, rd->msn, st);
		return true;
	}
	r.flags = (rd->off ? 0 : ROPCIE_WIRE_FIRST) |
		  (last ? ROPCIE_WIRE_LAST : 0);
	/* Off the queue before the peer can have it and ask again. */
	if (last)
		ropcie_lx_read_done(x, rd);
	if (ropcie_lx_tx_commit(&tx, &r) && !last) {
		ropcie_lx_read_done(x, rd);
		return true;
	}
	rd->off += flen;
	return last;
}

/* The queue's head, to be answered next; NULL when it is empty. */
static struct ropcie_lx_read *ropcie_lx_read_next(struct ropcie_xport *x)
{
	struct ropcie_lx_read *rd;

	spin_lock(&x->read_lock);
	rd = list_first_entry_or_null(&x->reads, struct ropcie_lx_read, list);
	spin_unlock(&x->read_lock);
	return rd;
}

/* @rd answered a fragment and has more: behind the others. */
static void ropcie_lx_read_rotate(struct ropcie_xport *x,
				  struct ropcie_lx_read *rd)
{
	spin_lock(&x->read_lock);
	list_move_tail(&rd->list, &x->reads);
	spin_unlock(&x->read_lock);
}

/**
 * ropcie_lx_read_thread() - the transport's read kthread
 * @arg: the transport
 *
 * Answers the queued READs a fragment at a time, the queue's head
 * first, then moves it to the tail. A READ whose connection ended (or
 * whose link went down) is dropped: its requester learnt that from the
 * CLOSE or the link. Only this kthread takes entries off the queue or
 * frees them.
 */
int ropcie_lx_read_thread(void *arg)
{
	struct ropcie_xport *x = arg;

	while (!kthread_should_stop()) {
		struct ropcie_lx_read *rd = ropcie_lx_read_next(x);
		struct ropcie_qp *qp;
		bool done;

		if (!rd) {
			wait_event_interruptible(x->read_wq,
						 !list_empty_careful(&x->reads) ||
						 kthread_should_stop());
			continue;
		}
		qp = ropcie_lx_conn_qp(x, rd->gen, rd->conn, rd->peer_conn);
		if (qp) {
			done = ropcie_lx_read_frag(x, rd, qp);
			ropcie_qp_put(qp);
		} else {
			ropcie_lx_read_done(x, rd);
			done = true;
		}
		if (done)
			kfree(rd);
		else
			ropcie_lx_read_rotate(x, rd);
		cond_resched();
	}
	return 0;
}

/**
 * ropcie_lx_read_drop() - free the READs still queued
 * @x: the transport, its read kthread stopped
 */
void ropcie_lx_read_drop(struct ropcie_xport *x)
{
	struct ropcie_lx_read *rd, *tmp;

	list_for_each_entry_safe(rd, tmp, &x->reads, list) {
		list_del(&rd->list);
		kfree(rd);
	}
}
