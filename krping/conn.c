// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The connection of a run: rdma_cm setup and teardown, the queues and
 * buffers, work request posting and the waits of the run's thread.
 *
 * Every wait sleeps interruptibly on run->wq (or, with poll=1, spins on
 * the CQ) and checks kthread_should_stop() and signals, so start=0, rmdir
 * and SIGKILL end a run at any point.
 * CM events and completions only record facts and wake the thread; the
 * thread alone creates and destroys resources.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/rcupdate.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "run.h"

#define KRPING_RESOLVE_TIMEOUT_MS	2000
/* After the peer's disconnect, how long its last work may still take. */
#define KRPING_DISCONNECT_GRACE		HZ
/* After our disconnect, how long flushed work may take to come back. */
#define KRPING_FLUSH_TIMEOUT		(5 * HZ)
/*
 * How long a side waits for ESTABLISHED once it has connected or
 * accepted: beyond the CM's own verdicts (an IB CM gives up after about
 * a minute of retries), for a provider that never answers.
 */
#define KRPING_CONNECT_TIMEOUT		(90 * HZ)
/*
 * Connection requests a listener may hold before it takes them. On
 * iWARP it is the TCP listener's backlog, and siw also sizes the
 * listener's pool of accept work by it, two items short of what a burst
 * of connections needs (fixed by the test bed's siw patch 0006): with
 * 1, a few TCP connections that open and close at once (a port scan)
 * use up the pool and a real client behind them is never accepted.
 * rping listens with 3.
 */
#define KRPING_LISTEN_BACKLOG		8
/* A draining group's nap between two polls (see krping_idle()). */
#define KRPING_DRAIN_NAP_US		200
/* The longest nap of a lazy poll (see krping_wait_count()). */
#define KRPING_NAP_MAX_MS		20
#define KRPING_RECV_DEPTH		1
#define KRPING_MSG_SIZE			sizeof(struct krping_rdma_info)

#ifdef CONFIG_FAULT_INJECTION
/*
 * A fault-injection knob of kernels built for it (the test bed's debug
 * kernel), so that a test can widen the windows where a server hands a
 * connection request to a run; see krping_handoff_delay()'s callers.
 */
#define KRPING_HANDOFF_DELAY_MAX_MS	10000
static unsigned int handoff_delay_ms;
module_param(handoff_delay_ms, uint, 0600);
MODULE_PARM_DESC(handoff_delay_ms,
		 "fault injection: sleep this long (ms, at most 10000) where a server hands a connection request to a run");

/* Sleep handoff_delay_ms, in process context (a CM handler or a thread). */
void krping_handoff_delay(void)
{
	unsigned int ms = min_t(unsigned int, READ_ONCE(handoff_delay_ms),
				KRPING_HANDOFF_DELAY_MAX_MS);

	if (ms)
		msleep(ms);
}
#endif

static const char *run_name(const struct krping_run *run)
{
	return config_item_name(&run->sess->item);
}

/* Tell the run's thread that something happened. */
void krping_wake(struct krping_run *run)
{
	atomic_inc(&run->events);
	wake_up(&run->wq);
}

/* Record the run's first hard error and wake its thread. */
void krping_fail(struct krping_run *run, int err)
{
	cmpxchg(&run->error, 0, krping_conn_errno(err));
	krping_wake(run);
}

static bool krping_broken(const struct krping_run *run)
{
	return READ_ONCE(run->error) || READ_ONCE(run->disconnected) ||
	       READ_ONCE(run->flushed);
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

static bool krping_told_to_stop(const struct krping_run *run)
{
	return krping_should_stop(run) || signal_pending(current);
}

/* Why a wait ended without reaching its goal. */
static int krping_wait_result(const struct krping_run *run, int wait_ret)
{
	if (wait_ret || krping_told_to_stop(run))
		return -EINTR;
	if (READ_ONCE(run->error))
		return READ_ONCE(run->error);
	return -ECONNRESET;
}

/*
 * Before the connection is established, a flush is only the QP's side of
 * a verdict the CM is about to deliver: on a REJ, rdma_cm moves the QP to
 * the error state before it calls us with REJECTED, and the flushed
 * receives can reach us first (seen on a slow kernel). Wait a bounded time
 * for the CM's event, which says why.
 */
static int krping_wait_cm_verdict(struct krping_run *run)
{
	long ret;

	ret = wait_event_interruptible_timeout(run->wq,
					       READ_ONCE(run->error) ||
					       READ_ONCE(run->disconnected) ||
					       krping_should_stop(run),
					       KRPING_FLUSH_TIMEOUT);
	return ret < 0 ? ret : 0;
}

/*
 * Wait for a CM milestone. Address and route resolution end in an event
 * by rdma_cm's own timeouts; ESTABLISHED is bounded here.
 */
static int krping_wait_cm(struct krping_run *run, int milestone)
{
	long timeout = milestone == KRPING_CM_ESTABLISHED ?
		       KRPING_CONNECT_TIMEOUT : MAX_SCHEDULE_TIMEOUT;
	long ret;

	ret = wait_event_interruptible_timeout(run->wq,
					       test_bit(milestone, &run->cm_flags) ||
					       krping_broken(run) ||
					       krping_should_stop(run),
					       timeout);
	if (test_bit(milestone, &run->cm_flags)) {
		/* What the handler stored before the bit, the hello. */
		smp_rmb();
		/* The connection is the peer's first sign of life. */
		if (milestone == KRPING_CM_ESTABLISHED)
			krping_heard(run);
		return 0;
	}
	if (!ret) {
		pr_debug("%s: no connection after %u s\n",
			 run_name(run), KRPING_CONNECT_TIMEOUT / HZ);
		return -ETIMEDOUT;
	}
	ret = ret < 0 ? ret : 0;
	if (!ret && !READ_ONCE(run->error) && !READ_ONCE(run->disconnected) &&
	    !krping_told_to_stop(run))
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
		.addr = run->recv_buf.dma,
		.length = 0,
		.lkey = run->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = &run->probe_cqe,
			.sg_list = &sge,
			.num_sge = 1,	/* siw takes exactly one READ sink */
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
		},
	};

	WRITE_ONCE(run->probing, true);
	if (ib_post_send(run->qp, &wr.wr, NULL))
		WRITE_ONCE(run->probing, false);	/* try again later */
	else
		pr_debug("%s: peer silent for %u ms, probing\n", run_name(run),
			 jiffies_to_msecs(jiffies - READ_ONCE(run->heard)));
}

