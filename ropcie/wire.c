// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link protocol: window geometry, header and descriptor encoding,
 * and the checks that every header, ring index and descriptor read from
 * a peer's writes passes before use (see wire.h). The callers copy a
 * header or a descriptor out of the window once and hand the copy here.
 */
#include <linux/align.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <asm/byteorder.h>

#include "wire.h"

/**
 * ropcie_wire_geometry() - lay out an inbound window
 * @window: its size in bytes
 * @g: filled on success
 *
 * Two request and response rings of ROPCIE_WIRE_SLOTS entries each; the
 * payload slots get what is left, rounded down to 4 KiB and at most
 * ROPCIE_WIRE_SLOT_MAX. Both hosts compute this from the same size.
 *
 * Return: 0, or -ENOSPC when the window cannot hold slots of
 * ROPCIE_WIRE_SLOT_MIN bytes.
 */
int ropcie_wire_geometry(u64 window, struct ropcie_wire_geom *g)
{
	u64 descs = (u64)ROPCIE_WIRE_NR_RINGS * ROPCIE_WIRE_SLOTS *
		    ROPCIE_WIRE_DESC_SIZE;
	u64 fixed = ROPCIE_WIRE_HDR_SIZE + ALIGN(descs, 4096);
	u64 slot;
	int i;

	if (window < fixed)
		return -ENOSPC;
	slot = (window - fixed) / (ROPCIE_WIRE_NR_RINGS * ROPCIE_WIRE_SLOTS);
	slot = min_t(u64, ALIGN_DOWN(slot, 4096), ROPCIE_WIRE_SLOT_MAX);
	if (slot < ROPCIE_WIRE_SLOT_MIN)
		return -ENOSPC;

	memset(g, 0, sizeof(*g));
	g->nslots = ROPCIE_WIRE_SLOTS;
	g->slot_size = slot;
	for (i = 0; i < ROPCIE_WIRE_NR_RINGS; i++) {
		g->desc_off[i] = ROPCIE_WIRE_HDR_SIZE +
				 (u64)i * ROPCIE_WIRE_SLOTS * ROPCIE_WIRE_DESC_SIZE;
		g->data_off[i] = fixed + (u64)i * ROPCIE_WIRE_SLOTS * slot;
	}
	g->used = fixed + (u64)ROPCIE_WIRE_NR_RINGS * ROPCIE_WIRE_SLOTS * slot;
	return 0;
}

/**
 * ropcie_wire_hdr_init() - a header for the peer's window, indices at 0
 * @h: a header in host memory, copied to the window by the caller
 * @g: the geometry both sides computed
 * @epoch: this host's incarnation, never 0
 */
void ropcie_wire_hdr_init(struct ropcie_wire_hdr *h,
			  const struct ropcie_wire_geom *g, u64 epoch)
{
	memset(h, 0, sizeof(*h));
	h->magic = cpu_to_le32(ROPCIE_WIRE_MAGIC);
	h->version = cpu_to_le16(ROPCIE_WIRE_VERSION);
	h->nslots = cpu_to_le16(g->nslots);
	h->slot_size = cpu_to_le32(g->slot_size);
	h->epoch = cpu_to_le64(epoch);
}

/**
 * ropcie_wire_hdr_check() - is a header the peer wrote usable?
 * @h: a copy of the inbound window's header, taken once
 * @g: this host's geometry of that window
 *
 * Return: 0; -EAGAIN while the peer has not written one (no magic, or
 * epoch 0: it is starting); -EPROTO for another version or geometry.
 */
int ropcie_wire_hdr_check(const struct ropcie_wire_hdr *h,
			  const struct ropcie_wire_geom *g)
{
	if (le32_to_cpu(h->magic) != ROPCIE_WIRE_MAGIC || !h->epoch)
		return -EAGAIN;
	if (le16_to_cpu(h->version) != ROPCIE_WIRE_VERSION ||
	    le16_to_cpu(h->nslots) != g->nslots ||
	    le32_to_cpu(h->slot_size) != g->slot_size)
		return -EPROTO;
	return 0;
}

