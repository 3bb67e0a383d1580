// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests of the ropcie single-producer/single-consumer ring
 * (ropcie/ring.h): empty and full states, wrap-around, power-of-two
 * sizing, free-running counters that overflow past UINT_MAX, and a stress
 * run of a producer kthread against a consumer kthread that checks every
 * item arrives once and in order.
 *
 * On UML (one CPU) the two kthreads never run at the same time: each one
 * fills or drains the ring until it has to sleep on its wait queue, so
 * the stress test there checks the wake-up protocol and the counters,
 * not the memory ordering. The ordering is exercised where more than one
 * CPU is online (kunit.py --arch=x86_64 --qemu_args='-smp 2', or a VM);
 * the test logs which case it ran.
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include "../ropcie/ring.h"

static void ropcie_ring_test_sizing(struct kunit *test)
{
	struct ropcie_ring r;

	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(0), 0U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(1), 2U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(3), 4U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(4), 8U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(255), 256U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(256), 512U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(ROPCIE_RING_MAX_SIZE - 1),
			ROPCIE_RING_MAX_SIZE);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(ROPCIE_RING_MAX_SIZE), 0U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_size_for(U32_MAX), 0U);

	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, 0, 8, GFP_KERNEL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, 1, 8, GFP_KERNEL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, 3, 8, GFP_KERNEL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, 96, 8, GFP_KERNEL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, 8, 0, GFP_KERNEL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ropcie_ring_init(&r, ROPCIE_RING_MAX_SIZE * 2, 8,
					       GFP_KERNEL), -EINVAL);
	KUNIT_ASSERT_EQ(test, ropcie_ring_init(&r, 2, 8, GFP_KERNEL), 0);
	KUNIT_EXPECT_EQ(test, ropcie_ring_capacity(&r), 1U);
	ropcie_ring_free(&r);
	KUNIT_ASSERT_EQ(test, ropcie_ring_init(&r, 64, 8, GFP_KERNEL), 0);
	KUNIT_EXPECT_EQ(test, ropcie_ring_capacity(&r), 63U);
	ropcie_ring_free(&r);
	KUNIT_EXPECT_NULL(test, r.slots);
}

