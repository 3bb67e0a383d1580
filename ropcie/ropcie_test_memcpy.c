// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie_test role=memcpy: the single-thread memcpy() bandwidth of this
 * kernel on this machine, the yardstick of ropcie's bandwidth (make
 * bench). Every byte ropcie moves is copied by a CPU, once on loopback and
 * twice over a link (into the shared window, out of it), so a link
 * cannot be faster than one CPU's memcpy between two buffers much larger
 * than the caches. Measured here rather than in user space: a Python
 * copy pays for the interpreter and page faults and flatters the ratio.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>
#include <linux/minmax.h>
#include <linux/sched.h>
#include <linux/sort.h>
#include <linux/vmalloc.h>

#include "ropcie_test.h"

#define RT_MC_BYTES	(64U << 20)
#define RT_MC_CHUNK	(4U << 20)	/* a chance to reschedule in between */
#define RT_MC_REPS	5

static int rt_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* One copy of RT_MC_BYTES from @src to @dst: MB/s (2^20 bytes). */
static u64 rt_memcpy_once(void *dst, const void *src)
{
	u64 t0, ns;
	u32 off;

	t0 = ktime_get_ns();
	for (off = 0; off < RT_MC_BYTES; off += RT_MC_CHUNK) {
		memcpy(dst + off, src + off, RT_MC_CHUNK);
		cond_resched();
	}
	ns = max_t(u64, ktime_get_ns() - t0, 1);
	return div64_u64((u64)RT_MC_BYTES * NSEC_PER_SEC, ns) >> 20;
}

/**
 * rt_memcpy_bench() - measure memcpy() between two 64 MiB buffers
 *
 * One warm-up copy, then RT_MC_REPS timed ones, checked afterwards. The
 * result line says "median N MB/s, runs A B C D E".
 */
void rt_memcpy_bench(void)
{
	u64 runs[RT_MC_REPS], sorted[RT_MC_REPS];
	char why[128];
	u8 *src, *dst;
	u32 i;

	src = vmalloc(RT_MC_BYTES);
	dst = vmalloc(RT_MC_BYTES);
	if (!src || !dst) {
		rt_result("memcpy", -ENOMEM, "no 2 x 64 MiB of vmalloc space");
		goto out;
	}
	for (i = 0; i < RT_MC_BYTES; i += PAGE_SIZE)
		memset(src + i, (u8)(i / PAGE_SIZE), PAGE_SIZE);
	rt_memcpy_once(dst, src);
	for (i = 0; i < RT_MC_REPS; i++)
		runs[i] = rt_memcpy_once(dst, src);
	if (memcmp(dst, src, RT_MC_BYTES)) {
		rt_result("memcpy", 1, "the copy differs from its source");
		goto out;
	}
	memcpy(sorted, runs, sizeof(runs));
	sort(sorted, RT_MC_REPS, sizeof(sorted[0]), rt_cmp_u64, NULL);
	snprintf(why, sizeof(why), "median %llu MB/s, runs %llu %llu %llu %llu %llu",
		 sorted[RT_MC_REPS / 2], runs[0], runs[1], runs[2], runs[3],
		 runs[4]);
	rt_result("memcpy", 0, why);
out:
	vfree(dst);
	vfree(src);
}
