/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie ring: a power-of-two circular buffer of fixed-size slots with one
 * producer and one consumer, ordered as in
 * Documentation/core-api/circular-buffers.rst:
 *
 *  - the producer writes a slot, then publishes it with a store-release of
 *    head; the consumer reads head with a load-acquire before it reads the
 *    slot;
 *  - the consumer reads a slot, then frees it with a store-release of tail;
 *    the producer reads tail with a load-acquire before it reuses the slot.
 *
 * head and tail are free-running u32 counters; the slot of counter c is
 * c & mask, so they may wrap past UINT_MAX. One slot is kept free, as with
 * CIRC_SPACE(), so a ring of size 2^n holds at most 2^n - 1 entries.
 *
 * Several producers (or consumers) must serialise among themselves, e.g.
 * under a spinlock; the ring itself only orders one producer against one
 * consumer. No ib_core dependency, so KUnit can test it on any arch.
 */
#ifndef ROPCIE_RING_H
#define ROPCIE_RING_H

#include <linux/compiler.h>
#include <linux/errno.h>
#include <linux/log2.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/types.h>
#include <asm/barrier.h>

#define ROPCIE_RING_MAX_SIZE	0x100000U	/* 2^20 slots */

struct ropcie_ring {
	u32 head;		/* written by the producer only */
	u32 tail;		/* written by the consumer only */
	u32 mask;		/* size - 1, size a power of two */
	u32 esize;		/* bytes per slot */
	void *slots;
};

/**
 * ropcie_ring_size_for() - ring size able to hold @entries entries
 * @entries: entries wanted (1 .. ROPCIE_RING_MAX_SIZE - 1)
 *
 * Return: the smallest power of two greater than @entries (one slot stays
 * free), or 0 when @entries is 0 or too large.
 */
static inline u32 ropcie_ring_size_for(u32 entries)
{
	if (!entries || entries >= ROPCIE_RING_MAX_SIZE)
		return 0;
	return roundup_pow_of_two(entries + 1);
}

/**
 * ropcie_ring_init() - allocate the slots of a ring
 * @r: ring
 * @size: number of slots, a power of two between 2 and ROPCIE_RING_MAX_SIZE
 * @esize: size of one slot in bytes
 * @gfp: allocation flags
 *
 * Return: 0, -EINVAL for a bad size, -ENOMEM.
 */
static inline int ropcie_ring_init(struct ropcie_ring *r, u32 size, u32 esize,
				   gfp_t gfp)
{
	if (size < 2 || size > ROPCIE_RING_MAX_SIZE || !is_power_of_2(size) ||
	    !esize)
		return -EINVAL;
	r->slots = kvcalloc(size, esize, gfp);
	if (!r->slots)
		return -ENOMEM;
	r->head = 0;
	r->tail = 0;
	r->mask = size - 1;
	r->esize = esize;
	return 0;
}

/* ropcie_ring_init_at() - as ropcie_ring_init(), counters start at @start */
static inline int ropcie_ring_init_at(struct ropcie_ring *r, u32 size,
				      u32 esize, u32 start, gfp_t gfp)
{
	int ret = ropcie_ring_init(r, size, esize, gfp);

	if (!ret) {
		r->head = start;
		r->tail = start;
	}
	return ret;
}

static inline void ropcie_ring_free(struct ropcie_ring *r)
{
	kvfree(r->slots);
	r->slots = NULL;
}

static inline u32 ropcie_ring_capacity(const struct ropcie_ring *r)
{
	return r->mask;
}

static inline void *ropcie_ring_slot(const struct ropcie_ring *r, u32 ctr)
{
	return r->slots + (size_t)(ctr & r->mask) * r->esize;
}

/* Entries in use, seen from either side (a snapshot). */
static inline u32 ropcie_ring_count(const struct ropcie_ring *r)
{
	return READ_ONCE(r->head) - READ_ONCE(r->tail);
}

static inline bool ropcie_ring_empty(const struct ropcie_ring *r)
{
	return ropcie_ring_count(r) == 0;
}

static inline bool ropcie_ring_full(const struct ropcie_ring *r)
{
	return ropcie_ring_count(r) >= r->mask;
}

/* --- producer side ------------------------------------------------------ */

/**
 * ropcie_ring_prod_slot() - the next free slot, or NULL when the ring is full
 * @r: ring
 *
 * Fill the slot, then call ropcie_ring_produce().
 */
static inline void *ropcie_ring_prod_slot(struct ropcie_ring *r)
{
	u32 head = r->head;
	/* Pairs with the store-release of tail in ropcie_ring_consume(). */
	u32 tail = smp_load_acquire(&r->tail);

	if (head - tail >= r->mask)
		return NULL;
	return ropcie_ring_slot(r, head);
}

/* Publish the slot filled after ropcie_ring_prod_slot(). */
static inline void ropcie_ring_produce(struct ropcie_ring *r)
{
	/* Pairs with the load-acquire of head in ropcie_ring_cons_slot(). */
	smp_store_release(&r->head, r->head + 1);
}

/* Copy @entry into the ring. Return: 0, or -ENOSPC when full. */
static inline int ropcie_ring_push(struct ropcie_ring *r, const void *entry)
{
	void *slot = ropcie_ring_prod_slot(r);

	if (!slot)
		return -ENOSPC;
	memcpy(slot, entry, r->esize);
	ropcie_ring_produce(r);
	return 0;
}

/* --- consumer side ------------------------------------------------------ */

/**
 * ropcie_ring_cons_slot() - the oldest entry, or NULL when the ring is empty
 * @r: ring
 *
 * Read the slot, then call ropcie_ring_consume().
 */
static inline void *ropcie_ring_cons_slot(struct ropcie_ring *r)
{
	u32 tail = r->tail;
	/* Pairs with the store-release of head in ropcie_ring_produce(). */
	u32 head = smp_load_acquire(&r->head);

	if (head == tail)
		return NULL;
	return ropcie_ring_slot(r, tail);
}

/**
 * ropcie_ring_cons_slot_at() - the @n-th oldest entry, or NULL
 * @r: ring
 * @n: 0 for the oldest (as ropcie_ring_cons_slot())
 *
 * For a consumer that starts on entries before it releases older ones.
 */
static inline void *ropcie_ring_cons_slot_at(struct ropcie_ring *r, u32 n)
{
	u32 tail = r->tail;
	/* Pairs with the store-release of head in ropcie_ring_produce(). */
	u32 head = smp_load_acquire(&r->head);

	if (head - tail <= n)
		return NULL;
	return ropcie_ring_slot(r, tail + n);
}

/* Release the slot read after ropcie_ring_cons_slot(). */
static inline void ropcie_ring_consume(struct ropcie_ring *r)
{
	/* Pairs with the load-acquire of tail in ropcie_ring_prod_slot(). */
	smp_store_release(&r->tail, r->tail + 1);
}

/* Copy the oldest entry to @entry. Return: 0, or -ENOENT when empty. */
static inline int ropcie_ring_pop(struct ropcie_ring *r, void *entry)
{
	void *slot = ropcie_ring_cons_slot(r);

	if (!slot)
		return -ENOENT;
	memcpy(entry, slot, r->esize);
	ropcie_ring_consume(r);
	return 0;
}

#endif /* ROPCIE_RING_H */
