// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests of the ropcie link protocol (ropcie/wire.c): the window
 * geometry, the header handshake fields, ring indices that wrap around
 * or that a peer advanced too far, the descriptor round trip, a table
 * of hostile descriptors (one per field class a peer can get wrong, each
 * with the errno it must get), and every single-byte corruption of a
 * valid descriptor of each type: whatever decodes must still describe a
 * fragment inside its slot and its message. The same for the connection
 * management messages: a round trip, a hostile table, a byte sweep.
 *
 * The protocol code is included rather than linked so that its object
 * file is not built into two modules.
 */

#include <kunit/test.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../ropcie/wire.c"

/* An inbound window of the test bed: half of a 16 MiB BAR, less a page. */
#define WIN_8M		(8ULL * 1024 * 1024 - 4096)

static void geom_8m(struct kunit *test, struct ropcie_wire_geom *g)
{
	KUNIT_ASSERT_EQ(test, ropcie_wire_geometry(WIN_8M, g), 0);
}

static void ropcie_wire_test_geometry(struct kunit *test)
{
	static const u64 sizes[] = {
		270336, 1 << 20, WIN_8M, 64ULL << 20, 1ULL << 30, 1ULL << 40,
	};
	struct ropcie_wire_geom g;
	u64 fixed = ROPCIE_WIRE_HDR_SIZE + 4096;
	int i, r;

	geom_8m(test, &g);
	KUNIT_EXPECT_EQ(test, g.nslots, ROPCIE_WIRE_SLOTS);
	/* (8 MiB - 4 KiB - 8 KiB) / 64 slots, rounded down to 4 KiB */
	KUNIT_EXPECT_EQ(test, g.slot_size, 126976U);

	/* The smallest window: 4 KiB slots exactly; one byte less fails. */
	KUNIT_EXPECT_EQ(test, ropcie_wire_geometry(fixed + 64 * 4096, &g), 0);
	KUNIT_EXPECT_EQ(test, g.slot_size, 4096U);
	KUNIT_EXPECT_EQ(test, ropcie_wire_geometry(fixed + 64 * 4096 - 1, &g),
			-ENOSPC);
	KUNIT_EXPECT_EQ(test, ropcie_wire_geometry(0, &g), -ENOSPC);
	KUNIT_EXPECT_EQ(test, ropcie_wire_geometry(fixed - 1, &g), -ENOSPC);

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		KUNIT_ASSERT_EQ(test, ropcie_wire_geometry(sizes[i], &g), 0);
		KUNIT_EXPECT_LE(test, g.used, sizes[i]);
		KUNIT_EXPECT_LE(test, g.slot_size, ROPCIE_WIRE_SLOT_MAX);
		KUNIT_EXPECT_GE(test, g.slot_size, ROPCIE_WIRE_SLOT_MIN);
		KUNIT_EXPECT_EQ(test, g.slot_size % 4096, 0U);
		for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
			/* Descriptors after the header, data after them. */
			KUNIT_EXPECT_GE(test, g.desc_off[r],
					(u64)ROPCIE_WIRE_HDR_SIZE);
			KUNIT_EXPECT_LE(test, g.desc_off[r] +
					g.nslots * ROPCIE_WIRE_DESC_SIZE, fixed);
			KUNIT_EXPECT_EQ(test, g.data_off[r] % 4096, 0ULL);
			KUNIT_EXPECT_LE(test, g.data_off[r] +
					(u64)g.nslots * g.slot_size, g.used);
		}
		KUNIT_EXPECT_EQ(test, g.desc_off[1] - g.desc_off[0],
				(u64)g.nslots * ROPCIE_WIRE_DESC_SIZE);
		KUNIT_EXPECT_EQ(test, g.data_off[1] - g.data_off[0],
				(u64)g.nslots * g.slot_size);
	}
	/* Huge windows: slots stop growing at the maximum. */
	KUNIT_EXPECT_EQ(test, ropcie_wire_geometry(1ULL << 40, &g), 0);
	KUNIT_EXPECT_EQ(test, g.slot_size, ROPCIE_WIRE_SLOT_MAX);
}