/**
 * ropcie_wire_ring_count() - entries between a consumer and a producer
 * @prod: the producer's free-running index
 * @cons: the consumer's free-running index
 * @nslots: ring size
 * @count: @prod - @cons, modulo 2^32
 *
 * One side of the pair is the peer's word: a ring advanced past what it
 * can hold, or moved backwards, yields a count above @nslots.
 *
 * Return: 0, or -ERANGE when the count exceeds @nslots.
 */
int ropcie_wire_ring_count(u32 prod, u32 cons, u32 nslots, u32 *count)
{
	u32 n = prod - cons;

	if (n > nslots)
		return -ERANGE;
	*count = n;
	return 0;
}

/**
 * ropcie_wire_desc_encode() - a descriptor for the peer's window
 * @d: a descriptor in host memory, copied to the window by the caller
 * @m: what it says
 */
void ropcie_wire_desc_encode(struct ropcie_wire_desc *d,
			     const struct ropcie_wire_msg *m)
{
	memset(d, 0, sizeof(*d));
	d->type = m->type;
	d->flags = m->flags;
	d->status = cpu_to_le16(m->status);
	d->len = cpu_to_le32(m->len);
	d->dst_qpn = cpu_to_le32(m->dst_qpn);
	d->src_qpn = cpu_to_le32(m->src_qpn);
	d->msn = cpu_to_le32(m->msn);
	d->rkey = cpu_to_le32(m->rkey);
	d->inv_rkey = cpu_to_le32(m->inv_rkey);
	d->credit = cpu_to_le32(m->credit);
	d->raddr = cpu_to_le64(m->raddr);
	d->msg_len = cpu_to_le64(m->msg_len);
	d->offset = cpu_to_le64(m->offset);
}

/* Which ring a type travels in; -1 for no known type. */
static int ropcie_wire_type_ring(u8 type)
{
	switch (type) {
	case ROPCIE_WIRE_SEND:
	case ROPCIE_WIRE_SEND_INV:
	case ROPCIE_WIRE_WRITE:
	case ROPCIE_WIRE_READ:
	case ROPCIE_WIRE_RECV_POSTED:
	case ROPCIE_WIRE_CM:
	case ROPCIE_WIRE_STREAM:
		return ROPCIE_WIRE_REQ;
	case ROPCIE_WIRE_ACK:
	case ROPCIE_WIRE_READ_DATA:
	case ROPCIE_WIRE_RNR:
	case ROPCIE_WIRE_CLOSE:
		return ROPCIE_WIRE_RSP;
	default:
		return -1;
	}
}

/*
 * A fragment of a message: @len bytes at @offset of @msg_len, with FIRST
 * and LAST exactly where they belong. Only an empty message has an empty
 * fragment.
 */
static bool ropcie_wire_fragment_ok(const struct ropcie_wire_msg *m,
				    const struct ropcie_wire_geom *g)
{
	bool first = m->flags & ROPCIE_WIRE_FIRST;
	bool last = m->flags & ROPCIE_WIRE_LAST;

	if (m->msg_len > ROPCIE_WIRE_MAX_MSG || m->len > g->slot_size ||
	    m->offset > m->msg_len || m->len > m->msg_len - m->offset)
		return false;
	if (!m->len && m->msg_len)
		return false;
	return first == !m->offset && last == (m->offset + m->len == m->msg_len);
}

/**
 * ropcie_wire_desc_decode() - check a descriptor the peer wrote
 * @d: a copy of the descriptor, taken once from the window
 * @ring: the ring it was taken from
 * @g: the window's geometry
 * @m: filled on success
 *
 * Checks the type against the ring, flags, status, QP numbers, the
 * reserved fields, and that a fragment lies inside its message and its
 * slot. What the fields name (a QP, a key, an address in an MR) is
 * checked later by their owner, on this host.
 *
 * Return: 0, or -EINVAL for a descriptor no correct peer writes.
 */
