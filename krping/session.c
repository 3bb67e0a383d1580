// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Session life cycle: create, start a run in a kthread, stop it, free.
 *
 * A run owns every RDMA resource it creates and releases them before its
 * thread returns, so stopping a session is kthread_stop() and nothing else.
 * The session keeps a reference on the last run's task so that stop, a new
 * start and rmdir can all reap it, whether or not it already finished.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/netdevice.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <net/net_namespace.h>

#include "krping.h"

static const char * const krping_state_names[] = {
	[KRPING_STATE_IDLE] = "idle",
	[KRPING_STATE_RESOLVING] = "resolving",
	[KRPING_STATE_LISTENING] = "listening",
	[KRPING_STATE_CONNECTING] = "connecting",
	[KRPING_STATE_RUNNING] = "running",
	[KRPING_STATE_DONE] = "done",
	[KRPING_STATE_FAILED] = "failed",
	[KRPING_STATE_STOPPED] = "stopped",
};

const char *krping_state_name(int state)
{
	if (state < 0 || state >= ARRAY_SIZE(krping_state_names))
		return "unknown";
	return krping_state_names[state];
}

/**
 * krping_session_active() - does the session have a run in progress?
 * @sess: the session
 *
 * A run is in progress from a successful start until its thread has set
 * a final state (done, failed or stopped).
 */
bool krping_session_active(const struct krping_session *sess)
{
	switch (READ_ONCE(sess->state)) {
	case KRPING_STATE_RESOLVING:
	case KRPING_STATE_LISTENING:
	case KRPING_STATE_CONNECTING:
	case KRPING_STATE_RUNNING:
		return true;
	default:
		return false;
	}
}

void krping_session_set_state(struct krping_session *sess, int state)
{
	WRITE_ONCE(sess->state, state);
	krping_results_notify_state(sess->results);
}

void krping_session_set_device(struct krping_session *sess,
			       const struct ib_device *dev)
{
	spin_lock(&sess->result_lock);
	strscpy(sess->device, dev ? dev_name(&dev->dev) : "",
		sizeof(sess->device));
	spin_unlock(&sess->result_lock);
}

static void krping_stats_reset(struct krping_stats *st)
{
	atomic64_set(&st->send_bytes, 0);
	atomic64_set(&st->send_msgs, 0);
	atomic64_set(&st->recv_bytes, 0);
	atomic64_set(&st->recv_msgs, 0);
	atomic64_set(&st->write_bytes, 0);
	atomic64_set(&st->write_msgs, 0);
	atomic64_set(&st->read_bytes, 0);
	atomic64_set(&st->read_msgs, 0);
	atomic64_set(&st->iterations, 0);
}

static void krping_progress_reset(struct krping_progress *p)
{
	atomic64_set(&p->iterations, 0);
	atomic64_set(&p->bytes, 0);
	atomic64_set(&p->samples, 0);
	WRITE_ONCE(p->start_ns, 0);
	WRITE_ONCE(p->end_ns, 0);
}

/*
 * failed_wc packs the first failed completion of the current or last
 * run into one word, so that one cmpxchg keeps the first and a reader
 * never sees half of one: 0 for none, else (wr + 1) << 8 | status.
 */
#define KRPING_FAILED_WC(wr, status)	((((wr) + 1) << 8) | (status))

/**
 * krping_session_wc_failed() - note a work request that failed
 * @sess: the session
 * @wr: what was posted
 * @status: its completion's status (not IB_WC_WR_FLUSH_ERR, which only
 *	follows a failure)
 *
 * The first one of a run stays. Context: any; completion handlers.
 */
void krping_session_wc_failed(struct krping_session *sess, enum krping_wr wr,
			      enum ib_wc_status status)
{
	atomic_cmpxchg(&sess->failed_wc, 0,
		       KRPING_FAILED_WC(wr, status & 0xff));
}

/**
 * krping_session_failed_wc() - the first failed work request of a run
 * @sess: the session
 * @wr: what was posted
 * @status: its completion's status
 *
 * Return: false when no completion of the current or last run failed.
 */
