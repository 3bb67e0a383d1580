// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The waits of a run's thread: for a CM milestone, a counter, the
 * peer's disconnect; and, while it waits, the watch over a silent peer
 * (keepalive probes).
 *
 * Every wait sleeps interruptibly on run->wait.wq (or, with poll=1, spins on
 * the CQ) and checks kthread_should_stop() and signals, so start=0, rmdir
 * and SIGKILL end a run at any point. CM events and completions only
 * record facts and wake the thread; the thread alone creates and
 * destroys resources.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kthread.h>

#include "run.h"

/* After the peer's disconnect, how long its last work may still take. */
#define KRPING_DISCONNECT_GRACE		HZ
/*
 * How long a side waits for ESTABLISHED once it has connected or
 * accepted: beyond the CM's own verdicts (an IB CM gives up after about
 * a minute of retries), for a provider that never answers.
 */
#define KRPING_CONNECT_TIMEOUT		(90 * HZ)
/* A draining group's nap between two polls (see krping_idle()). */
#define KRPING_DRAIN_NAP_US		200
/* The longest nap of a lazy poll (see krping_wait_count()). */
#define KRPING_NAP_MAX_MS		20

/* Tell the run's thread that something happened. */
void krping_wake(struct krping_run *run)
{
	atomic_inc(&run->wait.events);
	wake_up(&run->wait.wq);
}

/* Record the run's first hard error and wake its thread. */
void krping_fail(struct krping_run *run, int err)
{
	cmpxchg(&run->wait.error, 0, krping_conn_errno(err));
	krping_wake(run);
}

bool krping_broken(const struct krping_run *run)
{
	return READ_ONCE(run->wait.error) ||
	       READ_ONCE(run->wait.disconnected) ||
	       READ_ONCE(run->wait.flushed);
}

/**
 * krping_should_stop() - is the run's thread to end?
 * @run: the run
 *
 * Its thread was told to stop (start=0, rmdir), or, in a group, the
 * session was stopped or another run failed (krping_group_stop()).
 *
 * Return: true if the run must end now.
 */
bool krping_should_stop(const struct krping_run *run)
{
	return kthread_should_stop() ||
	       (run->grp && READ_ONCE(run->grp->stop));
}

/**
 * krping_run_state() - the session's state, as far as this run knows it
 * @run: the run
 * @state: KRPING_STATE_CONNECTING or KRPING_STATE_RUNNING
 *
 * Alone, a run sets the session's state. In a group the state only moves
 * forward: connecting once one run connects, running once every run is
 * connected.
 */
void krping_run_state(struct krping_run *run, int state)
{
	struct krping_group *grp = run->grp;

	if (!grp) {
		krping_session_set_state(run->sess, state);
		return;
	}
	if (state == KRPING_STATE_RUNNING) {
		if (atomic_inc_return(&grp->running) == grp->n)
			krping_session_set_state(run->sess, state);
	} else if (READ_ONCE(run->sess->state) < state) {
		krping_session_set_state(run->sess, state);
	}
}

bool krping_told_to_stop(const struct krping_run *run)
{
	return krping_should_stop(run) || signal_pending(current);
}

/* Why a wait ended without reaching its goal. */
int krping_wait_result(const struct krping_run *run, int wait_ret)
{
	if (wait_ret || krping_told_to_stop(run))
		return -EINTR;
	if (READ_ONCE(run->wait.error))
		return READ_ONCE(run->wait.error);
	return -ECONNRESET;
}

/*
 * Before the connection is established, a flush is only the QP's side of
 * a verdict the CM is about to deliver: on a REJ, rdma_cm moves the QP to
 * the error state before it calls us with REJECTED, and the flushed
 * receives can reach us first (seen on a slow kernel). Wait a bounded time
 * for the CM's event, which says why.
 */
