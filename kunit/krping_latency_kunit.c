// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests of krping's latency statistics: empty, single and constant
 * runs, ramps with known percentiles, the switch from the exact samples
 * to the histogram, large random runs against a sorted copy and a wide
 * reference computation, two-point distributions up to U64_MAX, counts
 * up to 2^63, reset, and order independence. Every expectation is
 * computed here, independently of the code under test.
 *
 * latency.c is included rather than linked so that its object file is
 * not built into two modules; this also reaches its static helpers.
 */

#include <kunit/resource.h>
#include <kunit/test.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "../krping/latency.c"

#define LAT_MILLION	1000000ULL
#define LAT_1E9		1000000000ULL
#define LAT_1E10	10000000000ULL

KUNIT_DEFINE_ACTION_WRAPPER(krping_test_lat_free, krping_lat_free,
			    struct krping_lat *);
KUNIT_DEFINE_ACTION_WRAPPER(krping_test_kvfree, kvfree, const void *);

/* Initialized statistics, freed when the test ends. */
static struct krping_lat *krping_test_lat(struct kunit *test)
{
	struct krping_lat *lat = kunit_kzalloc(test, sizeof(*lat), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, lat);
	KUNIT_ASSERT_EQ(test, krping_lat_init(lat), 0);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							krping_test_lat_free,
							lat), 0);
	return lat;
}

/* An array of @n u64, freed when the test ends. */
static u64 *krping_test_array(struct kunit *test, size_t n)
{
	u64 *v = kvmalloc_array(n, sizeof(*v), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, v);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							krping_test_kvfree,
							v), 0);
	return v;
}

/* xorshift64*: reproducible and cheap. */
static u64 krping_test_rnd(u64 *state)
{
	u64 x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [0, n) (n == 0: [0, 2^64)), without a division. */
static u64 krping_test_below(u64 *state, u64 n)
{
	u64 r = krping_test_rnd(state);

	return n ? mul_u64_u64_shr(r, n, 64) : r;
}

static void krping_test_shuffle(u64 *v, size_t n, u64 *state)
{
	size_t i, j;

	for (i = n; i > 1; i--) {
		/* Not inside swap(), which evaluates its arguments twice. */
		j = krping_test_below(state, i);
		swap(v[i - 1], v[j]);
	}
}

static int krping_test_cmp(const void *a, const void *b)
{
	const u64 *x = a, *y = b;

	if (*x != *y)
		return *x < *y ? -1 : 1;
	return 0;
}

static void krping_test_add_all(struct krping_lat *lat, const u64 *v,
				size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		krping_lat_add(lat, v[i]);
}

/* ceil(n * permille / 1000), the nearest rank, for n below 2^54. */
static u64 krping_test_rank(u64 n, u64 permille)
{
	return div_u64(n * permille + 999, 1000);
}

/*
 * A reported percentile against the exact one: equal when @exact_mode,
 * else never below and less than 1/128 of it above (equal below 256).
 */
static void krping_test_pct(struct kunit *test, const char *what, u64 got,
			    u64 want, bool exact_mode)
{
	if (exact_mode || want < 256) {
		KUNIT_EXPECT_EQ_MSG(test, got, want, "%s", what);
		return;
	}
	KUNIT_EXPECT_GE_MSG(test, got, want, "%s", what);
	if (got >= want)
		KUNIT_EXPECT_LE_MSG(test, got - want, (want - 1) >> 7,
				    "%s: %llu for %llu", what, got, want);
}

/* The three percentiles against those of sorted[0..n). */
static void krping_test_pcts(struct kunit *test,
			     const struct krping_lat_summary *sum,
			     const u64 *sorted, u64 n)
{
	bool exact = n <= KRPING_LAT_EXACT;

	krping_test_pct(test, "p50", sum->p50_ns,
			sorted[krping_test_rank(n, 500) - 1], exact);
	krping_test_pct(test, "p99", sum->p99_ns,
			sorted[krping_test_rank(n, 990) - 1], exact);
	krping_test_pct(test, "p999", sum->p999_ns,
			sorted[krping_test_rank(n, 999) - 1], exact);
}

/*
 * Mean and stdev of v[0..n) (n <= 2^32, samples <= 2^40) checked with
 * 128-bit integers and a two-pass computation: with S = m * n + r and
 * T = sum (x - m)^2, the variance is T / n - r^2 / n^2, so the stdev s
 * is right iff s^2 n + ceil(r^2 / n) <= T < (s + 1)^2 n + ceil(r^2 / n).
 */
static void krping_test_moments(struct kunit *test,
				const struct krping_lat_summary *sum,
				const u64 *v, u64 n)
{
#ifdef __SIZEOF_INT128__
	unsigned __int128 s = 0, t = 0, m = sum->mean_ns, sd = sum->stdev_ns;
	u64 r, c, i;

	for (i = 0; i < n; i++)
		s += v[i];
	KUNIT_EXPECT_TRUE(test, m * n <= s && s < (m + 1) * n);
	if (m * n > s)
		return;
	r = (u64)(s - m * n);
	for (i = 0; i < n; i++) {
		unsigned __int128 d = v[i] > m ? v[i] - m : m - v[i];

		t += d * d;
	}
	c = div64_u64(r * r + n - 1, n);
	KUNIT_EXPECT_TRUE_MSG(test, sd * sd * n + c <= t,
			      "stdev %llu too large", sum->stdev_ns);
	KUNIT_EXPECT_TRUE_MSG(test, t < (sd + 1) * (sd + 1) * n + c,
			      "stdev %llu too small", sum->stdev_ns);
#else
	kunit_skip(test, "no 128-bit integers for the reference");
#endif
}

/* Every field of the summary of v[0..n), which this sorts. */
static void krping_test_check(struct kunit *test,
			      const struct krping_lat_summary *sum, u64 *v,
			      u64 n)
{
	KUNIT_EXPECT_EQ(test, sum->samples, n);
	krping_test_moments(test, sum, v, n);
	sort(v, n, sizeof(*v), krping_test_cmp, NULL);
	KUNIT_EXPECT_EQ(test, sum->min_ns, v[0]);
	KUNIT_EXPECT_EQ(test, sum->max_ns, v[n - 1]);
	krping_test_pcts(test, sum, v, n);
}

static void krping_test_empty(struct kunit *test)
{
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum, zero = {};

	memset(&sum, 0xa5, sizeof(sum));
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_MEMEQ(test, &sum, &zero, sizeof(sum));
	KUNIT_EXPECT_EQ(test, lat->min_ns, 0);
	KUNIT_EXPECT_EQ(test, lat->max_ns, 0);
}

static void krping_test_free_twice(struct kunit *test)
{
	struct krping_lat lat;
	struct krping_lat_summary sum, zero = {};

	KUNIT_ASSERT_EQ(test, krping_lat_init(&lat), 0);
	krping_lat_add(&lat, 5);
	krping_lat_free(&lat);
	KUNIT_EXPECT_NULL(test, lat.exact);
	KUNIT_EXPECT_NULL(test, lat.hist);
	krping_lat_summarize(&lat, &sum);
	KUNIT_EXPECT_MEMEQ(test, &sum, &zero, sizeof(sum));
	krping_lat_free(&lat);
}

/* A value @count times: everything is that value, stdev 0. */
static const struct krping_const_case {
	u64 value;
	u64 count;
} krping_const_cases[] = {
	{ 0, 1 }, { 1, 1 }, { 127, 1 }, { 128, 1 }, { 1000, 1 },
	{ LAT_1E10, 1 }, { 1ULL << 40, 1 }, { U64_MAX, 1 },
	{ 0, 10 }, { 42, 4096 }, { 42, 4097 }, { 255, 100000 },
	{ 1000, 4097 }, { 12345, 100000 }, { LAT_1E10, 5000 },
	{ (1ULL << 40) + 1, 5000 }, { (1ULL << 63) + 12345, 5000 },
	{ U64_MAX - 1, 4096 }, { U64_MAX, 10000 },
};

static void krping_const_desc(const struct krping_const_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%llu x %llu", c->value,
		 c->count);
}