bool krping_session_failed_wc(const struct krping_session *sess,
			      enum krping_wr *wr, enum ib_wc_status *status)
{
	int v = atomic_read(&sess->failed_wc);

	if (!v)
		return false;
	*wr = (v >> 8) - 1;
	*status = v & 0xff;
	return true;
}

/**
 * krping_session_publish() - store the figures of a finished run
 * @sess: the session
 * @lat: latency summary (all zero if the test takes no samples)
 * @hist: its histogram from krping_lat_export() (NULL, an ERR_PTR or
 *	buckets); the session takes it over and frees the one it replaces
 * @msgs: operations (WRITEs, SENDs) completed by a bandwidth test
 * @bytes: bytes they moved, 0 for the other tests
 * @duration_ns: the time they took
 */
void krping_session_publish(struct krping_session *sess,
			    const struct krping_lat_summary *lat,
			    struct krping_lat_buckets *hist,
			    u64 msgs, u64 bytes, u64 duration_ns)
{
	struct krping_bandwidth bw = {};
	struct krping_lat_buckets *old;

	if (bytes && duration_ns) {
		bw.bytes = bytes;
		bw.duration_ns = duration_ns;
		bw.mbytes_per_sec = mul_u64_u64_div_u64(bytes, NSEC_PER_SEC,
							duration_ns) >> 20;
		bw.msgs_per_sec = mul_u64_u64_div_u64(msgs, NSEC_PER_SEC,
						      duration_ns);
	}
	spin_lock(&sess->result_lock);
	sess->latency = *lat;
	old = sess->lat_hist;
	sess->lat_hist = hist;
	sess->bandwidth = bw;
	spin_unlock(&sess->result_lock);
	krping_lat_buckets_free(old);
}

static void krping_results_clear(struct krping_session *sess)
{
	struct krping_lat_buckets *old;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sess->stats); i++)
		krping_stats_reset(&sess->stats[i]);
	krping_progress_reset(&sess->progress);
	atomic_set(&sess->failed_wc, 0);
	spin_lock(&sess->result_lock);
	memset(&sess->latency, 0, sizeof(sess->latency));
	old = sess->lat_hist;
	sess->lat_hist = NULL;
	memset(&sess->bandwidth, 0, sizeof(sess->bandwidth));
	spin_unlock(&sess->result_lock);
	krping_lat_buckets_free(old);
}

/**
 * krping_session_reset() - zero the results of a session that is not running
 * @sess: the session
 *
 * Return: 0, or -EBUSY while a run is in progress.
 */
int krping_session_reset(struct krping_session *sess)
{
	int ret = 0;

	mutex_lock(&sess->lock);
	if (krping_session_active(sess))
		ret = -EBUSY;
	else
		krping_results_clear(sess);
	mutex_unlock(&sess->lock);
	return ret;
}

struct krping_session *krping_session_create(const char *name)
{
	struct krping_session *sess;

	sess = kzalloc(sizeof(*sess), GFP_KERNEL);
	if (!sess)
		return ERR_PTR(-ENOMEM);

	mutex_init(&sess->lock);
	spin_lock_init(&sess->result_lock);
	krping_options_init(&sess->opts);
	sess->state = KRPING_STATE_IDLE;

	sess->results = krping_results_add(sess, name);
	if (IS_ERR(sess->results)) {
		int err = PTR_ERR(sess->results);

		kfree(sess);
		return ERR_PTR(err);
	}
	return sess;
}

static int krping_thread(void *data)
{
	struct krping_session *sess = data;
	int ret;

	/* SIGKILL from an administrator ends the run like start=0. */
	allow_signal(SIGKILL);

	ret = krping_run(sess, &sess->run_opts);

	if (ret == -EINTR || ret == -ERESTARTSYS) {
		WRITE_ONCE(sess->error, 0);
		krping_session_set_state(sess, KRPING_STATE_STOPPED);
	} else if (ret) {
		WRITE_ONCE(sess->error, ret);
		krping_session_set_state(sess, KRPING_STATE_FAILED);
	} else {
		krping_session_set_state(sess, KRPING_STATE_DONE);
	}
	return ret;
}