int krping_wait_cm_verdict(struct krping_run *run)
{
	long ret;

	ret = wait_event_interruptible_timeout(run->wait.wq,
					       READ_ONCE(run->wait.error) ||
					       READ_ONCE(run->wait.disconnected) ||
					       krping_should_stop(run),
					       KRPING_FLUSH_TIMEOUT);
	return ret < 0 ? ret : 0;
}

/*
 * Wait for a CM milestone. Address and route resolution end in an event
 * by rdma_cm's own timeouts; ESTABLISHED is bounded here.
 */
int krping_wait_cm(struct krping_run *run, int milestone)
{
	long timeout = milestone == KRPING_CM_ESTABLISHED ?
		       KRPING_CONNECT_TIMEOUT : MAX_SCHEDULE_TIMEOUT;
	long ret;

	ret = wait_event_interruptible_timeout(run->wait.wq,
					       test_bit(milestone, &run->conn.cm_flags) ||
					       krping_broken(run) ||
					       krping_should_stop(run),
					       timeout);
	if (test_bit(milestone, &run->conn.cm_flags)) {
		/* What the handler stored before the bit, the hello. */
		smp_rmb();
		/* The connection is the peer's first sign of life. */
		if (milestone == KRPING_CM_ESTABLISHED)
			krping_heard(run);
		return 0;
	}
	if (!ret) {
		pr_debug("%s: no connection after %u s\n",
			 krping_run_name(run), KRPING_CONNECT_TIMEOUT / HZ);
		return -ETIMEDOUT;
	}
	ret = ret < 0 ? ret : 0;
	if (!ret && !READ_ONCE(run->wait.error) &&
	    !READ_ONCE(run->wait.disconnected) && !krping_told_to_stop(run))
		ret = krping_wait_cm_verdict(run);
	return krping_wait_result(run, ret);
}

/*
 * A peer can vanish without a word (powered off, its link cut): then no
 * CM message and no completion ever reaches a side that only waits, such
 * as a ping server waiting for the next advertisement or a bw server for
 * the end marker. So once the peer has been silent for half of
 * peer_timeout, the run asks its RDMA device for a sign of life: a
 * zero-length RDMA READ, which the peer's device answers without the
 * peer's thread and without checking a key (IBTA C9-88; siw and ropcie
 * check no key for zero bytes either). A READ, because on iWARP a SEND
 * or WRITE completes as soon as the local TCP stack has it.
 */
static void krping_probe(struct krping_run *run)
{
	struct ib_sge sge = {
		.addr = run->io.recv_buf.dma,
		.length = 0,
		.lkey = run->conn.pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = &run->wait.probe_cqe,
			.sg_list = &sge,
			.num_sge = 1,	/* siw takes exactly one READ sink */
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
		},
	};

	WRITE_ONCE(run->wait.probing, true);
	if (ib_post_send(run->conn.qp, &wr.wr, NULL))
		WRITE_ONCE(run->wait.probing, false);	/* try again later */
	else
		pr_debug("%s: peer silent for %u ms, probing\n",
			 krping_run_name(run),
			 jiffies_to_msecs(jiffies - READ_ONCE(run->wait.heard)));
}

static void krping_probe_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	/* After the peer's disconnect, a lost probe means nothing. */
	if (wc->status == IB_WC_SUCCESS)
		krping_heard(run);
	else if (!READ_ONCE(run->wait.disconnected))
		krping_wc_ok(run, wc, KRPING_WR_RDMA_READ);
	WRITE_ONCE(run->wait.probing, false);
	krping_wake(run);
}

/* Is the peer watched: connected, not leaving, and a timeout set? */
static bool krping_watching(const struct krping_run *run)
{
	return run->wait.peer_timeout &&
	       test_bit(KRPING_CM_ESTABLISHED, &run->conn.cm_flags) &&
	       !READ_ONCE(run->wait.disconnected);
}