static void ropcie_wire_test_header(struct kunit *test)
{
	struct ropcie_wire_geom g, other;
	struct ropcie_wire_hdr h, bad;

	geom_8m(test, &g);
	ropcie_wire_hdr_init(&h, &g, 0x1234);
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&h, &g), 0);
	KUNIT_EXPECT_EQ(test, le64_to_cpu(h.epoch), 0x1234ULL);
	KUNIT_EXPECT_EQ(test, h.prod[0] | h.prod[1] | h.cons[0] | h.cons[1],
			0U);

	/* A peer that has not written, or is restarting: wait. */
	memset(&bad, 0, sizeof(bad));
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EAGAIN);
	bad = h;
	bad.epoch = 0;
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EAGAIN);
	bad = h;
	bad.magic = cpu_to_le32(ROPCIE_WIRE_MAGIC ^ 1);
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EAGAIN);

	/* Another protocol or another idea of the window: never up. */
	bad = h;
	bad.version = cpu_to_le16(ROPCIE_WIRE_VERSION + 1);
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EPROTO);
	bad = h;
	bad.nslots = cpu_to_le16(ROPCIE_WIRE_SLOTS * 2);
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EPROTO);
	KUNIT_ASSERT_EQ(test, ropcie_wire_geometry(1 << 20, &other), 0);
	ropcie_wire_hdr_init(&bad, &other, 0x1234);
	KUNIT_EXPECT_EQ(test, ropcie_wire_hdr_check(&bad, &g), -EPROTO);
}

static void ropcie_wire_test_ring_count(struct kunit *test)
{
	const u32 n = ROPCIE_WIRE_SLOTS;
	u32 c = 0xdead;

	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(3, 3, n, &c), 0);
	KUNIT_EXPECT_EQ(test, c, 0U);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(5, 3, n, &c), 0);
	KUNIT_EXPECT_EQ(test, c, 2U);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(3 + n, 3, n, &c), 0);
	KUNIT_EXPECT_EQ(test, c, n);
	/* Wrap-around of the free-running counters. */
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(2, U32_MAX - 1, n, &c), 0);
	KUNIT_EXPECT_EQ(test, c, 4U);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(n - 1, U32_MAX, n, &c), 0);
	KUNIT_EXPECT_EQ(test, c, n);

	/* Advanced too far, or backwards: refused, @count untouched. */
	c = 0xdead;
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(4 + n, 3, n, &c), -ERANGE);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(3, 5, n, &c), -ERANGE);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(n, U32_MAX, n, &c),
			-ERANGE);
	KUNIT_EXPECT_EQ(test, ropcie_wire_ring_count(U32_MAX, 0, n, &c),
			-ERANGE);
	KUNIT_EXPECT_EQ(test, c, 0xdeadU);
}

/* A valid message of each type, as a correct peer writes it. */
static const struct ropcie_wire_msg valid_msgs[] = {
	{ .type = ROPCIE_WIRE_SEND, .flags = ROPCIE_WIRE_FIRST |
	  ROPCIE_WIRE_LAST | ROPCIE_WIRE_SOLICITED, .len = 64, .dst_qpn = 2,
	  .src_qpn = 3, .msn = 7, .msg_len = 64 },
	{ .type = ROPCIE_WIRE_SEND, .flags = ROPCIE_WIRE_FIRST |
	  ROPCIE_WIRE_LAST, .dst_qpn = 2, .src_qpn = 3 },	/* empty */
	{ .type = ROPCIE_WIRE_SEND_INV, .flags = ROPCIE_WIRE_LAST,
	  .len = 100, .dst_qpn = 2, .src_qpn = 3, .msn = 8, .inv_rkey = 0x501,
	  .msg_len = 126976 + 100, .offset = 126976 },
	{ .type = ROPCIE_WIRE_WRITE, .flags = ROPCIE_WIRE_FIRST, .len = 126976,
	  .dst_qpn = ROPCIE_WIRE_MAX_QPN, .src_qpn = 2, .msn = U32_MAX,
	  .rkey = 0x1234, .raddr = U64_MAX - 4096,
	  .msg_len = ROPCIE_WIRE_MAX_MSG },
	{ .type = ROPCIE_WIRE_WRITE, .len = 126976, .dst_qpn = 2, .src_qpn = 2,
	  .rkey = 0x1234, .raddr = 0x1000, .msg_len = 1 << 20,
	  .offset = 126976 },
	{ .type = ROPCIE_WIRE_READ, .flags = ROPCIE_WIRE_FIRST |
	  ROPCIE_WIRE_LAST, .dst_qpn = 2, .src_qpn = 3, .msn = 9,
	  .rkey = 0x2201, .raddr = 0xffff888000000000ULL, .msg_len = 1 << 20 },
	{ .type = ROPCIE_WIRE_RECV_POSTED, .dst_qpn = 2, .src_qpn = 3 },
	{ .type = ROPCIE_WIRE_CM, .flags = ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST,
	  .len = 512, .src_qpn = 5, .msg_len = 512 },
	{ .type = ROPCIE_WIRE_ACK, .dst_qpn = 3, .src_qpn = 2, .msn = 7 },
	{ .type = ROPCIE_WIRE_ACK, .status = 10, .dst_qpn = 3, .src_qpn = 2,
	  .msn = 7 },
	{ .type = ROPCIE_WIRE_READ_DATA, .flags = ROPCIE_WIRE_LAST, .len = 4,
	  .dst_qpn = 3, .src_qpn = 2, .msn = 9, .msg_len = 126980,
	  .offset = 126976 },
	{ .type = ROPCIE_WIRE_RNR, .dst_qpn = 3, .src_qpn = 2, .msn = 7 },
	{ .type = ROPCIE_WIRE_CLOSE, .dst_qpn = 3, .src_qpn = 2 },	/* 12 */
	{ .type = ROPCIE_WIRE_STREAM, .flags = ROPCIE_WIRE_LAST, .len = 8,
	  .msg_len = 126984, .offset = 126976 },			/* 13 */
	{ .type = ROPCIE_WIRE_ACK, .flags = ROPCIE_WIRE_CREDIT, .dst_qpn = 3,
	  .src_qpn = 2, .msn = 7, .credit = U32_MAX },			/* 14 */
	{ .type = ROPCIE_WIRE_RNR, .flags = ROPCIE_WIRE_CREDIT, .dst_qpn = 3,
	  .src_qpn = 2, .msn = 7 },					/* 15 */
};

