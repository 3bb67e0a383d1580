// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: connections between the QPs of two hosts over
 * a ropcie link (link.h), in the rings of the link protocol (wire.h).
 *
 * Each host produces into the peer's inbound window and consumes its
 * own. Requests (SEND, WRITE and READ fragments, connection management,
 * RECV_POSTED) go into the request ring; verdicts and READ data come back
 * in the response ring. Two kthreads per link consume: one the requests,
 * as the responder of the QPs they name (responder.c decides everything
 * about the target's memory, here as on loopback), one the responses,
 * which it hands to the waiting requester. The response consumer never
 * waits for anything, and the request consumer waits only for room in
 * the peer's response ring, so the two hosts cannot wait on each other
 * in a circle.
 *
 * A requester (a QP's worker) writes the fragments of a SEND or WRITE
 * into the peer's request ring, a slot each, and waits for the verdict;
 * WRITEs it may also post (up to ROPCIE_LX_POSTED in flight, taking
 * their verdicts in order later), and the peer refuses whatever follows
 * a failed message of the connection. Every descriptor and index the peer wrote
 * is copied out once and checked (wire.c) before use; what it names (a
 * connection, a key, a range) is checked by its owner here. A peer that
 * breaks the protocol takes the link down (every connection over it
 * fails, the link comes back with fresh rings); one that stops
 * answering a request for request_timeout fails that request's QP.
 *
 * The link's generation changes whenever it goes down: a connection,
 * a slot or an index of an older generation is never used again.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/sched/clock.h>
#include <linux/sched/stat.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <asm/byteorder.h>

#include "ropcie.h"
#include "link.h"

/* Descriptors of a QP's connection on the link: marks in xport.conns. */
#define ROPCIE_LX_NOTIFY	XA_MARK_1	/* send RECV_POSTED */

/*
 * Answers to the peer's CM messages (a REJECT of its request, the CLOSE
 * of a connection this host does not know) waiting to be sent, at most:
 * the peer decides how many it provokes, and while it frees no slot of
 * its ring they wait. One more is dropped, and counted; the peer's
 * request then ends by its own timeout.
 */
#define ROPCIE_LX_ANSWERS_MAX	64

/* Links whose transport may carry a new connection, under the fabric lock. */
static LIST_HEAD(ropcie_xports);

/*
 * Held for reading by whoever uses a transport outside the fabric lock
 * (a requester, connect, accept); for writing by the link's teardown
 * before it frees the transport.
 */
DECLARE_RWSEM(ropcie_lx_life);

/**
 * struct ropcie_lx_rx - the consumer of one inbound ring
 * @x: its transport
 * @ring: the ring
 * @task: its kthread
 * @wq: where it sleeps
 * @events: bumped by each doorbell for this ring, and each beat
 * @owner: bit 0 set while the kthread or the doorbell's fast path
 *	(ropcie_lx_rx_fast()) consumes: they take turns, the fast path
 *	only trying, and whoever holds it owns @cons, @gen and @broken
 * @cons: the next index to consume; read without @owner by the
 *	doorbell, to see whether the ring holds anything new
 * @gen: the generation @cons counts in
 * @broken: a generation whose ring the peer broke: consumed no more
 * @want_at: @cons when the peer's waiting producer was last rung for
 * @traffic: a descriptor was consumed since the kthread last looked
 *	(ropcie_lx_rx_poll() follows traffic)
 * @rang_at: when profiling, the doorbell it has not yet taken
 *	(ktime_get_ns(); 0: none)
 */
struct ropcie_lx_rx {
	struct ropcie_xport *x;
	enum ropcie_wire_ring ring;
	struct task_struct *task;
	wait_queue_head_t wq;
	atomic_t events;
	unsigned long owner;
	u32 cons, gen, broken;
	u32 want_at;
	bool traffic;
	atomic64_t rang_at;
};

/**
 * struct ropcie_xport - the transport over one link
 * @link: the link
 * @list: in ropcie_xports
 * @lock: @up, @gen, @peer_epoch, and the transport's fields of the
 *	header of the peer's window (prod, cons, rx_sleep, tx_want)
 * @up: the link is up: the rings may be used
 * @gen: the link's generation: changes when it goes down. @up and @gen
 *	change under the fabric lock too, so the connection manager sees
 *	them stable.
 * @peer_epoch: the peer's epoch in this generation
 * @tx_busy: bit @ring set while a producer holds that ring of the
 *	peer's window: a bit lock, not a mutex, because a poster and the
 *	doorbell's fast path may only try it (ropcie_lx_tx_trylock())
 * @prod: the next index to produce, in generation @tx_gen
 * @tx_gen: the generation @prod counts in
 * @tx_wq: producers waiting for room
 * @rx: the consumers of the two inbound rings (struct ropcie_lx_rx)
 * @conns: connection (QP) id on the link -> QP, held
 * @conn_next: the next id to try (xa_alloc_cyclic())
 * @ctrl: control messages to send (struct ropcie_lx_ctrl), under @lock
 * @answers: of @ctrl, the answers to the peer (at most
 *	ROPCIE_LX_ANSWERS_MAX), under @lock
 * @ctrl_work: sends them, and the RECV_POSTED notices
 * @dead: the link is going away: no more up
 * @stats: descriptors produced and consumed, doorbells rung, of the
 *	consumed the WRITEs served in the doorbell's tasklet, the answers
 *	dropped for want of room in @ctrl, and the peer's faults in a
 *	descriptor: dropped (it named no connection) or ending the
 *	connection it named (ropcie_lx_rx_fault())
 */
struct ropcie_xport {
	struct ropcie_link *link;
	struct list_head list;
	spinlock_t lock;		/* see above */
	bool up;
	u32 gen;
	u64 peer_epoch;
	unsigned long tx_busy;
	u32 prod[ROPCIE_WIRE_NR_RINGS];
	u32 tx_gen[ROPCIE_WIRE_NR_RINGS];
	wait_queue_head_t tx_wq;
	struct ropcie_lx_rx rx[ROPCIE_WIRE_NR_RINGS];
	struct xarray conns;
	u32 conn_next;
	struct list_head ctrl;
	unsigned int answers;
	struct work_struct ctrl_work;
	bool dead;
	struct {
		atomic64_t tx, rx, db, irq, answers_dropped;
		atomic64_t rx_dropped, conn_faults;
	} stats;
};

/*
 * A control message waiting to be sent: a CM message (REJECT) in the
 * request ring, or the CLOSE of connection conn, peer_conn in the
 * response ring; an answer to the peer, or a QP's own CLOSE.
 */
struct ropcie_lx_ctrl {
	struct list_head list;
	u32 gen;
	bool close, answer;
	u32 conn, peer_conn;
	struct ropcie_wire_cm_msg cm;
};

/**
 * struct ropcie_lx_wait - a requester's message in flight
 * @msn: its number
 * @read: a READ: the response carries data into @sink
 * @sink: the READ's sink, held by the requester while it waits
 * @len: bytes of the message
 * @next: a READ: where the next fragment of data goes
 * @progress: bumped by every response: the requester's timeout
 *	counts from the last one
 * @done: the verdict is in @status (or @rnr)
 * @rnr: a SEND found no receive: send it again once one is posted
 * @status: the verdict
 * @answered_at: when profiling, when @done was set (ktime_get_ns())
 */
struct ropcie_lx_wait {
	u32 msn;
	bool read;
	const struct ropcie_segs *sink;
	u64 len, next;
	unsigned long progress;
	bool done, rnr;
	enum ib_wc_status status;
	u64 answered_at;
};

/* A request without an answer for this long fails its QP. */
static unsigned long ropcie_lx_request_timeout(void)
{
	return msecs_to_jiffies(4 * READ_ONCE(ropcie_link_timeout_ms));
}

static void *ropcie_lx_desc(void *win, const struct ropcie_wire_geom *g,
			    int ring, u32 idx)
{
	return win + g->desc_off[ring] +
	       (size_t)(idx % g->nslots) * ROPCIE_WIRE_DESC_SIZE;
}

static void *ropcie_lx_data(void *win, const struct ropcie_wire_geom *g,
			    int ring, u32 idx)
{
	return win + g->data_off[ring] + (size_t)(idx % g->nslots) * g->slot_size;
}

static struct ropcie_wire_hdr *ropcie_lx_out(struct ropcie_xport *x)
{
	return x->link->hw->out;
}

static const struct ropcie_wire_hdr *ropcie_lx_in(struct ropcie_xport *x)
{
	return x->link->hw->in;
}

/**
 * ropcie_lx_alive() - may generation @gen of @x still be used?
 * @x: a transport
 * @gen: a generation
 *
 * Context: under the fabric lock, for an answer that stays true.
 */
bool ropcie_lx_alive(const struct ropcie_xport *x, u32 gen)
{
	return READ_ONCE(x->up) && READ_ONCE(x->gen) == gen;
}

static bool ropcie_lx_alive_locked(struct ropcie_xport *x, u32 gen,
				   unsigned long *flags)
{
	spin_lock_irqsave(&x->lock, *flags);
	if (x->up && x->gen == gen)
		return true;
	spin_unlock_irqrestore(&x->lock, *flags);
	return false;
}

static void ropcie_lx_ring_peer(struct ropcie_xport *x)
{
	atomic64_inc(&x->stats.db);
	x->link->hw->ops->peer_db_set(x->link->hw);
}

/*
 * Read a ring index the peer wrote in this host's inbound header, in
 * the generation's epoch: -EAGAIN when the peer is starting over (the
 * link core notices at its next beat).
 */
static int ropcie_lx_peer_index(struct ropcie_xport *x, const __le32 *field,
				u32 *val)
{
	const struct ropcie_wire_hdr *in = ropcie_lx_in(x);
	u64 e1, e2;

	e1 = le64_to_cpu(READ_ONCE(in->epoch));
	smp_rmb();	/* the epoch, then the index, then the epoch again */
	*val = le32_to_cpu(READ_ONCE(*field));
	smp_rmb();	/* pairs with the wmb()s of ropcie_link_publish() */
	e2 = le64_to_cpu(READ_ONCE(in->epoch));
	return e1 == e2 && e1 == READ_ONCE(x->peer_epoch) ? 0 : -EAGAIN;
}

/* Write one of the transport's header fields, in generation @gen only. */
static void ropcie_lx_set_hdr(struct ropcie_xport *x, u32 gen, __le32 *field,
			      u32 val)
{
	unsigned long flags;

	if (ropcie_lx_alive_locked(x, gen, &flags)) {
		WRITE_ONCE(*field, cpu_to_le32(val));
		spin_unlock_irqrestore(&x->lock, flags);
	}
}

/*
 * Room in the peer's ring? 1 yes, 0 no, <0 the peer broke the ring (its
 * consumer index is out of it): only a producer in task context fails
 * the link for that (ropcie_lx_tx_begin()).
 */
static int ropcie_lx_room(struct ropcie_xport *x, int ring)
{
	u32 cons, n;

	if (ropcie_lx_peer_index(x, &ropcie_lx_in(x)->cons[ring], &cons))
		return 0;
	if (ropcie_wire_ring_count(x->prod[ring], cons, x->link->gout.nslots,
				   &n))
		return -EPROTO;
	return n < x->link->gout.nslots;
}

static bool ropcie_lx_tx_ready(struct ropcie_xport *x, int ring, u32 gen,
			       int *room)
{
	if (!READ_ONCE(x->up) || READ_ONCE(x->gen) != gen)
		return true;
	*room = ropcie_lx_room(x, ring);
	return *room != 0;
}

/* A ring's producer index counts from 0 in each generation; under @lock. */
static void ropcie_lx_tx_gen(struct ropcie_xport *x, int ring, u32 gen)
{
	if (x->tx_gen[ring] != gen) {
		x->tx_gen[ring] = gen;
		x->prod[ring] = 0;
	}
}

/* Take the producer's side of @ring, waiting for it. Context: task. */
static void ropcie_lx_tx_lock(struct ropcie_xport *x, int ring)
{
	might_sleep();
	wait_on_bit_lock(&x->tx_busy, ring, TASK_UNINTERRUPTIBLE);
}

/* Take the producer's side of @ring if it is free. Context: any. */
static bool ropcie_lx_tx_trylock(struct ropcie_xport *x, int ring)
{
	return !test_and_set_bit_lock(ring, &x->tx_busy);
}

static void ropcie_lx_tx_unlock(struct ropcie_xport *x, int ring)
{
	clear_and_wake_up_bit(ring, &x->tx_busy);
}

/* The next slot of @ring, its producer's side held, with room checked. */
static void ropcie_lx_tx_take(struct ropcie_xport *x, int ring, u32 gen,
			      struct ropcie_lx_tx *tx)
{
	tx->x = x;
	tx->ring = ring;
	tx->gen = gen;
	tx->idx = x->prod[ring];
	tx->data = ropcie_lx_data(x->link->hw->out, &x->link->gout, ring,
				  tx->idx);
}

/**
 * ropcie_lx_tx_begin() - take the next slot of a ring of the peer's window
 * @x: the transport
 * @ring: which ring
 * @gen: the generation to produce in
 * @tx: filled on success
 *
 * Waits for room; the peer's consumer rings when it frees a slot (or the
 * next beat wakes us). Context: task; sleeps.
 *
 * Return: 0 with the ring's producer lock held (ropcie_lx_tx_commit() or
 * ropcie_lx_tx_abort()), -ENOTCONN when the link is down or in another
 * generation, -ETIMEDOUT when the peer freed no slot for the request
 * timeout, -EPROTO when it broke the ring (for both, the link is failed).
 */
static int ropcie_lx_tx_begin(struct ropcie_xport *x, int ring, u32 gen,
			      struct ropcie_lx_tx *tx)
{
	unsigned long flags, deadline = jiffies + ropcie_lx_request_timeout();
	u64 full_at = 0;
	int room = 0;

	ropcie_lx_tx_lock(x, ring);
	for (;;) {
		if (!ropcie_lx_alive_locked(x, gen, &flags))
			goto down;
		ropcie_lx_tx_gen(x, ring, gen);
		spin_unlock_irqrestore(&x->lock, flags);
		room = ropcie_lx_room(x, ring);
		if (room < 0)
			goto fail;
		if (room)
			break;
		if (!full_at)
			full_at = ropcie_prof_now();
		/* Tell the peer's consumer, then look again: Dekker. */
		ropcie_lx_set_hdr(x, gen, &ropcie_lx_out(x)->tx_want[ring], 1);
		smp_mb();	/* want, then cons; the consumer: cons, then want */
		wait_event_timeout(x->tx_wq, ropcie_lx_tx_ready(x, ring, gen, &room),
				   msecs_to_jiffies(ROPCIE_LINK_BEAT_MS));
		ropcie_lx_set_hdr(x, gen, &ropcie_lx_out(x)->tx_want[ring], 0);
		if (room < 0)
			goto fail;
		if (time_after(jiffies, deadline)) {
			ropcie_link_fail(x->link, "the peer consumes no more");
			ropcie_lx_tx_unlock(x, ring);
			return -ETIMEDOUT;
		}
	}
	if (full_at)
		ropcie_prof_add(ROPCIE_PROF_LX_ROOM, ktime_get_ns() - full_at);
	ropcie_lx_tx_take(x, ring, gen, tx);
	return 0;
down:
	ropcie_lx_tx_unlock(x, ring);
	return -ENOTCONN;
fail:
	ropcie_link_fail(x->link, "the peer's consumer index is out of its ring");
	ropcie_lx_tx_unlock(x, ring);
	return -EPROTO;
}

/*
 * ropcie_lx_tx_begin() for a context that must not sleep (a poster, the
 * doorbell's fast path): -EAGAIN at once when another producer holds
 * the ring or it is full, -EPROTO when the peer broke the ring, which
 * this leaves to a producer that may wait and fail the link (the
 * caller's work goes to its kthread).
 */
static int ropcie_lx_tx_try(struct ropcie_xport *x, int ring, u32 gen,
			    struct ropcie_lx_tx *tx)
{
	unsigned long flags;
	int room;

	if (!ropcie_lx_tx_trylock(x, ring))
		return -EAGAIN;
	if (!ropcie_lx_alive_locked(x, gen, &flags)) {
		ropcie_lx_tx_unlock(x, ring);
		return -ENOTCONN;
	}
	ropcie_lx_tx_gen(x, ring, gen);
	spin_unlock_irqrestore(&x->lock, flags);
	room = ropcie_lx_room(x, ring);
	if (room <= 0) {
		ropcie_lx_tx_unlock(x, ring);
		return room ? -EPROTO : -EAGAIN;
	}
	ropcie_lx_tx_take(x, ring, gen, tx);
	return 0;
}

static void ropcie_lx_tx_abort(struct ropcie_lx_tx *tx)
{
	ropcie_lx_tx_unlock(tx->x, tx->ring);
}

/**
 * ropcie_lx_tx_commit() - produce the slot taken by ropcie_lx_tx_begin()
 * @tx: the slot, its payload written
 * @m: its descriptor
 *
 * Return: 0, or -ENOTCONN when the link went down meanwhile (nothing
 * was produced).
 */
static int ropcie_lx_tx_commit(struct ropcie_lx_tx *tx,
			       const struct ropcie_wire_msg *m)
{
	struct ropcie_xport *x = tx->x;
	struct ropcie_wire_hdr *out = ropcie_lx_out(x);
	const struct ropcie_wire_hdr *in = ropcie_lx_in(x);
	struct ropcie_wire_desc d;
	unsigned long flags;
	bool ok;

	ropcie_wire_desc_encode(&d, m);
	memcpy(ropcie_lx_desc(out, &x->link->gout, tx->ring, tx->idx), &d,
	       sizeof(d));
	/* The payload and the descriptor, then the index that shows them. */
	wmb();
	ok = ropcie_lx_alive_locked(x, tx->gen, &flags);
	if (ok) {
		x->prod[tx->ring] = tx->idx + 1;
		WRITE_ONCE(out->prod[tx->ring], cpu_to_le32(tx->idx + 1));
		spin_unlock_irqrestore(&x->lock, flags);
	}
	ropcie_lx_tx_unlock(x, tx->ring);
	if (!ok)
		return -ENOTCONN;
	atomic64_inc(&x->stats.tx);
	/* The index, then the peer's sleep flag: Dekker, see the consumer. */
	smp_mb();
	if (READ_ONCE(in->rx_sleep[tx->ring]))
		ropcie_lx_ring_peer(x);
	return 0;
}

/*
 * A response without payload: ACK or RNR for message @msn. In *@slot
 * when the caller took one already (the doorbell's fast path; it is used
 * up and set to NULL), else in one taken here, waiting for room.
 */
static void ropcie_lx_answer(struct ropcie_xport *x, u32 gen,
			     struct ropcie_lx_tx **slot,
			     enum ropcie_wire_type type, u32 dst, u32 src,
			     u32 msn, enum ib_wc_status status)
{
	struct ropcie_wire_msg m = {
		.type = type,
		.status = status,
		.dst_qpn = dst,
		.src_qpn = src,
		.msn = msn,
	};
	struct ropcie_lx_tx tx;

	if (slot && *slot) {
		ropcie_lx_tx_commit(*slot, &m);
		*slot = NULL;
	} else if (!ropcie_lx_tx_begin(x, ROPCIE_WIRE_RSP, gen, &tx)) {
		ropcie_lx_tx_commit(&tx, &m);
	}
}

/* --- connections -------------------------------------------------------- */

/**
 * ropcie_lx_pick() - a link to reach the other host through
 * @gen: its current generation, when one is returned
 *
 * The first link that is up: a host has one PCI link today.
 * Context: under the fabric lock, holding ropcie_lx_life for reading.
 */
struct ropcie_xport *ropcie_lx_pick(u32 *gen)
{
	struct ropcie_xport *x;

	lockdep_assert_held(&ropcie_fabric_lock);
	list_for_each_entry(x, &ropcie_xports, list) {
		if (READ_ONCE(x->up)) {
			*gen = x->gen;
			return x;
		}
	}
	return NULL;
}

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
static struct ropcie_qp *ropcie_lx_conn_qp(struct ropcie_xport *x, u32 gen,
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

/*
 * The peer broke the protocol in a message of @qp's connection: that
 * connection ends (its QP fails, the peer gets a CLOSE), the link and
 * every other connection go on.
 */
static void ropcie_lx_conn_fault(struct ropcie_xport *x, struct ropcie_qp *qp,
				 enum ropcie_wire_ring ring, const char *why)
{
	atomic64_inc(&x->stats.conn_faults);
	dev_warn_ratelimited(x->link->hw->dev,
			     "ropcie connection %u (QP %u) ends: %s\n",
			     qp->lx.conn, qp->ibqp.qp_num, why);
	ropcie_cm_link_end(x, qp, ring == ROPCIE_WIRE_REQ ?
			   ROPCIE_CONN_BAD_REQUEST : ROPCIE_CONN_BAD_RESPONSE);
}

/*
 * A descriptor of ring @ring that no correct peer writes (@why), naming
 * connection @dst of ours and @src of the peer's, unchecked: the
 * connection ends if it is one in @gen, else the descriptor is dropped.
 * Either way it was consumed: the ring itself is intact.
 */
static void ropcie_lx_rx_fault(struct ropcie_xport *x, u32 gen,
			       enum ropcie_wire_ring ring, u32 dst, u32 src,
			       const char *why)
{
	struct ropcie_qp *qp = ropcie_lx_conn_qp(x, gen, dst, src);

	if (!qp) {
		atomic64_inc(&x->stats.rx_dropped);
		dev_warn_ratelimited(x->link->hw->dev,
				     "ropcie link: dropped a descriptor: %s\n",
				     why);
		return;
	}
	ropcie_lx_conn_fault(x, qp, ring, why);
	ropcie_qp_put(qp);
}

/* --- control messages ----------------------------------------------------- */

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
static void ropcie_lx_ctrl_work(struct work_struct *work)
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

/* --- the requester ------------------------------------------------------ */

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
 * The WRITE @m of @qp (numbered by the caller) as in flight, before it
 * is sent: its answer may come at once. Under the QP's wait_lock.
 */
static struct ropcie_lx_posted *ropcie_lx_posted_add(struct ropcie_qp_lx *lx,
						     u32 msn)
{
	struct ropcie_lx_posted *p = &lx->posted[msn % ROPCIE_LX_POSTED];

	lockdep_assert_held(&lx->wait_lock);
	if (!lx->nposted)
		lx->posted_msn = msn;
	*p = (struct ropcie_lx_posted){
		.sent_at = jiffies,
		.status = IB_WC_WR_FLUSH_ERR,
	};
	lx->nposted++;
	return p;
}

/* A posted WRITE's send failed: that is its verdict. Under wait_lock. */
static void ropcie_lx_posted_fail(struct ropcie_lx_posted *p, int ret)
{
	if (!p->done) {
		p->status = ret == -EFAULT ? IB_WC_LOC_PROT_ERR :
					     IB_WC_WR_FLUSH_ERR;
		p->done = true;
	}
}

/*
 * The link and the header of a WRITE of @qp; ropcie_lx_life is held for
 * reading. Return: the transport, or NULL when the QP has no connection.
 */
static struct ropcie_xport *ropcie_lx_write_msg(struct ropcie_qp *qp,
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
	m->type = ROPCIE_WIRE_WRITE;
	m->msg_len = req->len;
	m->rkey = req->rkey;
	m->raddr = req->remote_addr;
	return x && m->dst_qpn ? x : NULL;
}

/*
 * A WRITE of one slot at most from the poster's context, which may hold
 * a spinlock: every lock is only tried, and the ring must have room.
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
	x = ropcie_lx_write_msg(qp, req, &gen, &m);
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
	p = ropcie_lx_posted_add(lx, m.msn);
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
 * ropcie_transport_ops.post over a link: a WRITE into the peer's request
 * ring, registered as in flight before it is sent (its answer may come
 * at once). A send that fails makes its own verdict, taken in order.
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
	x = ropcie_lx_write_msg(qp, req, &gen, &m);
	if (!x) {
		up_read(&ropcie_lx_life);
		return -ENOTCONN;
	}
	m.msn = lx->msn++;
	mutex_lock(&lx->wait_lock);
	p = ropcie_lx_posted_add(lx, m.msn);
	mutex_unlock(&lx->wait_lock);

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

/* ropcie_transport_ops.reap over a link: the oldest posted WRITE. */
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
	if (p->done) {
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

/* --- the consumers ---------------------------------------------------------- */

/*
 * A SEND or WRITE fragment of the peer, for one of our QPs. Its answer,
 * if it has one, goes into *@rsp when that is a slot taken already.
 */
static void ropcie_lx_rx_data(struct ropcie_xport *x, u32 gen,
			      const struct ropcie_wire_msg *m, void *payload,
			      struct ropcie_lx_tx **rsp)
{
	struct ropcie_req req = {
		.rkey = m->rkey,
		.inv_rkey = m->inv_rkey,
		.remote_addr = m->raddr,
		.len = m->msg_len,
		.solicited = !!(m->flags & ROPCIE_WIRE_SOLICITED),
	};
	struct ropcie_segs data = {
		.n = m->len ? 1 : 0,
		.total = m->len,
		.seg[0] = { .addr = (uintptr_t)payload, .len = m->len },
	};
	bool first = m->flags & ROPCIE_WIRE_FIRST;
	bool last = m->flags & ROPCIE_WIRE_LAST;
	enum ib_wc_status st = IB_WC_SUCCESS;
	struct ropcie_qp *qp;
	struct ropcie_qp_lx *lx;
	int ret;

	req.op = m->type == ROPCIE_WIRE_SEND ? ROPCIE_OP_SEND :
		 m->type == ROPCIE_WIRE_SEND_INV ? ROPCIE_OP_SEND_INV :
		 ROPCIE_OP_WRITE;
	qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
	if (!qp) {
		/* A closed connection: its requester may still wait. */
		if (last)
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, IB_WC_WR_FLUSH_ERR);
		return;
	}
	lx = &qp->lx;
	if (first) {
		lx->in_active = true;
		lx->in_skip = lx->in_broken;
		lx->in_msn = m->msn;
		if (lx->in_broken)
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, IB_WC_WR_FLUSH_ERR);
	} else if (!lx->in_active || lx->in_msn != m->msn) {
		/* Its requester hears why before the CLOSE. */
		ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, IB_WC_REM_INV_REQ_ERR);
		ropcie_lx_conn_fault(x, qp, ROPCIE_WIRE_REQ,
				     "the peer broke a message's order");
		ropcie_qp_put(qp);
		return;
	}
	if (!lx->in_skip) {
		ret = ropcie_respond_frag(qp, &req, &lx->in, m->offset, &data,
					  last, !rsp, &st);
		if (ret == -EAGAIN) {
			lx->in_skip = true;
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_RNR, m->src_qpn,
					 m->dst_qpn, m->msn, 0);
		} else if (st != IB_WC_SUCCESS || last) {
			lx->in_skip = true;
			lx->in_broken = st != IB_WC_SUCCESS;
			ropcie_lx_answer(x, gen, rsp, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, st);
		}
		/* The receive completes once the answer is on its way. */
		if (!ret)
			ropcie_respond_done(qp, &lx->in);
	}
	if (last)
		lx->in_active = false;
	ropcie_qp_put(qp);
}