/* When krping_keepalive() has something to do next (jiffies), or 0. */
static unsigned long krping_keepalive_due(const struct krping_run *run)
{
	if (!krping_watching(run))
		return 0;
	return READ_ONCE(run->wait.heard) +
	       (READ_ONCE(run->wait.probing) ? run->wait.peer_timeout :
					       run->wait.peer_timeout / 2);
}

/**
 * krping_keepalive() - is the peer still there?
 * @run: the run
 *
 * Called by every wait of a connected run (see krping_probe()). Sends
 * a probe after peer_timeout / 2 of silence.
 *
 * Return: 0, or -ETIMEDOUT when the peer has given no sign of life for
 * peer_timeout: the run then fails within peer_timeout of the peer's
 * last answer, however it vanished.
 */
static int krping_keepalive(struct krping_run *run)
{
	unsigned long heard;

	if (!krping_watching(run))
		return 0;
	heard = READ_ONCE(run->wait.heard);
	if (time_after_eq(jiffies, heard + run->wait.peer_timeout)) {
		pr_debug("%s: no sign of life from the peer for %u ms\n",
			 krping_run_name(run), jiffies_to_msecs(jiffies - heard));
		return -ETIMEDOUT;
	}
	if (!READ_ONCE(run->wait.probing) &&
	    time_after_eq(jiffies, heard + run->wait.peer_timeout / 2))
		krping_probe(run);
	return 0;
}

/* The sooner of two deadlines in jiffies, where 0 is none. */
static unsigned long krping_sooner(unsigned long a, unsigned long b)
{
	if (!a || !b)
		return a ? a : b;
	return time_before(a, b) ? a : b;
}

/**
 * krping_check() - the checks of a busy loop
 * @run: the run
 *
 * Polls the CQ when the run polls (poll=1), and tells whether the loop
 * must end: told to stop, the run failed, or the peer went away (it
 * disconnected, or fell silent: krping_keepalive()).
 *
 * Return: 0 to go on, or the negative errno to end the run with.
 */
int krping_check(struct krping_run *run)
{
	if (run->wait.poll)
		ib_process_cq_direct(run->conn.cq, -1);
	if (krping_told_to_stop(run))
		return -EINTR;
	if (krping_broken(run))
		return krping_wait_result(run, 0);
	return krping_keepalive(run);
}

/*
 * A group that polls has more polling threads than the CPUs they run on:
 * spinning, they would take turns with each other, and a software
 * device's own work would get the CPU only between them.
 */
static bool krping_crowded(const struct krping_run *run)
{
	return run->grp && run->grp->n >= num_online_cpus();
}

/*
 * Between two polls of a wait: sleep until the next event of the run, or,
 * when the run polls its CQ, just let others run. @deadline (jiffies, 0
 * for none) bounds the sleep. A lazy wait that polls naps between polls
 * instead, for *@nap jiffies (see krping_wait_count()).
 *
 * A bandwidth stream that waits for its operations in flight loses
 * nothing by a short nap when its group is crowded: the queue keeps the
 * device busy, and the stream's end is the time of its last completion,
 * not of the poll that saw it. perftest -q N polls all its QPs from one
 * thread. With rxe on two vCPUs, bw qps=4 at 1 MiB went from 56 to 78
 * MB/s spinning to 88 to 95 (ib_write_bw -q 4: 72 to 78).
 */
static void krping_idle(struct krping_run *run, int seen,
			unsigned long deadline, unsigned long *nap)
{
	long timeout = MAX_SCHEDULE_TIMEOUT;

	if (run->wait.poll) {
		if (run->wait.draining && krping_crowded(run)) {
			usleep_range(KRPING_DRAIN_NAP_US, 2 * KRPING_DRAIN_NAP_US);
			return;
		}
		if (!run->wait.lazy) {
			krping_spin_yield();
			return;
		}
		timeout = *nap;
		*nap = min(*nap * 2, msecs_to_jiffies(KRPING_NAP_MAX_MS));
	}
	if (deadline)
		timeout = clamp_t(long, (long)(deadline - jiffies), 1, timeout);
	wait_event_interruptible_timeout(run->wait.wq,
					 krping_woken(run, seen),
					 timeout);
}

