// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Latency statistics of a run: exact min, max, mean and stdev; exact
 * percentiles of the first KRPING_LAT_EXACT samples; beyond that,
 * percentiles from a log-linear histogram with a bounded relative error.
 *
 * The histogram. Values below 2^KRPING_LAT_SUB_BITS = 128 have a bucket
 * each. Above, each power of two [2^k, 2^(k+1)), k = 7..63, is cut into
 * 128 linear buckets of width 2^(k-7): 58 groups of 128 buckets cover
 * every u64 from 0 to U64_MAX, so no value is out of range and nothing
 * is clamped on the way in (8 bytes a bucket: 58 KiB).
 *
 * A percentile from the histogram is the largest value of the bucket
 * holding the sample of that rank, clamped to [min, max]. The bound: if
 * the exact percentile v lies in the bucket [lo, lo + 2^s - 1] with
 * lo >= 128 * 2^s, the reported value r satisfies
 *
 *	v <= r <= v + 2^s - 1 < v * (1 + 2^-7)
 *
 * so a percentile is never below the exact one and exceeds it by less than
 * 1/128 (0.78125 %) of it; values below 256 are exact (buckets of width 1).
 * Clamping to max keeps r >= v, since v <= max.
 *
 * Mean and stdev. The sum of the samples (128 bits) and the sum of their
 * squares (192 bits) are kept exactly in integer words, and the summary
 * computes the floors of S / n and of sqrt((n * Q - S^2) / n^2) from them
 * with 256-bit intermediates. This is what Welford's algorithm is for in
 * floating point (no cancellation), without its integer pitfall: a
 * running mean rounded to an integer biases the sum of squared deviations
 * on every step. Both results are exact (rounded down) for any samples
 * and any count below 2^64; adding costs two 64-bit additions and one
 * 64x64->128 multiply.
 *
 * Export. krping_lat_export() lists the non-empty buckets for sysfs
 * latency/histogram, a file that must fit in one page: adjacent fine
 * buckets are merged, 2, 4, .. 128 at a time, until the text fits.
 * Only the view is coarsened; the percentiles use the fine buckets.
 */

#include <linux/bitops.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/limits.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>

#include "latency.h"

#define KRPING_LAT_SUB_BITS	7
#define KRPING_LAT_SUB		BIT(KRPING_LAT_SUB_BITS)
/* Group 0: 0..127 one by one; groups 1..57: [2^7, 2^8) .. [2^63, 2^64). */
#define KRPING_LAT_GROUPS	(64 - KRPING_LAT_SUB_BITS + 1)
#define KRPING_LAT_BUCKETS	(KRPING_LAT_GROUPS * KRPING_LAT_SUB)

struct krping_lat_hist {
	u64 count[KRPING_LAT_BUCKETS];
};

/* The percentiles of struct krping_lat_summary, in per mille. */
static const unsigned int krping_lat_permille[] = { 500, 990, 999 };

static unsigned int krping_lat_bucket(u64 ns)
{
	unsigned int shift;

	if (ns < KRPING_LAT_SUB)
		return ns;
	/* ns >> shift is in [128, 255]: the sub-bucket plus 128. */
	shift = fls64(ns) - 1 - KRPING_LAT_SUB_BITS;
	return ((shift + 1) << KRPING_LAT_SUB_BITS) +
	       (unsigned int)(ns >> shift) - KRPING_LAT_SUB;
}

/* The largest value that falls into bucket @b (U64_MAX for the last). */
static u64 krping_lat_bucket_max(unsigned int b)
{
	unsigned int group = b >> KRPING_LAT_SUB_BITS;
	unsigned int shift;

	if (!group)
		return b;
	shift = group - 1;
	return (((u64)(b & (KRPING_LAT_SUB - 1)) + KRPING_LAT_SUB) << shift) +
	       ((1ULL << shift) - 1);
}

/*
 * Nearest rank of the @permille-th percentile of @n samples (1-based):
 * ceil(n * permille / 1000), computed without overflow.
 */