/* A READ of the peer: our MR's bytes back in fragments of READ_DATA. */
static void ropcie_lx_rx_read(struct ropcie_xport *x, u32 gen,
			      const struct ropcie_wire_msg *m)
{
	struct ropcie_req req = {
		.op = ROPCIE_OP_READ,
		.rkey = m->rkey,
		.remote_addr = m->raddr,
		.len = m->msg_len,
	};
	u64 slot = x->link->gout.slot_size, off = 0;
	enum ib_wc_status st = IB_WC_SUCCESS;
	struct ropcie_inmsg in = {};
	struct ropcie_qp *qp;

	qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
	if (!qp) {
		ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, IB_WC_WR_FLUSH_ERR);
		return;
	}
	if (!req.len) {
		struct ropcie_segs none = {};

		ropcie_respond_frag(qp, &req, &in, 0, &none, true, true, &st);
		ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK, m->src_qpn,
				 m->dst_qpn, m->msn, st);
		goto out;
	}
	while (off < req.len) {
		u64 flen = min(slot, req.len - off);
		struct ropcie_wire_msg r = {
			.type = ROPCIE_WIRE_READ_DATA,
			.dst_qpn = m->src_qpn,
			.src_qpn = m->dst_qpn,
			.msn = m->msn,
			.len = flen,
			.offset = off,
			.msg_len = req.len,
		};
		bool last = off + flen == req.len;
		struct ropcie_segs data = { .n = 1, .total = flen };
		struct ropcie_lx_tx tx;

		if (ropcie_lx_tx_begin(x, ROPCIE_WIRE_RSP, gen, &tx))
			break;
		data.seg[0].addr = (uintptr_t)tx.data;
		data.seg[0].len = flen;
		ropcie_respond_frag(qp, &req, &in, off, &data, last, true, &st);
		if (st != IB_WC_SUCCESS) {
			ropcie_lx_tx_abort(&tx);
			ropcie_lx_answer(x, gen, NULL, ROPCIE_WIRE_ACK, m->src_qpn,
					 m->dst_qpn, m->msn, st);
			break;
		}
		r.flags = (off ? 0 : ROPCIE_WIRE_FIRST) |
			  (last ? ROPCIE_WIRE_LAST : 0);
		if (ropcie_lx_tx_commit(&tx, &r))
			break;
		off += flen;
	}
