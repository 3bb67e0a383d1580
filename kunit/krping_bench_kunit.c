// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests of what a krping run counts (krping/count.h): completion
 * counters and the reached-target test past 2^31 and 2^32, the
 * beginning of the measured part and a timed run's deadline around
 * iteration 2^32, the warm-up's share of a batch, the signaled
 * operations of a stream, and wlat's tags. A run without a count, or a
 * timed one, goes past 2^32 iterations on a fast NIC in minutes; each
 * expectation here is computed independently of the code under test.
 *
 * count.h needs no ib_core, so this runs on UML too.
 */

#include <kunit/test.h>
#include <linux/kernel.h>
#include <linux/module.h>

#include "../krping/count.h"

#define BENCH_2_31	BIT_ULL(31)
#define BENCH_2_32	BIT_ULL(32)

/* Warm-ups to try: none, short, long, and the largest an option takes. */
static const u32 krping_bench_warmups[] = { 0, 1, 1000, U32_MAX };

/*
 * A counter read back past 2^31 and 2^32: all of it, and what the sbw
 * server reports (the count less its client's closing message).
 */
static void krping_bench_test_count_past_2_31(struct kunit *test)
{
	atomic64_t c = ATOMIC64_INIT(BENCH_2_31 - 1);

	krping_count_inc(&c);
	KUNIT_EXPECT_EQ(test, krping_read_count(&c), BENCH_2_31);
	KUNIT_EXPECT_EQ(test, krping_read_count(&c) - 1, BENCH_2_31 - 1);
	krping_count_add(&c, BENCH_2_31);
	KUNIT_EXPECT_EQ(test, krping_read_count(&c), BENCH_2_32);
	krping_count_add(&c, 5);
	KUNIT_EXPECT_EQ(test, krping_read_count(&c), BENCH_2_32 + 5);
	krping_count_add(&c, 3 * BENCH_2_32);
	KUNIT_EXPECT_EQ(test, krping_read_count(&c), 4 * BENCH_2_32 + 5);
}

/* A count and a target, and whether the wait for it is over. */
struct krping_bench_reach {
	u64 count;
	u64 target;
	bool reached;
};

static const struct krping_bench_reach krping_bench_reaches[] = {
	{ 0, 0, true },
	{ 0, 1, false },
	/* Targets more than 2^31 ahead: an sbw server's whole count. */
	{ 0, BENCH_2_31, false },
	{ 0, BENCH_2_31 + 1, false },
	{ 0, 3000000000ULL, false },
	{ 0, U32_MAX, false },
	{ 0, BENCH_2_32, false },
	{ 0, BENCH_2_32 + 1, false },
	{ 1, BENCH_2_32 + 1, false },
	/* Around 2^31. */
	{ BENCH_2_31 - 1, BENCH_2_31, false },
	{ BENCH_2_31, BENCH_2_31 - 1, true },
	{ BENCH_2_31, BENCH_2_31, true },
	{ BENCH_2_31 + 1, BENCH_2_31, true },
	{ BENCH_2_31, 1, true },
	/* Around 2^32. */
	{ U32_MAX, BENCH_2_32, false },
	{ BENCH_2_32, U32_MAX, true },
	{ BENCH_2_32, BENCH_2_32, true },
	{ BENCH_2_32, 1, true },
	{ BENCH_2_32, BENCH_2_32 + 1, false },
	{ BENCH_2_32 + 1, BENCH_2_32 + 2, false },
	{ BENCH_2_32 + 2, BENCH_2_32 + 1, true },
	{ BENCH_2_32 + BENCH_2_31, BENCH_2_32 + 7, true },
	{ BENCH_2_32 + 7, BENCH_2_32 + BENCH_2_31, false },
};

/*
 * krping_wait_count()'s test, on a counter brought to the count by
 * completions of one and of many (a bw handler counts a batch).
 */