static void krping_probe_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	/* After the peer's disconnect, a lost probe means nothing. */
	if (wc->status == IB_WC_SUCCESS)
		krping_heard(run);
	else if (!READ_ONCE(run->disconnected))
		krping_wc_ok(run, wc, "keepalive READ");
	WRITE_ONCE(run->probing, false);
	krping_wake(run);
}

/* Is the peer watched: connected, not leaving, and a timeout set? */
static bool krping_watching(const struct krping_run *run)
{
	return run->peer_timeout &&
	       test_bit(KRPING_CM_ESTABLISHED, &run->cm_flags) &&
	       !READ_ONCE(run->disconnected);
}

/* When krping_keepalive() has something to do next (jiffies), or 0. */
static unsigned long krping_keepalive_due(const struct krping_run *run)
{
	if (!krping_watching(run))
		return 0;
	return READ_ONCE(run->heard) +
	       (READ_ONCE(run->probing) ? run->peer_timeout :
					  run->peer_timeout / 2);
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
	heard = READ_ONCE(run->heard);
	if (time_after_eq(jiffies, heard + run->peer_timeout)) {
		pr_debug("%s: no sign of life from the peer for %u ms\n",
			 run_name(run), jiffies_to_msecs(jiffies - heard));
		return -ETIMEDOUT;
	}
	if (!READ_ONCE(run->probing) &&
	    time_after_eq(jiffies, heard + run->peer_timeout / 2))
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
	if (run->poll)
		ib_process_cq_direct(run->cq, -1);
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

	if (run->poll) {
		if (run->draining && krping_crowded(run)) {
			usleep_range(KRPING_DRAIN_NAP_US, 2 * KRPING_DRAIN_NAP_US);
			return;
		}
		if (!run->lazy) {
			krping_spin_yield();
			return;
		}
		timeout = *nap;
		*nap = min(*nap * 2, msecs_to_jiffies(KRPING_NAP_MAX_MS));
	}
	if (deadline)
		timeout = clamp_t(long, (long)(deadline - jiffies), 1, timeout);
	wait_event_interruptible_timeout(run->wq,
					 atomic_read(&run->events) != seen ||
					 krping_should_stop(run),
					 timeout);
}

/**
 * krping_wait_count() - wait for a completion counter to reach a target
 * @run: the run
 * @counter: a completion counter of the run (recv_count, send_count,
 *	rdma_count, data_count, fr_count)
 * @target: the count to wait for
 *
 * Sleeps on completion events, or busy-polls the CQ when the run polls.
 * A lazy wait (run->lazy: nothing is measured, e.g. a benchmark's passive
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
		seen = atomic_read(&run->events);
		if (run->poll)
			ib_process_cq_direct(run->cq, -1);
		if (krping_count_reached(krping_read_count(counter), target))
			return 0;
		if (krping_told_to_stop(run))
			return -EINTR;
		if (READ_ONCE(run->error) || READ_ONCE(run->flushed))
			return krping_wait_result(run, 0);
		ret = krping_keepalive(run);
		if (ret)
			return ret;
		if (READ_ONCE(run->disconnected)) {
			if (!deadline) {
				deadline = jiffies + KRPING_DISCONNECT_GRACE;
			} else if (time_after_eq(jiffies, deadline)) {
				if (flushing) {
					pr_debug("%s: peer gone, %llu of %llu done\n",
						 run_name(run),
						 krping_read_count(counter),
						 target);
					return -ECONNRESET;
				}
				WRITE_ONCE(run->peer_left, true);
				rdma_disconnect(run->conn_id);
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

	ret = wait_event_interruptible_timeout(run->wq,
					       krping_broken(run) ||
					       krping_should_stop(run),
					       timeout);
	if (ret < 0 || krping_should_stop(run))
		return -EINTR;
	return READ_ONCE(run->error);
}

/* The krping hello in a CM event's private data, or NULL if none. */
static const struct krping_hello *krping_hello_of(const struct rdma_cm_event *ev)
{
	const struct krping_hello *hello = ev->param.conn.private_data;

	if (!hello || ev->param.conn.private_data_len < KRPING_HELLO_MIN_LEN ||
	    hello->magic != cpu_to_be32(KRPING_HELLO_MAGIC))
		return NULL;
	return hello;
}

/*
 * Keep what the peer's hello announces: its count, and its whole plan if
 * it sent one (a krping before KRPING_HELLO_PLAN sends the count only).
 */
static void krping_take_hello(struct krping_run *run,
			      const struct rdma_cm_event *ev,
			      const struct krping_hello *hello)
{
	run->peer_hello = true;
	run->peer.count = be32_to_cpu(hello->count);
	run->peer_plan = ev->param.conn.private_data_len >= sizeof(*hello) &&
			 (be32_to_cpu(hello->flags) & KRPING_HELLO_PLAN);
	if (run->peer_plan) {
		run->peer.warmup = be32_to_cpu(hello->warmup);
		run->peer.duration_ms = be32_to_cpu(hello->duration_ms);
	}
}

/* The qps a hello announces: 1 for none, or one that names none. */
static u32 krping_hello_qps(const struct krping_hello *hello)
{
	u32 qps = hello ? FIELD_GET(KRPING_HELLO_QPS,
				    be32_to_cpu(hello->flags)) : 0;

	return qps ? qps : 1;
}

/* The hello flags that announce the run's qps and index. */
static u32 krping_hello_group(const struct krping_run *run)
{
	return FIELD_PREP(KRPING_HELLO_QPS, run->opts->qps) |
	       FIELD_PREP(KRPING_HELLO_INDEX, run->index);
}