static u64 krping_lat_rank(u64 n, unsigned int permille)
{
	u32 rem;
	u64 q = div_u64_rem(n, 1000, &rem);

	return q * permille + DIV_ROUND_UP(rem * permille, 1000);
}

/* acc[0..len) += a * b; the caller guarantees that the sum fits. */
static void krping_lat_mac(u64 *acc, unsigned int len, u64 a, u64 b)
{
	u64 lo = a * b;
	u64 hi = mul_u64_u64_shr(a, b, 64);	/* <= U64_MAX - 1 */
	unsigned int i;

	acc[0] += lo;
	hi += acc[0] < lo;
	for (i = 1; i < len && hi; i++) {
		acc[i] += hi;
		hi = acc[i] < hi;
	}
}

/*
 * (hi * 2^64 + lo) / d for hi < d, so that the quotient fits in 64 bits;
 * the remainder goes to *rem.
 */
static u64 krping_lat_div128(u64 hi, u64 lo, u64 d, u64 *rem)
{
	unsigned int i;

	if (!hi)
		return div64_u64_rem(lo, d, rem);
	/* Restoring division, one quotient bit at a time. */
	for (i = 0; i < 64; i++) {
		u64 top = hi >> 63;

		hi = hi << 1 | lo >> 63;
		lo <<= 1;
		if (top || hi >= d) {
			hi -= d;
			lo |= 1;
		}
	}
	*rem = hi;
	return lo;
}

/* x[0..len) /= d, most significant word last; returns the remainder. */
static u64 krping_lat_div(u64 *x, unsigned int len, u64 d)
{
	u64 rem = 0;

	while (len--)
		x[len] = krping_lat_div128(rem, x[len], d, &rem);
	return rem;
}

/* floor(sqrt(hi * 2^64 + lo)), one result bit at a time. */
static u64 krping_lat_sqrt128(u64 hi, u64 lo)
{
	u64 r = 0;
	int b;

	for (b = 63; b >= 0; b--) {
		u64 t = r | 1ULL << b;
		u64 thi = mul_u64_u64_shr(t, t, 64);

		if (thi < hi || (thi == hi && t * t <= lo))
			r = t;
	}
	return r;
}

/*
 * floor(sqrt((n * Q - S^2) / n^2)): the population standard deviation of
 * @n samples whose sum is @sum (S) and sum of squares @sumsq (Q).
 * n * Q - S^2 = sum over pairs i < j of (x_i - x_j)^2 is >= 0 and below
 * 2^256; divided by n^2 it is the variance, below 2^126.
 */
static u64 krping_lat_stdev(u64 n, const u64 *sum, const u64 *sumsq)
{
	u64 nq[4] = {}, s2[4] = {};
	u64 borrow = 0;
	unsigned int i, j;

	for (i = 0; i < 3; i++)
		krping_lat_mac(nq + i, 4 - i, n, sumsq[i]);
	for (i = 0; i < 2; i++)
		for (j = 0; j < 2; j++)
			krping_lat_mac(s2 + i + j, 4 - i - j, sum[i], sum[j]);
	for (i = 0; i < 4; i++) {
		u64 d = nq[i] - s2[i] - borrow;

		borrow = nq[i] < s2[i] || (nq[i] == s2[i] && borrow);
		nq[i] = d;
	}
	/* floor(floor(x / n) / n) == floor(x / n^2) */
	krping_lat_div(nq, 4, n);
	krping_lat_div(nq, 4, n);
	return krping_lat_sqrt128(nq[1], nq[0]);
}

static int krping_lat_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return (x > y) - (x < y);
}

/**
 * krping_lat_init() - allocate the sample storage and reset
 * @lat: the statistics; its previous contents are ignored
 *
 * Context: process context, may sleep (GFP_KERNEL).
 * Return: 0, or -ENOMEM with nothing allocated.
 */