static void krping_bench_test_count_reached(struct kunit *test)
{
	const struct krping_bench_reach *r;
	atomic64_t c;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(krping_bench_reaches); k++) {
		r = &krping_bench_reaches[k];
		atomic64_set(&c, 0);
		if (r->count) {
			krping_count_add(&c, r->count - 1);
			krping_count_inc(&c);
		}
		KUNIT_EXPECT_EQ_MSG(test,
				    krping_count_reached(krping_read_count(&c),
							 r->target),
				    r->reached, "count %llu target %llu",
				    r->count, r->target);
	}
}

/*
 * The measured part begins at iteration warmup and at no later one:
 * neither warmup + 2^32 nor anything around 2^32. krping_bench_next()
 * measures (a timed client arms its deadline) there, and a stream
 * (bw, sbw) waits for its queue to empty and starts its clock there.
 */
static void krping_bench_test_begins(struct kunit *test)
{
	u64 i, w;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(krping_bench_warmups); k++) {
		w = krping_bench_warmups[k];
		KUNIT_EXPECT_TRUE(test, krping_bench_begins(w, w));
		KUNIT_EXPECT_FALSE_MSG(test,
				       krping_bench_begins(w + BENCH_2_32, w),
				       "warmup %llu", w);
		KUNIT_EXPECT_FALSE_MSG(test,
				       krping_bench_begins(w + 2 * BENCH_2_32,
							   w),
				       "warmup %llu", w);
		for (i = BENCH_2_32 - 3; i <= BENCH_2_32 + 3; i++)
			KUNIT_EXPECT_EQ_MSG(test, krping_bench_begins(i, w),
					    i == w, "i %llu warmup %llu", i,
					    w);
		for (i = w + BENCH_2_32 - 3; i <= w + BENCH_2_32 + 3; i++)
			KUNIT_EXPECT_FALSE_MSG(test, krping_bench_begins(i, w),
					       "i %llu warmup %llu", i, w);
	}
}

/*
 * A timed client without a count, taking the decisions of
 * krping_bench_next() with a clock that advances 1 ns per iteration:
 * its deadline is armed at iteration warmup, then the run goes on from
 * 2^32 + warmup - 50, as if the iterations in between had taken no
 * time, until the deadline. The deadline must be armed once and end the
 * run 100 iterations after that, at 2^32 + warmup + 49.
 */
static void krping_bench_test_timed_run(struct kunit *test)
{
	const u64 duration_ns = 100;
	u64 i, w, now, deadline, end;
	unsigned int armed;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(krping_bench_warmups); k++) {
		w = krping_bench_warmups[k];
		now = 0;
		deadline = 0;
		armed = 0;
		end = 0;
		for (i = w; i < w + BENCH_2_32 + 1000; i++) {
			if (i == w + 1)
				i = w + BENCH_2_32 - 50;
			if (krping_bench_begins(i, (u32)w)) {
				deadline = now + duration_ns;
				armed++;
			}
			if (!krping_bench_within(i, 0) || now >= deadline) {
				end = i;
				break;
			}
			now++;
		}
		KUNIT_EXPECT_EQ_MSG(test, armed, 1U, "warmup %llu", w);
		KUNIT_EXPECT_EQ_MSG(test, end, w + BENCH_2_32 + 49,
				    "warmup %llu", w);
	}
}

/* An iteration past the warm-up counts, however far past. */
static void krping_bench_test_measured(struct kunit *test)
{
	KUNIT_EXPECT_FALSE(test, krping_bench_measured(9, 10));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(10, 10));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(U32_MAX, 10));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(BENCH_2_32, 10));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(BENCH_2_32 + 9, 10));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(BENCH_2_32,
						      U32_MAX));
	KUNIT_EXPECT_TRUE(test, krping_bench_measured(BENCH_2_32 - 1,
						      U32_MAX));
	KUNIT_EXPECT_FALSE(test, krping_bench_measured(BENCH_2_32 - 2,
						       U32_MAX));
}

/* A first iteration, a count, a warm-up and how many of them count. */
struct krping_bench_share {
	u64 first;
	u32 n;
	u32 warmup;
	u32 measured;
};

