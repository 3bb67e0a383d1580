/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie link protocol: how two hosts lay out the shared window between
 * them, and the descriptors they exchange through it.
 *
 * Each host has an inbound window that only its peer writes: a memory
 * window of an NTB, or this host's half of an ivshmem BAR. The peer
 * produces into it; this host consumes from it and tells the peer how
 * far it got through the peer's own inbound window. Posted writes
 * cross a PCIe link cheaply and reads do not, so no host reads the
 * window it writes.
 *
 * Everything in an inbound window is the peer's word, so hostile: it is
 * copied out once (a header or a descriptor at a time) and checked here
 * before any field is used. No ib_core and no device in this file: the
 * KUnit suite (kunit/ropcie_wire_kunit.c) runs it on UML.
 *
 * Layout of an inbound window (all fields little-endian):
 *
 *   0                    struct ropcie_wire_hdr, in a 4 KiB page
 *   desc_off[REQ]        nslots request descriptors (64 B each)
 *   desc_off[RSP]        nslots response descriptors
 *   data_off[REQ]        nslots payload slots of slot_size bytes
 *   data_off[RSP]        nslots payload slots
 *
 * Requests (SEND, WRITE, READ, connection management) and responses
 * (verdicts, READ data) travel in separate rings, so that consuming a
 * response never waits for ring space: the responder may wait for room
 * in the response ring, the requester never waits for anything while
 * it drains it, and the two hosts cannot deadlock on each other's rings.
 */
#ifndef ROPCIE_WIRE_H
#define ROPCIE_WIRE_H

#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/types.h>

#define ROPCIE_WIRE_MAGIC	0x4c435052U	/* "RPCL" */
#define ROPCIE_WIRE_VERSION	2	/* 2: ACK and RNR carry credit */
#define ROPCIE_WIRE_HDR_SIZE	4096U
#define ROPCIE_WIRE_DESC_SIZE	64U
#define ROPCIE_WIRE_SLOTS	32U		/* entries per ring */
#define ROPCIE_WIRE_SLOT_MIN	4096U
#define ROPCIE_WIRE_SLOT_MAX	(1024U * 1024U)
#define ROPCIE_WIRE_MAX_MSG	0x80000000ULL	/* as ROPCIE_MAX_MSG */
#define ROPCIE_WIRE_MAX_QPN	0xffffffU

/* The two rings of a window. */
enum ropcie_wire_ring {
	ROPCIE_WIRE_REQ,
	ROPCIE_WIRE_RSP,
	ROPCIE_WIRE_NR_RINGS
};

/* Descriptor types. The ring a type may travel in is fixed. */
enum ropcie_wire_type {
	/* In the request ring: */
	ROPCIE_WIRE_SEND = 1,	/* payload: a fragment of the message */
	ROPCIE_WIRE_SEND_INV,	/* + inv_rkey, the responder's MR */
	ROPCIE_WIRE_WRITE,	/* payload: a fragment; rkey, raddr */
	ROPCIE_WIRE_READ,	/* no payload; rkey, raddr, msg_len */
	ROPCIE_WIRE_RECV_POSTED, /* dst_qpn has a receive for a waiting SEND */
	ROPCIE_WIRE_CM,		/* payload: connection management, cm.c's */
	/*
	 * payload: a fragment of the raw stream (offset, msg_len), its
	 * first 8 bytes its offset (le64); no connection (both qpns 0), no
	 * answer. The link's ceiling without verbs (link_stream.c); a
	 * peer that does not know it drops it (rx_dropped).
	 */
	ROPCIE_WIRE_STREAM,
	/* In the response ring: */
	ROPCIE_WIRE_ACK = 16,	/* the verdict on message msn: status */
	ROPCIE_WIRE_READ_DATA,	/* payload: a fragment of READ msn's data */
	ROPCIE_WIRE_RNR,	/* SEND msn found no receive: wait, resend */
	/*
	 * The connection dst_qpn, src_qpn ends. In the response ring, so
	 * that it never overtakes a response sent before it: a requester
	 * learns the fate of everything the peer answered first.
	 */
	ROPCIE_WIRE_CLOSE,
};

/* Descriptor flags. */
#define ROPCIE_WIRE_FIRST	0x01	/* the fragment at offset 0 */
#define ROPCIE_WIRE_LAST	0x02	/* the fragment that ends the message */
#define ROPCIE_WIRE_SOLICITED	0x04	/* SEND, SEND_INV */
#define ROPCIE_WIRE_CREDIT	0x08	/* ACK, RNR: credit is the QP's */
#define ROPCIE_WIRE_FLAGS	0x0f

/*
 * Verdicts in an ACK or the last READ_DATA: the requester's completion
 * status, as the responder decided it. Values of enum ib_wc_status; the
 * largest one a responder sends is bounded here so that this file needs
 * no ib_core.
 */
