// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie segments: the bytes of a work request. A list of SGEs is
 * resolved against this host's MRs into segments (key, PD, bounds and
 * rights checked, each MR held against invalidation), and bytes move
 * between two segment lists. The requester and the responder both use
 * this, whatever carries the request between them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sizes.h>
#include <linux/string.h>

#include "ropcie.h"

/**
 * ropcie_segs_put() - let go of the MRs a segment list holds
 * @s: a list filled by ropcie_segs_get()
 */
void ropcie_segs_put(struct ropcie_segs *s)
{
	u32 i;

	for (i = 0; i < s->n; i++)
		if (s->seg[i].mr)
			ropcie_mr_leave(s->seg[i].mr);
	s->n = 0;
	s->total = 0;
}

/**
 * ropcie_segs_get() - resolve SGEs of @qp into segments
 * @qp: the QP whose PD and device the SGEs belong to
 * @sge: the SGEs, as posted
 * @num: how many
 * @sink: the bytes will be written (local write access needed)
 * @s: filled on success
 *
 * Every SGE's lkey, PD and bounds are checked before the first byte
 * moves: a refused request touches no memory. The kernel's DMA lkey
 * (any kernel address) is the kernel's own: a user's QP names MRs only.
 *
 * Return: IB_WC_SUCCESS with @s filled (ropcie_segs_put() it), or the
 * error status with nothing held.
 */
enum ib_wc_status ropcie_segs_get(struct ropcie_qp *qp,
				  const struct ib_sge *sge, u32 num,
				  bool sink, struct ropcie_segs *s)
{
	struct ropcie_dev *dev = qp->dev;
	u32 i;

	s->n = 0;
	s->total = 0;
	for (i = 0; i < num; i++) {
		struct ropcie_seg *seg = &s->seg[s->n];
		struct ropcie_mr *mr = NULL;

		if (!sge[i].length)
			continue;
		if (sge[i].lkey == dev->ibdev.local_dma_lkey && qp->owner)
			goto err;
		if (sge[i].lkey != dev->ibdev.local_dma_lkey) {
			mr = ropcie_mr_access(dev, sge[i].lkey, qp->ibqp.pd,
					      sge[i].addr, sge[i].length,
					      sink ? IB_ACCESS_LOCAL_WRITE : 0);
			if (!mr)
				goto err;
		}
		seg->mr = mr;
		seg->addr = sge[i].addr;
		seg->len = sge[i].length;
		s->n++;
		s->total += sge[i].length;
	}
	if (s->total > ROPCIE_MAX_MSG) {
		ropcie_segs_put(s);
		return IB_WC_LOC_LEN_ERR;
	}
	return IB_WC_SUCCESS;
err:
	ropcie_segs_put(s);
	return IB_WC_LOC_PROT_ERR;
}

/* A cursor over a list of segments. */
struct ropcie_cursor {
	const struct ropcie_seg *seg;
	u32 n, i;
	u64 off;
};

/* Kernel address of the cursor and the bytes contiguous from it. */
static void *ropcie_cursor_va(const struct ropcie_cursor *c, u64 *contig)
{
	const struct ropcie_seg *seg = &c->seg[c->i];
	u64 left = seg->len - c->off;
	void *va;

	if (seg->mr) {
		va = ropcie_mr_va(seg->mr, seg->addr + c->off, contig);
	} else {
		va = (void *)(uintptr_t)(seg->addr + c->off);
		*contig = U64_MAX;
	}
	*contig = min(*contig, left);
	return va;
}

static void ropcie_cursor_advance(struct ropcie_cursor *c, u64 len)
{
	c->off += len;
	if (c->off == c->seg[c->i].len) {
		c->i++;
		c->off = 0;
	}
}

/*
 * The most a copy moves between two chances to reschedule: a message
 * may be 2 GiB of one contiguous DMA MR.
 */
#define ROPCIE_COPY_CHUNK	SZ_64K

/* Move a fresh cursor @off bytes in. Return: false past the end. */
static bool ropcie_cursor_skip(struct ropcie_cursor *c, u64 off)
{
	while (off && c->i < c->n) {
		u64 step = min(off, c->seg[c->i].len - c->off);

		ropcie_cursor_advance(c, step);
		off -= step;
	}
	return !off;
}

/**
 * ropcie_copy_at() - copy bytes between two segment lists, at offsets
 * @dst: the sink's segments
 * @nd: how many
 * @doff: where in the sink the bytes go
 * @src: the source's segments
 * @ns: how many
 * @soff: where in the source they come from
 * @len: bytes to copy; both lists were checked to hold them
 * @may_sleep: reschedule between chunks
 *
 * A message that crosses a link arrives in fragments: each lands at its
 * offset in the sink.
 *
 * Return: false if a range did not translate (an MR changed under us)
 * or lies outside a list: the work request fails.
 */
bool ropcie_copy_at(const struct ropcie_seg *dst, u32 nd, u64 doff,
		    const struct ropcie_seg *src, u32 ns, u64 soff, u64 len,
		    bool may_sleep)
{
	struct ropcie_cursor d = { .seg = dst, .n = nd };
	struct ropcie_cursor s = { .seg = src, .n = ns };

	if (!ropcie_cursor_skip(&d, doff) || !ropcie_cursor_skip(&s, soff))
		return false;
	while (len && d.i < d.n && s.i < s.n) {
		u64 dc, sc, chunk;
		void *dva = ropcie_cursor_va(&d, &dc);
		void *sva = ropcie_cursor_va(&s, &sc);

		chunk = min3(dc, sc, len);
		if (!dva || !sva || !chunk) {
			pr_debug("QP copy: a checked range did not translate\n");
			return false;
		}
		chunk = min_t(u64, chunk, ROPCIE_COPY_CHUNK);
		memcpy(dva, sva, chunk);
		if (may_sleep)
			cond_resched();
		ropcie_cursor_advance(&d, chunk);
		ropcie_cursor_advance(&s, chunk);
		len -= chunk;
	}
	return !len;
}

/**
 * ropcie_copy() - copy bytes between two segment lists
 * @dst: the sink's segments
 * @nd: how many
 * @src: the source's segments
 * @ns: how many
 * @len: bytes to copy; both lists were checked to hold them
 * @may_sleep: reschedule between chunks
 *
 * Return: false if a range did not translate (an MR changed under us):
 * the work request fails.
 */
bool ropcie_copy(const struct ropcie_seg *dst, u32 nd,
		 const struct ropcie_seg *src, u32 ns, u64 len,
		 bool may_sleep)
{
	return ropcie_copy_at(dst, nd, 0, src, ns, 0, len, may_sleep);
}