out:
	ropcie_qp_put(qp);
}

/* One descriptor of the request ring. */
static void ropcie_lx_rx_request(struct ropcie_xport *x, u32 gen,
				 const struct ropcie_wire_msg *m, void *payload)
{
	struct ropcie_qp *qp;

	switch (m->type) {
	case ROPCIE_WIRE_CM: {
		struct ropcie_wire_cm w;
		struct ropcie_wire_cm_msg cm;

		memcpy(&w, payload, min_t(u32, m->len, sizeof(w)));
		barrier();	/* the copy, never the window, from here on */
		/* Names no connection: its connect times out. */
		if (ropcie_wire_cm_decode(&w, m->len, &cm))
			ropcie_lx_rx_fault(x, gen, ROPCIE_WIRE_REQ, 0, 0,
					   "the peer wrote a malformed CM message");
		else
			ropcie_cm_link_msg(x, gen, &cm);
		break;
	}
	case ROPCIE_WIRE_RECV_POSTED:
		qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
		if (qp) {
			ropcie_qp_kick(qp);
			ropcie_qp_put(qp);
		}
		break;
	case ROPCIE_WIRE_READ:
		ropcie_lx_rx_read(x, gen, m);
		break;
	default:
		ropcie_lx_rx_data(x, gen, m, payload, NULL);
		break;
	}
}

