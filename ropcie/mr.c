// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie memory regions: DMA MRs, fast-registration MRs and the key
 * lookup the transport uses for every local and remote access.
 *
 * The device has no DMA master of its own (dma_device is NULL), so the
 * DMA addresses ULPs see are kernel virtual addresses, and a fast-reg
 * page list holds the virtual addresses of its pages. A user's MR pins
 * its pages and keeps the same kind of list: its bytes are copied through
 * the kernel's mapping, by whichever thread moves them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>

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
	ret = xa_alloc_cyclic_irq(&dev->mr_xa, &id, mr, XA_LIMIT(1, 0xffffff),
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
	xa_erase_irq(&dev->mr_xa, mr->key >> 8);
	ropcie_mr_put(mr);
	wait_for_completion(&mr->released);
	if (mr->umem)
		ib_umem_release(mr->umem);
	kvfree(mr->pages);
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
				 u64 virt, int access,
				 KRPING_COMPAT_REG_USER_MR_DMAH
				 struct ib_udata *udata)
{
	struct ib_block_iter biter;
	struct ropcie_mr *mr;
	struct ib_umem *umem;
	size_t n;

	if (access & IB_ACCESS_ON_DEMAND)
		return ERR_PTR(-EOPNOTSUPP);
	if (ropcie_fault_verb(to_rdev(pd->device), ROPCIE_FAULT_REG_MR))
		return ERR_PTR(-ENOMEM);
	/* ib_umem_get(): pins within RLIMIT_MEMLOCK or with CAP_IPC_LOCK. */
	umem = krping_compat_umem_get(pd->device, start, len, access);
	if (IS_ERR(umem))
		return ERR_CAST(umem);
	mr = ropcie_mr_new(pd, access, false);
	if (IS_ERR(mr)) {
		ib_umem_release(umem);
		return ERR_CAST(mr);
	}
	mr->umem = umem;
	n = ib_umem_num_dma_blocks(umem, PAGE_SIZE);
	mr->pages = kvcalloc(n, sizeof(u64), GFP_KERNEL);
	if (!mr->pages) {
		ropcie_mr_free(to_rdev(pd->device), mr);
		return ERR_PTR(-ENOMEM);
	}
	rdma_umem_for_each_dma_block(umem, &biter, PAGE_SIZE)
		mr->pages[mr->npages++] = rdma_block_iter_dma_address(&biter);
	mr->max_pages = mr->npages;
	mr->ibmr.page_size = PAGE_SIZE;
	mr->ibmr.iova = virt;
	mr->ibmr.length = len;
	/* ib_core checked that @start and @virt share their page offset. */
	mr->fbo = ib_umem_offset(umem);
	/* Lookups may use it from here: ropcie_mr_access() acquires. */
	smp_store_release(&mr->valid, true);
	return &mr->ibmr;
}

struct ib_mr *ropcie_alloc_mr(struct ib_pd *pd, enum ib_mr_type type,
			      u32 max_num_sg)
{
	struct ropcie_mr *mr;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > ROPCIE_MAX_FR_PAGES)
		return ERR_PTR(-EINVAL);
	if (ropcie_fault_verb(to_rdev(pd->device), ROPCIE_FAULT_ALLOC_MR))
		return ERR_PTR(-ENOMEM);
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

/*
 * The MR at the index of @key, held, whatever its key byte; or NULL.
 * Context: any (a link's doorbell tasklet serves WRITEs).
 */
static struct ropcie_mr *ropcie_mr_get_index(struct ropcie_dev *dev, u32 key)
{
	struct ropcie_mr *mr;
	unsigned long flags;

	xa_lock_irqsave(&dev->mr_xa, flags);
	mr = xa_load(&dev->mr_xa, key >> 8);
	if (mr && !refcount_inc_not_zero(&mr->ref))
		mr = NULL;
	xa_unlock_irqrestore(&dev->mr_xa, flags);
	return mr;
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
	struct ropcie_mr *mr = ropcie_mr_get_index(dev, key);

	if (mr && READ_ONCE(mr->key) != key) {
		ropcie_mr_put(mr);
		mr = NULL;
	}
	return mr;
}

void ropcie_mr_put(struct ropcie_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		complete(&mr->released);
}

/* Is [addr, addr + len) registered? @mr is valid and entered. */
static bool ropcie_mr_covers(const struct ropcie_mr *mr, u64 addr, u64 len)
{
	u64 start = mr->ibmr.iova, size = mr->ibmr.length;

	if (mr->dma)
		return addr + len >= addr;	/* no wrap-around */
	return addr >= start && len <= size && addr - start <= size - len;
}