KUNIT_ARRAY_PARAM(krping_const, krping_const_cases, krping_const_desc);

static void krping_test_const(struct kunit *test)
{
	const struct krping_const_case *c = test->param_value;
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	u64 i;

	for (i = 0; i < c->count; i++)
		krping_lat_add(lat, c->value);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, c->count);
	KUNIT_EXPECT_EQ(test, sum.min_ns, c->value);
	KUNIT_EXPECT_EQ(test, sum.max_ns, c->value);
	KUNIT_EXPECT_EQ(test, sum.mean_ns, c->value);
	KUNIT_EXPECT_EQ(test, sum.stdev_ns, 0);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, c->value);
	KUNIT_EXPECT_EQ(test, sum.p99_ns, c->value);
	KUNIT_EXPECT_EQ(test, sum.p999_ns, c->value);
}

enum krping_order { KRPING_UP, KRPING_DOWN, KRPING_SHUFFLED };

static const char *const krping_order_names[] = { "up", "down", "shuffled" };

/*
 * The ramp 1..n in some order, with its exact nearest-rank percentiles
 * worked out by hand: p = ceil(n * permille / 1000).
 */
static const struct krping_ramp_case {
	u64 n;
	enum krping_order order;
	u64 p50, p99, p999;
} krping_ramp_cases[] = {
	{ 1, KRPING_UP, 1, 1, 1 },
	{ 2, KRPING_UP, 1, 2, 2 },
	{ 2, KRPING_DOWN, 1, 2, 2 },
	{ 3, KRPING_SHUFFLED, 2, 3, 3 },
	{ 10, KRPING_UP, 5, 10, 10 },
	{ 100, KRPING_DOWN, 50, 99, 100 },
	{ 1000, KRPING_UP, 500, 990, 999 },
	{ 1000, KRPING_DOWN, 500, 990, 999 },
	{ 1000, KRPING_SHUFFLED, 500, 990, 999 },
	{ 1001, KRPING_SHUFFLED, 501, 991, 1000 },
	{ 4095, KRPING_SHUFFLED, 2048, 4055, 4091 },
	{ 4096, KRPING_UP, 2048, 4056, 4092 },
	{ 4096, KRPING_SHUFFLED, 2048, 4056, 4092 },
	/* From here on, the histogram. */
	{ 4097, KRPING_UP, 2049, 4057, 4093 },
	{ 4097, KRPING_DOWN, 2049, 4057, 4093 },
	{ 10000, KRPING_SHUFFLED, 5000, 9900, 9990 },
	{ 65536, KRPING_UP, 32768, 64881, 65471 },
	{ 1000000, KRPING_SHUFFLED, 500000, 990000, 999000 },
	{ 1000000, KRPING_DOWN, 500000, 990000, 999000 },
};

static void krping_ramp_desc(const struct krping_ramp_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "1..%llu %s", c->n,
		 krping_order_names[c->order]);
}

KUNIT_ARRAY_PARAM(krping_ramp, krping_ramp_cases, krping_ramp_desc);