/* An answer to a posted WRITE, under wait_lock; else it is dropped. */
static void ropcie_lx_posted_answer(struct ropcie_qp *qp,
				    const struct ropcie_wire_msg *m)
{
	struct ropcie_qp_lx *lx = &qp->lx;
	struct ropcie_lx_posted *p;

	if (m->msn - lx->posted_msn >= lx->nposted)
		return;
	p = &lx->posted[m->msn % ROPCIE_LX_POSTED];
	if (p->done)
		return;
	/* A WRITE's answer is an ACK: anything else fails it. */
	p->status = m->type == ROPCIE_WIRE_ACK ? m->status : IB_WC_REM_OP_ERR;
	p->answered_at = ropcie_prof_now();
	p->done = true;
	ropcie_qp_kick(qp);
}

/* One descriptor of the response ring: to the requester waiting for it. */
static void ropcie_lx_rx_response(struct ropcie_xport *x, u32 gen,
				  const struct ropcie_wire_msg *m, void *payload)
{
	struct ropcie_lx_wait *w;
	struct ropcie_qp *qp;

	qp = ropcie_lx_conn_qp(x, gen, m->dst_qpn, m->src_qpn);
	if (!qp)
		return;
	if (m->type == ROPCIE_WIRE_CLOSE) {
		/* After every answer the peer gave before it. */
		ropcie_cm_link_end(x, qp, ROPCIE_CONN_CLOSED);
		ropcie_qp_put(qp);
		return;
	}
	mutex_lock(&qp->lx.wait_lock);
	w = qp->lx.wait;
	if (!w || w->msn != m->msn) {
		ropcie_lx_posted_answer(qp, m);
		goto out;
	}
	/* An answer to a request its requester gave up on: dropped. */
	if (w->done)
		goto out;
	w->progress++;
	switch (m->type) {
	case ROPCIE_WIRE_ACK:
		w->status = m->status;
		WRITE_ONCE(w->done, true);
		break;
	case ROPCIE_WIRE_RNR:
		w->rnr = !w->read;
		w->status = IB_WC_REM_OP_ERR;
		WRITE_ONCE(w->done, true);
		break;
	case ROPCIE_WIRE_READ_DATA: {
		struct ropcie_seg src = {
			.addr = (uintptr_t)payload,
			.len = m->len,
		};

		if (!w->read || m->offset != w->next || m->msg_len != w->len) {
			/* No correct responder sends this: the QP fails. */
			w->status = IB_WC_REM_OP_ERR;
			WRITE_ONCE(w->done, true);
			break;
		}
		if (!ropcie_copy_at(w->sink->seg, w->sink->n, m->offset, &src,
				    1, 0, m->len, true)) {
			w->status = IB_WC_LOC_PROT_ERR;
			WRITE_ONCE(w->done, true);
			break;
		}
		w->next += m->len;
		if (m->flags & ROPCIE_WIRE_LAST) {
			w->status = m->status;
			WRITE_ONCE(w->done, true);
		}
		break;
	}
	default:
		break;
	}
	if (READ_ONCE(w->done)) {
		w->answered_at = ropcie_prof_now();
		ropcie_qp_kick(qp);
	}
out:
	mutex_unlock(&qp->lx.wait_lock);
	ropcie_qp_put(qp);
}

