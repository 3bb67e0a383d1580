// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The runs of a session, in the session's thread: connect, run the test,
 * publish the latency and bandwidth figures, release everything.
 *
 * With qps = 1 the session's thread does its one run itself, as it always
 * did. With qps = N above 1 it starts N threads ("krping/<name>/<i>"),
 * each with a run of its own (rdma_cm id, PD, CQ, QP, buffers), and waits
 * for them: a group. A server listens once for all of them
 * (krping_listen()): a krping client's hello names the index of each
 * connection, and the listener hands it to that run. The first run that
 * fails stops the others (krping_group_fail()), and its error is the
 * session's; stopping the session stops every run. The figures are
 * published once all runs have ended: counters per run (stats[i], summed
 * in stats/), latency from the merged samples of all runs, bandwidth as
 * the bytes of all runs over the time from the first run's start to the
 * last one's end.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include "run.h"

static struct krping_run *krping_run_new(struct krping_session *sess,
					 const struct krping_options *opts)
{
	struct krping_run *run;

	run = kzalloc(sizeof(*run), GFP_KERNEL);
	if (!run)
		return NULL;
	if (krping_lat_init(&run->lat)) {
		kfree(run);
		return NULL;
	}
	krping_run_init(run, sess, opts);
	return run;
}

static void krping_run_free(struct krping_run *run)
{
	if (!run)
		return;
	krping_lat_free(&run->lat);
	kfree(run);
}

/* Connect, run the test and release the run's RDMA resources. */
static int krping_run_body(struct krping_run *run)
{
	int ret;

	if (run->opts->role == KRPING_ROLE_CLIENT)
		ret = krping_connect(run);
	else
		ret = krping_accept(run);
	if (!ret) {
		krping_run_state(run, KRPING_STATE_RUNNING);
		if (run->opts->test == KRPING_TEST_PING)
			ret = krping_ping(run);
		else
			ret = krping_bench(run);
	}
	return krping_conn_errno(ret);
}

/**
 * krping_group_fail() - end every run of a group
 * @grp: the group
 * @err: why: a run's negative errno, or -EINTR when it was stopped
 *
 * The first error is the session's. Called by the runs' threads, the
 * session's thread and the group's CM handler.
 */
void krping_group_fail(struct krping_group *grp, int err)
{
	u32 i;

	cmpxchg(&grp->error, 0, err);
	WRITE_ONCE(grp->stop, true);
	for (i = 0; i < grp->n; i++)
		krping_wake(grp->runs[i]);
	wake_up(&grp->wq);
}

static int krping_qp_thread(void *data)
{
	struct krping_run *run = data;
	struct krping_group *grp = run->grp;
	int ret;

	/* SIGKILL from an administrator ends the session like start=0. */
	allow_signal(SIGKILL);
	ret = krping_run_body(run);
	krping_teardown(run);
	set_bit(run->index, grp->torn_down);
	if (ret)
		krping_group_fail(grp, ret == -ERESTARTSYS ? -EINTR : ret);
	atomic_inc(&grp->done);
	wake_up(&grp->wq);
	/* The task reference lets kthread_stop() reap it after its exit. */
	return ret;
}

/*
 * Merge the figures of a group's runs: the latency samples into its
 * first run's, the bandwidth into @bw.
 */
static void krping_group_merge(struct krping_group *grp,
			       struct krping_bw_result *bw)
{
	struct krping_run *first = grp->runs[0];
	struct krping_bw_result res;
	u64 start = 0, end = 0;
	u32 i;

	memset(bw, 0, sizeof(*bw));
	for (i = 0; i < grp->n; i++) {
		struct krping_run *run = grp->runs[i];

		if (i)
			krping_lat_merge(&first->lat, &run->lat);
		krping_bench_bw_result(run, &res);
		if (!res.bytes)
			continue;
		if (!start || res.start_ns < start)
			start = res.start_ns;
		end = max(end, res.start_ns + res.ns);
		bw->msgs += res.msgs;
		bw->bytes += res.bytes;
	}
	bw->ns = end - start;
}

/*
 * The session's thread with qps above 1: start a thread per run, wait
 * until every run has ended, or until one fails or the session is told
 * to stop, then stop and reap them all.
 */