static void krping_test_ramp(struct kunit *test)
{
	const struct krping_ramp_case *c = test->param_value;
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	bool exact = c->n <= KRPING_LAT_EXACT;
	u64 *v = krping_test_array(test, c->n);
	u64 i, state = 0x9e3779b97f4a7c15ULL, s, nn1;

	for (i = 0; i < c->n; i++)
		v[i] = c->order == KRPING_DOWN ? c->n - i : i + 1;
	if (c->order == KRPING_SHUFFLED)
		krping_test_shuffle(v, c->n, &state);
	krping_test_add_all(lat, v, c->n);
	krping_lat_summarize(lat, &sum);

	KUNIT_EXPECT_EQ(test, sum.samples, c->n);
	KUNIT_EXPECT_EQ(test, sum.min_ns, 1);
	KUNIT_EXPECT_EQ(test, sum.max_ns, c->n);
	KUNIT_EXPECT_EQ(test, sum.mean_ns, (c->n + 1) / 2);
	/* The variance of 1..n is (n^2 - 1) / 12. */
	s = sum.stdev_ns;
	nn1 = c->n * c->n - 1;
	KUNIT_EXPECT_LE(test, 12 * s * s, nn1);
	KUNIT_EXPECT_GT(test, 12 * (s + 1) * (s + 1), nn1);
	krping_test_pct(test, "p50", sum.p50_ns, c->p50, exact);
	krping_test_pct(test, "p99", sum.p99_ns, c->p99, exact);
	krping_test_pct(test, "p999", sum.p999_ns, c->p999, exact);
	/* And the same by the formula. */
	KUNIT_EXPECT_EQ(test, krping_test_rank(c->n, 500), c->p50);
	KUNIT_EXPECT_EQ(test, krping_test_rank(c->n, 990), c->p99);
	KUNIT_EXPECT_EQ(test, krping_test_rank(c->n, 999), c->p999);
}

/*
 * na samples of a and nb of b > a, d = b - a. The mean is
 * a + d * nb / n, the stdev d * sqrt(na * nb) / n: the cases keep the
 * ratios at 1:1, 1:4 and 9:1, where both are d times a simple fraction.
 */
static const struct krping_two_case {
	u64 a, b, na, nb;
	u64 mean_num, sd_num, den;
} krping_two_cases[] = {
	{ 0, 1, 1, 1, 1, 1, 2 },
	{ 0, 2, 1, 1, 1, 1, 2 },
	{ 0, 3, 5, 5, 1, 1, 2 },
	{ 1000, 3000, 5000, 5000, 1, 1, 2 },
	{ 0, U64_MAX, 1, 1, 1, 1, 2 },
	{ 0, U64_MAX, 3000, 3000, 1, 1, 2 },
	{ U64_MAX - 10, U64_MAX, 1, 4, 4, 2, 5 },
	{ U64_MAX - 10, U64_MAX, 1000, 4000, 4, 2, 5 },
	{ 7, U64_MAX - 3, 2000, 8000, 4, 2, 5 },
	{ 1ULL << 40, 1ULL << 41, 9, 1, 1, 3, 10 },
	{ 1ULL << 40, 1ULL << 41, 9000, 1000, 1, 3, 10 },
	{ 1, U64_MAX, 90000, 10000, 1, 3, 10 },
	{ LAT_1E10, LAT_1E10 + 7, 100000, 400000, 4, 2, 5 },
	{ 2000, 3000, 900, 100, 1, 3, 10 },
};

static void krping_two_desc(const struct krping_two_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%llu x %llu, %llu x %llu",
		 c->na, c->a, c->nb, c->b);
}

KUNIT_ARRAY_PARAM(krping_two, krping_two_cases, krping_two_desc);

/* floor(d * num / den) without overflow, for num < den <= 10. */
static u64 krping_test_frac(u64 d, u64 num, u64 den)
{
	u64 rem, q = div64_u64_rem(d, den, &rem);

	return q * num + div64_u64(rem * num, den);
}

static void krping_test_two(struct kunit *test)
{
	const struct krping_two_case *c = test->param_value;
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	u64 n = c->na + c->nb, d = c->b - c->a, i;
	u64 *v = krping_test_array(test, n);
	u64 state = 0x0123456789abcdefULL;
	bool exact = n <= KRPING_LAT_EXACT;
	u64 rank;

	for (i = 0; i < n; i++)
		v[i] = i < c->na ? c->a : c->b;
	krping_test_shuffle(v, n, &state);
	krping_test_add_all(lat, v, n);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, n);
	KUNIT_EXPECT_EQ(test, sum.min_ns, c->a);
	KUNIT_EXPECT_EQ(test, sum.max_ns, c->b);
	KUNIT_EXPECT_EQ(test, sum.mean_ns,
			c->a + krping_test_frac(d, c->mean_num, c->den));
	KUNIT_EXPECT_EQ(test, sum.stdev_ns,
			krping_test_frac(d, c->sd_num, c->den));
	rank = krping_test_rank(n, 500);
	krping_test_pct(test, "p50", sum.p50_ns,
			rank <= c->na ? c->a : c->b, exact);
	rank = krping_test_rank(n, 990);
	krping_test_pct(test, "p99", sum.p99_ns,
			rank <= c->na ? c->a : c->b, exact);
	rank = krping_test_rank(n, 999);
	krping_test_pct(test, "p999", sum.p999_ns,
			rank <= c->na ? c->a : c->b, exact);
}

enum krping_dist {
	KRPING_UNIFORM,		/* [1, 1e10] */
	KRPING_LOG_UNIFORM,	/* 2^[0, 40) scaled, [1, 2^40] */
	KRPING_BIMODAL,		/* 99 %: ~2 us, 1 %: 1..2 s */
	KRPING_SMALL,		/* [0, 255]: the histogram is exact there */
	KRPING_NARROW,		/* 5e9 + [0, 2]: big mean, tiny stdev */
	KRPING_EXPONENTIAL,	/* geometric-ish around 10 us, long tail */
};

static const char *const krping_dist_names[] = {
	"uniform", "log-uniform", "bimodal", "small", "narrow", "exponential",
};