/*
 * The descriptor at @cons of ring @ring in generation @gen, copied out
 * of the window once and checked, into @m; its payload slot in
 * *@payload. Return: 1, 0 when the ring holds nothing there (or the
 * peer is starting over), -EBADMSG with *@why when the descriptor is
 * malformed (@m holds only the connection it names, unchecked), -EPROTO
 * with *@why when the peer broke the ring.
 */
static int ropcie_lx_rx_peek(struct ropcie_xport *x, int ring, u32 cons,
			     struct ropcie_wire_msg *m, void **payload,
			     const char **why)
{
	const struct ropcie_wire_geom *g = &x->link->gin;
	void *win = x->link->hw->in;
	const struct ropcie_wire_hdr *in = win;
	struct ropcie_wire_desc d;
	u32 prod, n;

	if (ropcie_lx_peer_index(x, &in->prod[ring], &prod))
		return 0;
	if (ropcie_wire_ring_count(prod, cons, g->nslots, &n)) {
		*why = "the peer's producer index is out of its ring";
		return -EPROTO;
	}
	if (!n)
		return 0;
	/* The index, then the descriptor it shows. */
	smp_rmb();
	memcpy(&d, ropcie_lx_desc(win, g, ring, cons), sizeof(d));
	barrier();	/* the copy, never the window */
	if (ropcie_wire_desc_decode(&d, ring, g, m)) {
		ropcie_wire_desc_conn(&d, &m->dst_qpn, &m->src_qpn);
		*why = "the peer wrote a malformed descriptor";
		return -EBADMSG;
	}
	*payload = ropcie_lx_data(win, g, ring, cons);
	return 1;
}

/* Entries waiting in ring @ring past @cons? */
static bool ropcie_lx_pending(struct ropcie_xport *x, int ring, u32 cons)
{
	u32 prod;

	if (ropcie_lx_peer_index(x, &ropcie_lx_in(x)->prod[ring], &prod))
		return false;
	return prod != cons;
}

/*
 * Ring the peer's producer, which waits for room, now? Once half the
 * ring is free since it was last rung for, or when the ring is empty:
 * a producer woken for every freed slot would take one and wait again,
 * a doorbell each way per slot.
 */
static bool ropcie_lx_want_due(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;

	if (rx->cons - rx->want_at < x->link->gin.nslots / 2 &&
	    ropcie_lx_pending(x, rx->ring, rx->cons))
		return false;
	rx->want_at = rx->cons;
	return true;
}

