/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * krping internals shared by the engine, the configfs control plane and
 * the sysfs results.
 */
#ifndef KRPING_H
#define KRPING_H

#include <linux/atomic.h>
#include <linux/configfs.h>
#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <rdma/ib_verbs.h>

#include "../configfs/krping_options.h"
#include "latency.h"

/* Life of a session, as shown by /sys/kernel/krping/<name>/state. */
enum krping_state {
	KRPING_STATE_IDLE,
	KRPING_STATE_RESOLVING,
	KRPING_STATE_LISTENING,
	KRPING_STATE_CONNECTING,
	KRPING_STATE_RUNNING,
	KRPING_STATE_DONE,
	KRPING_STATE_FAILED,
	KRPING_STATE_STOPPED,
};

/* Counters of one connection, updated from completion handlers. */
struct krping_stats {
	atomic64_t send_bytes;
	atomic64_t send_msgs;
	atomic64_t recv_bytes;
	atomic64_t recv_msgs;
	atomic64_t write_bytes;
	atomic64_t write_msgs;
	atomic64_t read_bytes;
	atomic64_t read_msgs;
	atomic64_t iterations;
};

/**
 * struct krping_progress - the measured part of a benchmark, as it runs
 * @iterations: measured iterations completed (warm-up left out)
 * @bytes: bytes of the measured operations of this side completed
 * @samples: latency samples taken
 * @start_ns: ktime_get_ns() when the measured part began, 0 before
 * @end_ns: ktime_get_ns() when the measured part ended (before the
 *	closing exchange), or the run if it measured nothing; 0 before
 *
 * Written by the run (counters also by its completion handlers) and read
 * by sysfs progress/ at any time: each field on its own is current, the
 * set is not a snapshot.
 */
struct krping_progress {
	atomic64_t iterations;
	atomic64_t bytes;
	atomic64_t samples;
	u64 start_ns;
	u64 end_ns;
};

/**
 * struct krping_bandwidth - what sysfs bandwidth/ shows
 * @bytes: bytes transferred
 * @duration_ns: from the first post to the last completion
 * @mbytes_per_sec: @bytes / @duration_ns in MB/s, MB = 2^20 as perftest
 * @msgs_per_sec: operations per second
 */
struct krping_bandwidth {
	u64 bytes;
	u64 duration_ns;
	u64 mbytes_per_sec;
	u64 msgs_per_sec;
};

struct krping_results;

/*
 * The work requests a failed completion names in failed_wr (results.c),
 * by the verb of what was posted: a failed completion's opcode is not
 * defined.
 */
enum krping_wr {
	KRPING_WR_SEND,
	KRPING_WR_RECV,
	KRPING_WR_RDMA_WRITE,
	KRPING_WR_RDMA_READ,
	KRPING_WR_REG_MR,
	KRPING_WR_LOCAL_INV,
	KRPING_WR_NR,
};

/**
 * struct krping_session - one test session (a configfs directory)
 * @item: the configfs item; its release frees the session
 * @lock: serialises option changes, start and stop
 * @opts: current settings, under @lock
 * @run_opts: settings of the current or last run, read by its thread
 * @task: thread of the current or last run (a task reference is held),
 *	NULL if none; under @lock
 * @dropped: the directory was removed; no new run may start
 * @state: enum krping_state, written by the run thread or under @lock
 * @error: negative errno of a failed run, 0 otherwise
 * @result_lock: protects @device, @latency, @lat_hist and @bandwidth
 * @device: name of the RDMA device of the current or last run
 * @latency: latency figures of the last run
 * @lat_hist: latency histogram of the last run: NULL (no run, or no
 *	samples), an ERR_PTR if it could not be exported, or the buckets,
 *	owned by the session
 * @bandwidth: bandwidth figures of the last run
 * @stats: counters of the current or last run, one set per connection
 *	(qps); sysfs stats/ shows their sums, per_qp each set
 * @nr_qps: connections of the current or last run, 0 before the first
 * @progress: the measured part of the current or last run
 * @results: the sysfs directory of this session
 * @failed_wc: the first failed completion of the current or last run,
 *	packed (krping_session_wc_failed())
 */
struct krping_session {
	struct config_item item;
	struct mutex lock;		/* see the kernel-doc above */
	struct krping_options opts;
	struct krping_options run_opts;
	struct task_struct *task;
	bool dropped;
	int state;
	int error;
	atomic_t failed_wc;
	spinlock_t result_lock;		/* see the kernel-doc above */
	char device[IB_DEVICE_NAME_MAX];
	struct krping_lat_summary latency;
	struct krping_lat_buckets *lat_hist;
	struct krping_bandwidth bandwidth;
	struct krping_stats stats[KRPING_MAX_QPS];
	u32 nr_qps;
	struct krping_progress progress;
	struct krping_results *results;
};

/* session.c */
struct krping_session *krping_session_create(const char *name);
void krping_session_drop(struct krping_session *sess);
void krping_session_free(struct krping_session *sess);
int krping_session_start(struct krping_session *sess);
void krping_session_stop(struct krping_session *sess);
bool krping_session_active(const struct krping_session *sess);
void krping_session_set_state(struct krping_session *sess, int state);
void krping_session_set_device(struct krping_session *sess,
			       const struct ib_device *dev);
void krping_session_wc_failed(struct krping_session *sess, enum krping_wr wr,
			      enum ib_wc_status status);
bool krping_session_failed_wc(const struct krping_session *sess,
			      enum krping_wr *wr, enum ib_wc_status *status);
void krping_session_publish(struct krping_session *sess,
			    const struct krping_lat_summary *lat,
			    struct krping_lat_buckets *hist,
			    u64 msgs, u64 bytes, u64 duration_ns);
int krping_session_reset(struct krping_session *sess);
const char *krping_state_name(int state);

/* results.c: /sys/kernel/krping */
const char *krping_wr_name(enum krping_wr wr);
const char *krping_wc_status_name(enum ib_wc_status status);
int krping_results_init(void);
void krping_results_exit(void);
struct krping_results *krping_results_add(struct krping_session *sess,
					  const char *name);
void krping_results_remove(struct krping_results *res);
void krping_results_notify_state(struct krping_results *res);

/* configfs.c: /sys/kernel/config/krping */
int krping_configfs_init(void);
void krping_configfs_exit(void);

/* run.c: the body of a run, called in the session's thread */
int krping_run(struct krping_session *sess, const struct krping_options *opts);

#endif /* KRPING_H */