#define ROPCIE_WIRE_STATUS_MAX	31

/**
 * struct ropcie_wire_hdr - the first bytes of an inbound window
 * @magic: ROPCIE_WIRE_MAGIC
 * @version: ROPCIE_WIRE_VERSION
 * @nslots: entries per ring, ROPCIE_WIRE_SLOTS
 * @slot_size: payload bytes per entry; both sides compute it from the
 *	window size and must agree
 * @epoch: the writer's incarnation, random and never 0: changes when
 *	the writer (re)starts the link, and then every index below starts
 *	again from 0
 * @ack_epoch: the epoch of this window's reader, once the writer saw it:
 *	the link is up when each side's epoch is acknowledged by the other
 * @heartbeat: bumped by the writer at least every ROPCIE_LINK_BEAT_MS
 * @prod: how many entries the writer produced into this window's rings
 * @cons: how many entries the writer consumed from the rings of the
 *	reader's window (which the reader produced)
 * @rx_sleep: nonzero while the writer's consumer of ring r (of the
 *	entries the reader produces) sleeps: the reader rings after it
 *	produced
 * @tx_want: nonzero while the writer's producer into ring r of this
 *	window waits for room: the consumer rings when it frees a slot
 *
 * The last two are hints: a peer that lies about them only loses its
 * own doorbells, and every side polls at each heartbeat anyway.
 */
struct ropcie_wire_hdr {
	__le32 magic;
	__le16 version;
	__le16 nslots;
	__le32 slot_size;
	__le32 reserved0;
	__le64 epoch;
	__le64 ack_epoch;
	__le64 heartbeat;
	__le32 prod[ROPCIE_WIRE_NR_RINGS];
	__le32 cons[ROPCIE_WIRE_NR_RINGS];
	__le32 rx_sleep[ROPCIE_WIRE_NR_RINGS];
	__le32 tx_want[ROPCIE_WIRE_NR_RINGS];
};

/**
 * struct ropcie_wire_desc - one ring entry
 * @type: enum ropcie_wire_type
 * @flags: ROPCIE_WIRE_FIRST, _LAST, _SOLICITED, _CREDIT
 * @status: a verdict (ACK, READ_DATA with LAST), else 0
 * @len: payload bytes in this entry's slot (the slot is the entry's
 *	index in the ring, so no offset is ever taken from the peer)
 * @dst_qpn: the QP on the reader's side (0 for ROPCIE_WIRE_CM)
 * @src_qpn: the QP on the writer's side
 * @msn: the message's sequence number on its requester QP; responses
 *	echo the request's
 * @rkey: WRITE, READ: the responder's MR
 * @inv_rkey: SEND_INV: the responder's MR to invalidate
 * @credit: ACK, RNR with ROPCIE_WIRE_CREDIT: the receives the responder's
 *	QP has had for this connection (waiting when it began, or posted
 *	since; mod 2^32) when it answered.
 *	The connection's n-th SEND finds a receive once credit has reached
 *	n, as RC's end-to-end credits: a requester sends that far without
 *	waiting for RNR. Else 0.
 * @raddr: WRITE, READ: the address in the responder's MR where the
 *	message starts
 * @msg_len: bytes of the whole message
 * @offset: where this fragment's payload lies in the message
 * @reserved1: 0
 */
struct ropcie_wire_desc {
	u8 type;
	u8 flags;
	__le16 status;
	__le32 len;
	__le32 dst_qpn;
	__le32 src_qpn;
	__le32 msn;
	__le32 rkey;
	__le32 inv_rkey;
	__le32 credit;
	__le64 raddr;
	__le64 msg_len;
	__le64 offset;
	__le64 reserved1;
};

static_assert(sizeof(struct ropcie_wire_desc) == ROPCIE_WIRE_DESC_SIZE);
static_assert(sizeof(struct ropcie_wire_hdr) <= ROPCIE_WIRE_HDR_SIZE);

/* A descriptor in host order, checked (ropcie_wire_desc_decode()). */
struct ropcie_wire_msg {
	enum ropcie_wire_type type;
	u8 flags;
	u16 status;
	u32 len;
	u32 dst_qpn, src_qpn;
	u32 msn;
	u32 rkey, inv_rkey;
	u32 credit;
	u64 raddr;
	u64 msg_len;
	u64 offset;
};

/* Where the parts of a window lie, computed from its size alone. */
struct ropcie_wire_geom {
	u32 nslots;
	u32 slot_size;
	u64 desc_off[ROPCIE_WIRE_NR_RINGS];
	u64 data_off[ROPCIE_WIRE_NR_RINGS];
	u64 used;			/* bytes of the window in use */
};

