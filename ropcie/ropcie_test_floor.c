// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie_test role=floor: the least a WRITE-and-spin ping-pong can cost
 * on this machine, the yardstick of ropcie's loopback latency (make
 * bench). Two kthreads on two CPUs pass one cache line back and forth,
 * each spinning until the other has written it: the two stores and two
 * cache-line transfers of every round trip are all a loopback wlat
 * iteration cannot avoid (its initiator writes, the target's spinner
 * sees it and writes back), so ropcie's 64 B wlat is reported as a
 * multiple of half a round trip here. Whatever is above it is ropcie's
 * and krping's own work (ropcie's profile splits it).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cache.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/sort.h>

#include "ropcie_test.h"

#define RT_FL_ROUNDS	20000
#define RT_FL_REPS	5
/* A side that waits this long for one move of the other gives up (ns). */
#define RT_FL_PATIENCE	(10 * NSEC_PER_SEC)

/*
 * The ball: round i is served by the pinger writing 2i + 1 and answered
 * by the ponger writing 2i + 2. Alone in its cache line, so that only
 * the two spinners move it. Static: the module runs one measurement at
 * a time, and static storage keeps the alignment under any allocator
 * debugging.
 */
static struct rt_floor {
	u32 ball ____cacheline_aligned;
	int err ____cacheline_aligned;
	u64 ns;
	struct completion done[2];
} rt_floor_state;

/*
 * Spin until the ball reads @want. Return: 0, the other side's error
 * once it gave up, or -ETIMEDOUT after RT_FL_PATIENCE without the ball
 * moving there. The clock is read only once a wait is long, so that the
 * spin measures the cache line and not the clock.
 */
static int rt_floor_wait(struct rt_floor *f, u32 want)
{
	unsigned int n = 0;
	u64 since = 0;

	while (READ_ONCE(f->ball) != want) {
		cpu_relax();
		if (++n & 0xfff)
			continue;
		if (READ_ONCE(f->err))
			return READ_ONCE(f->err);
		if (!since)
			since = ktime_get_ns();
		else if (ktime_get_ns() - since > RT_FL_PATIENCE)
			return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Both sides end with kthread_complete_and_exit(): once the waiter in
 * rt_floor_once() returns, the module may go, and no code of it may run
 * after the completion.
 */
static int rt_floor_ponger(void *arg)
{
	struct rt_floor *f = arg;
	u32 i;
	int ret;

	for (i = 0; i < RT_FL_ROUNDS; i++) {
		ret = rt_floor_wait(f, 2 * i + 1);
		if (ret) {
			cmpxchg(&f->err, 0, ret);
			break;
		}
		WRITE_ONCE(f->ball, 2 * i + 2);
	}
	kthread_complete_and_exit(&f->done[1], 0);
}

static int rt_floor_pinger(void *arg)
{
	struct rt_floor *f = arg;
	u64 t0 = ktime_get_ns();
	u32 i;
	int ret;

	for (i = 0; i < RT_FL_ROUNDS; i++) {
		WRITE_ONCE(f->ball, 2 * i + 1);
		ret = rt_floor_wait(f, 2 * i + 2);
		if (ret) {
			cmpxchg(&f->err, 0, ret);
			break;
		}
	}
	f->ns = ktime_get_ns() - t0;
	kthread_complete_and_exit(&f->done[0], 0);
}

/*
 * One run of RT_FL_ROUNDS round trips between CPUs @a and @b. Return:
 * the mean ns per round trip, or a negative errno. Each kthread ends by
 * itself (the other side's error or its own patience bounds it) and
 * signals its completion as it exits.
 */
static s64 rt_floor_once(struct rt_floor *f, int a, int b)
{
	struct task_struct *ping, *pong;

	f->ball = 0;
	f->err = 0;
	init_completion(&f->done[0]);
	init_completion(&f->done[1]);
	pong = kthread_create_on_cpu(rt_floor_ponger, f, b, "rt_pong/%u");
	if (IS_ERR(pong))
		return PTR_ERR(pong);
	ping = kthread_create_on_cpu(rt_floor_pinger, f, a, "rt_ping/%u");
	if (IS_ERR(ping)) {
		/* The ponger sees the error at its first long wait. */
		WRITE_ONCE(f->err, PTR_ERR(ping));
		wake_up_process(pong);
		wait_for_completion(&f->done[1]);
		return PTR_ERR(ping);
	}
	wake_up_process(pong);
	wake_up_process(ping);
	wait_for_completion(&f->done[0]);
	wait_for_completion(&f->done[1]);
	if (f->err)
		return f->err;
	return div_u64(f->ns, RT_FL_ROUNDS);
}

static int rt_floor_cmp(const void *a, const void *b)
{
	s64 x = *(const s64 *)a, y = *(const s64 *)b;

	return x < y ? -1 : x > y;
}

/**
 * rt_floor_bench() - measure a cache-line round trip between two CPUs
 *
 * One warm-up run, then RT_FL_REPS timed ones of RT_FL_ROUNDS round
 * trips each, between the first two online CPUs; each run gives its
 * mean (interrupts and a preempted vCPU count in it). The result line says
 * "median N ns per round trip, runs A B C D E"; with fewer than two
 * CPUs it fails with -ENODEV and says so.
 */
void rt_floor_bench(void)
{
	s64 runs[RT_FL_REPS], sorted[RT_FL_REPS], ret;
	struct rt_floor *f = &rt_floor_state;
	char why[128];
	int a, b, i;

	a = cpumask_first(cpu_online_mask);
	b = cpumask_next(a, cpu_online_mask);
	if (b >= nr_cpu_ids) {
		rt_result("floor", -ENODEV, "needs two online CPUs");
		return;
	}
	ret = rt_floor_once(f, a, b);
	for (i = 0; ret >= 0 && i < RT_FL_REPS; i++) {
		ret = rt_floor_once(f, a, b);
		runs[i] = ret;
	}
	if (ret < 0) {
		rt_result("floor", ret, ret == -ETIMEDOUT ?
			  "a side waited 10 s for the other" :
			  "a kthread could not start");
		return;
	}
	memcpy(sorted, runs, sizeof(runs));
	sort(sorted, RT_FL_REPS, sizeof(sorted[0]), rt_floor_cmp, NULL);
	snprintf(why, sizeof(why),
		 "median %lld ns per round trip, runs %lld %lld %lld %lld %lld",
		 sorted[RT_FL_REPS / 2], runs[0], runs[1], runs[2], runs[3],
		 runs[4]);
	rt_result("floor", 0, why);
}