/**
 * krping_wait_count() - wait for a completion counter to reach a target
 * @run: the run
 * @counter: a completion counter of the run (struct krping_counts, or
 *	a benchmark's own: fr's count, slat's and sbw's data_count)
 * @target: the count to wait for
 *
 * Sleeps on completion events, or busy-polls the CQ when the run polls.
 * A lazy wait (run->wait.lazy: nothing is measured, e.g. a benchmark's passive
 * side waiting for the end of the test) polls too, but naps in between,
 * from one jiffy up to KRPING_NAP_MAX_MS: a thread that woke every few
 * hundred microseconds took enough CPU from a software device's own work
 * to make the peer's READ latency on rxe up to 1.7 times as long.
 * When the peer disconnects first, what it did before may still be on its
 * way: the CM's messages travel apart from the QP's, so its disconnect can
 * overtake the ACK of our last SEND. Give that a moment, then move our QP
 * to the error state and let the flush decide, since flushed work
 * completes after every successful completion before it.
 *
 * A peer that falls silent ends the wait after peer_timeout
 * (krping_keepalive()).
 *
 * Return: 0, -EINTR when told to stop, the run's error, -ETIMEDOUT, or
 * -ECONNRESET.
 */
int krping_wait_count(struct krping_run *run, const atomic64_t *counter,
		      u64 target)
{
	unsigned long deadline = 0, nap = 1;
	bool flushing = false;
	int seen, ret;

	for (;;) {
		seen = atomic_read(&run->wait.events);
		if (run->wait.poll)
			ib_process_cq_direct(run->conn.cq, -1);
		if (krping_count_reached(krping_read_count(counter), target))
			return 0;
		if (krping_told_to_stop(run))
			return -EINTR;
		if (READ_ONCE(run->wait.error) || READ_ONCE(run->wait.flushed))
			return krping_wait_result(run, 0);
		ret = krping_keepalive(run);
		if (ret)
			return ret;
		if (READ_ONCE(run->wait.disconnected)) {
			if (!deadline) {
				deadline = jiffies + KRPING_DISCONNECT_GRACE;
			} else if (time_after_eq(jiffies, deadline)) {
				if (flushing) {
					pr_debug("%s: peer gone, %llu of %llu done\n",
						 krping_run_name(run),
						 krping_read_count(counter),
						 target);
					return -ECONNRESET;
				}
				WRITE_ONCE(run->wait.peer_left, true);
				rdma_disconnect(run->conn.conn_id);
				flushing = true;
				deadline = jiffies + KRPING_FLUSH_TIMEOUT;
			}
		}
		krping_idle(run, seen,
			    krping_sooner(deadline, krping_keepalive_due(run)),
			    &nap);
	}
}

/**
 * krping_wait_disconnect() - wait for the peer to end the connection
 * @run: the run
 * @timeout: in jiffies
 *
 * Return: 0 on disconnect or timeout, -EINTR when told to stop, or the
 * run's error.
 */
int krping_wait_disconnect(struct krping_run *run, unsigned long timeout)
{
	long ret;

	ret = wait_event_interruptible_timeout(run->wait.wq,
					       krping_broken(run) ||
					       krping_should_stop(run),
					       timeout);
	if (ret < 0 || krping_should_stop(run))
		return -EINTR;
	return READ_ONCE(run->wait.error);
}

/* The thread's wait queue and the watch over its peer (run_init). */
void krping_wait_init(struct krping_run *run)
{
	init_waitqueue_head(&run->wait.wq);
	run->wait.probe_cqe.done = krping_probe_done;
	run->wait.peer_timeout = msecs_to_jiffies(run->opts->peer_timeout_ms);
}