static int krping_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct krping_run *run = id->context;
	const struct krping_hello *hello;

	pr_debug("%s: %s, status %d\n", run_name(run), rdma_event_msg(ev->event),
		 ev->status);

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		set_bit(KRPING_CM_ADDR_RESOLVED, &run->cm_flags);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		set_bit(KRPING_CM_ROUTE_RESOLVED, &run->cm_flags);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		hello = krping_hello_of(ev);
		/* A client of another qps: see krping_listen_handler(). */
		if (krping_hello_qps(hello) != 1)
			return -EINVAL;
		krping_handoff_delay();
		/*
		 * One connection per server session; refuse the others. On a
		 * wildcard address rdma_cm listens on each device with an id
		 * of its own, whose requests reach this handler in parallel:
		 * the one that sets the bit takes the run.
		 */
		if (test_and_set_bit(KRPING_CM_REQUEST_TAKEN, &run->cm_flags))
			return -EBUSY;
		if (hello)
			krping_take_hello(run, ev, hello);
		/* Pairs with smp_load_acquire() in krping_accept(). */
		smp_store_release(&run->child, id);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* The client learns from the accept how the run ends. */
		hello = krping_hello_of(ev);
		if (run->opts->role == KRPING_ROLE_CLIENT && hello) {
			krping_take_hello(run, ev, hello);
			run->server_leaves_first = be32_to_cpu(hello->flags) &
						   KRPING_HELLO_LEAVES_FIRST;
		}
		/* Pairs with smp_rmb() in krping_wait_cm(). */
		smp_mb__before_atomic();
		set_bit(KRPING_CM_ESTABLISHED, &run->cm_flags);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -ENETUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		krping_fail(run, ev->status < 0 ? ev->status : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		krping_fail(run, -ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -ECONNABORTED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		WRITE_ONCE(run->disconnected, true);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		krping_fail(run, -ENODEV);
		break;
	default:
		break;
	}
	krping_wake(run);
	return 0;
}

/*
 * The port under the run went down (or the device died): end the run.
 * A side that only waits for its peer's next message would not learn it
 * otherwise, as no CM message reaches it either.
 */
static void krping_port_event(struct ib_event_handler *handler,
			      struct ib_event *ev)
{
	struct krping_run *run = container_of(handler, struct krping_run,
					      port_events);

	switch (ev->event) {
	case IB_EVENT_PORT_ERR:
		if (ev->element.port_num == run->port_num)
			krping_fail(run, -ENETDOWN);
		break;
	case IB_EVENT_DEVICE_FATAL:
		krping_fail(run, -EIO);
		break;
	default:
		break;
	}
}

/*
 * The provider lost the QP's connection (a link or its peer host gone):
 * a hard error, so that the flush that follows is not taken for a peer
 * that closed cleanly between iterations. Called in any context.
 */
static void krping_qp_event(struct ib_event *ev, void *context)
{
	struct krping_run *run = context;

	if (ev->event == IB_EVENT_QP_FATAL) {
		pr_debug("%s: QP fatal error\n", run_name(run));
		krping_fail(run, -ECONNRESET);
	}
}

static int krping_wc_errno(enum ib_wc_status status)
{
	switch (status) {
	case IB_WC_REM_ACCESS_ERR:
	case IB_WC_LOC_PROT_ERR:
	case IB_WC_MW_BIND_ERR:
		return -EACCES;
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IB_WC_LOC_LEN_ERR:
		return -EMSGSIZE;
	case IB_WC_REM_INV_REQ_ERR:
		return -EREMOTEIO;
	default:
		return -EIO;
	}
}

/* Check a completion; record what a failed one means for the run. */
bool krping_wc_ok(struct krping_run *run, struct ib_wc *wc, const char *what)
{
	if (likely(wc->status == IB_WC_SUCCESS))
		return true;
	if (wc->status == IB_WC_WR_FLUSH_ERR) {
		WRITE_ONCE(run->flushed, true);
		krping_wake(run);
	} else {
		pr_debug("%s: %s failed: %s (vendor error %#x)\n",
			 run_name(run), what, ib_wc_status_msg(wc->status),
			 wc->vendor_err);
		krping_fail(run, krping_wc_errno(wc->status));
	}
	return false;
}

/* Count the closing SEND as sent, once: on its ACK or on the answer. */
static void krping_count_fin(struct krping_run *run)
{
	struct krping_stats *st = run->stats;

	if (atomic_xchg(&run->fin_counted, 1))
		return;
	atomic64_inc(&st->send_msgs);
	if (!run->fin_empty)
		atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
}

static void krping_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, "RECV"))
		return;
	if (wc->byte_len != KRPING_MSG_SIZE) {
		krping_fail(run, -EPROTO);
		return;
	}
	ib_dma_sync_single_for_cpu(run->pd->device, run->recv_buf.dma,
				   KRPING_MSG_SIZE, DMA_FROM_DEVICE);
	memcpy(&run->rx, run->recv_buf.addr, KRPING_MSG_SIZE);
	run->rx_inv_rkey = wc->wc_flags & IB_WC_WITH_INVALIDATE ?
			   wc->ex.invalidate_rkey : 0;
	atomic64_inc(&st->recv_msgs);
	atomic64_add(wc->byte_len, &st->recv_bytes);
	/* Once the closing SEND is out, the only message left is the answer. */
	if (READ_ONCE(run->fin_posted))
		krping_count_fin(run);
	krping_heard(run);
	krping_count_inc(&run->recv_count);
	krping_wake(run);
}

/*
 * The completion of a benchmark client's closing SEND. The server answers
 * it only once it has arrived, then disconnects: when the ACK of our SEND
 * was lost, its retry meets a QP that is gone, and the SEND fails or is
 * flushed after the answer has proven its delivery (1 run in about 20 over
 * a link losing 5 % of its frames). Such a failure is no failure.
 */
static void krping_fin_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS && atomic_read(&run->fin_counted))
		return;
	if (!krping_wc_ok(run, wc, "closing SEND"))
		return;
	krping_count_fin(run);
	krping_heard(run);
	krping_wake(run);
}

static void krping_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, "SEND"))
		return;
	atomic64_inc(&st->send_msgs);
	atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
	krping_heard(run);
	krping_count_inc(&run->send_count);
	krping_wake(run);
}

static void krping_rdma_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, "RDMA"))
		return;
	if (wc->opcode == IB_WC_RDMA_READ) {
		atomic64_inc(&st->read_msgs);
		atomic64_add(run->rdma_len, &st->read_bytes);
	} else {
		atomic64_inc(&st->write_msgs);
		atomic64_add(run->rdma_len, &st->write_bytes);
	}
	krping_heard(run);
	krping_count_inc(&run->rdma_count);
	krping_wake(run);
}

static void krping_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	krping_wc_ok(cq->cq_context, wc, "REG_MR/LOCAL_INV");
}

