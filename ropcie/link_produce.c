// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: producing into the peer's rings. A producer
 * takes the next slot of a ring of the peer's window once there is room
 * (the peer's consumer index, checked), fills it and publishes it; the
 * answers without payload (ACK, RNR) go the same way.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched.h>

#include "link_transport.h"

void ropcie_lx_ring_peer(struct ropcie_xport *x)
{
	atomic64_inc(&x->stats.db);
	x->link->hw->ops->peer_db_set(x->link->hw);
}

/*
 * Read a ring index the peer wrote in this host's inbound header, in
 * the generation's epoch: -EAGAIN when the peer is starting over (the
 * link core notices at its next beat).
 */
int ropcie_lx_peer_index(struct ropcie_xport *x, const __le32 *field,
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
void ropcie_lx_set_hdr(struct ropcie_xport *x, u32 gen, __le32 *field,
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
int ropcie_lx_tx_begin(struct ropcie_xport *x, int ring, u32 gen,
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
int ropcie_lx_tx_try(struct ropcie_xport *x, int ring, u32 gen,
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

void ropcie_lx_tx_abort(struct ropcie_lx_tx *tx)
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
int ropcie_lx_tx_commit(struct ropcie_lx_tx *tx,
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
 * A response without payload (@m: ACK, RNR or CLOSE). In *@slot when the
 * caller took one already (the doorbell's fast path; it is used up and
 * set to NULL), else in one taken here, waiting for room.
 */
void ropcie_lx_answer_msg(struct ropcie_xport *x, u32 gen,
			  struct ropcie_lx_tx **slot,
			  const struct ropcie_wire_msg *m)
{
	struct ropcie_lx_tx tx;

	if (slot && *slot) {
		ropcie_lx_tx_commit(*slot, m);
		*slot = NULL;
	} else if (!ropcie_lx_tx_begin(x, ROPCIE_WIRE_RSP, gen, &tx)) {
		ropcie_lx_tx_commit(&tx, m);
	}
}

/* ropcie_lx_answer_msg() of @type for message @msn, without a credit. */
void ropcie_lx_answer(struct ropcie_xport *x, u32 gen,
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

	ropcie_lx_answer_msg(x, gen, slot, &m);
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