int ropcie_wire_geometry(u64 window, struct ropcie_wire_geom *g);
void ropcie_wire_hdr_init(struct ropcie_wire_hdr *h,
			  const struct ropcie_wire_geom *g, u64 epoch);
int ropcie_wire_hdr_check(const struct ropcie_wire_hdr *h,
			  const struct ropcie_wire_geom *g);
int ropcie_wire_ring_count(u32 prod, u32 cons, u32 nslots, u32 *count);
void ropcie_wire_desc_encode(struct ropcie_wire_desc *d,
			     const struct ropcie_wire_msg *m);
int ropcie_wire_desc_decode(const struct ropcie_wire_desc *d,
			    enum ropcie_wire_ring ring,
			    const struct ropcie_wire_geom *g,
			    struct ropcie_wire_msg *m);

/*
 * The connection a descriptor names, as the peer wrote it: unchecked,
 * for looking up the connection a malformed descriptor belongs to.
 */
static inline void ropcie_wire_desc_conn(const struct ropcie_wire_desc *d,
					 u32 *dst_qpn, u32 *src_qpn)
{
	*dst_qpn = le32_to_cpu(d->dst_qpn);
	*src_qpn = le32_to_cpu(d->src_qpn);
}

/*
 * Connection management: the payload of a ROPCIE_WIRE_CM descriptor, one
 * struct ropcie_wire_cm. A connection is known on the link by the two
 * hosts' ids of its QPs ("conn", at most ROPCIE_WIRE_MAX_QPN, never 0),
 * which data descriptors carry in dst_qpn and src_qpn.
 */
enum ropcie_wire_cm_op {
	ROPCIE_WIRE_CM_REQ = 1,	/* connect to the listener at dst */
	ROPCIE_WIRE_CM_ACCEPT,	/* request creq accepted, by QP conn */
	ROPCIE_WIRE_CM_REJECT,	/* request creq refused */
};

#define ROPCIE_WIRE_PDATA_MAX	255	/* iw_cm's private data: u8 length */
#define ROPCIE_WIRE_MAX_ORD	128	/* as ROPCIE_MAX_IRD_ORD */
#define ROPCIE_WIRE_INET	4	/* family: IPv4, in src_addr[0..3] */
#define ROPCIE_WIRE_INET6	6

/**
 * struct ropcie_wire_cm - a connection management message
 * @op: enum ropcie_wire_cm_op
 * @family: REQ: ROPCIE_WIRE_INET or ROPCIE_WIRE_INET6; else 0
 * @pdata_len: bytes of @pdata used
 * @reserved0: 0
 * @creq: REQ: the requester's id of the request; ACCEPT and REJECT echo
 *	it
 * @conn: the sender's id of its QP (REQ, ACCEPT; REJECT: 0)
 * @peer_conn: the receiver's id of its QP (ACCEPT, REJECT; REQ: 0)
 * @ird: REQ: inbound READs the requester's QP takes at once
 * @ord: REQ: outbound READs its QP may have posted at once. Both are
 *	the verbs' depths, handed to the ULPs; on the wire a connection
 *	has one READ at a time (the next waits in the requester's send
 *	queue), and a second one is the peer's fault (link_read.c).
 * @src_port: REQ: the requester's port, network order
 * @dst_port: REQ: the listener's port, network order
 * @reserved1: 0
 * @src_addr: REQ: the requester's address
 * @dst_addr: REQ: the listener's address
 * @pdata: private data
 *
 * A connection ends with a ROPCIE_WIRE_CLOSE descriptor in the response
 * ring, not a CM message.
 */
struct ropcie_wire_cm {
	u8 op;
	u8 family;
	u8 pdata_len;
	u8 reserved0;
	__le32 creq;
	__le32 conn;
	__le32 peer_conn;
	__le32 ird;
	__le32 ord;
	__be16 src_port;
	__be16 dst_port;
	__le32 reserved1;
	u8 src_addr[16];
	u8 dst_addr[16];
	u8 pdata[ROPCIE_WIRE_PDATA_MAX + 1];
};

static_assert(sizeof(struct ropcie_wire_cm) == 320);

/* A connection management message in host order, checked. */
struct ropcie_wire_cm_msg {
	enum ropcie_wire_cm_op op;
	u8 family;
	u8 pdata_len;
	u32 creq, conn, peer_conn;
	u32 ird, ord;
	u16 src_port, dst_port;		/* host order */
	u8 src_addr[16], dst_addr[16];
	u8 pdata[ROPCIE_WIRE_PDATA_MAX];
};

void ropcie_wire_cm_encode(struct ropcie_wire_cm *w,
			   const struct ropcie_wire_cm_msg *m);
int ropcie_wire_cm_decode(const struct ropcie_wire_cm *w, u32 len,
			  struct ropcie_wire_cm_msg *m);

#endif /* ROPCIE_WIRE_H */