static int krping_buf_alloc(struct krping_run *run, struct krping_buf *b,
			    u32 size, enum dma_data_direction dir)
{
	struct ib_device *dev = run->pd->device;

	b->addr = kzalloc(size, GFP_KERNEL | __GFP_NOWARN);
	if (!b->addr)
		return -ENOMEM;
	b->dir = dir;
	b->dma = ib_dma_map_single(dev, b->addr, size, dir);
	if (ib_dma_mapping_error(dev, b->dma)) {
		kfree(b->addr);
		b->addr = NULL;
		return -ENOMEM;
	}
	b->size = size;
	return 0;
}

static void krping_buf_free(struct krping_run *run, struct krping_buf *b)
{
	if (!b->addr)
		return;
	ib_dma_unmap_single(run->pd->device, b->dma, b->size, b->dir);
	kfree(b->addr);
	b->addr = NULL;
}

/*
 * Pick the MR page size for a buffer: the smallest the device supports
 * whose page list still fits. kmalloc memory is contiguous, so a buffer
 * larger than the page list allows at PAGE_SIZE (rxe: 512 entries) can be
 * registered with larger pages. Returns 0 if none fits.
 */
static u32 krping_mr_page_size(const struct ib_device *dev,
			       const struct krping_buf *b, u32 *pages)
{
	u64 page_size;

	for (page_size = PAGE_SIZE; page_size <= SZ_1G; page_size <<= 1) {
		if (!(dev->attrs.page_size_cap & page_size))
			continue;
		*pages = DIV_ROUND_UP((b->dma & (page_size - 1)) + b->size,
				      page_size);
		if (*pages <= dev->attrs.max_fast_reg_page_list_len)
			return page_size;
	}
	return 0;
}

int krping_mr_alloc(struct krping_run *run, struct krping_mr *m,
		    struct krping_buf *b)
{
	u32 pages;

	m->page_size = krping_mr_page_size(run->pd->device, b, &pages);
	if (!m->page_size)
		return -EMSGSIZE;
	m->mr = ib_alloc_mr(run->pd, IB_MR_TYPE_MEM_REG, pages);
	if (IS_ERR(m->mr)) {
		int ret = PTR_ERR(m->mr);

		m->mr = NULL;
		return ret;
	}
	m->buf = b;
	m->valid = false;
	return 0;
}

/**
 * krping_server_registers() - does the server register rdma_buf?
 * @run: the run
 * @read: for the RDMA READ sink (else for the WRITE source)
 *
 * In reg mode it does unless local_dma_lkey is set. On iWARP a READ sink
 * always needs a registration with remote write access (READ responses
 * are placed like WRITEs), which no local DMA lkey has.
 */
bool krping_server_registers(const struct krping_run *run, bool read)
{
	const struct krping_options *o = run->opts;

	if (o->mem_mode == KRPING_MEM_REG && !o->local_dma_lkey)
		return true;
	return read && rdma_protocol_iwarp(run->conn_id->device,
					   run->conn_id->port_num);
}

/* Queues, buffers and registrations of a run, on @id's device. */
/*
 * sbw: how many data receives the server keeps posted. Twice the send
 * queue, as perftest's rx_depth is to its tx_depth, within what the
 * device's queues and CQs take beside the rest of the run.
 */
static int krping_sbw_depth(const struct krping_options *o,
			    const struct ib_device_attr *attr)
{
	int depth = 2 * o->txdepth;

	depth = min(depth, attr->max_qp_wr - KRPING_RECV_DEPTH - 1);
	depth = min(depth, attr->max_cqe - (int)o->txdepth -
			   KRPING_RECV_DEPTH - 4);
	return depth > 0 ? depth : -EINVAL;
}

static int krping_setup(struct krping_run *run, struct rdma_cm_id *id)
{
	const struct krping_options *o = run->opts;
	bool client = o->role == KRPING_ROLE_CLIENT;
	bool bench = o->test != KRPING_TEST_PING;
	bool sbw_server = o->test == KRPING_TEST_SBW && !client;
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr qp_attr = {};
	int ret;

	run->conn_id = id;
	krping_session_set_device(run->sess, dev);

	run->port_num = id->port_num;
	/*
	 * No keepalive on iWARP for now: siw completed the zero-length READ
	 * probe of a bw server with a local length error while the client's
	 * WRITEs streamed in, which broke a healthy connection.
	 */
	if (rdma_protocol_iwarp(dev, id->port_num))
		run->peer_timeout = 0;
	INIT_IB_EVENT_HANDLER(&run->port_events, dev, krping_port_event);
	ib_register_event_handler(&run->port_events);

	if (o->read_inv && !rdma_cap_read_inv(dev, id->port_num))
		return -EOPNOTSUPP;

	run->pd = ib_alloc_pd(dev, o->mem_mode == KRPING_MEM_DMA ?
			      IB_PD_UNSAFE_GLOBAL_RKEY : 0);
	if (IS_ERR(run->pd)) {
		ret = PTR_ERR(run->pd);
		run->pd = NULL;
		return ret;
	}

	/*
	 * Room for a full send queue, the keepalive probe, the receive and
	 * both drain WRs.
	 */
	run->poll = o->poll;
	if (sbw_server) {
		ret = krping_sbw_depth(o, &dev->attrs);
		if (ret < 0)
			return ret;
		run->sbw_depth = ret;
	}
	run->cq = ib_alloc_cq(dev, run,
			      o->txdepth + KRPING_RECV_DEPTH + 4 + run->sbw_depth, 0,
			      o->poll ? IB_POLL_DIRECT : IB_POLL_SOFTIRQ);
	if (IS_ERR(run->cq)) {
		ret = PTR_ERR(run->cq);
		run->cq = NULL;
		return ret;
	}

	qp_attr.send_cq = run->cq;
	qp_attr.recv_cq = run->cq;
	qp_attr.qp_type = IB_QPT_RC;
	qp_attr.event_handler = krping_qp_event;
	qp_attr.qp_context = run;
	qp_attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	/*
	 * One extra slot on each queue for ib_drain_qp(), and one on the
	 * send queue for the keepalive probe.
	 */
	qp_attr.cap.max_send_wr = o->txdepth + 2;
	qp_attr.cap.max_recv_wr = KRPING_RECV_DEPTH + 1 + run->sbw_depth;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	ret = rdma_create_qp(id, run->pd, &qp_attr);
	if (ret)
		return ret;
	run->qp = id->qp;

	ret = krping_buf_alloc(run, &run->recv_buf, KRPING_MSG_SIZE,
			       DMA_FROM_DEVICE);
	if (!ret)
		ret = krping_buf_alloc(run, &run->send_buf, KRPING_MSG_SIZE,
				       DMA_TO_DEVICE);
	/* An sbw client's sink takes the server's grants too. */
	if (!ret)
		ret = krping_buf_alloc(run, &run->rdma_buf,
				       o->test == KRPING_TEST_SBW ?
				       max_t(u32, o->size, sizeof(__be64)) :
				       o->size, DMA_BIDIRECTIONAL);
	if (!ret && sbw_server)
		ret = krping_buf_alloc(run, &run->grant_buf, sizeof(__be64),
				       DMA_TO_DEVICE);
	if (!ret && (client || bench))
		ret = krping_buf_alloc(run, &run->start_buf, o->size,
				       DMA_BIDIRECTIONAL);
	if (ret)
		return ret;

	if (client || bench) {
		if (o->mem_mode != KRPING_MEM_REG)
			return 0;
		ret = krping_mr_alloc(run, &run->start_mr, &run->start_buf);
		if (!ret)
			ret = krping_mr_alloc(run, &run->rdma_mr,
					      &run->rdma_buf);
	} else if (krping_server_registers(run, true)) {
		ret = krping_mr_alloc(run, &run->rdma_mr, &run->rdma_buf);
	}
	return ret;
}