static enum ropcie_wire_ring ring_of(const struct ropcie_wire_msg *m)
{
	return m->type >= ROPCIE_WIRE_ACK ? ROPCIE_WIRE_RSP : ROPCIE_WIRE_REQ;
}

static void ropcie_wire_test_round_trip(struct kunit *test)
{
	struct ropcie_wire_desc d;
	struct ropcie_wire_msg m;
	struct ropcie_wire_geom g;
	int i, ret;

	geom_8m(test, &g);
	for (i = 0; i < ARRAY_SIZE(valid_msgs); i++) {
		ropcie_wire_desc_encode(&d, &valid_msgs[i]);
		ret = ropcie_wire_desc_decode(&d, ring_of(&valid_msgs[i]), &g,
					      &m);
		KUNIT_EXPECT_EQ_MSG(test, ret, 0, "valid message %d", i);
		KUNIT_EXPECT_EQ_MSG(test, memcmp(&m, &valid_msgs[i], sizeof(m)),
				    0, "valid message %d", i);
	}
}

/* A hostile descriptor: a valid message with one field class wrong. */
struct hostile_case {
	const char *what;
	int base;			/* index into valid_msgs */
	enum ropcie_wire_ring ring;
	void (*spoil)(struct ropcie_wire_desc *d);
};

#define SPOIL(name, stmt) \
	static void spoil_##name(struct ropcie_wire_desc *d) { stmt; }

SPOIL(type0, d->type = 0)
SPOIL(type_gap, d->type = ROPCIE_WIRE_STREAM + 1)
SPOIL(type_ff, d->type = 0xff)
SPOIL(none, (void)d)
SPOIL(flag8, d->flags |= 0x08)
SPOIL(flag80, d->flags |= 0x80)
SPOIL(credit, d->credit = cpu_to_le32(1))
SPOIL(rsvd1, d->reserved1 = cpu_to_le64(1ULL << 63))
SPOIL(dst_qpn, d->dst_qpn = cpu_to_le32(ROPCIE_WIRE_MAX_QPN + 1))
SPOIL(src_qpn, d->src_qpn = cpu_to_le32(U32_MAX))
SPOIL(status, d->status = cpu_to_le16(1))
SPOIL(status_big, d->status = cpu_to_le16(ROPCIE_WIRE_STATUS_MAX + 1))
SPOIL(solicited, d->flags |= ROPCIE_WIRE_SOLICITED)
SPOIL(len_slot, d->len = cpu_to_le32(126976 + 1);
	      d->msg_len = cpu_to_le64(126977))
SPOIL(len_huge, d->len = cpu_to_le32(U32_MAX))
SPOIL(len_msg, d->len = cpu_to_le32(65))
SPOIL(offset_past, d->offset = cpu_to_le64(le64_to_cpu(d->msg_len) + 1))
SPOIL(offset_wrap, d->offset = cpu_to_le64(U64_MAX - 8);
	      d->flags &= ~ROPCIE_WIRE_FIRST)