/* Reap the thread of a previous run. Called with sess->lock held. */
static void krping_session_reap(struct krping_session *sess)
{
	if (!sess->task)
		return;
	kthread_stop(sess->task);
	put_task_struct(sess->task);
	sess->task = NULL;
	/* A thread stopped before it first ran never set a final state. */
	if (krping_session_active(sess)) {
		WRITE_ONCE(sess->error, 0);
		krping_session_set_state(sess, KRPING_STATE_STOPPED);
	}
}

/* Turn an IPv6 link-local scope name into the sockaddr's scope id. */
static int krping_resolve_scope(struct krping_options *opts)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&opts->addr;
	struct net_device *ndev;

	if (!opts->scope[0] || opts->addr.ss_family != AF_INET6)
		return 0;
	ndev = dev_get_by_name(&init_net, opts->scope);
	if (!ndev)
		return -ENODEV;
	sin6->sin6_scope_id = ndev->ifindex;
	dev_put(ndev);
	return 0;
}

/**
 * krping_session_start() - validate the settings and start a run
 * @sess: the session
 *
 * Return: 0, -EBUSY if a run is in progress, -EINVAL for settings that
 * cannot run, -ENODEV for an unknown link-local scope, -ENOMEM.
 */
int krping_session_start(struct krping_session *sess)
{
	struct krping_options run_opts;
	struct task_struct *task;
	int ret;

	mutex_lock(&sess->lock);
	if (sess->dropped) {
		ret = -ENODEV;
		goto out;
	}
	if (krping_session_active(sess)) {
		ret = -EBUSY;
		goto out;
	}
	ret = krping_options_validate(&sess->opts);
	if (ret)
		goto out;

	run_opts = sess->opts;
	ret = krping_resolve_scope(&run_opts);
	if (ret)
		goto out;

	/* The thread only runs once woken, after the reset below. */
	task = kthread_create(krping_thread, sess, "krping/%s",
			      config_item_name(&sess->item));
	if (IS_ERR(task)) {
		ret = PTR_ERR(task);
		goto out;
	}
	get_task_struct(task);

	/* Nothing can fail from here on: the last run's results go. */
	krping_session_reap(sess);
	sess->task = task;
	sess->run_opts = run_opts;
	krping_results_clear(sess);
	WRITE_ONCE(sess->nr_qps, run_opts.qps);
	krping_session_set_device(sess, NULL);
	WRITE_ONCE(sess->error, 0);
	/* Active from here on, so that writes racing the thread see -EBUSY. */
	krping_session_set_state(sess, KRPING_STATE_RESOLVING);
	wake_up_process(task);
out:
	mutex_unlock(&sess->lock);
	return ret;
}

/**
 * krping_session_stop() - stop the session's run, if any, and wait for it
 * @sess: the session
 *
 * The run releases its resources and ends in the stopped state unless it
 * had already finished. Stopping an idle session does nothing.
 */
void krping_session_stop(struct krping_session *sess)
{
	mutex_lock(&sess->lock);
	krping_session_reap(sess);
	mutex_unlock(&sess->lock);
}

/* rmdir: stop the run and remove the results directory. */
void krping_session_drop(struct krping_session *sess)
{
	mutex_lock(&sess->lock);
	sess->dropped = true;
	krping_session_reap(sess);
	mutex_unlock(&sess->lock);
	krping_results_remove(sess->results);
	sess->results = NULL;
}

void krping_session_free(struct krping_session *sess)
{
	/* An item that was never dropped (failed mkdir) still has results. */
	if (sess->results)
		krping_results_remove(sess->results);
	krping_lat_buckets_free(sess->lat_hist);
	mutex_destroy(&sess->lock);
	kfree(sess);
}