static void krping_set_port(struct sockaddr_storage *ss, u16 port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static int krping_create_id(struct krping_run *run)
{
	run->cm_id = rdma_create_id(&init_net, krping_cm_handler, run,
				    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(run->cm_id)) {
		int ret = PTR_ERR(run->cm_id);

		run->cm_id = NULL;
		return ret;
	}
	if (run->opts->tos)
		rdma_set_service_type(run->cm_id, run->opts->tos);
	return 0;
}

static void krping_conn_param(struct rdma_conn_param *p,
			      struct krping_hello *hello, u32 flags,
			      const struct krping_plan *plan)
{
	memset(p, 0, sizeof(*p));
	/*
	 * The server RDMA READs from the client, either side may send a
	 * keepalive READ: one read in flight each way.
	 */
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
	hello->magic = cpu_to_be32(KRPING_HELLO_MAGIC);
	hello->flags = cpu_to_be32(flags | KRPING_HELLO_PLAN);
	hello->count = cpu_to_be32(plan->count);
	hello->warmup = cpu_to_be32(plan->warmup);
	hello->duration_ms = cpu_to_be32(plan->duration_ms);
	p->private_data = hello;
	p->private_data_len = sizeof(*hello);
}

/*
 * Server: how the run ends, decided before the accept that tells the
 * client. A ping server without a count of its own runs the count its
 * krping client announced. With a count and a krping client it
 * disconnects first; an rping client disconnects first itself. A
 * benchmark's server follows the plan of a client that announced one
 * (krping_plan_follow()) and always leaves first (its client is krping).
 */
static void krping_plan_end(struct krping_run *run)
{
	const struct krping_options *o = run->opts;

	krping_plan_of(o, &run->plan);
	if (o->test != KRPING_TEST_PING) {
		if (run->peer_plan)
			run->plan_error = krping_plan_follow(o, &run->peer,
							     &run->plan);
		run->server_leaves_first = true;
	} else {
		if (!run->plan.count && run->peer_hello)
			run->plan.count = run->peer.count;
		run->server_leaves_first = run->peer_hello && run->plan.count;
	}
	pr_debug("%s: %s client, count %u, the %s disconnects first\n",
		 run_name(run), run->peer_hello ? "krping" : "foreign",
		 run->plan.count,
		 run->server_leaves_first ? "server" : "client");
	if (o->test != KRPING_TEST_PING)
		pr_debug("%s: plan: count %u, warmup %u, duration_ms %u%s\n",
			 run_name(run), run->plan.count, run->plan.warmup,
			 run->plan.duration_ms,
			 run->plan_error ? ", not the client's" : "");
}

/**
 * krping_connect() - client: resolve, set up and connect
 * @run: the run
 *
 * Return: 0 when connected with a receive posted, or a negative errno.
 */
int krping_connect(struct krping_run *run)
{
	struct sockaddr_storage dst = run->opts->addr;
	struct rdma_conn_param param;
	struct krping_hello hello;
	int ret;

	krping_set_port(&dst, run->opts->port);
	ret = krping_create_id(run);
	if (ret)
		return ret;

	ret = rdma_resolve_addr(run->cm_id, NULL, (struct sockaddr *)&dst,
				KRPING_RESOLVE_TIMEOUT_MS);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ADDR_RESOLVED);
	if (!ret)
		ret = rdma_resolve_route(run->cm_id, KRPING_RESOLVE_TIMEOUT_MS);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ROUTE_RESOLVED);
	if (ret)
		return ret;

	krping_run_state(run, KRPING_STATE_CONNECTING);
	ret = krping_setup(run, run->cm_id);
	if (!ret)
		ret = krping_post_recv(run);
	if (ret)
		return ret;

	krping_plan_of(run->opts, &run->plan);
	krping_conn_param(&param, &hello, krping_hello_group(run), &run->plan);
	ret = rdma_connect(run->cm_id, &param);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ESTABLISHED);
	/* A server that does not follow our plan ends with -EINVAL too. */
	if (!ret && run->opts->test != KRPING_TEST_PING && run->peer_plan &&
	    !krping_plans_agree(&run->plan, &run->peer)) {
		pr_debug("%s: the server's plan is count %u, warmup %u, duration_ms %u\n",
			 run_name(run), run->peer.count, run->peer.warmup,
			 run->peer.duration_ms);
		return -EINVAL;
	}
	return ret;
}

/**
 * krping_accept() - server: listen, take one connection and accept it
 * @run: the run
 *
 * Return: 0 when connected with a receive posted, -EINVAL once a client
 * whose plan the server does not follow has seen the server's and left
 * (see krping_plan_end()), or another negative errno.
 */