SPOIL(msg_huge, d->msg_len = cpu_to_le64(ROPCIE_WIRE_MAX_MSG + 1))
SPOIL(msg_u64, d->msg_len = cpu_to_le64(U64_MAX))
SPOIL(no_first, d->flags &= ~ROPCIE_WIRE_FIRST)
SPOIL(late_first, d->flags |= ROPCIE_WIRE_FIRST)
SPOIL(no_last, d->flags &= ~ROPCIE_WIRE_LAST)
SPOIL(early_last, d->flags |= ROPCIE_WIRE_LAST)
SPOIL(empty_frag, d->len = 0)
SPOIL(read_payload, d->len = cpu_to_le32(8))
SPOIL(read_offset, d->offset = cpu_to_le64(4096))
SPOIL(some_len, d->len = cpu_to_le32(1))
SPOIL(some_msg, d->msg_len = cpu_to_le64(1))
SPOIL(some_flags, d->flags = ROPCIE_WIRE_FIRST)
SPOIL(some_flags_too, d->flags |= ROPCIE_WIRE_FIRST)
SPOIL(cm_qpn, d->dst_qpn = cpu_to_le32(2))
SPOIL(cm_split, d->msg_len = cpu_to_le64(1024);
	      d->flags &= ~ROPCIE_WIRE_LAST)
SPOIL(no_dst, d->dst_qpn = 0)
SPOIL(no_src, d->src_qpn = 0)
SPOIL(msn, d->msn = cpu_to_le32(1))
SPOIL(src2, d->src_qpn = cpu_to_le32(2))
SPOIL(rkey, d->rkey = cpu_to_le32(0x1234))
SPOIL(inv_rkey, d->inv_rkey = cpu_to_le32(0x501))
SPOIL(raddr, d->raddr = cpu_to_le64(0x1000))
SPOIL(stamp_short, d->len = cpu_to_le32(4); d->msg_len = cpu_to_le64(126980))