/* The descriptor at rx->cons is done with: its slot back to the peer. */
static void ropcie_lx_rx_consumed(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	const struct ropcie_wire_hdr *in = ropcie_lx_in(x);

	atomic64_inc(&x->stats.rx);
	rx->traffic = true;
	WRITE_ONCE(rx->cons, rx->cons + 1);
	/* Done with the slot before the peer may reuse it. */
	smp_mb();
	ropcie_lx_set_hdr(x, rx->gen, &ropcie_lx_out(x)->cons[rx->ring],
			  rx->cons);
	smp_mb();	/* the index, then the peer's want */
	if (READ_ONCE(in->tx_want[rx->ring]) && ropcie_lx_want_due(rx))
		ropcie_lx_ring_peer(x);
}

/*
 * Consume @rx's ring from rx->cons on, in generation rx->gen, until it
 * is empty; @rx is owned. @rang_at: when profiling, the doorbell the
 * first descriptor answers (0: none). A descriptor the peer broke ends
 * at most its connection (ropcie_lx_rx_fault()); indices it broke, the
 * link. Context: the consumer kthread.
 * Return: <0 when the peer broke the ring (the link is failed).
 */
static int ropcie_lx_drain(struct ropcie_lx_rx *rx, u64 rang_at)
{
	struct ropcie_xport *x = rx->x;
	int ring = rx->ring;
	u32 gen = rx->gen;

	for (;;) {
		struct ropcie_wire_msg m;
		const char *why;
		void *payload;
		u64 t;
		int ret;

		ret = ropcie_lx_rx_peek(x, ring, rx->cons, &m, &payload, &why);
		if (ret == -EBADMSG) {
			ropcie_lx_rx_fault(x, gen, ring, m.dst_qpn, m.src_qpn,
					   why);
			goto consumed;
		}
		if (ret < 0)
			ropcie_link_fail(x->link, why);
		if (ret <= 0)
			return ret;
		t = ropcie_prof_now();
		if (t && rang_at) {
			ropcie_prof_add(ROPCIE_PROF_LX_BELL, t - rang_at);
			rang_at = 0;
		}
		if (ring == ROPCIE_WIRE_REQ)
			ropcie_lx_rx_request(x, gen, &m, payload);
		else
			ropcie_lx_rx_response(x, gen, &m, payload);
		if (t && ring == ROPCIE_WIRE_REQ && m.type != ROPCIE_WIRE_CM &&
		    m.type != ROPCIE_WIRE_RECV_POSTED)
			ropcie_prof_add(ROPCIE_PROF_LX_SERVE, ktime_get_ns() - t);
consumed:
		ropcie_lx_rx_consumed(rx);
		if (READ_ONCE(x->gen) != gen)
			return 0;
		cond_resched();
	}
}

/**
 * ropcie_lx_rx_poll() - look at the ring a while before sleeping
 * @rx: the consumer, not owned, after it consumed something
 *
 * Traffic on a link comes in exchanges (a WRITE, its ACK, the answer
 * that follows) and streams (a message's fragments). Until the consumer
 * says it sleeps, the peer's producer rings no doorbell: polling for up
 * to rx_poll_us spares the peer an MMIO exit and an eventfd per
 * descriptor, and this host an interrupt and a wake-up, each of which
 * costs tens of microseconds under TCG, more than serving a short WRITE.
 *
 * Between two looks it gives way to any other task that wants this CPU:
 * on a guest with one vCPU that is the task waiting for what the peer
 * sends (krping's wlat spins on its buffer), which only runs when the
 * poller lets it. cond_resched() would not: the spinner has the same
 * priority, so the poller would keep the CPU for the rest of its slice.
 * Hence yield(), bounded by rx_poll_us of wall time.
 *
 * Return: whether entries came.
 */
static bool ropcie_lx_rx_poll(struct ropcie_lx_rx *rx)
{
	u64 until, budget = READ_ONCE(ropcie_rx_poll_us) * NSEC_PER_USEC;

	if (!budget)
		return false;
	until = local_clock() + budget;
	while (!kthread_should_stop()) {
		if (ropcie_lx_pending(rx->x, rx->ring, READ_ONCE(rx->cons)))
			return true;
		if (local_clock() > until)
			break;
		if (need_resched() || !single_task_running())
			yield();
		else
			cpu_relax();
	}
	return false;
}

/*
 * Own @rx's consumer state. The fast path holds it only for a bounded
 * time and never on this CPU while we run here: spin.
 */
static void ropcie_lx_rx_own(struct ropcie_lx_rx *rx)
{
	while (test_and_set_bit_lock(0, &rx->owner))
		cpu_relax();
}

static void ropcie_lx_rx_disown(struct ropcie_lx_rx *rx)
{
	clear_bit_unlock(0, &rx->owner);
}

/* At most this many descriptors per doorbell in its tasklet. */
#define ROPCIE_LX_FAST_BUDGET	8

/*
 * A WRITE the doorbell's tasklet may serve: one fragment (a slot
 * holds it whole) of at most irq_serve_max bytes. It needs nothing that
 * sleeps: its checks and copy are the responder's (as an inline WRITE's
 * in the poster's context) and its answer takes a response slot that
 * the fast path tried for before.
 */
static bool ropcie_lx_fast_ok(const struct ropcie_wire_msg *m)
{
	u32 whole = ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST;

	return m->type == ROPCIE_WIRE_WRITE && (m->flags & whole) == whole &&
	       m->len <= READ_ONCE(ropcie_irq_serve_max);
}

/**
 * ropcie_lx_rx_fast() - serve the request ring's head in the doorbell's
 *	tasklet
 * @rx: the request ring's consumer
 * @rang_at: when profiling, the doorbell's time (0: not profiling)
 *
 * The short WRITEs at the head of the ring are served here, answer and
 * all, so that their bytes land without waiting for the consumer
 * kthread to be woken and scheduled: on a busy host, or one with a
 * single CPU that the waiting side spins on, that is most of a WRITE's
 * latency. Whatever else comes first (any other descriptor, one the
 * peer broke, a full response ring, a kthread consuming, a generation
 * the kthread has not taken yet, or the budget used up) is left to the
 * kthread, which then sees the same ring from the same index: the two
 * consume one after the other, never both at once. The peer's bytes
 * are checked as the kthread checks them (ropcie_lx_rx_peek()).
 *
 * Nothing here fails the link or takes a lock the link's state machine
 * holds while it waits (link->lock, link->db_lock): what is broken is
 * left to the kthread, which fails the link for it.
 *
 * Context: softirq (the link's doorbell tasklet).
 * Return: true when the ring is empty now: the kthread has nothing to
 * consume (it is still woken to poll for what follows, see
 * ropcie_lx_rx_poll()).
 */