/**
 * ropcie_mr_access() - look a key up for a transfer and enter the MR
 * @dev: the device the key belongs to
 * @key: full lkey or rkey
 * @pd: the PD the MR must belong to
 * @addr: start of the range in the MR's address space
 * @len: length of the range, which the MR must cover
 * @access: the IB_ACCESS_* flags the MR must have (0: a local source)
 *
 * The transfer is counted in @mr->active before the MR's validity is
 * read, and an invalidation clears the validity before it waits for that
 * count to drop to zero: one of the two always sees the other.
 *
 * Context: any; does not sleep.
 * Return: the MR, held and entered (ropcie_mr_leave()), or NULL when
 * the key, PD, validity, access or range does not allow the transfer.
 */
struct ropcie_mr *ropcie_mr_access(struct ropcie_dev *dev, u32 key,
				   struct ib_pd *pd, u64 addr, u64 len,
				   int access)
{
	struct ropcie_mr *mr = ropcie_mr_get(dev, key);

	if (!mr)
		return NULL;
	atomic_inc(&mr->active);
	/* The count, then the validity: pairs with ropcie_mr_invalidate(). */
	smp_mb__after_atomic();
	/* Pairs with smp_store_release() in ropcie_mr_register(). */
	if (!smp_load_acquire(&mr->valid) || mr->ibmr.pd != pd ||
	    (READ_ONCE(mr->access) & access) != access ||
	    !ropcie_mr_covers(mr, addr, len)) {
		ropcie_mr_leave(mr);
		return NULL;
	}
	return mr;
}

/* End a transfer begun with ropcie_mr_access(); drop the hold. */
void ropcie_mr_leave(struct ropcie_mr *mr)
{
	if (atomic_dec_and_test(&mr->active))
		wake_up_var(&mr->active);
	ropcie_mr_put(mr);
}

/**
 * ropcie_mr_va() - kernel address of a registered address
 * @mr: the MR, entered for @addr (ropcie_mr_access())
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
 * ropcie_mr_register() - run a REG_MR work request
 * @dev: device of the QP
 * @pd: the QP's PD
 * @mr: the MR the work request named at post time: compared with what
 *	the key's index finds now, never followed (the ULP may have
 *	deregistered it since)
 * @key: the new key; only its low byte may differ from the MR's
 * @access: the access rights to grant
 *
 * The page list, iova and length were set by ib_map_mr_sg() before the
 * post; the release on @mr->valid publishes them with the key and access.
 *
 * Return: IB_WC_SUCCESS, or IB_WC_MW_BIND_ERR for an MR that is gone,
 * of another PD, a DMA MR, still valid, or a key of another index.
 */
enum ib_wc_status ropcie_mr_register(struct ropcie_dev *dev,
				     struct ib_pd *pd,
				     const struct ropcie_mr *mr, u32 key,
				     int access)
{
	struct ropcie_mr *cur = ropcie_mr_get_index(dev, key);
	enum ib_wc_status st = IB_WC_MW_BIND_ERR;

	if (!cur)
		return st;
	if (cur == mr && !cur->dma && !cur->umem && cur->ibmr.pd == pd &&
	    !READ_ONCE(cur->valid)) {
		WRITE_ONCE(cur->access, access);
		WRITE_ONCE(cur->key, key);
		/* Publish all of the above: ropcie_mr_access() acquires. */
		smp_store_release(&cur->valid, true);
		st = IB_WC_SUCCESS;
	}
	ropcie_mr_put(cur);
	return st;
}

/**
 * ropcie_mr_invalidate() - invalidate a fast-reg MR by key
 * @dev: device of the MR
 * @pd: the PD the key must belong to
 * @key: the key
 *
 * Waits for the transfers that entered the MR before (they passed their
 * checks and may still be copying): once this returns, none of the MR's
 * memory is read or written on behalf of the key any more. Transfers
 * never wait for anything, so the wait is as long as the longest copy.
 *
 * Context: task; sleeps. The caller must not have entered the MR.
 * Return: 0, -ENOENT for an unknown key, -EPERM for a DMA MR, a user's
 * MR (only fast-reg MRs are invalidated) or another PD.
 */
int ropcie_mr_invalidate(struct ropcie_dev *dev, struct ib_pd *pd, u32 key)
{
	struct ropcie_mr *mr = ropcie_mr_get(dev, key);
	int ret = 0;

	might_sleep();
	if (!mr)
		return -ENOENT;
	if (mr->dma || mr->umem || mr->ibmr.pd != pd) {
		ret = -EPERM;
	} else {
		WRITE_ONCE(mr->valid, false);
		smp_mb();	/* the store above, then the count: see access */
		wait_var_event(&mr->active, !atomic_read(&mr->active));
	}
	ropcie_mr_put(mr);
	return ret;
}