static u64 krping_test_sample(enum krping_dist dist, u64 *state)
{
	u64 e, v;

	switch (dist) {
	case KRPING_UNIFORM:
		return 1 + krping_test_below(state, LAT_1E10);
	case KRPING_LOG_UNIFORM:
		e = 1 + krping_test_below(state, 40);
		return 1 + (krping_test_rnd(state) >> (64 - e));
	case KRPING_BIMODAL:
		if (krping_test_below(state, 100))
			return 2000 + krping_test_below(state, 500);
		return LAT_1E9 + krping_test_below(state, LAT_1E9);
	case KRPING_SMALL:
		return krping_test_below(state, 256);
	case KRPING_NARROW:
		return 5 * LAT_1E9 + krping_test_below(state, 3);
	case KRPING_EXPONENTIAL:
		/* Halve the chance for every further 10 us. */
		v = 0;
		while (v < 60 && (krping_test_rnd(state) & 1))
			v++;
		return 1000 + v * 10000 + krping_test_below(state, 10000);
	}
	return 0;
}

static const struct krping_dist_case {
	enum krping_dist dist;
	u64 n;
} krping_dist_cases[] = {
	{ KRPING_UNIFORM, 1000 },
	{ KRPING_UNIFORM, KRPING_LAT_EXACT },
	{ KRPING_UNIFORM, KRPING_LAT_EXACT + 1 },
	{ KRPING_UNIFORM, LAT_MILLION },
	{ KRPING_LOG_UNIFORM, KRPING_LAT_EXACT },
	{ KRPING_LOG_UNIFORM, KRPING_LAT_EXACT + 1 },
	{ KRPING_LOG_UNIFORM, LAT_MILLION },
	{ KRPING_BIMODAL, KRPING_LAT_EXACT },
	{ KRPING_BIMODAL, KRPING_LAT_EXACT + 1 },
	{ KRPING_BIMODAL, LAT_MILLION },
	{ KRPING_SMALL, KRPING_LAT_EXACT + 1 },
	{ KRPING_SMALL, LAT_MILLION },
	{ KRPING_NARROW, KRPING_LAT_EXACT + 1 },
	{ KRPING_NARROW, LAT_MILLION },
	{ KRPING_EXPONENTIAL, KRPING_LAT_EXACT },
	{ KRPING_EXPONENTIAL, LAT_MILLION },
};

static void krping_dist_desc(const struct krping_dist_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s %llu",
		 krping_dist_names[c->dist], c->n);
}

KUNIT_ARRAY_PARAM(krping_dist, krping_dist_cases, krping_dist_desc);

static void krping_test_dist(struct kunit *test)
{
	const struct krping_dist_case *c = test->param_value;
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	u64 *v = krping_test_array(test, c->n);
	u64 i, state = 0x2545f4914f6cdd1dULL + c->n + c->dist;

	for (i = 0; i < c->n; i++)
		v[i] = krping_test_sample(c->dist, &state);
	krping_test_add_all(lat, v, c->n);
	krping_lat_summarize(lat, &sum);
	krping_test_check(test, &sum, v, c->n);
}

/*
 * The summary arithmetic at counts no test can add one by one: the
 * accumulators of na samples of a and nb of b, set directly.
 */
static const struct krping_count_case {
	u64 a, b, na, nb;
	u64 mean_num, sd_num, den;
} krping_count_cases[] = {
	{ LAT_1E10 - 12345, LAT_1E10, LAT_1E9 / 2, LAT_1E9 / 2, 1, 1, 2 },
	{ LAT_1E10 - 999999999, LAT_1E10, LAT_1E9 / 5, LAT_1E9 / 5 * 4,
	  4, 2, 5 },
	{ 1, LAT_1E10, LAT_1E9 / 10 * 9, LAT_1E9 / 10, 1, 3, 10 },
	{ 3, 4, LAT_1E9 / 2, LAT_1E9 / 2, 1, 1, 2 },
	{ 5000, 5003, 1ULL << 40, 1ULL << 42, 4, 2, 5 },
	{ 0, U64_MAX, 1ULL << 62, 1ULL << 62, 1, 1, 2 },
	{ U64_MAX - 1000, U64_MAX, 9ULL << 58, 1ULL << 58, 1, 3, 10 },
};

static void krping_count_desc(const struct krping_count_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%llu x %llu, %llu x %llu",
		 c->na, c->a, c->nb, c->b);
}

KUNIT_ARRAY_PARAM(krping_count, krping_count_cases, krping_count_desc);

#ifdef __SIZEOF_INT128__
/* acc[0..3) += n * x^2, with 128-bit integers. */
static void krping_test_mac3(u64 *acc, u64 n, u64 x)
{
	unsigned __int128 p = (unsigned __int128)x * x;
	unsigned __int128 t0 = (unsigned __int128)n * (u64)p;
	unsigned __int128 t1 = (unsigned __int128)n * (u64)(p >> 64);
	unsigned __int128 c;

	c = (unsigned __int128)acc[0] + (u64)t0;
	acc[0] = (u64)c;
	c = (c >> 64) + acc[1] + (u64)(t0 >> 64) + (u64)t1;
	acc[1] = (u64)c;
	c = (c >> 64) + acc[2] + (u64)(t1 >> 64);
	acc[2] = (u64)c;
}
#endif