static bool ropcie_lx_rx_fast(struct ropcie_lx_rx *rx, u64 rang_at)
{
	struct ropcie_xport *x = rx->x;
	int budget = ROPCIE_LX_FAST_BUDGET;
	unsigned long flags;
	bool ok, empty = false;
	u32 gen;

	if (rx->ring != ROPCIE_WIRE_REQ || !READ_ONCE(ropcie_irq_serve_max) ||
	    test_and_set_bit_lock(0, &rx->owner))
		return false;
	spin_lock_irqsave(&x->lock, flags);
	gen = x->gen;
	ok = x->up && gen == rx->gen && gen != rx->broken;
	spin_unlock_irqrestore(&x->lock, flags);
	while (ok && budget--) {
		struct ropcie_lx_tx slot, *rsp = &slot;
		struct ropcie_wire_msg m;
		const char *why;
		void *payload;
		int ret;
		u64 t;

		ret = ropcie_lx_rx_peek(x, rx->ring, rx->cons, &m, &payload,
					&why);
		/* Broken: the kthread reads it again and fails the link. */
		if (ret <= 0) {
			empty = !ret;
			break;
		}
		if (!ropcie_lx_fast_ok(&m) ||
		    ropcie_lx_tx_try(x, ROPCIE_WIRE_RSP, gen, &slot))
			break;
		t = ropcie_prof_now();
		if (t && rang_at) {
			ropcie_prof_add(ROPCIE_PROF_LX_BELL, t - rang_at);
			rang_at = 0;
		}
		/* A whole message: no fault of order to end its connection. */
		ropcie_lx_rx_data(x, gen, &m, payload, &rsp);
		if (rsp)
			ropcie_lx_tx_abort(rsp);
		if (t)
			ropcie_prof_add(ROPCIE_PROF_LX_SERVE, ktime_get_ns() - t);
		atomic64_inc(&x->stats.irq);
		ropcie_lx_rx_consumed(rx);
	}
	ropcie_lx_rx_disown(rx);
	return empty;
}

/* Wake the consumer @rx. */
static void ropcie_lx_rx_kick(struct ropcie_lx_rx *rx)
{
	atomic_inc(&rx->events);
	wake_up(&rx->wq);
}

/*
 * Does a doorbell concern @rx: entries past what it consumed, or an
 * index it cannot read (the peer starting over)? A doorbell does not
 * say which ring it rang for; waking only the consumer that has work
 * spares a context switch per message. A consumer that is draining
 * sees new entries itself; one that sleeps published its index first.
 */
static bool ropcie_lx_rx_due(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	u32 prod;

	if (!READ_ONCE(x->up) ||
	    ropcie_lx_peer_index(x, &ropcie_lx_in(x)->prod[rx->ring], &prod))
		return true;
	return prod != READ_ONCE(rx->cons);
}

/*
 * Take the link's generation into the owned @rx (a new one counts from
 * index 0). Return: whether the ring may be consumed.
 */
static bool ropcie_lx_rx_sync(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	unsigned long flags;
	bool up;
	u32 cur;

	spin_lock_irqsave(&x->lock, flags);
	up = x->up;
	cur = x->gen;
	spin_unlock_irqrestore(&x->lock, flags);
	if (cur != rx->gen) {
		rx->gen = cur;
		WRITE_ONCE(rx->cons, 0);
		rx->want_at = 0;
		rx->traffic = false;
	}
	return up && rx->gen != rx->broken;
}

static int ropcie_lx_rx_thread(void *arg)
{
	struct ropcie_lx_rx *rx = arg;
	struct ropcie_xport *x = rx->x;
	struct ropcie_wire_hdr *out = ropcie_lx_out(x);
	int ring = rx->ring;

	while (!kthread_should_stop()) {
		int seen = atomic_read(&rx->events);
		u64 rang_at, slept_at;
		bool live, poll;
		u32 gen;

		ropcie_lx_rx_own(rx);
		live = ropcie_lx_rx_sync(rx);
		/* A doorbell for nothing new is dropped. */
		rang_at = atomic64_xchg(&rx->rang_at, 0);
		if (live && ropcie_lx_drain(rx, rang_at)) {
			rx->broken = rx->gen;
			live = false;
		}
		gen = rx->gen;
		poll = live && rx->traffic;
		rx->traffic = false;
		ropcie_lx_rx_disown(rx);
		if (poll && ropcie_lx_rx_poll(rx))
			continue;
		/* Asleep, then look again: Dekker with the producer. */
		ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 1);
		smp_mb();	/* sleep, then prod; the producer: prod, then sleep */
		if (live && ropcie_lx_pending(x, ring, READ_ONCE(rx->cons))) {
			ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 0);
			continue;
		}
		slept_at = ring == ROPCIE_WIRE_REQ ? ropcie_prof_now() : 0;
		wait_event_interruptible(rx->wq,
					 atomic_read(&rx->events) != seen ||
					 kthread_should_stop());
		ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 0);
		if (slept_at)
			ropcie_prof_add(ROPCIE_PROF_LX_IDLE,
					ktime_get_ns() - slept_at);
	}
	return 0;
}

/**
 * ropcie_xport_inject() - produce a descriptor of the caller's own bytes
 * @link: the link
 * @ring: ROPCIE_WIRE_REQ or ROPCIE_WIRE_RSP
 * @desc: ROPCIE_WIRE_DESC_SIZE bytes, copied to the next slot unchecked
 * @payload: bytes for its payload slot, or NULL
 * @len: how many; at most a slot
 *
 * The scribbler's hostile peer (debugfs link-<device>/inject): the other
 * host consumes whatever this is, in order with the real traffic.
 * Context: task.
 *
 * Return: 0, -ERANGE for a payload larger than a slot, -EINVAL for an
 * unknown ring, -ENOTCONN when the link is not up, or a producer's error.
 */
int ropcie_xport_inject(struct ropcie_link *link, int ring, const void *desc,
			const void *payload, size_t len)
{
	struct ropcie_xport *x = link->xport;
	struct ropcie_wire_hdr *out = ropcie_lx_out(x);
	struct ropcie_lx_tx tx;
	unsigned long flags;
	bool ok;
	int ret;

	if (ring != ROPCIE_WIRE_REQ && ring != ROPCIE_WIRE_RSP)
		return -EINVAL;
	if (len > link->gout.slot_size)
		return -ERANGE;
	ret = ropcie_lx_tx_begin(x, ring, READ_ONCE(x->gen), &tx);
	if (ret)
		return ret;
	if (payload)
		memcpy(tx.data, payload, len);
	memcpy(ropcie_lx_desc(out, &link->gout, ring, tx.idx), desc,
	       ROPCIE_WIRE_DESC_SIZE);
	wmb();	/* as in ropcie_lx_tx_commit() */
	ok = ropcie_lx_alive_locked(x, tx.gen, &flags);
	if (ok) {
		x->prod[ring] = tx.idx + 1;
		WRITE_ONCE(out->prod[ring], cpu_to_le32(tx.idx + 1));
		spin_unlock_irqrestore(&x->lock, flags);
	}
	ropcie_lx_tx_abort(&tx);
	if (!ok)
		return -ENOTCONN;
	ropcie_lx_ring_peer(x);
	return 0;
}

/* --- the link's life ---------------------------------------------------- */

/*
 * At each beat, wake the workers of the QPs with WRITEs in flight: one
 * posted from a poster's context did not wake its worker, which checks
 * the request timeout (ropcie_lx_reap()).
 */
static void ropcie_lx_kick_posted(struct ropcie_xport *x)
{
	struct ropcie_qp *qp;
	unsigned long flags, id;

	xa_lock_irqsave(&x->conns, flags);
	xa_for_each(&x->conns, id, qp)
		if (READ_ONCE(qp->lx.nposted))
			ropcie_qp_kick(qp);
	xa_unlock_irqrestore(&x->conns, flags);
}

/**
 * ropcie_xport_doorbell() - the peer rang, or a beat passed
 * @link: the link
 * @rang: the peer rang (for the profile: the time the consumers start)
 *
 * Context: any; with @rang, the doorbell's tasklet (softirq).
 */