int krping_lat_init(struct krping_lat *lat)
{
	memset(lat, 0, sizeof(*lat));
	lat->exact = kvmalloc_array(KRPING_LAT_EXACT, sizeof(*lat->exact),
				    GFP_KERNEL);
	lat->hist = kvmalloc(sizeof(*lat->hist), GFP_KERNEL);
	if (!lat->exact || !lat->hist) {
		krping_lat_free(lat);
		return -ENOMEM;
	}
	krping_lat_reset(lat);
	return 0;
}

/**
 * krping_lat_free() - free the sample storage
 * @lat: the statistics; zeroed, so freeing twice is harmless
 */
void krping_lat_free(struct krping_lat *lat)
{
	kvfree(lat->exact);
	kvfree(lat->hist);
	memset(lat, 0, sizeof(*lat));
}

/**
 * krping_lat_reset() - forget every sample, keep the storage
 * @lat: statistics set up by krping_lat_init()
 */
void krping_lat_reset(struct krping_lat *lat)
{
	lat->samples = 0;
	lat->min_ns = 0;
	lat->max_ns = 0;
	memset(lat->sum, 0, sizeof(lat->sum));
	memset(lat->sumsq, 0, sizeof(lat->sumsq));
	memset(lat->hist, 0, sizeof(*lat->hist));
}

/**
 * krping_lat_add() - add one sample
 * @lat: statistics set up by krping_lat_init()
 * @ns: the sample, any u64
 *
 * O(1), allocation and lock free, for the run's busy loop. At most
 * 2^64 - 1 samples between two resets.
 */
void krping_lat_add(struct krping_lat *lat, u64 ns)
{
	if (lat->samples < KRPING_LAT_EXACT)
		lat->exact[lat->samples] = ns;
	if (ns < lat->min_ns || !lat->samples)
		lat->min_ns = ns;
	if (ns > lat->max_ns)
		lat->max_ns = ns;
	lat->hist->count[krping_lat_bucket(ns)]++;
	lat->sum[0] += ns;
	lat->sum[1] += lat->sum[0] < ns;
	krping_lat_mac(lat->sumsq, ARRAY_SIZE(lat->sumsq), ns, ns);
	lat->samples++;
}

/**
 * krping_lat_merge() - add the samples of one run to another's
 * @dst: statistics set up by krping_lat_init(), added to
 * @src: statistics set up by krping_lat_init(), unchanged (but for the
 *	order of its exact samples, which krping_lat_summarize() may sort)
 *
 * The result is what adding each sample of @src to @dst would have
 * given, but for which samples are kept exactly: the exact samples of
 * @src follow those of @dst while there is room. As long as the merged
 * count is at most KRPING_LAT_EXACT, every sample is kept, so the merged
 * percentiles are exact too. At most 2^64 - 1 samples in all.
 */
