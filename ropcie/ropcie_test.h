/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the two halves of ropcie_test share: the remote access cases (what
 * the target registers, what the initiator forges, what each must see)
 * and the small verbs helpers. ropcie_test.c runs both ends of a case on
 * one host; ropcie_test_remote.c runs one end per host, over the link.
 */
#ifndef ROPCIE_TEST_H
#define ROPCIE_TEST_H

#include <linux/scatterlist.h>
#include <linux/string.h>
#include <linux/types.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define RT_TIMEOUT	(5 * HZ)
#define RT_GUARD	0x5a
#define RT_DATA		0xc3
/* Bytes an access case moves (an out-of-bounds one: 8 in, 8 out). */
#define RT_CASE_LEN	64

/*
 * RT_BEHIND_FAIL: three WRITEs in one post, the middle one with a bad
 * rkey. The first lands; the third, which a link may have sent before
 * the second's verdict came back, must not.
 *
 * RT_RESET_POSTED: four WRITEs posted one by one, then the QP moved to
 * ERR and at once to RESET, while a link's verdicts are still on their
 * way: nothing completes from the emptied queue when they come.
 */
enum rt_kind { RT_OK, RT_BAD_RKEY, RT_BAD_KEYBYTE, RT_WRONG_PD, RT_OOB_WRITE,
	       RT_OOB_READ, RT_NO_WRITE, RT_NO_READ, RT_BEHIND_FAIL,
	       RT_RESET_POSTED, RT_NKINDS };

extern const char * const rt_names[RT_NKINDS];

/**
 * struct rt_target_adv - what the target of an access case lends
 * @iova: the registered page's address for the initiator
 * @rkey: its rkey
 * @other_rkey: a valid rkey of another PD of the target's device (the
 *	unsafe global rkey of a PD made for RT_WRONG_PD), 0 otherwise
 * @other_addr: the page's kernel address, which @other_rkey would reach
 */
struct rt_target_adv {
	u64 iova;
	u32 rkey;
	u32 other_rkey;
	u64 other_addr;
};

/**
 * struct rt_access - what the initiator of an access case posts
 * @op: IB_WR_RDMA_WRITE or IB_WR_RDMA_READ
 * @len: bytes
 * @raddr: remote address
 * @rkey: remote key
 * @want: the completion status the verbs prescribe
 */
struct rt_access {
	enum ib_wr_opcode op;
	u32 len;
	u64 raddr;
	u32 rkey;
	enum ib_wc_status want;
};

/* The target's page is registered with these rights for @kind. */
static inline int rt_case_rights(enum rt_kind kind)
{
	int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		     IB_ACCESS_REMOTE_READ;

	if (kind == RT_NO_WRITE)
		access &= ~IB_ACCESS_REMOTE_WRITE;
	if (kind == RT_NO_READ)
		access &= ~IB_ACCESS_REMOTE_READ;
	return access;
}

/* What the initiator posts for @kind, from what the target lent. */
static inline struct rt_access rt_case_access(enum rt_kind kind,
					      const struct rt_target_adv *adv)
{
	struct rt_access a = {
		.op = IB_WR_RDMA_WRITE,
		.len = RT_CASE_LEN,
		.raddr = adv->iova,
		.rkey = adv->rkey,
		.want = IB_WC_REM_ACCESS_ERR,
	};

	switch (kind) {
	case RT_OK:
	case RT_RESET_POSTED:
		a.want = IB_WC_SUCCESS;
		break;
	case RT_BAD_RKEY:
		a.rkey += 0x100;	/* another MR index */
		break;
	case RT_BAD_KEYBYTE:
		a.rkey ^= 0x01;		/* right MR, stale key byte */
		a.op = IB_WR_RDMA_READ;
		break;
	case RT_WRONG_PD:
		a.rkey = adv->other_rkey;
		a.raddr = adv->other_addr;
		break;
	case RT_OOB_WRITE:
		a.raddr += PAGE_SIZE - 8;	/* 8 bytes in, 8 beyond */
		a.len = 16;
		break;
	case RT_OOB_READ:
		a.raddr -= 8;		/* 8 bytes before the region */
		a.len = 16;
		a.op = IB_WR_RDMA_READ;
		break;
	case RT_NO_READ:
		a.op = IB_WR_RDMA_READ;
		break;
	case RT_BEHIND_FAIL:
		/* The middle WRITE's; rt_case_initiate() posts the chain. */
		a.rkey += 0x100;
		break;
	default:
		break;
	}
	return a;
}

static inline bool rt_all(const u8 *buf, size_t len, u8 v)
{
	return !memchr_inv(buf, v, len);
}

/*
 * The target's two pages (RT_GUARD, only the first registered) after
 * @kind: the valid case wrote RT_CASE_LEN bytes of RT_DATA at the start,
 * a refused access left every byte alone. The WRITEs of RT_RESET_POSTED
 * land or not (the QP's end may reach the target first), nothing else.
 */
static inline bool rt_case_target_intact(enum rt_kind kind, const u8 *sbuf)
{
	bool written = rt_all(sbuf, RT_CASE_LEN, RT_DATA) &&
		       rt_all(sbuf + RT_CASE_LEN, 2 * PAGE_SIZE - RT_CASE_LEN,
			      RT_GUARD);
	bool untouched = rt_all(sbuf, 2 * PAGE_SIZE, RT_GUARD);

	if (kind == RT_OK || kind == RT_BEHIND_FAIL)
		return written;
	if (kind == RT_RESET_POSTED)
		return written || untouched;
	return untouched;
}

void rt_result(const char *name, int err, const char *why);
int rt_make_qp(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *cq);
int rt_poll(struct ib_cq *cq, struct ib_wc *wc);
struct ib_mr *rt_reg_on(struct rdma_cm_id *id, struct ib_pd *pd,
			struct ib_cq *cq, void *buf, u32 len, int access,
			struct scatterlist *sg);
int rt_rdma_on(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *cq,
	       enum ib_wr_opcode op, void *local, u32 len, u64 raddr, u32 rkey,
	       enum ib_wc_status *status);

void rt_case_initiate(struct rdma_cm_id *id, struct ib_pd *pd,
		      struct ib_cq *cq, enum rt_kind kind,
		      const struct rt_access *a, u8 *cbuf, const u8 *sbuf);

/* ropcie_test_remote.c: one end of the access cases per host. */
int rt_remote_target_start(const char *addr, int port);
void rt_remote_target_stop(void);
void rt_remote_initiator(const char *addr, int port);

/* ropcie_test_memcpy.c: role=memcpy. */
void rt_memcpy_bench(void);

/* ropcie_test_floor.c: role=floor. */
void rt_floor_bench(void);

/* ropcie_test_hold.c: role=hold. */
int rt_hold_start(const char *addr, int port);
void rt_hold_stop(void);

#endif /* ROPCIE_TEST_H */