static void krping_test_count(struct kunit *test)
{
#ifdef __SIZEOF_INT128__
	const struct krping_count_case *c = test->param_value;
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	unsigned __int128 s = (unsigned __int128)c->na * c->a;
	u64 d = c->b - c->a;

	s += (unsigned __int128)c->nb * c->b;

	lat->sum[0] = (u64)s;
	lat->sum[1] = (u64)(s >> 64);
	krping_test_mac3(lat->sumsq, c->na, c->a);
	krping_test_mac3(lat->sumsq, c->nb, c->b);
	lat->samples = c->na + c->nb;
	lat->min_ns = c->a;
	lat->max_ns = c->b;
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, c->na + c->nb);
	KUNIT_EXPECT_EQ(test, sum.mean_ns,
			c->a + krping_test_frac(d, c->mean_num, c->den));
	KUNIT_EXPECT_EQ(test, sum.stdev_ns,
			krping_test_frac(d, c->sd_num, c->den));
#else
	kunit_skip(test, "no 128-bit integers for the reference");
#endif
}

/* Reset forgets everything, and the storage is reused correctly. */
static void krping_test_reset(struct kunit *test)
{
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum, zero = {};
	u64 i;

	for (i = 0; i < 5000; i++)
		krping_lat_add(lat, U64_MAX - i);
	krping_lat_reset(lat);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_MEMEQ(test, &sum, &zero, sizeof(sum));

	/* Exact samples: only the new ones count. */
	for (i = 1000; i >= 1; i--)
		krping_lat_add(lat, i);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, 1000);
	KUNIT_EXPECT_EQ(test, sum.min_ns, 1);
	KUNIT_EXPECT_EQ(test, sum.max_ns, 1000);
	KUNIT_EXPECT_EQ(test, sum.mean_ns, 500);
	KUNIT_EXPECT_EQ(test, sum.stdev_ns, 288);	/* sqrt(999999 / 12) */
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 500);
	KUNIT_EXPECT_EQ(test, sum.p99_ns, 990);
	KUNIT_EXPECT_EQ(test, sum.p999_ns, 999);

	/* Histogram: nothing left of the first run's buckets. */
	krping_lat_reset(lat);
	for (i = 0; i < 5000; i++)
		krping_lat_add(lat, 7);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, 5000);
	KUNIT_EXPECT_EQ(test, sum.min_ns, 7);
	KUNIT_EXPECT_EQ(test, sum.max_ns, 7);
	KUNIT_EXPECT_EQ(test, sum.mean_ns, 7);
	KUNIT_EXPECT_EQ(test, sum.stdev_ns, 0);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 7);
	KUNIT_EXPECT_EQ(test, sum.p99_ns, 7);
	KUNIT_EXPECT_EQ(test, sum.p999_ns, 7);
}

/*
 * Summarizing in the middle of a run (which sorts the exact samples)
 * does not disturb what comes after, across the switch to the histogram.
 */
static void krping_test_midrun(struct kunit *test)
{
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_summary sum;
	u64 i;

	for (i = 1000; i > 500; i--)
		krping_lat_add(lat, i);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 750);
	for (i = 500; i >= 1; i--)
		krping_lat_add(lat, i);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, 1000);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 500);
	KUNIT_EXPECT_EQ(test, sum.p99_ns, 990);
	KUNIT_EXPECT_EQ(test, sum.p999_ns, 999);
	for (i = 0; i < 3096; i++)
		krping_lat_add(lat, 200);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, KRPING_LAT_EXACT);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 200);
	/* Ranks 4056 and 4092 of 1..1000 and 3096 x 200: 960 and 996. */
	KUNIT_EXPECT_EQ(test, sum.p99_ns, 960);
	KUNIT_EXPECT_EQ(test, sum.p999_ns, 996);
	krping_lat_add(lat, 200);
	krping_lat_summarize(lat, &sum);
	KUNIT_EXPECT_EQ(test, sum.samples, KRPING_LAT_EXACT + 1);
	KUNIT_EXPECT_EQ(test, sum.p50_ns, 200);
	/* Ranks 4057 and 4093: 960 and 996 still, now in buckets of 4. */
	krping_test_pct(test, "p99", sum.p99_ns, 960, false);
	krping_test_pct(test, "p999", sum.p999_ns, 996, false);
	KUNIT_EXPECT_EQ(test, sum.max_ns, 1000);
	KUNIT_EXPECT_EQ(test, sum.min_ns, 1);
}

/* The same samples in any order give the same summary. */
static const u64 krping_order_counts[] = { 1000, KRPING_LAT_EXACT,
					   KRPING_LAT_EXACT + 1, 100000 };

static void krping_order_desc(const u64 *n, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%llu samples", *n);
}

KUNIT_ARRAY_PARAM(krping_order, krping_order_counts, krping_order_desc);

static void krping_test_order(struct kunit *test)
{
	u64 n = *(const u64 *)test->param_value;
	u64 *v = krping_test_array(test, n);
	struct krping_lat_summary first, sum;
	u64 i, state = 42;
	unsigned int round;

	for (i = 0; i < n; i++)
		v[i] = krping_test_sample(KRPING_LOG_UNIFORM, &state);
	for (round = 0; round < 4; round++) {
		struct krping_lat *lat = krping_test_lat(test);

		if (round == 1)
			krping_test_shuffle(v, n, &state);
		else if (round == 2)
			sort(v, n, sizeof(*v), krping_test_cmp, NULL);
		else if (round == 3)
			for (i = 0; i < n / 2; i++)
				swap(v[i], v[n - 1 - i]);
		krping_test_add_all(lat, v, n);
		krping_lat_summarize(lat, round ? &sum : &first);
		if (round)
			KUNIT_EXPECT_MEMEQ_MSG(test, &sum, &first, sizeof(sum),
					       "round %u", round);
	}
}

/*
 * krping_lat_merge(): the samples of one run split over several runs in
 * uneven parts, merged into the first, give what one run of them all
 * gives: the same summary, histogram and exact sums. Counts around
 * KRPING_LAT_EXACT (exact percentiles up to it, the histogram beyond),
 * empty parts, and samples near U64_MAX for the carries of the sums.
 */
