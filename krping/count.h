/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What a run counts: its completion counters and the index of a
 * benchmark's iterations, and the pure decisions taken on them.
 *
 * Both are 64 bits wide. A run of count=0 or a timed run has no upper
 * bound, and a NIC doing 10^7 operations a second passes 2^32 in seven
 * minutes; 2^64 takes 58,000 years, so nothing here wraps in practice,
 * and plain comparisons of counts and indices hold.
 *
 * Nothing here needs ib_core, so KUnit tests it on any kernel, UML
 * included (kunit/krping_bench_kunit.c).
 */
#ifndef KRPING_COUNT_H
#define KRPING_COUNT_H

#include <linux/atomic.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/types.h>

/*
 * A completion counter has one writer, the completion handler of the
 * run's one CQ (handlers of a CQ never run at once), and readers in the
 * run's thread. The writer's release publishes what the handler stored
 * before the new count (the message received, rx_inv_rkey); a reader's
 * acquire pairs with it, so a thread that sees the count sees those
 * stores too. atomic64_t rather than a u64 under smp_store_release():
 * a u64 is not a native word on 32-bit architectures, where
 * atomic64_set_release() and atomic64_read_acquire() fall back to a
 * fence and an untorn access.
 */

/* Count @n more completions (the counter's writer only). */
static inline void krping_count_add(atomic64_t *counter, u64 n)
{
	/* Publish the handler's stores before the new count. */
	atomic64_set_release(counter, atomic64_read(counter) + n);
}

/* Count one more completion (the counter's writer only). */
static inline void krping_count_inc(atomic64_t *counter)
{
	krping_count_add(counter, 1);
}

/* The count, and what its writer stored before it. */
static inline u64 krping_read_count(const atomic64_t *counter)
{
	/* Pairs with atomic64_set_release() in krping_count_add(). */
	return atomic64_read_acquire(counter);
}

/*
 * Has @count reached @target? A count only grows and never wraps, so it
 * has exactly when it is not below; this also holds for a target more
 * than 2^31 ahead (an sbw server waits for its whole count at once).
 */
static inline bool krping_count_reached(u64 count, u64 target)
{
	return count >= target;
}

/*
 * Iteration indices of a benchmark run from 0, the warm-up included;
 * warmup and count are u32 options, but a run without a count has no
 * last iteration.
 */

/* Does the measured part begin at iteration @i (krping_bench_next())? */
static inline bool krping_bench_begins(u64 i, u32 warmup)
{
	return i == warmup;
}

/* Is iteration @i past the warm-up (measured)? */
static inline bool krping_bench_measured(u64 i, u32 warmup)
{
	return i >= warmup;
}

/* Does a run of @total iterations (0: no limit) run iteration @i? */
static inline bool krping_bench_within(u64 i, u64 total)
{
	return !total || i < total;
}

/* How many of iterations @first .. @first + @n - 1 are measured. */
static inline u32 krping_bench_measured_n(u64 first, u32 n, u32 warmup)
{
	u64 skip = warmup > first ? warmup - first : 0;

	return skip >= n ? 0 : n - (u32)skip;
}

/**
 * krping_bw_batch_end() - where a signaled completion of a stream ends
 * @done: operations completed before the ones it stands for
 * @every: one operation in this many is signaled
 * @warmup: the run's warm-up iterations
 * @total: the stream's operations once known, 0 before
 *
 * A signaled completion stands for the operations after @done up to the
 * next signaled one: the next multiple of @every, or the warm-up's last
 * or the stream's last when that comes first (krping_bw_signaled_at()).
 *
 * Return: the index past the last operation it stands for.
 */
static inline u64 krping_bw_batch_end(u64 done, u32 every, u32 warmup,
				      u64 total)
{
	u32 rem;
	u64 end;

	div_u64_rem(done, every, &rem);
	end = done - rem + every;
	if (done < warmup)
		end = min_t(u64, end, warmup);
	if (total && done < total)
		end = min(end, total);
	return end;
}

/* Does operation @i of a stream ask for a completion? */
static inline bool krping_bw_signaled_at(u64 i, u32 every, u32 warmup,
					 u64 total)
{
	u32 rem;

	div_u64_rem(i + 1, every, &rem);
	return !rem || i + 1 == warmup || i + 1 == total;
}

/**
 * krping_wlat_tag() - the tag that marks wlat's iteration @i in the sink
 * @i: the iteration
 *
 * Never 0 (the sink starts zeroed), and never the same in two iterations
 * in a row: @i and @i + 1 differ by one modulo 255 for every @i below
 * U64_MAX. All 64 bits of @i count: 2^32 - 1 is a multiple of 255, so an
 * index taken modulo 2^32 would give iteration 2^32 the tag of iteration
 * 2^32 - 1, and the spin would take the previous answer for the next.
 *
 * Return: the tag, 1..255.
 */
static inline u8 krping_wlat_tag(u64 i)
{
	u32 rem;

	div_u64_rem(i, 255, &rem);
	return rem + 1;
}

#endif /* KRPING_COUNT_H */