static const struct hostile_case hostile[] = {
	{ "type 0", 0, ROPCIE_WIRE_REQ, spoil_type0 },
	{ "type between the rings' ranges", 0, ROPCIE_WIRE_REQ, spoil_type_gap },
	{ "type 0xff", 0, ROPCIE_WIRE_REQ, spoil_type_ff },
	{ "SEND in the response ring", 0, ROPCIE_WIRE_RSP, spoil_none },
	{ "READ in the response ring", 5, ROPCIE_WIRE_RSP, spoil_none },
	{ "ACK in the request ring", 8, ROPCIE_WIRE_REQ, spoil_none },
	{ "READ_DATA in the request ring", 10, ROPCIE_WIRE_REQ, spoil_none },
	{ "CREDIT on a SEND", 0, ROPCIE_WIRE_REQ, spoil_flag8 },
	{ "CREDIT on RECV_POSTED", 6, ROPCIE_WIRE_REQ, spoil_flag8 },
	{ "CREDIT on READ_DATA", 10, ROPCIE_WIRE_RSP, spoil_flag8 },
	{ "CREDIT on CLOSE", 12, ROPCIE_WIRE_RSP, spoil_flag8 },
	{ "unknown flag 0x80", 8, ROPCIE_WIRE_RSP, spoil_flag80 },
	{ "credit on a WRITE", 3, ROPCIE_WIRE_REQ, spoil_credit },
	{ "credit on an ACK without CREDIT", 8, ROPCIE_WIRE_RSP, spoil_credit },
	{ "credit on an RNR without CREDIT", 11, ROPCIE_WIRE_RSP, spoil_credit },
	{ "CREDIT with FIRST on an ACK", 14, ROPCIE_WIRE_RSP, spoil_some_flags_too },
	{ "reserved1 set", 8, ROPCIE_WIRE_RSP, spoil_rsvd1 },
	{ "dst_qpn beyond 24 bits", 3, ROPCIE_WIRE_REQ, spoil_dst_qpn },
	{ "src_qpn beyond 24 bits", 8, ROPCIE_WIRE_RSP, spoil_src_qpn },
	{ "status on a SEND", 0, ROPCIE_WIRE_REQ, spoil_status },
	{ "status on an RNR", 11, ROPCIE_WIRE_RSP, spoil_status },
	{ "status beyond the largest", 8, ROPCIE_WIRE_RSP, spoil_status_big },
	{ "solicited WRITE", 3, ROPCIE_WIRE_REQ, spoil_solicited },
	{ "solicited ACK", 8, ROPCIE_WIRE_RSP, spoil_solicited },
	{ "fragment larger than a slot", 0, ROPCIE_WIRE_REQ, spoil_len_slot },
	{ "fragment of 4 GiB", 3, ROPCIE_WIRE_REQ, spoil_len_huge },
	{ "fragment past its message", 0, ROPCIE_WIRE_REQ, spoil_len_msg },
	{ "offset past the message", 2, ROPCIE_WIRE_REQ, spoil_offset_past },
	{ "offset + len wraps", 4, ROPCIE_WIRE_REQ, spoil_offset_wrap },
	{ "message over 2 GiB", 3, ROPCIE_WIRE_REQ, spoil_msg_huge },
	{ "message of 2^64 - 1", 5, ROPCIE_WIRE_REQ, spoil_msg_u64 },
	{ "offset 0 without FIRST", 3, ROPCIE_WIRE_REQ, spoil_no_first },
	{ "FIRST at a later offset", 4, ROPCIE_WIRE_REQ, spoil_late_first },
	{ "end without LAST", 0, ROPCIE_WIRE_REQ, spoil_no_last },
	{ "LAST before the end", 3, ROPCIE_WIRE_REQ, spoil_early_last },
	{ "empty fragment of a message", 3, ROPCIE_WIRE_REQ, spoil_empty_frag },
	{ "READ with a payload", 5, ROPCIE_WIRE_REQ, spoil_read_payload },
	{ "READ at an offset", 5, ROPCIE_WIRE_REQ, spoil_read_offset },
	{ "READ without LAST", 5, ROPCIE_WIRE_REQ, spoil_no_last },
	{ "ACK with a payload", 8, ROPCIE_WIRE_RSP, spoil_some_len },
	{ "RNR with a message", 11, ROPCIE_WIRE_RSP, spoil_some_msg },
	{ "RECV_POSTED with flags", 6, ROPCIE_WIRE_REQ, spoil_some_flags },
	{ "CM to a QP", 7, ROPCIE_WIRE_REQ, spoil_cm_qpn },
	{ "CM in fragments", 7, ROPCIE_WIRE_REQ, spoil_cm_split },
	{ "CLOSE in the request ring", 12, ROPCIE_WIRE_REQ, spoil_none },
	{ "CLOSE of no connection here", 12, ROPCIE_WIRE_RSP, spoil_no_dst },
	{ "CLOSE of no connection there", 12, ROPCIE_WIRE_RSP, spoil_no_src },
	{ "CLOSE with a message number", 12, ROPCIE_WIRE_RSP, spoil_msn },
	{ "CLOSE with a payload", 12, ROPCIE_WIRE_RSP, spoil_some_len },
	{ "CLOSE with flags", 12, ROPCIE_WIRE_RSP, spoil_some_flags },
	{ "STREAM in the response ring", 13, ROPCIE_WIRE_RSP, spoil_none },
	{ "STREAM to a QP", 13, ROPCIE_WIRE_REQ, spoil_cm_qpn },
	{ "STREAM from a QP", 13, ROPCIE_WIRE_REQ, spoil_src2 },
	{ "STREAM fragment without its stamp", 13, ROPCIE_WIRE_REQ,
	  spoil_stamp_short },
	{ "STREAM with a message number", 13, ROPCIE_WIRE_REQ, spoil_msn },
	{ "STREAM with an rkey", 13, ROPCIE_WIRE_REQ, spoil_rkey },
	{ "STREAM with an inv_rkey", 13, ROPCIE_WIRE_REQ, spoil_inv_rkey },
	{ "STREAM with an address", 13, ROPCIE_WIRE_REQ, spoil_raddr },
};

static void ropcie_wire_test_hostile(struct kunit *test)
{
	struct ropcie_wire_msg m, zero = {};
	struct ropcie_wire_desc d;
	struct ropcie_wire_geom g;
	int i, ret;

	geom_8m(test, &g);
	for (i = 0; i < ARRAY_SIZE(hostile); i++) {
		const struct hostile_case *c = &hostile[i];

		ropcie_wire_desc_encode(&d, &valid_msgs[c->base]);
		/* The base itself is valid in its own ring. */
		ret = ropcie_wire_desc_decode(&d, ring_of(&valid_msgs[c->base]),
					      &g, &m);
		KUNIT_ASSERT_EQ_MSG(test, ret, 0, "%s: base", c->what);
		c->spoil(&d);
		memset(&m, 0xa5, sizeof(m));
		ret = ropcie_wire_desc_decode(&d, c->ring, &g, &m);
		KUNIT_EXPECT_EQ_MSG(test, ret, -EINVAL, "%s", c->what);
		/* Nothing of a refused descriptor is left to use. */
		KUNIT_EXPECT_EQ_MSG(test, memcmp(&m, &zero, sizeof(m)), 0,
				    "%s: output not cleared", c->what);
	}
}

static bool answer(const struct ropcie_wire_msg *m)
{
	return m->type == ROPCIE_WIRE_ACK || m->type == ROPCIE_WIRE_RNR;
}

static bool credited(const struct ropcie_wire_msg *m)
{
	return m->flags & ROPCIE_WIRE_CREDIT;
}