void ropcie_xport_doorbell(struct ropcie_link *link, bool rang)
{
	struct ropcie_xport *x = link->xport;
	u64 t = rang ? ropcie_prof_now() : 0;
	int ring;

	for (ring = 0; ring < ROPCIE_WIRE_NR_RINGS; ring++) {
		struct ropcie_lx_rx *rx = &x->rx[ring];

		if (rang && !ropcie_lx_rx_due(rx))
			continue;
		if (rang && ropcie_lx_rx_fast(rx, t)) {
			/* Served: the kthread only polls for what follows. */
			if (READ_ONCE(ropcie_rx_poll_us))
				ropcie_lx_rx_kick(rx);
			continue;
		}
		if (t)
			atomic64_cmpxchg(&rx->rang_at, 0, t);
		ropcie_lx_rx_kick(rx);
	}
	wake_up(&x->tx_wq);
	if (!rang)
		ropcie_lx_kick_posted(x);
}

/**
 * ropcie_xport_up() - the link came up: new connections may use it
 * @link: the link
 *
 * Context: the link's state machine (under its lock).
 */
void ropcie_xport_up(struct ropcie_link *link)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	spin_lock(&x->lock);
	if (!x->dead) {
		x->up = true;
		x->peer_epoch = link->peer_epoch;
	}
	spin_unlock(&x->lock);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_xport_doorbell(link, false);
}

/* Fail every connection of the current generation; then a new one. */
static void ropcie_xport_end_gen(struct ropcie_xport *x, bool dead)
{
	struct ropcie_lx_ctrl *msg, *tmp;
	struct ropcie_qp *qp;
	unsigned long flags, id;
	LIST_HEAD(drop);
	int r;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	spin_lock(&x->lock);
	x->up = false;
	x->gen++;
	if (dead)
		x->dead = true;
	list_splice_init(&x->ctrl, &drop);
	WRITE_ONCE(x->answers, 0);
	spin_unlock(&x->lock);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);

	/*
	 * Nothing joins the old generation from here on. Its requests are
	 * refused, then its QPs fail; a request being made drops its id.
	 */
	ropcie_cm_link_down(x);
	for (id = 0;; id++) {
		xa_lock_irqsave(&x->conns, flags);
		qp = xa_find(&x->conns, &id, ULONG_MAX, XA_PRESENT);
		if (qp)
			ropcie_qp_get(qp);
		xa_unlock_irqrestore(&x->conns, flags);
		if (!qp)
			break;
		ropcie_cm_link_end(x, qp, ROPCIE_CONN_LOST);
		ropcie_lx_conn_del(x, id, qp);
		ropcie_qp_put(qp);
	}
	list_for_each_entry_safe(msg, tmp, &drop, list)
		kfree(msg);
	wake_up(&x->tx_wq);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++)
		ropcie_lx_rx_kick(&x->rx[r]);
}

/**
 * ropcie_xport_down() - the link went down: end its connections
 * @link: the link
 *
 * Every connection over it fails (its QPs move to the error state, their
 * ULPs get DISCONNECT and CLOSE), every connection request over it is
 * refused, and no index of the old generation is written any more.
 *
 * Context: the link's state machine (under its lock).
 */
void ropcie_xport_down(struct ropcie_link *link)
{
	ropcie_xport_end_gen(link->xport, false);
}

/**
 * ropcie_xport_show() - the transport's state for sysfs
 * @link: the link
 * @buf: the sysfs buffer
 *
 * Return: bytes written.
 */
int ropcie_xport_show(struct ropcie_link *link, char *buf)
{
	struct ropcie_xport *x = link->xport;
	unsigned long id, n = 0;
	struct ropcie_qp *qp;

	xa_for_each(&x->conns, id, qp)
		n++;
	return sysfs_emit(buf,
			  "generation %u connections %lu tx %lld rx %lld doorbells_rung %lld rx_in_irq %lld answers_queued %u answers_dropped %lld rx_dropped %lld conn_faults %lld\n",
			  READ_ONCE(x->gen), n, atomic64_read(&x->stats.tx),
			  atomic64_read(&x->stats.rx),
			  atomic64_read(&x->stats.db),
			  atomic64_read(&x->stats.irq), READ_ONCE(x->answers),
			  atomic64_read(&x->stats.answers_dropped),
			  atomic64_read(&x->stats.rx_dropped),
			  atomic64_read(&x->stats.conn_faults));
}

/**
 * ropcie_xport_conns_show() - the connections over the link, for debugfs
 * @link: the link
 * @m: one line each: this host's id of the connection, the other
 *	host's, and the QP's number here
 */
void ropcie_xport_conns_show(struct ropcie_link *link, struct seq_file *m)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags, id;
	struct ropcie_qp *qp;

	/* The table holds each QP while its entry is there. */
	xa_lock_irqsave(&x->conns, flags);
	xa_for_each(&x->conns, id, qp)
		seq_printf(m, "%lu %u %u\n", id, READ_ONCE(qp->lx.peer_conn),
			   qp->ibqp.qp_num);
	xa_unlock_irqrestore(&x->conns, flags);
}

/**
 * ropcie_xport_create() - the transport of a new link
 * @link: the link, its geometry set
 *
 * Return: 0, or -ENOMEM or a kthread's error.
 */
int ropcie_xport_create(struct ropcie_link *link)
{
	struct ropcie_xport *x;
	unsigned long flags;
	int r;

	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return -ENOMEM;
	x->link = link;
	spin_lock_init(&x->lock);
	init_waitqueue_head(&x->tx_wq);
	xa_init_flags(&x->conns, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
	INIT_LIST_HEAD(&x->ctrl);
	INIT_WORK(&x->ctrl_work, ropcie_lx_ctrl_work);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
		x->rx[r].x = x;
		x->rx[r].ring = r;
		x->rx[r].broken = U32_MAX;	/* none yet: generations start at 0 */
		init_waitqueue_head(&x->rx[r].wq);
	}
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
		x->rx[r].task = kthread_run(ropcie_lx_rx_thread, &x->rx[r],
					    "ropcie-link-%s", r ? "rsp" : "req");
		if (IS_ERR(x->rx[r].task)) {
			int ret = PTR_ERR(x->rx[r].task);

			while (r--)
				kthread_stop(x->rx[r].task);
			kfree(x);
			return ret;
		}
	}
	link->xport = x;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_add_tail(&x->list, &ropcie_xports);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	return 0;
}

/**
 * ropcie_xport_destroy() - end the transport of a link that goes away
 * @link: the link; its state machine has stopped
 *
 * Ends every connection (as ropcie_xport_down()), stops the consumers,
 * waits for every requester, connect and accept that still uses the
 * transport (each was woken and ends within a beat) and frees it.
 */
void ropcie_xport_destroy(struct ropcie_link *link)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags;
	int r;

	if (!x)
		return;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_del(&x->list);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_xport_end_gen(x, true);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++)
		kthread_stop(x->rx[r].task);
	cancel_work_sync(&x->ctrl_work);
	/* The users of the transport saw it down and leave. */
	down_write(&ropcie_lx_life);
	up_write(&ropcie_lx_life);
	/* A conn_add that raced the end undid itself; nothing is left. */
	WARN_ON(!xa_empty(&x->conns));
	xa_destroy(&x->conns);
	link->xport = NULL;
	kfree(x);
}