static const u64 krping_merge_counts[] = {
	0, 1, 7, 100, KRPING_LAT_EXACT - 1, KRPING_LAT_EXACT,
	KRPING_LAT_EXACT + 1, 3 * KRPING_LAT_EXACT + 5,
};

KUNIT_ARRAY_PARAM(krping_merge, krping_merge_counts, krping_order_desc);

static void krping_test_merge(struct kunit *test)
{
	u64 n = *(const u64 *)test->param_value;
	u64 *v = krping_test_array(test, n ? n : 1);
	struct krping_lat_summary want, got;
	struct krping_lat *all, *part[4];
	u64 i, state = 7;
	unsigned int k, round;

	for (round = 0; round < 2; round++) {
		for (i = 0; i < n; i++)
			v[i] = round ? U64_MAX - krping_test_below(&state, 3) :
			       krping_test_sample(KRPING_LOG_UNIFORM, &state);
		all = krping_test_lat(test);
		krping_test_add_all(all, v, n);
		for (k = 0; k < ARRAY_SIZE(part); k++)
			part[k] = krping_test_lat(test);
		/* Parts of n/2, 0, n/3 and the rest: one of them empty. */
		krping_test_add_all(part[0], v, n / 2);
		krping_test_add_all(part[2], v + n / 2, n / 3);
		krping_test_add_all(part[3], v + n / 2 + n / 3,
				    n - n / 2 - n / 3);
		for (k = 1; k < ARRAY_SIZE(part); k++)
			krping_lat_merge(part[0], part[k]);

		KUNIT_EXPECT_EQ(test, part[0]->samples, n);
		KUNIT_EXPECT_MEMEQ(test, part[0]->sum, all->sum,
				   sizeof(all->sum));
		KUNIT_EXPECT_MEMEQ(test, part[0]->sumsq, all->sumsq,
				   sizeof(all->sumsq));
		KUNIT_EXPECT_MEMEQ(test, part[0]->hist, all->hist,
				   sizeof(*all->hist));
		krping_lat_summarize(all, &want);
		krping_lat_summarize(part[0], &got);
		KUNIT_EXPECT_MEMEQ_MSG(test, &got, &want, sizeof(got),
				       "round %u", round);
	}
}

/*
 * Every bucket: its smallest and largest values map to it, they follow
 * on from the previous bucket, the last one ends at U64_MAX, and the
 * width stays below 1/128 of the values in it (1 below 256).
 */
static void krping_test_buckets(struct kunit *test)
{
	u64 lo = 0, hi = 0;
	unsigned int b;

	for (b = 0; b < KRPING_LAT_BUCKETS; b++) {
		hi = krping_lat_bucket_max(b);
		KUNIT_ASSERT_GE_MSG(test, hi, lo, "bucket %u", b);
		KUNIT_EXPECT_EQ_MSG(test, krping_lat_bucket(lo), b,
				    "bucket %u low %llu", b, lo);
		KUNIT_EXPECT_EQ_MSG(test, krping_lat_bucket(hi), b,
				    "bucket %u high %llu", b, hi);
		if (lo < 256)
			KUNIT_EXPECT_EQ_MSG(test, hi, lo, "bucket %u", b);
		else
			KUNIT_EXPECT_LE_MSG(test, hi - lo, (lo - 1) >> 7,
					    "bucket %u", b);
		lo = hi + 1;
	}
	KUNIT_EXPECT_EQ(test, hi, U64_MAX);
	KUNIT_EXPECT_EQ(test, krping_lat_bucket(U64_MAX),
			KRPING_LAT_BUCKETS - 1);
	KUNIT_EXPECT_EQ(test, krping_lat_bucket(1ULL << 40),
			(41 - KRPING_LAT_SUB_BITS) << KRPING_LAT_SUB_BITS);
}

/* The wide-integer helpers against 128-bit integers. */
static void krping_test_wide(struct kunit *test)
{
#ifdef __SIZEOF_INT128__
	static const u64 edge[] = { 0, 1, 2, 3, 255, 1ULL << 32,
				    (1ULL << 32) - 1, 1ULL << 63,
				    (1ULL << 63) - 1, U64_MAX - 1, U64_MAX };
	u64 state = 7;
	unsigned int i;

	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(0, 0), 0);
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(0, 1), 1);
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(0, 3), 1);
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(0, 4), 2);
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(U64_MAX, U64_MAX), U64_MAX);
	/* (2^64 - 1)^2 = (2^64 - 2) * 2^64 + 1 */
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(U64_MAX - 1, 1), U64_MAX);
	KUNIT_EXPECT_EQ(test, krping_lat_sqrt128(U64_MAX - 1, 0), U64_MAX - 1);

	for (i = 0; i < 20000; i++) {
		u64 a = i < ARRAY_SIZE(edge) ? edge[i] :
			krping_test_rnd(&state);
		u64 b = krping_test_rnd(&state) >> (i % 64);
		u64 acc[3] = { U64_MAX, U64_MAX, 0 };
		unsigned __int128 x, r, want;
		u64 q, rem, d, hi;

		if (i >= ARRAY_SIZE(edge) && i % 3 == 0)
			a >>= krping_test_below(&state, 64);
		/* mac onto 2^128 - 1: a carry through both low words */
		krping_lat_mac(acc, 3, a, b);
		want = (unsigned __int128)a * b;
		x = (unsigned __int128)acc[1] << 64 | acc[0];
		if (want)
			KUNIT_EXPECT_TRUE(test, acc[2] == 1 && x == want - 1);
		else
			KUNIT_EXPECT_TRUE(test, acc[2] == 0 &&
					  x == ~(unsigned __int128)0);
		/* div128: quotient and remainder rebuild the dividend */
		d = b | 1;
		hi = krping_test_below(&state, d);
		q = krping_lat_div128(hi, a, d, &rem);
		x = (unsigned __int128)hi << 64 | a;
		KUNIT_EXPECT_LT(test, rem, d);
		KUNIT_EXPECT_TRUE(test, (unsigned __int128)q * d + rem == x);
		/* sqrt128 */
		x = (unsigned __int128)krping_test_rnd(&state) << 64 | a;
		x >>= i % 128;
		r = krping_lat_sqrt128((u64)(x >> 64), (u64)x);
		KUNIT_EXPECT_TRUE(test, r * r <= x);
		KUNIT_EXPECT_TRUE(test, r == U64_MAX || (r + 1) * (r + 1) > x);
	}
