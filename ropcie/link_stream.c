// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: the raw stream, the link's ceiling. One host
 * copies a buffer into the payload slots of the peer's request ring, a
 * STREAM descriptor each, as fast as the peer frees them; the peer
 * copies each slot out into a buffer of its own and checks that it is
 * the next one. No QP, no verbs, no answers: what is left is what every
 * byte of a WRITE over the link pays anyway (a copy in, a copy out, the
 * ring's indices and doorbells), so make bench-pair reports ropcie's
 * bandwidth over the link as a fraction of it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "link_transport.h"

/* The sender's source: larger than the caches, as role=memcpy's. */
#define ROPCIE_STREAM_SRC	(64U << 20)

/**
 * ropcie_lx_rx_stream() - a fragment of the peer's raw stream
 * @x: the transport
 * @m: its descriptor, checked (at least the 8 bytes of its stamp)
 * @payload: its slot in the window
 *
 * Copies the slot out and counts it in stream_rx when it is the next
 * one of the stream and holds its own offset, else in stream_bad.
 * Context: the request consumer, which owns x->stream_next.
 */
void ropcie_lx_rx_stream(struct ropcie_xport *x,
			 const struct ropcie_wire_msg *m, void *payload)
{
	__le64 stamp;

	if (m->flags & ROPCIE_WIRE_FIRST)
		x->stream_next = 0;
	memcpy(x->stream_sink, payload, m->len);
	memcpy(&stamp, x->stream_sink, sizeof(stamp));
	if (m->offset != x->stream_next || le64_to_cpu(stamp) != m->offset) {
		atomic64_inc(&x->stats.stream_bad);
		return;
	}
	x->stream_next += m->len;
	atomic64_add(m->len, &x->stats.stream_rx);
}

/* The peer consumed the request ring up to @idx (or the link went)? */
static bool ropcie_lx_stream_drained(struct ropcie_xport *x, u32 gen, u32 idx)
{
	u32 cons;

	if (!READ_ONCE(x->up) || READ_ONCE(x->gen) != gen)
		return true;
	if (ropcie_lx_peer_index(x, &ropcie_lx_in(x)->cons[ROPCIE_WIRE_REQ],
				 &cons))
		return false;
	return (s32)(cons - idx) >= 0;
}

/*
 * Wait until the peer consumed the ring up to @idx. It looks every
 * 20 to 50 us rather than asking the peer to ring (tx_want), which
 * belongs to the producer holding the ring.
 */
static int ropcie_lx_stream_wait(struct ropcie_xport *x, u32 gen, u32 idx)
{
	unsigned long deadline = jiffies + ropcie_lx_request_timeout();

	while (!ropcie_lx_stream_drained(x, gen, idx)) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		if (fatal_signal_pending(current))
			return -EINTR;
		usleep_range(20, 50);
	}
	return ropcie_lx_alive(x, gen) ? 0 : -ENOTCONN;
}

/* Produce @bytes of @src (cycled) as one stream in generation @gen. */
static int ropcie_lx_stream_send(struct ropcie_xport *x, u32 gen,
				 const u8 *src, u64 bytes)
{
	u32 slot = x->link->gout.slot_size, last = 0;
	u64 off, soff = 0;
	int ret;

	for (off = 0; off < bytes; off += slot) {
		struct ropcie_wire_msg m = {
			.type = ROPCIE_WIRE_STREAM,
			.len = min_t(u64, slot, bytes - off),
			.offset = off,
			.msg_len = bytes,
		};
		__le64 stamp = cpu_to_le64(off);
		struct ropcie_lx_tx tx;

		if (fatal_signal_pending(current))
			return -EINTR;
		ret = ropcie_lx_tx_begin(x, ROPCIE_WIRE_REQ, gen, &tx);
		if (ret)
			return ret;
		if (soff + slot > ROPCIE_STREAM_SRC)
			soff = 0;
		memcpy(tx.data, src + soff, m.len);
		memcpy(tx.data, &stamp, sizeof(stamp));
		soff += slot;
		m.flags = (off ? 0 : ROPCIE_WIRE_FIRST) |
			  (off + m.len == bytes ? ROPCIE_WIRE_LAST : 0);
		last = tx.idx + 1;
		ret = ropcie_lx_tx_commit(&tx, &m);
		if (ret)
			return ret;
	}
	return ropcie_lx_stream_wait(x, gen, last);
}

/**
 * ropcie_xport_stream() - stream bytes into the peer's request ring
 * @link: the link, up
 * @bytes: how many: a multiple of 8, at most ROPCIE_STREAM_MAX
 * @ns: the time from the first slot taken to the peer having consumed
 *	the last, on success
 *
 * The raw stream (see the top of this file); the peer counts what it
 * received in its transport's stream_rx (stream_bad: out of order or
 * not what was sent). One stream at a time per link. Context: task
 * (debugfs link-<device>/stream); ends within the request timeout of
 * the peer's last freed slot, or at a fatal signal.
 *
 * Return: 0, -EINVAL for a size that is not a multiple of 8 or 0,
 * -ERANGE for one too large, -EBUSY when a stream is under way,
 * -ENOTCONN when the link is not up or went down, -ENOMEM, -EINTR, or
 * a producer's error.
 */
int ropcie_xport_stream(struct ropcie_link *link, u64 bytes, u64 *ns)
{
	struct ropcie_xport *x = link->xport;
	u64 t0;
	u8 *src;
	u32 gen, i;
	int ret;

	if (!bytes || bytes % 8)
		return -EINVAL;
	if (bytes > ROPCIE_STREAM_MAX)
		return -ERANGE;
	if (!mutex_trylock(&x->stream_lock))
		return -EBUSY;
	src = vmalloc(ROPCIE_STREAM_SRC);
	ret = -ENOMEM;
	if (!src)
		goto out;
	for (i = 0; i < ROPCIE_STREAM_SRC; i += PAGE_SIZE)
		memset(src + i, (u8)(i / PAGE_SIZE), PAGE_SIZE);
	gen = READ_ONCE(x->gen);
	ret = -ENOTCONN;
	if (!READ_ONCE(x->up))
		goto out;
	t0 = ktime_get_ns();
	ret = ropcie_lx_stream_send(x, gen, src, bytes);
	*ns = ktime_get_ns() - t0;
out:
	vfree(src);
	mutex_unlock(&x->stream_lock);
	return ret;
}
