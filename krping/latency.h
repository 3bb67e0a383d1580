/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Latency statistics of a run: min, max, mean, standard deviation and
 * percentiles of per-iteration samples in nanoseconds, in bounded memory
 * whatever the number of samples.
 *
 * The first KRPING_LAT_EXACT samples are kept as they are, so percentiles
 * of short runs are exact. Beyond that the samples go into a log-linear
 * histogram whose buckets bound the relative error of a percentile (see
 * latency.c for the figure). min, max, mean and stdev are always exact.
 *
 * Pure C (no ib_core), so that KUnit can test it on UML. Not thread safe:
 * one writer, the run's thread; summarize once the run is over.
 */
#ifndef KRPING_LATENCY_H
#define KRPING_LATENCY_H

#include <linux/types.h>

#define KRPING_LAT_EXACT	4096

struct krping_lat_hist;

/**
 * struct krping_lat - samples of one run
 * @samples: number of samples added
 * @min_ns: smallest sample
 * @max_ns: largest sample
 * @exact: the first KRPING_LAT_EXACT samples
 * @hist: histogram of every sample (allocated by krping_lat_init())
 * @sum: sum of the samples, 128 bits, least significant word first
 * @sumsq: sum of their squares, 192 bits, least significant word first
 *
 * @sum and @sumsq are exact whatever the samples and their number (below
 * 2^64), which makes the mean and the stdev exact too; see latency.c.
 */
struct krping_lat {
	u64 samples;
	u64 min_ns;
	u64 max_ns;
	u64 *exact;
	struct krping_lat_hist *hist;
	u64 sum[2];
	u64 sumsq[3];
};

/**
 * struct krping_lat_summary - what sysfs latency/ shows
 * @samples: number of samples
 * @min_ns: smallest
 * @max_ns: largest
 * @mean_ns: arithmetic mean, rounded down
 * @p50_ns: median
 * @p99_ns: 99th percentile
 * @p999_ns: 99.9th percentile
 * @stdev_ns: population standard deviation, rounded down
 */
struct krping_lat_summary {
	u64 samples;
	u64 min_ns;
	u64 max_ns;
	u64 mean_ns;
	u64 p50_ns;
	u64 p99_ns;
	u64 p999_ns;
	u64 stdev_ns;
};

/**
 * struct krping_lat_bucket - one bucket of an exported histogram
 * @low_ns: smallest value the bucket holds
 * @high_ns: largest value the bucket holds (inclusive)
 * @count: samples in [@low_ns, @high_ns], at least 1
 */
struct krping_lat_bucket {
	u64 low_ns;
	u64 high_ns;
	u64 count;
};

/* How sysfs latency/histogram prints one bucket. */
#define KRPING_LAT_BUCKET_FMT	"%llu %llu %llu\n"

/**
 * struct krping_lat_buckets - the non-empty buckets of a run's histogram
 * @nr: number of buckets in @b, at least 1
 * @merge_bits: each bucket is 2^@merge_bits adjacent fine buckets of the
 *	histogram (0..7; 7: one bucket per power of two)
 * @b: the buckets, ascending and disjoint
 */
struct krping_lat_buckets {
	unsigned int nr;
	unsigned int merge_bits;
	struct krping_lat_bucket b[];
};

/* Allocate (GFP_KERNEL) and reset. Returns 0 or -ENOMEM. */
int krping_lat_init(struct krping_lat *lat);
void krping_lat_free(struct krping_lat *lat);
void krping_lat_reset(struct krping_lat *lat);
/* Add one sample; O(1), no allocation, callable in a busy loop. */
void krping_lat_add(struct krping_lat *lat, u64 ns);
/* Add every sample of @src to @dst, as if each was added to it. */
void krping_lat_merge(struct krping_lat *dst, const struct krping_lat *src);
/*
 * Compute the summary (all zero without samples). Percentile p is the
 * smallest sample s such that at least p% of the samples are <= s
 * ("nearest rank"). May sort the exact samples in place.
 */
void krping_lat_summarize(struct krping_lat *lat,
			  struct krping_lat_summary *sum);

struct krping_lat_buckets *krping_lat_export(const struct krping_lat *lat,
					     size_t max_len, gfp_t gfp);
void krping_lat_buckets_free(struct krping_lat_buckets *buckets);
size_t krping_lat_bucket_len(const struct krping_lat_bucket *bucket);

#endif /* KRPING_LATENCY_H */