#else
	kunit_skip(test, "no 128-bit integers for the reference");
#endif
}

/*
 * The export of the histogram (latency/histogram). The reference below
 * finds the bucket of a value from the bucket widths alone: 2^m below
 * 128, else 2^(ilog2(v) - 7 + m), aligned to its width.
 */
KUNIT_DEFINE_ACTION_WRAPPER(krping_test_buckets_free, krping_lat_buckets_free,
			    struct krping_lat_buckets *);

static void krping_test_ref_bucket(u64 v, unsigned int m, u64 *low, u64 *high)
{
	u64 w = 1ULL << m;

	if (v >= 128)
		w <<= ilog2(v) - 7;
	*low = v & ~(w - 1);
	*high = *low + (w - 1);
}

/* The buckets of the sorted @v[0..n) at merge level @m; returns how many. */
static size_t krping_test_ref_export(const u64 *v, size_t n, unsigned int m,
				     struct krping_lat_bucket *out)
{
	size_t i, nr = 0;
	u64 low, high;

	for (i = 0; i < n; i++) {
		krping_test_ref_bucket(v[i], m, &low, &high);
		if (nr && out[nr - 1].low_ns == low) {
			out[nr - 1].count++;
			continue;
		}
		out[nr].low_ns = low;
		out[nr].high_ns = high;
		out[nr].count = 1;
		nr++;
	}
	return nr;
}

static size_t krping_test_text_len(const struct krping_lat_bucket *b,
				   size_t nr)
{
	char line[80];
	size_t i, len = 0;

	for (i = 0; i < nr; i++)
		len += snprintf(line, sizeof(line), KRPING_LAT_BUCKET_FMT,
				b[i].low_ns, b[i].high_ns, b[i].count);
	return len;
}

/*
 * Export the samples @v[0..n) (in any order; sorted here) with @max_len
 * and compare with the reference: the finest level that fits, bucket by
 * bucket, the counts adding up to @n, each line's length. Returns the
 * merge level, or -1 when nothing fits.
 */
static int krping_test_export(struct kunit *test, u64 *v, size_t n,
			      size_t max_len)
{
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_bucket *ref;
	struct krping_lat_buckets *out;
	size_t nr = 0, i;
	unsigned int m;
	u64 sum = 0;

	krping_test_add_all(lat, v, n);
	sort(v, n, sizeof(*v), krping_test_cmp, NULL);
	ref = kvmalloc_array(n, sizeof(*ref), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ref);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							krping_test_kvfree,
							ref), 0);
	for (m = 0; m <= KRPING_LAT_SUB_BITS; m++) {
		nr = krping_test_ref_export(v, n, m, ref);
		if (krping_test_text_len(ref, nr) <= max_len)
			break;
	}
	out = krping_lat_export(lat, max_len, GFP_KERNEL);
	if (m > KRPING_LAT_SUB_BITS) {
		KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(out), -E2BIG);
		return -1;
	}
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(out));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							krping_test_buckets_free,
							out), 0);
	KUNIT_EXPECT_EQ(test, out->merge_bits, m);
	KUNIT_ASSERT_EQ(test, out->nr, nr);
	for (i = 0; i < nr; i++) {
		const struct krping_lat_bucket *b = &out->b[i];

		KUNIT_EXPECT_EQ_MSG(test, b->low_ns, ref[i].low_ns, "bucket %zu", i);
		KUNIT_EXPECT_EQ_MSG(test, b->high_ns, ref[i].high_ns,
				    "bucket %zu", i);
		KUNIT_EXPECT_EQ_MSG(test, b->count, ref[i].count, "bucket %zu", i);
		KUNIT_EXPECT_EQ_MSG(test, krping_lat_bucket_len(b),
				    krping_test_text_len(b, 1), "bucket %zu", i);
		if (i)
			KUNIT_EXPECT_GT_MSG(test, b->low_ns, out->b[i - 1].high_ns,
					    "bucket %zu", i);
		sum += b->count;
	}
	KUNIT_EXPECT_EQ(test, sum, n);
	KUNIT_EXPECT_LE(test, krping_test_text_len(out->b, out->nr), max_len);
	KUNIT_EXPECT_LE(test, out->b[0].low_ns, v[0]);
	KUNIT_EXPECT_GE(test, out->b[nr - 1].high_ns, v[n - 1]);
	return m;
}

static void krping_test_export_empty(struct kunit *test)
{
	struct krping_lat *lat = krping_test_lat(test);

	KUNIT_EXPECT_NULL(test, krping_lat_export(lat, SIZE_MAX, GFP_KERNEL));
	krping_lat_add(lat, 5);
	krping_lat_reset(lat);
	KUNIT_EXPECT_NULL(test, krping_lat_export(lat, SIZE_MAX, GFP_KERNEL));
	/* NULL and error pointers are ignored */
	krping_lat_buckets_free(NULL);
	krping_lat_buckets_free(ERR_PTR(-ENOMEM));
}