static const struct krping_bench_share krping_bench_shares[] = {
	{ 0, 5, 10, 0 },
	{ 5, 5, 10, 0 },
	{ 8, 4, 10, 2 },
	{ 10, 3, 10, 3 },
	{ 0, 3, 0, 3 },
	{ U32_MAX - 1, 4, 0, 4 },
	{ U32_MAX - 1, 4, U32_MAX, 3 },
	{ BENCH_2_32, 5, 10, 5 },
	{ BENCH_2_32 + 8, 4, 10, 4 },
	{ BENCH_2_32 - 2, 4, 10, 4 },
	{ BENCH_2_32, 1, U32_MAX, 1 },
};

/* progress/: the measured operations of a batch past 2^32. */
static void krping_bench_test_measured_n(struct kunit *test)
{
	const struct krping_bench_share *s;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(krping_bench_shares); k++) {
		s = &krping_bench_shares[k];
		KUNIT_EXPECT_EQ_MSG(test,
				    krping_bench_measured_n(s->first, s->n,
							    s->warmup),
				    s->measured, "first %llu n %u warmup %u",
				    s->first, s->n, s->warmup);
	}
}

/*
 * A stream's batches: past 2^32 the warm-up's end is no boundary any
 * more, and a total set past 2^32 (a timed stream's last operation) is
 * one.
 */
static void krping_bench_test_bw_past_2_32(struct kunit *test)
{
	/* every 4, warm-up 2: 2^32 .. 2^32 + 3 is one batch. */
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(BENCH_2_32, 4, 2, 0),
			BENCH_2_32 + 4);
	KUNIT_EXPECT_FALSE(test, krping_bw_signaled_at(BENCH_2_32 + 1, 4, 2,
						       0));
	KUNIT_EXPECT_TRUE(test, krping_bw_signaled_at(BENCH_2_32 + 3, 4, 2,
						      0));
	/* every 16, warm-up 10: the first batch past 2^32 is whole. */
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(BENCH_2_32, 16, 10, 0),
			BENCH_2_32 + 16);
	KUNIT_EXPECT_FALSE(test, krping_bw_signaled_at(BENCH_2_32 + 9, 16,
						       10, 0));
	/* A timed stream that ends at 2^32 + 6. */
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(BENCH_2_32 + 4, 4, 0,
						  BENCH_2_32 + 6),
			BENCH_2_32 + 6);
	KUNIT_EXPECT_TRUE(test, krping_bw_signaled_at(BENCH_2_32 + 5, 4, 0,
						      BENCH_2_32 + 6));
	KUNIT_EXPECT_FALSE(test, krping_bw_signaled_at(5, 4, 0,
						       BENCH_2_32 + 6));
	/* The warm-up's end and a small total still are boundaries. */
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(8, 16, 10, 0), 10ULL);
	KUNIT_EXPECT_TRUE(test, krping_bw_signaled_at(9, 16, 10, 0));
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(16, 16, 10, 20), 20ULL);
	KUNIT_EXPECT_TRUE(test, krping_bw_signaled_at(19, 16, 10, 20));
	/* Both near the largest warm-up an option takes. */
	KUNIT_EXPECT_EQ(test, krping_bw_batch_end(BENCH_2_32 - 4, 16, U32_MAX,
						  0), (u64)U32_MAX);
	KUNIT_EXPECT_TRUE(test, krping_bw_signaled_at(BENCH_2_32 - 2, 16,
						      U32_MAX, 0));
}

/* A stream's shape: every, warm-up and total. */
struct krping_bench_stream {
	u32 every;
	u32 warmup;
	u64 total;
};

static const struct krping_bench_stream krping_bench_streams[] = {
	{ 1, 0, 0 },
	{ 4, 2, 0 },
	{ 16, 10, 0 },
	{ 7, 100, 0 },
	{ 16, U32_MAX, 0 },
	{ 4, 2, BENCH_2_32 + 5 },
	{ 7, 100, BENCH_2_32 + 31 },
};

/*
 * Each signaled completion stands for exactly the operations up to and
 * including it (krping_bw_batch_end() and krping_bw_signaled_at()
 * agree), from 2^32 - 64 across 2^32 to the stream's end, so that the
 * stats count every operation once.
 */