int krping_accept(struct krping_run *run)
{
	struct sockaddr_storage src = run->opts->addr;
	struct rdma_conn_param param;
	struct krping_hello hello;
	struct rdma_cm_id *child;
	int ret;

	/* In a group the session listens (krping_listen()). */
	if (!run->grp) {
		krping_set_port(&src, run->opts->port);
		ret = krping_create_id(run);
		if (ret)
			return ret;

		ret = rdma_bind_addr(run->cm_id, (struct sockaddr *)&src);
		if (!ret)
			ret = rdma_listen(run->cm_id, KRPING_LISTEN_BACKLOG);
		if (ret)
			return ret;

		krping_session_set_state(run->sess, KRPING_STATE_LISTENING);
	}
	ret = wait_event_interruptible(run->wq,
				       READ_ONCE(run->child) ||
				       krping_broken(run) ||
				       krping_should_stop(run));
	/* Pairs with smp_store_release() in krping_cm_handler(). */
	child = smp_load_acquire(&run->child);
	if (!child)
		return krping_wait_result(run, ret);

	krping_run_state(run, KRPING_STATE_CONNECTING);
	ret = krping_setup(run, child);
	if (!ret)
		ret = krping_post_recv(run);
	/*
	 * A client that gave up (its REJ, its close) before we got here
	 * fails the QP's creation with -EINVAL, as the CM's state has moved
	 * on (ib_cm_init_qp_attr()); its REJECTED is on its way.
	 */
	if (ret && ret != -EINVAL)
		return ret;
	if (!ret) {
		krping_plan_end(run);
		krping_conn_param(&param, &hello, krping_hello_group(run) |
				  (run->server_leaves_first ?
				   KRPING_HELLO_LEAVES_FIRST : 0), &run->plan);
		/* Outside the CM handler rdma_accept() needs the lock. */
		rdma_lock_handler(child);
		ret = rdma_accept(child, &param);
		rdma_unlock_handler(child);
		if (!ret) {
			ret = krping_wait_cm(run, KRPING_CM_ESTABLISHED);
			if (!run->plan_error || ret == -EINTR)
				return ret;
			/*
			 * A client whose plan we do not follow learns ours
			 * from the accept and disconnects, maybe before our
			 * ESTABLISHED (iWARP). Leave after it, so that our
			 * disconnect cannot overtake its ESTABLISHED.
			 */
			if (!ret)
				ret = krping_wait_disconnect(run,
							     KRPING_FLUSH_TIMEOUT);
			return ret == -EINTR ? ret : run->plan_error;
		}
	}
	/*
	 * A client that gave up while we set up fails the accept with
	 * -EINVAL in the same way, before the handler lock we held let the
	 * CM tell us why. Either way, wait for the CM's verdict, which says
	 * why (KRPING_FLUSH_TIMEOUT at most).
	 */
	krping_wait_cm_verdict(run);
	if (krping_broken(run) || krping_told_to_stop(run))
		return krping_wait_result(run, 0);
	return ret;
}

/**
 * krping_group_barrier() - wait until every run of the group is ready
 * @run: a benchmark's run, set up (buffers exchanged, receives posted)
 *
 * A group's runs begin their tests together, as perftest's QPs do, so
 * that the session's bandwidth (bytes over the first start to the last
 * end) measures them side by side rather than one after another as
 * they happened to connect. Each side waits for its own runs only: a
 * run is set up once its peer has answered, whatever the peer's other
 * runs do, so the two sides cannot wait for each other. Nothing is in
 * flight meanwhile. A run alone does not wait.
 *
 * Return: 0, -EINTR when told to stop, or the run's error.
 */
int krping_group_barrier(struct krping_run *run)
{
	struct krping_group *grp = run->grp;
	u32 i;
	int ret;

	if (!grp)
		return 0;
	if (atomic_inc_return(&grp->ready) == grp->n)
		for (i = 0; i < grp->n; i++)
			krping_wake(grp->runs[i]);
	ret = wait_event_interruptible(run->wq,
				       atomic_read(&grp->ready) == grp->n ||
				       krping_broken(run) ||
				       krping_should_stop(run));
	if (atomic_read(&grp->ready) != grp->n || krping_told_to_stop(run))
		return krping_wait_result(run, ret);
	/* Its peer was not watched while it waited (krping_keepalive()). */
	krping_heard(run);
	return 0;
}

/*
 * The listener of a group (qps above 1). A connection request goes to
 * the run of the index its krping hello names, which accepts it in its
 * own thread; from then on the connection's events go to that run's
 * handler. A request without a hello, of another qps, for an index
 * taken, or for a run that has ended, is refused.
 */
static int krping_listen_handler(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	struct krping_group *grp = id->context;
	const struct krping_hello *hello;
	struct krping_run *run;
	u32 index;
	int ret = 0;

	pr_debug("%s: listener: %s, status %d\n",
		 config_item_name(&grp->sess->item),
		 rdma_event_msg(ev->event), ev->status);
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			krping_group_fail(grp, -ENODEV);
		return 0;
	}
	hello = krping_hello_of(ev);
	if (!hello || krping_hello_qps(hello) != grp->n)
		return -EINVAL;
	index = FIELD_GET(KRPING_HELLO_INDEX, be32_to_cpu(hello->flags));
	if (index >= grp->n)
		return -EINVAL;
	run = grp->runs[index];

	spin_lock(&grp->lock);
	if (run->closed || run->child) {
		ret = -EBUSY;
	} else {
		krping_take_hello(run, ev, hello);
		id->context = run;
		id->event_handler = krping_cm_handler;
		/* Pairs with smp_load_acquire() in krping_accept(). */
		smp_store_release(&run->child, id);
	}
	spin_unlock(&grp->lock);
	if (!ret)
		krping_wake(run);
	return ret;
}

/**
 * krping_listen() - a group's server: listen for all its connections
 * @grp: the group; its runs are allocated, their threads not started
 *
 * One listening id on the session's address and port takes the
 * connections of every run (krping_listen_handler()).
 *
 * Return: 0, or a negative errno with nothing left behind.
 */