/* Hand-checked buckets at full resolution. */
static void krping_test_export_known(struct kunit *test)
{
	static const u64 in[] = { 1000, 0, 1, 127, 128, 255, 256, 257, 1003,
				  1000, 1004, U64_MAX, 1ULL << 63 };
	static const struct krping_lat_bucket want[] = {
		{ 0, 0, 1 }, { 1, 1, 1 }, { 127, 127, 1 }, { 128, 128, 1 },
		{ 255, 255, 1 }, { 256, 257, 2 }, { 1000, 1003, 3 },
		{ 1004, 1007, 1 },
		{ 1ULL << 63, (1ULL << 63) + (1ULL << 56) - 1, 1 },
		{ U64_MAX - ((1ULL << 56) - 1), U64_MAX, 1 },
	};
	struct krping_lat *lat = krping_test_lat(test);
	struct krping_lat_buckets *out;
	unsigned int i;

	krping_test_add_all(lat, in, ARRAY_SIZE(in));
	out = krping_lat_export(lat, SIZE_MAX, GFP_KERNEL);
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(out));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test,
							krping_test_buckets_free,
							out), 0);
	KUNIT_EXPECT_EQ(test, out->merge_bits, 0);
	KUNIT_ASSERT_EQ(test, out->nr, ARRAY_SIZE(want));
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		KUNIT_EXPECT_EQ_MSG(test, out->b[i].low_ns, want[i].low_ns,
				    "bucket %u", i);
		KUNIT_EXPECT_EQ_MSG(test, out->b[i].high_ns, want[i].high_ns,
				    "bucket %u", i);
		KUNIT_EXPECT_EQ_MSG(test, out->b[i].count, want[i].count,
				    "bucket %u", i);
	}
	/* the longest line there can be */
	{
		struct krping_lat_bucket b = { 1ULL << 63, U64_MAX, U64_MAX };

		KUNIT_EXPECT_EQ(test, krping_lat_bucket_len(&b), 62);
		KUNIT_EXPECT_EQ(test, krping_test_text_len(&b, 1), 62);
	}
}

/*
 * 20000 samples, log-uniform over [0, 2^40) (past KRPING_LAT_EXACT, so
 * the exact samples are in the histogram once like the others), exported
 * into ever smaller budgets: the level grows, never past one bucket per
 * power of two, and a budget below that level's text is -E2BIG.
 */
static void krping_test_export_budgets(struct kunit *test)
{
	static const size_t budget[] = { SIZE_MAX, PAGE_SIZE - 1, 3596, 2000,
					 800, 300, 10 };
	const size_t n = 20000;
	u64 *v = krping_test_array(test, n);
	u64 state = 99;
	int m, last = 0;
	size_t i, j;

	for (j = 0; j < ARRAY_SIZE(budget); j++) {
		state = 99;
		for (i = 0; i < n; i++) {
			u64 r = krping_test_rnd(&state);

			v[i] = r >> (24 + krping_test_below(&state, 40));
		}
		m = krping_test_export(test, v, n, budget[j]);
		if (m < 0) {
			KUNIT_EXPECT_LT(test, budget[j], 3596);
			continue;
		}
		KUNIT_EXPECT_GE(test, m, last);
		last = m;
	}
	KUNIT_EXPECT_GT(test, last, 0);
}

/*
 * One sample in every bucket of the histogram: full resolution takes
 * 7424 lines; a page, or 3596 characters (what 58 lines of one bucket
 * per power of two take at most), needs merged buckets and gets them.
 */
static void krping_test_export_every_bucket(struct kunit *test)
{
	const size_t n = KRPING_LAT_BUCKETS;
	u64 *v = krping_test_array(test, n);
	size_t i = 0;
	unsigned int e, j;

	for (j = 0; j < 128; j++)
		v[i++] = j;
	for (e = 7; e < 64; e++)
		for (j = 0; j < 128; j++)
			v[i++] = (u64)(128 + j) << (e - 7);
	KUNIT_ASSERT_EQ(test, i, n);
	KUNIT_EXPECT_EQ(test, krping_test_export(test, v, n, SIZE_MAX), 0);
	KUNIT_EXPECT_GT(test, krping_test_export(test, v, n, 3596), 0);
	KUNIT_EXPECT_GT(test, krping_test_export(test, v, n, PAGE_SIZE - 1),
			0);
}

static struct kunit_case krping_latency_test_cases[] = {
	KUNIT_CASE(krping_test_empty),
	KUNIT_CASE(krping_test_free_twice),
	KUNIT_CASE_PARAM(krping_test_const, krping_const_gen_params),
	KUNIT_CASE_PARAM(krping_test_ramp, krping_ramp_gen_params),
	KUNIT_CASE_PARAM(krping_test_two, krping_two_gen_params),
	KUNIT_CASE_PARAM(krping_test_dist, krping_dist_gen_params),
	KUNIT_CASE_PARAM(krping_test_count, krping_count_gen_params),
	KUNIT_CASE(krping_test_reset),
	KUNIT_CASE(krping_test_midrun),
	KUNIT_CASE_PARAM(krping_test_order, krping_order_gen_params),
	KUNIT_CASE_PARAM(krping_test_merge, krping_merge_gen_params),
	KUNIT_CASE(krping_test_buckets),
	KUNIT_CASE(krping_test_wide),
	KUNIT_CASE(krping_test_export_empty),
	KUNIT_CASE(krping_test_export_known),
	KUNIT_CASE(krping_test_export_budgets),
	KUNIT_CASE(krping_test_export_every_bucket),
	{}
};

static struct kunit_suite krping_latency_test_suite = {
	.name = "krping_latency",
	.test_cases = krping_latency_test_cases,
};

kunit_test_suite(krping_latency_test_suite);

MODULE_DESCRIPTION("KUnit tests of krping's latency statistics");
MODULE_LICENSE("Dual BSD/GPL");
