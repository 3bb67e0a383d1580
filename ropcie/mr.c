// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie memory regions: DMA MRs, fast-registration MRs and the key
 * lookup the transport uses for every local and remote access.
 *
 * The device has no DMA master of its own (dma_device is NULL), so the
 * DMA addresses ULPs see are kernel virtual addresses, and a fast-reg
 * page list holds the virtual addresses of its pages.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/math64.h>
#include <linux/slab.h>

#include "ropcie.h"

static struct ropcie_mr *ropcie_mr_new(struct ib_pd *pd, int access,
				       bool dma)
{
	struct ropcie_dev *dev = to_rdev(pd->device);
	struct ropcie_mr *mr;
	u32 id;
	int ret;

	if (atomic_inc_return(&dev->num_mr) > ROPCIE_MAX_MR) {
		atomic_dec(&dev->num_mr);
		return ERR_PTR(-ENOMEM);
	}
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr) {
		atomic_dec(&dev->num_mr);
		return ERR_PTR(-ENOMEM);
	}
	refcount_set(&mr->ref, 1);
	init_completion(&mr->released);
	mr->access = access;
	mr->dma = dma;
	mr->valid = dma;
	ret = xa_alloc_cyclic(&dev->mr_xa, &id, mr, XA_LIMIT(1, 0xffffff),
			      &dev->mr_next, GFP_KERNEL);
	if (ret < 0) {
		kfree(mr);
		atomic_dec(&dev->num_mr);
		return ERR_PTR(ret);
	}
	/* The low byte is the consumer's key byte (ib_update_fast_reg_key). */
	mr->key = id << 8;
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;
	return mr;
}

/* Unpublish @mr, wait for the transfers that hold it, and free it. */
static void ropcie_mr_free(struct ropcie_dev *dev, struct ropcie_mr *mr)
{
	xa_erase(&dev->mr_xa, mr->key >> 8);
	ropcie_mr_put(mr);
	wait_for_completion(&mr->released);
	kfree(mr->pages);
	kfree(mr);
	atomic_dec(&dev->num_mr);
}

struct ib_mr *ropcie_get_dma_mr(struct ib_pd *pd, int access)
{
	struct ropcie_mr *mr = ropcie_mr_new(pd, access, true);

	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->ibmr.length = U64_MAX;
	return &mr->ibmr;
}

struct ib_mr *ropcie_reg_user_mr(struct ib_pd *pd, u64 start, u64 len,
				 u64 virt, int access, struct ib_udata *udata)
{
	return ERR_PTR(-EOPNOTSUPP);	/* no user-space provider */
}

struct ib_mr *ropcie_alloc_mr(struct ib_pd *pd, enum ib_mr_type type,
			      u32 max_num_sg)
{
	struct ropcie_mr *mr;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > ROPCIE_MAX_FR_PAGES)
		return ERR_PTR(-EINVAL);
	mr = ropcie_mr_new(pd, 0, false);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->pages = kcalloc(max_num_sg, sizeof(u64), GFP_KERNEL);
	if (!mr->pages) {
		/* Not ropcie_dereg_mr(): ib_core has not set ibmr.device. */
		ropcie_mr_free(to_rdev(pd->device), mr);
		return ERR_PTR(-ENOMEM);
	}
	mr->max_pages = max_num_sg;
	return &mr->ibmr;
}

static int ropcie_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct ropcie_mr *mr = to_rmr(ibmr);

	if (mr->npages >= mr->max_pages)
		return -ENOMEM;
	mr->pages[mr->npages++] = addr;
	return 0;
}

int ropcie_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int nents,
		     unsigned int *sg_offset)
{
	struct ropcie_mr *mr = to_rmr(ibmr);
	int n;

	mr->npages = 0;
	n = ib_sg_to_pages(ibmr, sg, nents, sg_offset, ropcie_set_page);
	/* iova may be moved later (zero-based); keep the first offset. */
	mr->fbo = ibmr->iova & (ibmr->page_size - 1);
	return n;
}

int ropcie_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	ropcie_mr_free(to_rdev(ibmr->device), to_rmr(ibmr));
	return 0;
}

/**
 * ropcie_mr_get() - look a key up and hold the MR
 * @dev: the device the key belongs to
 * @key: full lkey or rkey (index and key byte)
 *
 * Return: the MR, held (ropcie_mr_put()), or NULL for an unknown key.
 */
struct ropcie_mr *ropcie_mr_get(struct ropcie_dev *dev, u32 key)
{
	struct ropcie_mr *mr;

	xa_lock(&dev->mr_xa);
	mr = xa_load(&dev->mr_xa, key >> 8);
	if (mr && (READ_ONCE(mr->key) != key || !refcount_inc_not_zero(&mr->ref)))
		mr = NULL;
	xa_unlock(&dev->mr_xa);
	return mr;
}

void ropcie_mr_put(struct ropcie_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		complete(&mr->released);
}

/* Is [addr, addr + len) registered and valid? */
bool ropcie_mr_covers(const struct ropcie_mr *mr, u64 addr, u64 len)
{
	u64 start = mr->ibmr.iova, size = mr->ibmr.length;

	if (!READ_ONCE(mr->valid))
		return false;
	if (mr->dma)
		return addr + len >= addr;	/* no wrap-around */
	return addr >= start && len <= size && addr - start <= size - len;
}

/**
 * ropcie_mr_va() - kernel address of a registered address
 * @mr: the MR, covering @addr (ropcie_mr_covers())
 * @addr: address in the MR's iova space
 * @contig: set to the bytes contiguous from there
 *
 * Return: the kernel virtual address.
 */
void *ropcie_mr_va(const struct ropcie_mr *mr, u64 addr, u64 *contig)
{
	u64 ps = mr->ibmr.page_size, off, idx;
	u32 in_page;

	if (mr->dma) {
		*contig = U64_MAX;
		return (void *)(uintptr_t)addr;
	}
	off = addr - mr->ibmr.iova + mr->fbo;
	idx = div64_u64_rem(off, ps, &off);
	in_page = off;
	if (idx >= mr->npages) {	/* cannot happen when covered */
		*contig = 0;
		return NULL;
	}
	*contig = ps - in_page;
	return (void *)(uintptr_t)(mr->pages[idx] + in_page);
}

/**
 * ropcie_mr_invalidate() - invalidate a fast-reg MR by key
 * @dev: device of the MR
 * @pd: the PD the key must belong to
 * @key: the key
 *
 * Return: 0, -ENOENT for an unknown key, -EPERM for a DMA MR or another PD.
 */
int ropcie_mr_invalidate(struct ropcie_dev *dev, struct ib_pd *pd, u32 key)
{
	struct ropcie_mr *mr = ropcie_mr_get(dev, key);
	int ret = 0;

	if (!mr)
		return -ENOENT;
	if (mr->dma || mr->ibmr.pd != pd)
		ret = -EPERM;
	else
		WRITE_ONCE(mr->valid, false);
	ropcie_mr_put(mr);
	return ret;
}