int ropcie_wire_desc_decode(const struct ropcie_wire_desc *d,
			    enum ropcie_wire_ring ring,
			    const struct ropcie_wire_geom *g,
			    struct ropcie_wire_msg *m)
{
	memset(m, 0, sizeof(*m));
	if (ropcie_wire_type_ring(d->type) != (int)ring)
		return -EINVAL;
	if ((d->flags & ~ROPCIE_WIRE_FLAGS) || d->reserved1)
		return -EINVAL;
	m->type = d->type;
	m->flags = d->flags;
	m->status = le16_to_cpu(d->status);
	m->len = le32_to_cpu(d->len);
	m->dst_qpn = le32_to_cpu(d->dst_qpn);
	m->src_qpn = le32_to_cpu(d->src_qpn);
	m->msn = le32_to_cpu(d->msn);
	m->rkey = le32_to_cpu(d->rkey);
	m->inv_rkey = le32_to_cpu(d->inv_rkey);
	m->credit = le32_to_cpu(d->credit);
	m->raddr = le64_to_cpu(d->raddr);
	m->msg_len = le64_to_cpu(d->msg_len);
	m->offset = le64_to_cpu(d->offset);

	if (m->dst_qpn > ROPCIE_WIRE_MAX_QPN || m->src_qpn > ROPCIE_WIRE_MAX_QPN)
		goto bad;
	if (m->status > ROPCIE_WIRE_STATUS_MAX ||
	    (m->status && m->type != ROPCIE_WIRE_ACK &&
	     m->type != ROPCIE_WIRE_READ_DATA))
		goto bad;
	if ((m->flags & ROPCIE_WIRE_SOLICITED) && m->type != ROPCIE_WIRE_SEND &&
	    m->type != ROPCIE_WIRE_SEND_INV)
		goto bad;
	/* A credit only in an answer that says it carries one. */
	if (m->flags & ROPCIE_WIRE_CREDIT) {
		if (m->type != ROPCIE_WIRE_ACK && m->type != ROPCIE_WIRE_RNR)
			goto bad;
	} else if (m->credit) {
		goto bad;
	}

	switch (m->type) {
	case ROPCIE_WIRE_SEND:
	case ROPCIE_WIRE_SEND_INV:
	case ROPCIE_WIRE_WRITE:
	case ROPCIE_WIRE_READ_DATA:
	case ROPCIE_WIRE_CM:
		if (!ropcie_wire_fragment_ok(m, g))
			goto bad;
		/* Connection management fits one slot. */
		if (m->type == ROPCIE_WIRE_CM &&
		    (m->dst_qpn || m->msg_len != m->len))
			goto bad;
		break;
	case ROPCIE_WIRE_STREAM:
		/* No connection, no message of one; its stamp in each slot. */
		if (!ropcie_wire_fragment_ok(m, g) || m->dst_qpn ||
		    m->src_qpn || m->msn || m->rkey || m->inv_rkey ||
		    m->raddr || m->len < sizeof(__le64))
			goto bad;
		break;
	case ROPCIE_WIRE_READ:
		/* A READ request: no payload, the whole message at once. */
		if (m->len || m->offset || m->msg_len > ROPCIE_WIRE_MAX_MSG ||
		    m->flags != (ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST))
			goto bad;
		break;
	case ROPCIE_WIRE_CLOSE:
		/* Names both ends of a connection. */
		if (!m->dst_qpn || !m->src_qpn || m->msn)
			goto bad;
		fallthrough;
	case ROPCIE_WIRE_RECV_POSTED:
	case ROPCIE_WIRE_ACK:
	case ROPCIE_WIRE_RNR:
		/* No payload, no message. */
		if (m->len || m->offset || m->msg_len ||
		    (m->flags & ~ROPCIE_WIRE_CREDIT))
			goto bad;
		break;
	}
	return 0;
bad:
	memset(m, 0, sizeof(*m));
	return -EINVAL;
}

/**
 * ropcie_wire_cm_encode() - a connection management message for the peer
 * @w: the payload in host memory, copied to the window by the caller
 * @m: what it says
 */