int krping_listen(struct krping_group *grp)
{
	const struct krping_options *o = grp->opts;
	struct sockaddr_storage src = o->addr;
	struct rdma_cm_id *id;
	int ret;

	krping_set_port(&src, o->port);
	id = rdma_create_id(&init_net, krping_listen_handler, grp,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	if (o->tos)
		rdma_set_service_type(id, o->tos);
	ret = rdma_bind_addr(id, (struct sockaddr *)&src);
	if (!ret)
		ret = rdma_listen(id, max_t(int, grp->n, KRPING_LISTEN_BACKLOG));
	if (ret) {
		krping_destroy_id(id);
		return ret;
	}
	grp->listen_id = id;
	krping_session_set_state(grp->sess, KRPING_STATE_LISTENING);
	return 0;
}

/**
 * krping_destroy_id() - rdma_destroy_id(), the id's device kept meanwhile
 * @id: the id
 *
 * rdma_cm gives the id's device back (cma_release_dev()) before it puts
 * the id's GID attribute. A device being unregistered goes on as soon as
 * its last id has given it back, and if it frees its GID table before
 * that put, the put's free_gid_work() finds no table (a NULL pointer
 * dereference in ib_core, seen under a ropcie link delete with Debian's
 * 7.2). Unregistration waits for every reference on the device after
 * its clients are gone, so holding one across rdma_destroy_id() keeps
 * the table until the put has been made.
 */
void krping_destroy_id(struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	bool held = dev && ib_device_try_get(dev);

	rdma_destroy_id(id);
	if (held)
		ib_device_put(dev);
}

/**
 * krping_free_cq() - free a CQ once its softirq poller has let go of it
 * @cq: the CQ, whose QP is drained and destroyed
 * @polled: whether a QP ever fed it completions
 *
 * ib_poll_handler() calls irq_poll_complete() and only then re-arms the
 * CQ, so ib_free_cq()'s irq_poll_disable() can return while the handler
 * that ran the drain's last completion still reads the CQ: KASAN saw
 * that use after free on a loaded host (still so in 7.2). The handler
 * runs with softirqs disabled, which a grace period waits for; the
 * drained CQ is empty, so nothing schedules the handler again. An
 * expedited one, so that a teardown does not wait for the ticks of a
 * normal one; it interrupts the other CPUs once per run.
 */
static void krping_free_cq(struct ib_cq *cq, bool polled)
{
	if (polled && cq->poll_ctx == IB_POLL_SOFTIRQ)
		synchronize_rcu_expedited();
	ib_free_cq(cq);
}

/**
 * krping_teardown() - release everything a run created
 * @run: the run
 *
 * The listening id goes first so that no new connection request can
 * arrive; the QP is drained before the buffers its work pointed at are
 * freed; the connection's id goes last, after its QP.
 */
void krping_teardown(struct krping_run *run)
{
	bool server = run->opts->role == KRPING_ROLE_SERVER;
	struct rdma_cm_id *child;
	bool had_qp = run->qp;

	if (run->port_events.device)
		ib_unregister_event_handler(&run->port_events);
	if (server && run->cm_id) {
		krping_destroy_id(run->cm_id);
		run->cm_id = NULL;
	}
	/* The group's listener hands this run no connection any more. */
	if (server && run->grp) {
		spin_lock(&run->grp->lock);
		run->closed = true;
		spin_unlock(&run->grp->lock);
	}
	/* No handler runs any more that could set it. */
	child = READ_ONCE(run->child);

	if (run->qp) {
		rdma_disconnect(run->conn_id);
		ib_drain_qp(run->qp);
		rdma_destroy_qp(run->conn_id);
		run->qp = NULL;
	}
	while (run->fr_nmrs)
		ib_dereg_mr(run->fr_mrs[--run->fr_nmrs].mr);
	kfree(run->fr_mrs);
	if (run->start_mr.mr)
		ib_dereg_mr(run->start_mr.mr);
	if (run->rdma_mr.mr)
		ib_dereg_mr(run->rdma_mr.mr);
	if (run->pd) {
		krping_buf_free(run, &run->recv_buf);
		krping_buf_free(run, &run->send_buf);
		krping_buf_free(run, &run->start_buf);
		krping_buf_free(run, &run->rdma_buf);
		krping_buf_free(run, &run->grant_buf);
	}
	if (run->cq)
		krping_free_cq(run->cq, had_qp);
	if (run->pd)
		ib_dealloc_pd(run->pd);
	if (child)
		krping_destroy_id(child);
	if (run->cm_id)
		krping_destroy_id(run->cm_id);
}

int krping_post_recv(struct krping_run *run)
{
	struct ib_sge sge = {
		.addr = run->recv_buf.dma,
		.length = KRPING_MSG_SIZE,
		.lkey = run->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &run->recv_cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	ib_dma_sync_single_for_device(run->pd->device, run->recv_buf.dma,
				      KRPING_MSG_SIZE, DMA_FROM_DEVICE);
	return ib_post_recv(run->qp, &wr, NULL);
}

/* Post one advertisement, signaled, completing on @cqe. */
static int krping_post_msg(struct krping_run *run, struct ib_cqe *cqe,
			   u64 addr, u32 rkey, u32 size, u32 invalidate_rkey)
{
	struct krping_rdma_info *info = run->send_buf.addr;
	struct ib_sge sge = {
		.addr = run->send_buf.dma,
		.length = KRPING_MSG_SIZE,
		.lkey = run->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = invalidate_rkey ? IB_WR_SEND_WITH_INV : IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = invalidate_rkey,
	};

	if (rkey)
		pr_debug("%s: advertises addr %#llx rkey %#x size %u\n",
			 run_name(run), addr, rkey, size);
	info->buf = cpu_to_be64(addr);
	info->rkey = cpu_to_be32(rkey);
	info->size = cpu_to_be32(size);
	ib_dma_sync_single_for_device(run->pd->device, run->send_buf.dma,
				      KRPING_MSG_SIZE, DMA_TO_DEVICE);
	return ib_post_send(run->qp, &wr, NULL);
}

/**
 * krping_send_msg() - SEND one advertisement and wait for its completion
 * @run: the run
 * @addr: advertised buffer address
 * @rkey: advertised rkey
 * @size: advertised length
 * @invalidate_rkey: if not 0, SEND_WITH_INV invalidating this rkey
 *
 * Return: 0 or a negative errno (see krping_wait_count()).
 */
int krping_send_msg(struct krping_run *run, u64 addr, u32 rkey, u32 size,
		    u32 invalidate_rkey)
{
	u64 target = krping_read_count(&run->send_count) + 1;
	int ret;

	ret = krping_post_msg(run, &run->send_cqe, addr, rkey, size,
			      invalidate_rkey);
	if (ret)
		return ret;
	return krping_wait_count(run, &run->send_count, target);
}

/**
 * krping_count_send() - count a SEND whose delivery the caller vouches for
 * @run: the run
 *
 * For a SEND flushed after the peer had it (krping_server_answer()).
 */
void krping_count_send(struct krping_run *run)
{
	struct krping_stats *st = run->stats;

	atomic64_inc(&st->send_msgs);
	atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
}

/**
 * krping_post_fin() - post a benchmark client's closing SEND
 * @run: the run
 *
 * Does not wait for its completion: the server's answer, which the caller
 * waits for, proves its delivery (krping_fin_done()).
 *
 * Return: 0 or the negative errno of ib_post_send().
 */
int krping_post_fin(struct krping_run *run)
{
	struct ib_send_wr wr = {
		.wr_cqe = &run->fin_cqe,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};

	WRITE_ONCE(run->fin_posted, true);
	/* A timed slat or sbw: into a data receive, told apart by size. */
	if (run->fin_empty)
		return ib_post_send(run->qp, &wr, NULL);
	return krping_post_msg(run, &run->fin_cqe, 0, 0, 0, 0);
}

/*
 * Build [LOCAL_INV +] REG_MR for @m: a still valid registration is
 * invalidated first and the MR gets a new key, so that a peer can never
 * use a stale rkey. Returns the first WR of the chain in @first.
 */
static int krping_build_reg(struct krping_run *run, struct krping_mr *m,
			    int access, struct ib_send_wr *inv,
			    struct ib_reg_wr *reg, struct ib_send_wr **first)
{
	struct scatterlist sg;
	int n;

	*first = &reg->wr;
	if (m->valid) {
		inv->opcode = IB_WR_LOCAL_INV;
		inv->ex.invalidate_rkey = m->mr->rkey;
		inv->wr_cqe = &run->reg_cqe;
		inv->send_flags = IB_SEND_SIGNALED;
		inv->next = &reg->wr;
		*first = inv;
	}
	ib_update_fast_reg_key(m->mr, (u8)ib_inc_rkey(m->mr->rkey));

	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = m->buf->dma;
	sg_dma_len(&sg) = m->buf->size;
	n = ib_map_mr_sg(m->mr, &sg, 1, NULL, m->page_size);
	if (n != 1)
		return n < 0 ? n : -EINVAL;
	/*
	 * The peer sees iova: keep only its offset in the first page, not
	 * the kernel address. Not zero-based (ib_map_mr_sg_zbva()): rxe
	 * takes the in-page offset of a registered address from iova.
	 */
	m->mr->iova &= m->page_size - 1;

	reg->wr.opcode = IB_WR_REG_MR;
	reg->wr.wr_cqe = &run->reg_cqe;
	reg->wr.send_flags = IB_SEND_SIGNALED;
	reg->mr = m->mr;
	reg->key = m->mr->rkey;
	reg->access = access;
	return 0;
}

/**
 * krping_post_reg() - fast-register the buffer of @m
 * @run: the run
 * @m: the MR and the buffer it covers
 * @access: IB_ACCESS_* rights of the new registration
 *
 * Work on the send queue executes in order, so a SEND posted after this
 * may advertise the new key at once.
 *
 * Return: 0 or a negative errno from mapping or posting.
 */
int krping_post_reg(struct krping_run *run, struct krping_mr *m, int access)
{
	struct ib_send_wr inv = {}, *first;
	struct ib_reg_wr reg = {};
	int ret;

	ret = krping_build_reg(run, m, access, &inv, &reg, &first);
	if (!ret)
		ret = ib_post_send(run->qp, first, NULL);
	if (!ret)
		m->valid = true;
	return ret;
}

/**
 * krping_rdma() - one RDMA READ or WRITE, and wait for its completion
 * @run: the run
 * @opcode: IB_WR_RDMA_READ, IB_WR_RDMA_READ_WITH_INV or IB_WR_RDMA_WRITE
 * @sge: the local side; with @reg its address and lkey are filled in
 * @remote_addr: the peer's buffer
 * @rkey: the peer's key
 * @reg: if not NULL, fast-register this MR first (chained) and use it
 * @reg_access: access rights of that registration
 *
 * READ_WITH_INV invalidates @reg's registration when it completes.
 *
 * Return: 0 or a negative errno.
 */
int krping_rdma(struct krping_run *run, enum ib_wr_opcode opcode,
		struct ib_sge *sge, u64 remote_addr, u32 rkey,
		struct krping_mr *reg, int reg_access)
{
	struct ib_send_wr inv = {}, *first;
	struct ib_reg_wr regwr = {};
	struct ib_rdma_wr wr = {};
	u64 target = krping_read_count(&run->rdma_count) + 1;
	int ret;

	wr.wr.opcode = opcode;
	wr.wr.wr_cqe = &run->rdma_cqe;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.wr.sg_list = sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = remote_addr;
	wr.rkey = rkey;
	first = &wr.wr;

	if (reg) {
		ret = krping_build_reg(run, reg, reg_access, &inv, &regwr,
				       &first);
		if (ret)
			return ret;
		regwr.wr.next = &wr.wr;
		sge->addr = reg->mr->iova;
		sge->lkey = reg->mr->lkey;
		if (opcode == IB_WR_RDMA_READ_WITH_INV)
			wr.wr.ex.invalidate_rkey = reg->mr->lkey;
	}
	run->rdma_len = sge->length;

	ret = ib_post_send(run->qp, first, NULL);
	if (ret)
		return ret;
	/* READ_WITH_INV leaves the registration invalid when it is done. */
	if (reg)
		reg->valid = opcode != IB_WR_RDMA_READ_WITH_INV;
	return krping_wait_count(run, &run->rdma_count, target);
}

/* Called once per run before anything is posted. */
void krping_run_init(struct krping_run *run, struct krping_session *sess,
		     const struct krping_options *opts)
{
	run->sess = sess;
	run->opts = opts;
	run->stats = &sess->stats[0];
	init_waitqueue_head(&run->wq);
	run->recv_cqe.done = krping_recv_done;
	run->send_cqe.done = krping_send_done;
	run->fin_cqe.done = krping_fin_done;
	run->rdma_cqe.done = krping_rdma_done;
	run->reg_cqe.done = krping_reg_done;
	run->probe_cqe.done = krping_probe_done;
	run->peer_timeout = msecs_to_jiffies(opts->peer_timeout_ms);
}