/*
 * Every byte of every valid descriptor set to each of a few values:
 * decode may accept the result (it may still be a valid message), but
 * what it accepts must lie inside its slot and its message, in the ring
 * it came from.
 */
static void ropcie_wire_test_byte_sweep(struct kunit *test)
{
	static const u8 values[] = {
		0x00, 0x01, 0x02, 0x04, 0x08, 0x7f, 0x80, 0xff
	};
	unsigned int accepted = 0, refused = 0;
	struct ropcie_wire_desc d;
	struct ropcie_wire_msg m;
	struct ropcie_wire_geom g;
	int i, b, v, r;

	geom_8m(test, &g);
	for (i = 0; i < ARRAY_SIZE(valid_msgs); i++) {
		for (b = 0; b < sizeof(d); b++) {
			for (v = 0; v < ARRAY_SIZE(values); v++) {
				for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
					ropcie_wire_desc_encode(&d, &valid_msgs[i]);
					((u8 *)&d)[b] = values[v];
					if (ropcie_wire_desc_decode(&d, r, &g, &m)) {
						refused++;
						continue;
					}
					accepted++;
					KUNIT_EXPECT_LE(test, m.len, g.slot_size);
					KUNIT_EXPECT_LE(test, m.msg_len,
							ROPCIE_WIRE_MAX_MSG);
					KUNIT_EXPECT_LE(test, m.offset, m.msg_len);
					KUNIT_EXPECT_LE(test, (u64)m.len,
							m.msg_len - m.offset);
					KUNIT_EXPECT_EQ(test, (int)ring_of(&m), r);
					KUNIT_EXPECT_LE(test, m.dst_qpn,
							ROPCIE_WIRE_MAX_QPN);
					KUNIT_EXPECT_LE(test, m.status,
							ROPCIE_WIRE_STATUS_MAX);
					/* Only an answer carries a credit. */
					if (m.credit || (m.flags & ROPCIE_WIRE_CREDIT))
						KUNIT_EXPECT_TRUE(test, answer(&m));
					if (m.credit)
						KUNIT_EXPECT_TRUE(test, credited(&m));
				}
			}
		}
	}
	kunit_info(test, "%u corrupted descriptors accepted, %u refused\n",
		   accepted, refused);
	KUNIT_EXPECT_GT(test, refused, 0U);
	KUNIT_EXPECT_GT(test, accepted, 0U);
}

/* Valid CM messages, one per operation (and both address families). */
static const struct ropcie_wire_cm_msg valid_cms[] = {
	{ .op = ROPCIE_WIRE_CM_REQ, .family = ROPCIE_WIRE_INET, .creq = 7,
	  .conn = 3, .ird = 128, .ord = 1, .src_port = 40000,
	  .dst_port = 9999, .src_addr = { 10, 77, 0, 2 },
	  .dst_addr = { 10, 77, 0, 1 }, .pdata_len = 56,
	  .pdata = { 1, 2, 3 } },
	{ .op = ROPCIE_WIRE_CM_REQ, .family = ROPCIE_WIRE_INET6, .creq = 1,
	  .conn = ROPCIE_WIRE_MAX_QPN, .src_port = 1, .dst_port = 65535,
	  .src_addr = { 0xfd, [15] = 2 }, .dst_addr = { 0xfd, [15] = 1 },
	  .pdata_len = ROPCIE_WIRE_PDATA_MAX, .pdata = { [254] = 0xff } },
	{ .op = ROPCIE_WIRE_CM_ACCEPT, .creq = 7, .conn = 9, .peer_conn = 3,
	  .pdata_len = 1, .pdata = { 0x42 } },
	{ .op = ROPCIE_WIRE_CM_REJECT, .creq = 7, .peer_conn = 3,
	  .pdata_len = 2, .pdata = { 'n', 'o' } },
};

static void ropcie_wire_test_cm_round_trip(struct kunit *test)
{
	struct ropcie_wire_cm_msg m;
	struct ropcie_wire_cm w;
	int i;

	for (i = 0; i < ARRAY_SIZE(valid_cms); i++) {
		ropcie_wire_cm_encode(&w, &valid_cms[i]);
		KUNIT_EXPECT_EQ_MSG(test, ropcie_wire_cm_decode(&w, sizeof(w), &m),
				    0, "valid CM %d", i);
		KUNIT_EXPECT_EQ_MSG(test, memcmp(&m, &valid_cms[i], sizeof(m)),
				    0, "valid CM %d", i);
	}
	/* The payload length its descriptor gives must be the struct's. */
	ropcie_wire_cm_encode(&w, &valid_cms[0]);
	KUNIT_EXPECT_EQ(test, ropcie_wire_cm_decode(&w, sizeof(w) - 1, &m),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_wire_cm_decode(&w, 0, &m), -EINVAL);
}