static void ropcie_ring_test_empty(struct kunit *test)
{
	struct ropcie_ring r;
	u64 v = 0xdeadbeef;

	KUNIT_ASSERT_EQ(test, ropcie_ring_init(&r, 8, sizeof(u64), GFP_KERNEL), 0);
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	KUNIT_EXPECT_FALSE(test, ropcie_ring_full(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_count(&r), 0U);
	KUNIT_EXPECT_NULL(test, ropcie_ring_cons_slot(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_pop(&r, &v), -ENOENT);
	KUNIT_EXPECT_EQ(test, v, 0xdeadbeefULL);	/* untouched */

	KUNIT_EXPECT_EQ(test, ropcie_ring_push(&r, &v), 0);
	KUNIT_EXPECT_FALSE(test, ropcie_ring_empty(&r));
	v = 0;
	KUNIT_EXPECT_EQ(test, ropcie_ring_pop(&r, &v), 0);
	KUNIT_EXPECT_EQ(test, v, 0xdeadbeefULL);
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_pop(&r, &v), -ENOENT);
	ropcie_ring_free(&r);
}

static void ropcie_ring_test_full(struct kunit *test)
{
	struct ropcie_ring r;
	u32 i, v;

	KUNIT_ASSERT_EQ(test, ropcie_ring_init(&r, 16, sizeof(u32), GFP_KERNEL), 0);
	for (i = 0; i < 15; i++) {
		KUNIT_EXPECT_FALSE(test, ropcie_ring_full(&r));
		KUNIT_EXPECT_EQ(test, ropcie_ring_push(&r, &i), 0);
	}
	/* Capacity is size - 1: one slot stays free. */
	KUNIT_EXPECT_TRUE(test, ropcie_ring_full(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_count(&r), 15U);
	KUNIT_EXPECT_NULL(test, ropcie_ring_prod_slot(&r));
	v = 99;
	KUNIT_EXPECT_EQ(test, ropcie_ring_push(&r, &v), -ENOSPC);
	/* The refused push changed nothing. */
	KUNIT_EXPECT_EQ(test, ropcie_ring_count(&r), 15U);
	for (i = 0; i < 15; i++) {
		KUNIT_EXPECT_EQ(test, ropcie_ring_pop(&r, &v), 0);
		KUNIT_EXPECT_EQ(test, v, i);
	}
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	ropcie_ring_free(&r);
}

/* Peeking past unconsumed entries, across the wrap of the slots. */
static void ropcie_ring_test_slot_at(struct kunit *test)
{
	struct ropcie_ring r;
	u32 i, v, *slot;

	KUNIT_ASSERT_EQ(test, ropcie_ring_init_at(&r, 4, sizeof(u32), U32_MAX - 1,
						  GFP_KERNEL), 0);
	KUNIT_EXPECT_NULL(test, ropcie_ring_cons_slot_at(&r, 0));
	for (i = 10; i < 13; i++)
		KUNIT_EXPECT_EQ(test, ropcie_ring_push(&r, &i), 0);
	for (i = 0; i < 3; i++) {
		slot = ropcie_ring_cons_slot_at(&r, i);
		KUNIT_ASSERT_NOT_NULL(test, slot);
		KUNIT_EXPECT_EQ(test, *slot, 10 + i);
	}
	KUNIT_EXPECT_NULL(test, ropcie_ring_cons_slot_at(&r, 3));
	KUNIT_EXPECT_NULL(test, ropcie_ring_cons_slot_at(&r, U32_MAX));
	KUNIT_EXPECT_PTR_EQ(test, ropcie_ring_cons_slot_at(&r, 0),
			    ropcie_ring_cons_slot(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_pop(&r, &v), 0);
	KUNIT_EXPECT_EQ(test, v, 10U);
	slot = ropcie_ring_cons_slot_at(&r, 1);
	KUNIT_ASSERT_NOT_NULL(test, slot);
	KUNIT_EXPECT_EQ(test, *slot, 12U);
	KUNIT_EXPECT_NULL(test, ropcie_ring_cons_slot_at(&r, 2));
	ropcie_ring_free(&r);
}

static void ropcie_ring_test_wrap(struct kunit *test)
{
	struct ropcie_ring r;
	u32 next_in = 0, next_out = 0, v, round, k;

	KUNIT_ASSERT_EQ(test, ropcie_ring_init(&r, 8, sizeof(u32), GFP_KERNEL), 0);
	/* Uneven batches so the slots used move around the ring. */
	for (round = 0; round < 100; round++) {
		u32 n = 1 + round % 7;

		for (k = 0; k < n; k++) {
			KUNIT_ASSERT_EQ(test, ropcie_ring_push(&r, &next_in), 0);
			next_in++;
		}
		for (k = 0; k < n; k++) {
			KUNIT_ASSERT_EQ(test, ropcie_ring_pop(&r, &v), 0);
			KUNIT_EXPECT_EQ(test, v, next_out);
			next_out++;
		}
		KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	}
	KUNIT_EXPECT_EQ(test, r.head, next_in);
	KUNIT_EXPECT_GT(test, r.head, 8U);	/* it did wrap */
	/* Zero-copy access returns the slot of counter & mask. */
	KUNIT_EXPECT_PTR_EQ(test, ropcie_ring_prod_slot(&r),
			    r.slots + (r.head & 7) * sizeof(u32));
	ropcie_ring_free(&r);
}

/* Counters start just below UINT_MAX and wrap to 0 on the way. */
static void ropcie_ring_test_overflow(struct kunit *test)
{
	struct ropcie_ring r;
	u32 i, v;

	KUNIT_ASSERT_EQ(test, ropcie_ring_init_at(&r, 8, sizeof(u32),
						  U32_MAX - 3, GFP_KERNEL), 0);
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	for (i = 0; i < 7; i++)
		KUNIT_ASSERT_EQ(test, ropcie_ring_push(&r, &i), 0);
	/* head wrapped to 3, tail is still U32_MAX - 3: 7 in use, full. */
	KUNIT_EXPECT_EQ(test, r.head, 3U);
	KUNIT_EXPECT_EQ(test, ropcie_ring_count(&r), 7U);
	KUNIT_EXPECT_TRUE(test, ropcie_ring_full(&r));
	KUNIT_EXPECT_EQ(test, ropcie_ring_push(&r, &i), -ENOSPC);
	for (i = 0; i < 7; i++) {
		KUNIT_ASSERT_EQ(test, ropcie_ring_pop(&r, &v), 0);
		KUNIT_EXPECT_EQ(test, v, i);
	}
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&r));
	KUNIT_EXPECT_EQ(test, r.tail, 3U);
	ropcie_ring_free(&r);
}

/* --- two kthreads ------------------------------------------------------- */

#define STRESS_ITEMS	262144U
#define STRESS_SIZE	256

struct stress {
	struct ropcie_ring ring;
	wait_queue_head_t not_empty, not_full;
	struct completion prod_done, cons_done;
	u64 received, bad_order, first_bad;
	unsigned long prod_sleeps, cons_sleeps;
	int prod_cpu, cons_cpu;
	int prod_err, cons_err;
};

static int stress_producer(void *arg)
{
	struct stress *s = arg;
	u64 i;

	s->prod_cpu = raw_smp_processor_id();
	for (i = 0; i < STRESS_ITEMS; i++) {
		u64 *slot = ropcie_ring_prod_slot(&s->ring);

		if (!slot) {
			s->prod_sleeps++;
			if (!wait_event_timeout(s->not_full,
						!ropcie_ring_full(&s->ring),
						10 * HZ)) {
				s->prod_err = -ETIMEDOUT;
				break;
			}
			slot = ropcie_ring_prod_slot(&s->ring);
		}
		*slot = i;
		ropcie_ring_produce(&s->ring);
		wake_up(&s->not_empty);
	}
	complete(&s->prod_done);
	return 0;
}

static int stress_consumer(void *arg)
{
	struct stress *s = arg;
	u64 expect = 0;

	s->cons_cpu = raw_smp_processor_id();
	while (expect < STRESS_ITEMS) {
		u64 *slot = ropcie_ring_cons_slot(&s->ring);

		if (!slot) {
			s->cons_sleeps++;
			if (!wait_event_timeout(s->not_empty,
						!ropcie_ring_empty(&s->ring),
						10 * HZ)) {
				s->cons_err = -ETIMEDOUT;
				break;
			}
			continue;
		}
		if (*slot != expect && !s->bad_order++)
			s->first_bad = expect;
		expect++;
		ropcie_ring_consume(&s->ring);
		wake_up(&s->not_full);
	}
	s->received = expect;
	complete(&s->cons_done);
	return 0;
}

static void ropcie_ring_test_stress(struct kunit *test)
{
	struct task_struct *prod, *cons;
	struct stress *s;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	/* Start near UINT_MAX so the counters overflow during the run. */
	KUNIT_ASSERT_EQ(test, ropcie_ring_init_at(&s->ring, STRESS_SIZE,
						  sizeof(u64), U32_MAX - 1000,
						  GFP_KERNEL), 0);
	init_waitqueue_head(&s->not_empty);
	init_waitqueue_head(&s->not_full);
	init_completion(&s->prod_done);
	init_completion(&s->cons_done);

	cons = kthread_run(stress_consumer, s, "ropcie-ring-c");
	KUNIT_ASSERT_FALSE(test, IS_ERR(cons));
	prod = kthread_run(stress_producer, s, "ropcie-ring-p");
	if (IS_ERR(prod)) {
		/* The consumer gives up after its timeout. */
		wait_for_completion(&s->cons_done);
		ropcie_ring_free(&s->ring);
		KUNIT_FAIL(test, "kthread_run(producer) failed");
		return;
	}
	wait_for_completion(&s->prod_done);
	wait_for_completion(&s->cons_done);

	kunit_info(test, "%u items, %u online cpu(s), producer on cpu %d, consumer on cpu %d, sleeps %lu/%lu\n",
		   STRESS_ITEMS, num_online_cpus(), s->prod_cpu, s->cons_cpu,
		   s->prod_sleeps, s->cons_sleeps);
	KUNIT_EXPECT_EQ(test, s->prod_err, 0);
	KUNIT_EXPECT_EQ(test, s->cons_err, 0);
	KUNIT_EXPECT_EQ(test, s->received, (u64)STRESS_ITEMS);
	KUNIT_EXPECT_EQ_MSG(test, s->bad_order, 0ULL,
			    "first item out of order: %llu", s->first_bad);
	KUNIT_EXPECT_TRUE(test, ropcie_ring_empty(&s->ring));
	KUNIT_EXPECT_EQ(test, s->ring.head, U32_MAX - 1000 + STRESS_ITEMS);
	ropcie_ring_free(&s->ring);
}

static struct kunit_case ropcie_ring_test_cases[] = {
	KUNIT_CASE(ropcie_ring_test_sizing),
	KUNIT_CASE(ropcie_ring_test_empty),
	KUNIT_CASE(ropcie_ring_test_full),
	KUNIT_CASE(ropcie_ring_test_slot_at),
	KUNIT_CASE(ropcie_ring_test_wrap),
	KUNIT_CASE(ropcie_ring_test_overflow),
	KUNIT_CASE_SLOW(ropcie_ring_test_stress),
	{}
};

static struct kunit_suite ropcie_ring_test_suite = {
	.name = "ropcie_ring",
	.test_cases = ropcie_ring_test_cases,
};

kunit_test_suite(ropcie_ring_test_suite);

MODULE_DESCRIPTION("KUnit tests of the ropcie circular buffer");
MODULE_LICENSE("Dual BSD/GPL");