static void krping_bench_test_bw_batches(struct kunit *test)
{
	const struct krping_bench_stream *s;
	u64 done, end, j, last;
	bool signaled;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(krping_bench_streams); k++) {
		s = &krping_bench_streams[k];
		last = s->total ? s->total : BENCH_2_32 + 64;
		/* A batch starts after a signaled operation. */
		done = BENCH_2_32 - 64;
		while (!krping_bw_signaled_at(done - 1, s->every, s->warmup,
					      s->total))
			done--;
		while (done < last) {
			end = krping_bw_batch_end(done, s->every, s->warmup,
						  s->total);
			KUNIT_ASSERT_GT_MSG(test, end, done,
					    "every %u warmup %u total %llu",
					    s->every, s->warmup, s->total);
			KUNIT_ASSERT_LE(test, end - done, (u64)s->every);
			for (j = done; j < end; j++) {
				signaled = krping_bw_signaled_at(j, s->every,
								 s->warmup,
								 s->total);
				KUNIT_ASSERT_EQ_MSG(test, signaled, j == end - 1,
						    "op %llu every %u warmup %u",
						    j, s->every, s->warmup);
			}
			done = end;
		}
		/* A stream with a total ends exactly there. */
		if (s->total)
			KUNIT_EXPECT_EQ(test, done, s->total);
	}
}

/*
 * wlat's tags: never 0, never the same twice in a row, across 2^32 and
 * elsewhere; iteration i + 2^32 is not tagged as i, but as i + 1, since
 * 2^32 = 255 * 16843009 + 1.
 */
static void krping_bench_test_wlat_tag(struct kunit *test)
{
	static const u64 starts[] = {
		1, BENCH_2_32 - 600, BENCH_2_32 * 2 - 600, BENCH_2_31 - 600,
		U64_MAX - 600,
	};
	u64 i, s;
	size_t k;

	KUNIT_EXPECT_EQ(test, krping_wlat_tag(0), 1);
	KUNIT_EXPECT_EQ(test, krping_wlat_tag(U32_MAX), 1);
	KUNIT_EXPECT_EQ(test, krping_wlat_tag(BENCH_2_32), 2);
	KUNIT_EXPECT_NE(test, krping_wlat_tag(BENCH_2_32),
			krping_wlat_tag(BENCH_2_32 - 1));
	for (k = 0; k < ARRAY_SIZE(starts); k++) {
		s = starts[k];
		for (i = s; i < s + 600; i++) {
			KUNIT_ASSERT_NE_MSG(test, krping_wlat_tag(i), 0, "i %llu",
					    i);
			KUNIT_ASSERT_NE_MSG(test, krping_wlat_tag(i),
					    krping_wlat_tag(i - 1), "i %llu", i);
		}
	}
	for (i = 0; i < 600; i++) {
		KUNIT_ASSERT_NE_MSG(test, krping_wlat_tag(i + BENCH_2_32),
				    krping_wlat_tag(i), "i %llu", i);
		KUNIT_ASSERT_EQ_MSG(test, krping_wlat_tag(i + BENCH_2_32),
				    (u8)(((u32)i + 1) % 255 + 1), "i %llu", i);
	}
}

static struct kunit_case krping_bench_test_cases[] = {
	KUNIT_CASE(krping_bench_test_count_past_2_31),
	KUNIT_CASE(krping_bench_test_count_reached),
	KUNIT_CASE(krping_bench_test_begins),
	KUNIT_CASE(krping_bench_test_timed_run),
	KUNIT_CASE(krping_bench_test_measured),
	KUNIT_CASE(krping_bench_test_measured_n),
	KUNIT_CASE(krping_bench_test_bw_past_2_32),
	KUNIT_CASE(krping_bench_test_bw_batches),
	KUNIT_CASE(krping_bench_test_wlat_tag),
	{}
};

static struct kunit_suite krping_bench_test_suite = {
	.name = "krping_bench",
	.test_cases = krping_bench_test_cases,
};

kunit_test_suite(krping_bench_test_suite);

MODULE_DESCRIPTION("KUnit tests of krping's counters and benchmark iterations");
MODULE_LICENSE("Dual BSD/GPL");