struct hostile_cm {
	const char *what;
	int base;			/* index into valid_cms */
	void (*spoil)(struct ropcie_wire_cm *w);
};

#define SPOIL_CM(name, stmt) \
	static void spoil_cm_##name(struct ropcie_wire_cm *w) { stmt; }

SPOIL_CM(op0, w->op = 0)
SPOIL_CM(op4, w->op = ROPCIE_WIRE_CM_REJECT + 1)
SPOIL_CM(rsvd0, w->reserved0 = 1)
SPOIL_CM(rsvd1, w->reserved1 = cpu_to_le32(1))
SPOIL_CM(conn0, w->conn = 0)
SPOIL_CM(conn_big, w->conn = cpu_to_le32(ROPCIE_WIRE_MAX_QPN + 1))
SPOIL_CM(peer_conn, w->peer_conn = cpu_to_le32(5))
SPOIL_CM(peer_conn0, w->peer_conn = 0)
SPOIL_CM(peer_big, w->peer_conn = cpu_to_le32(U32_MAX))
SPOIL_CM(conn_set, w->conn = cpu_to_le32(5))
SPOIL_CM(creq0, w->creq = 0)
SPOIL_CM(family0, w->family = 0)
SPOIL_CM(family5, w->family = 5)
SPOIL_CM(family_set, w->family = ROPCIE_WIRE_INET)
SPOIL_CM(v4_tail, w->dst_addr[4] = 1)
SPOIL_CM(v4_src_tail, w->src_addr[15] = 1)
SPOIL_CM(addr_set, w->src_addr[0] = 10)
SPOIL_CM(port_set, w->dst_port = cpu_to_be16(1))
SPOIL_CM(ird_big, w->ird = cpu_to_le32(ROPCIE_WIRE_MAX_ORD + 1))
SPOIL_CM(ord_huge, w->ord = cpu_to_le32(U32_MAX))
SPOIL_CM(ird_set, w->ird = cpu_to_le32(1))
SPOIL_CM(pdata_tail, w->pdata[w->pdata_len] = 1)
SPOIL_CM(pdata_last, w->pdata[ROPCIE_WIRE_PDATA_MAX] = 1)

static const struct hostile_cm hostile_cms[] = {
	{ "operation 0", 0, spoil_cm_op0 },
	{ "operation past REJECT", 3, spoil_cm_op4 },
	{ "reserved0 set", 2, spoil_cm_rsvd0 },
	{ "reserved1 set", 0, spoil_cm_rsvd1 },
	{ "REQ without the requester's id", 0, spoil_cm_conn0 },
	{ "ACCEPT without the acceptor's id", 2, spoil_cm_conn0 },
	{ "id beyond 24 bits", 2, spoil_cm_conn_big },
	{ "REQ naming the receiver's QP", 0, spoil_cm_peer_conn },
	{ "ACCEPT without the requester's id", 2, spoil_cm_peer_conn0 },
	{ "REJECT without the requester's id", 3, spoil_cm_peer_conn0 },
	{ "peer id of 2^32 - 1", 2, spoil_cm_peer_big },
	{ "REJECT naming a QP of its own", 3, spoil_cm_conn_set },
	{ "REQ without a request id", 0, spoil_cm_creq0 },
	{ "ACCEPT without a request id", 2, spoil_cm_creq0 },
	{ "REJECT without a request id", 3, spoil_cm_creq0 },
	{ "REQ without a family", 0, spoil_cm_family0 },
	{ "REQ of family 5", 1, spoil_cm_family5 },
	{ "ACCEPT with a family", 2, spoil_cm_family_set },
	{ "IPv4 address with bytes after its four", 0, spoil_cm_v4_tail },
	{ "IPv4 source with a last byte", 0, spoil_cm_v4_src_tail },
	{ "REJECT with an address", 3, spoil_cm_addr_set },
	{ "REJECT with a port", 3, spoil_cm_port_set },
	{ "REQ with ird beyond the maximum", 0, spoil_cm_ird_big },
	{ "REQ with ord 2^32 - 1", 1, spoil_cm_ord_huge },
	{ "ACCEPT with an ird", 2, spoil_cm_ird_set },
	{ "private data past its length", 2, spoil_cm_pdata_tail },
	{ "the 256th byte of private data set", 3,
	  spoil_cm_pdata_last },
};