void krping_lat_merge(struct krping_lat *dst, const struct krping_lat *src)
{
	u64 room, carry;
	unsigned int i;

	if (!src->samples)
		return;
	if (dst->samples < KRPING_LAT_EXACT) {
		room = min_t(u64, KRPING_LAT_EXACT - dst->samples,
			     min_t(u64, src->samples, KRPING_LAT_EXACT));
		memcpy(dst->exact + dst->samples, src->exact,
		       room * sizeof(*dst->exact));
	}
	if (!dst->samples || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	for (i = 0; i < KRPING_LAT_BUCKETS; i++)
		dst->hist->count[i] += src->hist->count[i];
	for (i = 0, carry = 0; i < ARRAY_SIZE(dst->sum); i++) {
		u64 a = dst->sum[i] + carry, b = a + src->sum[i];

		carry = (a < carry) + (b < a);
		dst->sum[i] = b;
	}
	for (i = 0, carry = 0; i < ARRAY_SIZE(dst->sumsq); i++) {
		u64 a = dst->sumsq[i] + carry, b = a + src->sumsq[i];

		carry = (a < carry) + (b < a);
		dst->sumsq[i] = b;
	}
	dst->samples += src->samples;
}

/**
 * krping_lat_summarize() - compute what sysfs shows
 * @lat: statistics set up by krping_lat_init()
 * @sum: the summary; all zero without samples
 *
 * samples, min, max are exact; mean and stdev exact, rounded down.
 * Percentiles are by nearest rank: exact while at most KRPING_LAT_EXACT
 * samples were added (the exact samples are sorted in place, which adding
 * more samples afterwards does not mind), from the histogram beyond,
 * never below the exact value and less than 1/128 above it.
 */
void krping_lat_summarize(struct krping_lat *lat,
			  struct krping_lat_summary *sum)
{
	u64 n = lat->samples;
	u64 *pct[] = { &sum->p50_ns, &sum->p99_ns, &sum->p999_ns };
	u64 s[2], seen = 0;
	unsigned int i, b = 0;

	BUILD_BUG_ON(ARRAY_SIZE(pct) != ARRAY_SIZE(krping_lat_permille));
	memset(sum, 0, sizeof(*sum));
	if (!n)
		return;
	sum->samples = n;
	sum->min_ns = lat->min_ns;
	sum->max_ns = lat->max_ns;
	/* S < n * 2^64, so the quotient is in s[0]. */
	memcpy(s, lat->sum, sizeof(s));
	krping_lat_div(s, ARRAY_SIZE(s), n);
	sum->mean_ns = s[0];
	sum->stdev_ns = krping_lat_stdev(n, lat->sum, lat->sumsq);

	if (n <= KRPING_LAT_EXACT) {
		sort(lat->exact, n, sizeof(*lat->exact), krping_lat_cmp, NULL);
		for (i = 0; i < ARRAY_SIZE(pct); i++)
			*pct[i] = lat->exact[krping_lat_rank(n,
						krping_lat_permille[i]) - 1];
		return;
	}
	/* The ranks increase, so one walk over the buckets finds them all. */
	for (i = 0; i < ARRAY_SIZE(pct); i++) {
		u64 rank = krping_lat_rank(n, krping_lat_permille[i]);

		while (seen + lat->hist->count[b] < rank &&
		       b < KRPING_LAT_BUCKETS - 1)
			seen += lat->hist->count[b++];
		*pct[i] = clamp(krping_lat_bucket_max(b), lat->min_ns,
				lat->max_ns);
	}
}

/* The smallest value that falls into bucket @b. */
static u64 krping_lat_bucket_min(unsigned int b)
{
	unsigned int group = b >> KRPING_LAT_SUB_BITS;

	if (!group)
		return b;
	return ((u64)(b & (KRPING_LAT_SUB - 1)) + KRPING_LAT_SUB) << (group - 1);
}

/* Decimal digits of @v. */
static unsigned int krping_lat_digits(u64 v)
{
	unsigned int n = 1;

	while (v >= 10) {
		v = div_u64(v, 10);
		n++;
	}
	return n;
}

/**
 * krping_lat_bucket_len() - length of a bucket's line in sysfs
 * @bucket: the bucket
 *
 * Return: the number of characters KRPING_LAT_BUCKET_FMT prints for
 * @bucket, newline included: at most 62 (19 + 20 + 20 digits, two
 * spaces, a newline; a low bound has at most 19 digits as it is below
 * 2^64 / 2).
 */
size_t krping_lat_bucket_len(const struct krping_lat_bucket *bucket)
{
	return krping_lat_digits(bucket->low_ns) +
	       krping_lat_digits(bucket->high_ns) +
	       krping_lat_digits(bucket->count) + 3;
}

/* Fine buckets merged into one: 1 (merge_bits 0) .. 128 (merge_bits 7). */
#define KRPING_LAT_MERGES	(KRPING_LAT_SUB_BITS + 1)

/* Bucket @c of the histogram with 2^@m fine buckets merged into one. */
static void krping_lat_coarse(struct krping_lat_bucket *out, unsigned int c,
			      unsigned int m, u64 count)
{
	out->low_ns = krping_lat_bucket_min(c << m);
	out->high_ns = krping_lat_bucket_max(((c + 1) << m) - 1);
	out->count = count;
}

/**
 * krping_lat_export() - the non-empty buckets of the histogram, for sysfs
 * @lat: statistics set up by krping_lat_init()
 * @max_len: the most characters the buckets may take when printed with
 *	KRPING_LAT_BUCKET_FMT, one line each
 * @gfp: allocation flags
 *
 * Every sample added to @lat (the first KRPING_LAT_EXACT ones too, which
 * are also kept aside for exact percentiles) is counted in exactly one
 * bucket, so the counts add up to @lat->samples. The buckets are those of
 * the histogram (see the top of this file) with 2^m adjacent fine buckets
 * merged into one, m = 0..7, and m is the smallest whose lines fit in
 * @max_len: 0 keeps the histogram's resolution (1/128 of a power of two),
 * 7 leaves one bucket per power of two. A merged bucket never straddles
 * a power of two, since 2^m divides the 128 fine buckets of one. With
 * m = 7 there are at most 58 lines of at most 62 characters, 3596 in all,
 * so any @max_len from 3596 on succeeds.
 *
 * Context: may sleep if @gfp allows it.
 * Return: NULL without samples; the buckets, to be freed with
 * krping_lat_buckets_free(); ERR_PTR(-ENOMEM), or ERR_PTR(-E2BIG) if even
 * one bucket per power of two does not fit in @max_len.
 */
struct krping_lat_buckets *krping_lat_export(const struct krping_lat *lat,
					     size_t max_len, gfp_t gfp)
{
	size_t len[KRPING_LAT_MERGES] = {};
	unsigned int nr[KRPING_LAT_MERGES] = {};
	unsigned int cur[KRPING_LAT_MERGES] = {};
	u64 sum[KRPING_LAT_MERGES] = {};
	struct krping_lat_buckets *out;
	struct krping_lat_bucket bk;
	unsigned int b, m, i = 0;

	if (!lat->samples)
		return NULL;

	/* One walk measures the lines of every merge level. */
	for (b = 0; b < KRPING_LAT_BUCKETS; b++) {
		u64 count = lat->hist->count[b];

		if (!count)
			continue;
		for (m = 0; m < KRPING_LAT_MERGES; m++) {
			if (sum[m] && cur[m] != b >> m) {
				krping_lat_coarse(&bk, cur[m], m, sum[m]);
				len[m] += krping_lat_bucket_len(&bk);
				sum[m] = 0;
			}
			if (!sum[m]) {
				cur[m] = b >> m;
				nr[m]++;
			}
			sum[m] += count;
		}
	}
	for (m = 0; m < KRPING_LAT_MERGES; m++) {
		krping_lat_coarse(&bk, cur[m], m, sum[m]);
		len[m] += krping_lat_bucket_len(&bk);
	}
	for (m = 0; m < KRPING_LAT_MERGES && len[m] > max_len; m++)
		;
	if (m == KRPING_LAT_MERGES)
		return ERR_PTR(-E2BIG);

	out = kvmalloc(struct_size(out, b, nr[m]), gfp);
	if (!out)
		return ERR_PTR(-ENOMEM);
	out->nr = nr[m];
	out->merge_bits = m;
	memset(out->b, 0, nr[m] * sizeof(out->b[0]));
	for (b = 0; b < KRPING_LAT_BUCKETS; b++) {
		u64 count = lat->hist->count[b];

		if (!count)
			continue;
		if (out->b[i].count && cur[m] != b >> m)
			i++;
		if (!out->b[i].count) {
			cur[m] = b >> m;
			krping_lat_coarse(&out->b[i], cur[m], m, 0);
		}
		out->b[i].count += count;
	}
	return out;
}

/**
 * krping_lat_buckets_free() - free what krping_lat_export() returned
 * @buckets: the buckets; NULL and error pointers are ignored
 */
void krping_lat_buckets_free(struct krping_lat_buckets *buckets)
{
	if (!IS_ERR_OR_NULL(buckets))
		kvfree(buckets);
}