void ropcie_wire_cm_encode(struct ropcie_wire_cm *w,
			   const struct ropcie_wire_cm_msg *m)
{
	memset(w, 0, sizeof(*w));
	w->op = m->op;
	w->family = m->family;
	w->pdata_len = m->pdata_len;
	w->creq = cpu_to_le32(m->creq);
	w->conn = cpu_to_le32(m->conn);
	w->peer_conn = cpu_to_le32(m->peer_conn);
	w->ird = cpu_to_le32(m->ird);
	w->ord = cpu_to_le32(m->ord);
	w->src_port = cpu_to_be16(m->src_port);
	w->dst_port = cpu_to_be16(m->dst_port);
	memcpy(w->src_addr, m->src_addr, sizeof(w->src_addr));
	memcpy(w->dst_addr, m->dst_addr, sizeof(w->dst_addr));
	memcpy(w->pdata, m->pdata, min_t(u32, m->pdata_len,
					 ROPCIE_WIRE_PDATA_MAX));
}

static bool ropcie_wire_zero(const u8 *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/**
 * ropcie_wire_cm_decode() - check a connection management message
 * @w: a copy of the payload, taken once from the window
 * @len: the payload length its descriptor gave
 * @m: filled on success
 *
 * Checks the length, the operation, and that each operation carries
 * exactly the fields it uses: ids where they belong and never 0 there,
 * 0 elsewhere; an address family and addresses only in a request, an
 * IPv4 address with nothing after its four bytes; no private data
 * beyond pdata_len. What the ids name is checked by the
 * receiver's connection manager.
 *
 * Return: 0, or -EINVAL for a message no correct peer sends.
 */
int ropcie_wire_cm_decode(const struct ropcie_wire_cm *w, u32 len,
			  struct ropcie_wire_cm_msg *m)
{
	bool req, rej;

	memset(m, 0, sizeof(*m));
	if (len != sizeof(*w) || w->reserved0 || w->reserved1)
		goto bad;
	if (w->op < ROPCIE_WIRE_CM_REQ || w->op > ROPCIE_WIRE_CM_REJECT)
		goto bad;
	m->op = w->op;
	m->family = w->family;
	m->pdata_len = w->pdata_len;
	m->creq = le32_to_cpu(w->creq);
	m->conn = le32_to_cpu(w->conn);
	m->peer_conn = le32_to_cpu(w->peer_conn);
	m->ird = le32_to_cpu(w->ird);
	m->ord = le32_to_cpu(w->ord);
	m->src_port = be16_to_cpu(w->src_port);
	m->dst_port = be16_to_cpu(w->dst_port);
	req = m->op == ROPCIE_WIRE_CM_REQ;
	rej = m->op == ROPCIE_WIRE_CM_REJECT;

	if (m->conn > ROPCIE_WIRE_MAX_QPN || m->peer_conn > ROPCIE_WIRE_MAX_QPN)
		goto bad;
	/* Who names which QP: see struct ropcie_wire_cm. */
	if (!m->conn != rej || !m->peer_conn != req || !m->creq)
		goto bad;
	if (m->pdata_len > ROPCIE_WIRE_PDATA_MAX ||
	    !ropcie_wire_zero(w->pdata + m->pdata_len,
			      sizeof(w->pdata) - m->pdata_len))
		goto bad;
	if (!req) {
		if (m->family || m->ird || m->ord || m->src_port ||
		    m->dst_port || !ropcie_wire_zero(w->src_addr, 16) ||
		    !ropcie_wire_zero(w->dst_addr, 16))
			goto bad;
	} else {
		size_t alen = m->family == ROPCIE_WIRE_INET ? 4 : 16;

		if (m->family != ROPCIE_WIRE_INET &&
		    m->family != ROPCIE_WIRE_INET6)
			goto bad;
		if (!ropcie_wire_zero(w->src_addr + alen, 16 - alen) ||
		    !ropcie_wire_zero(w->dst_addr + alen, 16 - alen))
			goto bad;
		if (m->ird > ROPCIE_WIRE_MAX_ORD || m->ord > ROPCIE_WIRE_MAX_ORD)
			goto bad;
		memcpy(m->src_addr, w->src_addr, 16);
		memcpy(m->dst_addr, w->dst_addr, 16);
	}
	memcpy(m->pdata, w->pdata, m->pdata_len);
	return 0;
bad:
	memset(m, 0, sizeof(*m));
	return -EINVAL;
}