static void ropcie_wire_test_cm_hostile(struct kunit *test)
{
	struct ropcie_wire_cm_msg m, zero = {};
	struct ropcie_wire_cm w;
	int i;

	for (i = 0; i < ARRAY_SIZE(hostile_cms); i++) {
		const struct hostile_cm *c = &hostile_cms[i];

		ropcie_wire_cm_encode(&w, &valid_cms[c->base]);
		KUNIT_ASSERT_EQ_MSG(test, ropcie_wire_cm_decode(&w, sizeof(w), &m),
				    0, "%s: base", c->what);
		c->spoil(&w);
		memset(&m, 0xa5, sizeof(m));
		KUNIT_EXPECT_EQ_MSG(test, ropcie_wire_cm_decode(&w, sizeof(w), &m),
				    -EINVAL, "%s", c->what);
		KUNIT_EXPECT_EQ_MSG(test, memcmp(&m, &zero, sizeof(m)), 0,
				    "%s: output not cleared", c->what);
	}
	/* All 255 bytes of private data are carried. */
	ropcie_wire_cm_encode(&w, &valid_cms[1]);
	KUNIT_EXPECT_EQ(test, ropcie_wire_cm_decode(&w, sizeof(w), &m), 0);
	KUNIT_EXPECT_EQ(test, m.pdata_len, ROPCIE_WIRE_PDATA_MAX);
	KUNIT_EXPECT_EQ(test, m.pdata[254], 0xff);
}

/* Every byte of every valid CM message set to a few values. */
static void ropcie_wire_test_cm_byte_sweep(struct kunit *test)
{
	static const u8 values[] = { 0x00, 0x01, 0x06, 0x80, 0xff };
	unsigned int accepted = 0, refused = 0;
	struct ropcie_wire_cm_msg m;
	struct ropcie_wire_cm w;
	int i, b, v;

	for (i = 0; i < ARRAY_SIZE(valid_cms); i++) {
		for (b = 0; b < sizeof(w); b++) {
			for (v = 0; v < ARRAY_SIZE(values); v++) {
				ropcie_wire_cm_encode(&w, &valid_cms[i]);
				((u8 *)&w)[b] = values[v];
				if (ropcie_wire_cm_decode(&w, sizeof(w), &m)) {
					refused++;
					continue;
				}
				accepted++;
				KUNIT_EXPECT_GE(test, (int)m.op, ROPCIE_WIRE_CM_REQ);
				KUNIT_EXPECT_LE(test, (int)m.op, ROPCIE_WIRE_CM_REJECT);
				KUNIT_EXPECT_LE(test, m.conn, ROPCIE_WIRE_MAX_QPN);
				KUNIT_EXPECT_LE(test, m.peer_conn,
						ROPCIE_WIRE_MAX_QPN);
				KUNIT_EXPECT_LE(test, m.pdata_len,
						ROPCIE_WIRE_PDATA_MAX);
				KUNIT_EXPECT_LE(test, m.ird, ROPCIE_WIRE_MAX_ORD);
				KUNIT_EXPECT_LE(test, m.ord, ROPCIE_WIRE_MAX_ORD);
				if (m.op == ROPCIE_WIRE_CM_REQ)
					KUNIT_EXPECT_TRUE(test,
							  m.family == ROPCIE_WIRE_INET ||
							  m.family == ROPCIE_WIRE_INET6);
				else
					KUNIT_EXPECT_EQ(test, m.family, 0);
			}
		}
	}
	kunit_info(test, "%u corrupted CM messages accepted, %u refused\n",
		   accepted, refused);
	KUNIT_EXPECT_GT(test, refused, 0U);
	KUNIT_EXPECT_GT(test, accepted, 0U);
}

static struct kunit_case ropcie_wire_cases[] = {
	KUNIT_CASE(ropcie_wire_test_geometry),
	KUNIT_CASE(ropcie_wire_test_header),
	KUNIT_CASE(ropcie_wire_test_ring_count),
	KUNIT_CASE(ropcie_wire_test_round_trip),
	KUNIT_CASE(ropcie_wire_test_hostile),
	KUNIT_CASE(ropcie_wire_test_byte_sweep),
	KUNIT_CASE(ropcie_wire_test_cm_round_trip),
	KUNIT_CASE(ropcie_wire_test_cm_hostile),
	KUNIT_CASE(ropcie_wire_test_cm_byte_sweep),
	{}
};

static struct kunit_suite ropcie_wire_suite = {
	.name = "ropcie_wire",
	.test_cases = ropcie_wire_cases,
};

kunit_test_suite(ropcie_wire_suite);

MODULE_DESCRIPTION("KUnit tests of the ropcie link protocol");
MODULE_LICENSE("Dual BSD/GPL");