static int krping_group_run(struct krping_group *grp)
{
	struct krping_session *sess = grp->sess;
	u32 i, started = 0;
	int ret = 0;

	if (grp->opts->role == KRPING_ROLE_SERVER) {
		ret = krping_listen(grp);
		if (!ret)
			krping_handoff_delay();
	}
	for (i = 0; !ret && i < grp->n; i++) {
		struct task_struct *task;

		task = kthread_create(krping_qp_thread, grp->runs[i],
				      "krping/%s/%u",
				      config_item_name(&sess->item), i);
		if (IS_ERR(task)) {
			ret = PTR_ERR(task);
			break;
		}
		get_task_struct(task);
		grp->tasks[i] = task;
		started++;
		wake_up_process(task);
	}
	if (ret) {
		krping_group_fail(grp, ret);
	} else {
		wait_event_interruptible(grp->wq,
					 atomic_read(&grp->done) == grp->n ||
					 READ_ONCE(grp->stop) ||
					 kthread_should_stop());
		if (atomic_read(&grp->done) != grp->n)
			krping_group_fail(grp, -EINTR);
	}
	for (i = 0; i < started; i++) {
		kthread_stop(grp->tasks[i]);
		put_task_struct(grp->tasks[i]);
	}
	/*
	 * A run whose thread never ran (not created, or stopped before it
	 * first ran: kthread_stop() then skips its function) may hold a
	 * connection that the listener handed it meanwhile; its teardown
	 * closes it and refuses that connection. kthread_stop() has waited
	 * for the exit of every thread that ran, so their bits are set.
	 */
	for (i = 0; i < grp->n; i++)
		if (!test_bit(i, grp->torn_down))
			krping_teardown(grp->runs[i]);
	/* No run takes a connection any more: each closed its slot. */
	if (grp->listen_id)
		krping_destroy_id(grp->listen_id);
	return READ_ONCE(grp->error);
}

/*
 * Publish the figures of @run (a group's first: of the whole group) and
 * the bandwidth @bw.
 */
static void krping_run_publish(struct krping_session *sess,
			       struct krping_run *run,
			       const struct krping_bw_result *bw)
{
	struct krping_lat_buckets *hist;
	struct krping_lat_summary lat;

	/* A run that never ended a measured part (krping_bench_ended()). */
	if (!READ_ONCE(sess->progress.end_ns))
		WRITE_ONCE(sess->progress.end_ns, ktime_get_ns());
	/* The histogram file is one sysfs page; see krping_lat_export(). */
	hist = krping_lat_export(&run->lat, PAGE_SIZE - 1, GFP_KERNEL);
	krping_lat_summarize(&run->lat, &lat);
	krping_session_publish(sess, &lat, hist, bw->msgs, bw->bytes, bw->ns);
}

static int krping_run_group(struct krping_session *sess,
			    const struct krping_options *opts)
{
	struct krping_bw_result bw;
	struct krping_group *grp;
	int ret = -ENOMEM;
	u32 i;

	grp = kzalloc(sizeof(*grp), GFP_KERNEL);
	if (!grp)
		return -ENOMEM;
	grp->sess = sess;
	grp->opts = opts;
	grp->n = opts->qps;
	spin_lock_init(&grp->lock);
	init_waitqueue_head(&grp->wq);
	for (i = 0; i < grp->n; i++) {
		struct krping_run *run = krping_run_new(sess, opts);

		if (!run)
			goto out;
		run->grp = grp;
		run->index = i;
		run->stats = &sess->stats[i];
		grp->runs[i] = run;
	}

	ret = krping_group_run(grp);
	krping_group_merge(grp, &bw);
	krping_run_publish(sess, grp->runs[0], &bw);
out:
	for (i = 0; i < grp->n; i++)
		krping_run_free(grp->runs[i]);
	kfree(grp);
	return ret;
}

/**
 * krping_run() - run one session's test to its end
 * @sess: the session
 * @opts: the settings of this run
 *
 * Called in the session's thread. Everything the run creates is released
 * before this returns. The figures, the latency histogram among them, are
 * published however the run ended. With qps above 1, runs a group of
 * qps runs at once (see the top of this file).
 *
 * Return: 0 when the test completed, -EINTR when it was told to stop, or
 * the negative errno that failed it.
 */
int krping_run(struct krping_session *sess, const struct krping_options *opts)
{
	struct krping_bw_result bw;
	struct krping_run *run;
	int ret;

	if (opts->qps > 1)
		return krping_run_group(sess, opts);

	run = krping_run_new(sess, opts);
	if (!run)
		return -ENOMEM;
	ret = krping_run_body(run);
	krping_bench_bw_result(run, &bw);
	krping_run_publish(sess, run, &bw);
	krping_teardown(run);
	krping_run_free(run);
	return ret;
}
