// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: consuming this host's rings. A kthread per
 * ring consumes in order; the doorbell's tasklet serves short WRITEs at
 * the request ring's head first, and a user's poll that finds its CQ
 * empty serves short messages and answers. Every descriptor and index
 * the peer wrote is copied out once and checked (wire.c) before use.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/sched/clock.h>
#include <linux/sched/stat.h>
#include <linux/wait_bit.h>

#include "link_transport.h"

/*
 * The descriptor at @cons of ring @ring in generation @gen, copied out
 * of the window once and checked, into @m; its payload slot in
 * *@payload. Return: 1, 0 when the ring holds nothing there (or the
 * peer is starting over), -EBADMSG with *@why when the descriptor is
 * malformed (@m holds only the connection it names, unchecked), -EPROTO
 * with *@why when the peer broke the ring.
 */
static int ropcie_lx_rx_peek(struct ropcie_xport *x, int ring, u32 cons,
			     struct ropcie_wire_msg *m, void **payload,
			     const char **why)
{
	const struct ropcie_wire_geom *g = &x->link->gin;
	void *win = x->link->hw->in;
	const struct ropcie_wire_hdr *in = win;
	struct ropcie_wire_desc d;
	u32 prod, n;

	if (ropcie_lx_peer_index(x, &in->prod[ring], &prod))
		return 0;
	if (ropcie_wire_ring_count(prod, cons, g->nslots, &n)) {
		*why = "the peer's producer index is out of its ring";
		return -EPROTO;
	}
	if (!n)
		return 0;
	/* The index, then the descriptor it shows. */
	smp_rmb();
	memcpy(&d, ropcie_lx_desc(win, g, ring, cons), sizeof(d));
	barrier();	/* the copy, never the window */
	if (ropcie_wire_desc_decode(&d, ring, g, m)) {
		ropcie_wire_desc_conn(&d, &m->dst_qpn, &m->src_qpn);
		*why = "the peer wrote a malformed descriptor";
		return -EBADMSG;
	}
	*payload = ropcie_lx_data(win, g, ring, cons);
	return 1;
}

/* Entries waiting in ring @ring past @cons? */
static bool ropcie_lx_pending(struct ropcie_xport *x, int ring, u32 cons)
{
	u32 prod;

	if (ropcie_lx_peer_index(x, &ropcie_lx_in(x)->prod[ring], &prod))
		return false;
	return prod != cons;
}

/*
 * Ring the peer's producer, which waits for room, now? Once half the
 * ring is free since it was last rung for, or when the ring is empty:
 * a producer woken for every freed slot would take one and wait again,
 * a doorbell each way per slot.
 */
static bool ropcie_lx_want_due(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;

	if (rx->cons - rx->want_at < x->link->gin.nslots / 2 &&
	    ropcie_lx_pending(x, rx->ring, rx->cons))
		return false;
	rx->want_at = rx->cons;
	return true;
}

/* The descriptor at rx->cons is done with: its slot back to the peer. */
static void ropcie_lx_rx_consumed(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	const struct ropcie_wire_hdr *in = ropcie_lx_in(x);

	atomic64_inc(&x->stats.rx);
	rx->traffic = true;
	WRITE_ONCE(rx->cons, rx->cons + 1);
	/* Done with the slot before the peer may reuse it. */
	smp_mb();
	ropcie_lx_set_hdr(x, rx->gen, &ropcie_lx_out(x)->cons[rx->ring],
			  rx->cons);
	smp_mb();	/* the index, then the peer's want */
	if (READ_ONCE(in->tx_want[rx->ring]) && ropcie_lx_want_due(rx))
		ropcie_lx_ring_peer(x);
}

/*
 * Consume @rx's ring from rx->cons on, in generation rx->gen, until it
 * is empty; @rx is owned. @rang_at: when profiling, the doorbell the
 * first descriptor answers (0: none). A descriptor the peer broke ends
 * at most its connection (ropcie_lx_rx_fault()); indices it broke, the
 * link. Context: the consumer kthread.
 * Return: <0 when the peer broke the ring (the link is failed).
 */
static int ropcie_lx_drain(struct ropcie_lx_rx *rx, u64 rang_at)
{
	struct ropcie_xport *x = rx->x;
	int ring = rx->ring;
	u32 gen = rx->gen;

	for (;;) {
		struct ropcie_wire_msg m;
		const char *why;
		void *payload;
		u64 t;
		int ret;

		ret = ropcie_lx_rx_peek(x, ring, rx->cons, &m, &payload, &why);
		if (ret == -EBADMSG) {
			ropcie_lx_rx_fault(x, gen, m.dst_qpn, m.src_qpn, why);
			goto consumed;
		}
		if (ret < 0)
			ropcie_link_fail(x->link, why);
		if (ret <= 0)
			return ret;
		t = ropcie_prof_now();
		if (t && rang_at) {
			ropcie_prof_add(ROPCIE_PROF_LX_BELL, t - rang_at);
			rang_at = 0;
		}
		if (ring == ROPCIE_WIRE_REQ)
			ropcie_lx_rx_request(x, gen, &m, payload);
		else
			ropcie_lx_rx_response(x, gen, &m, payload, NULL);
		if (t && ring == ROPCIE_WIRE_REQ && m.type != ROPCIE_WIRE_CM &&
		    m.type != ROPCIE_WIRE_RECV_POSTED &&
		    m.type != ROPCIE_WIRE_STREAM)
			ropcie_prof_add(ROPCIE_PROF_LX_SERVE, ktime_get_ns() - t);
consumed:
		ropcie_lx_rx_consumed(rx);
		if (READ_ONCE(x->gen) != gen)
			return 0;
		cond_resched();
	}
}

/*
 * A yield this long went to a task that does not yield back (a tick is
 * 4 ms at HZ=250, a scheduler slice from 0.75 ms; krping's spinners give
 * the CPU back within tens of microseconds). After ROPCIE_LX_HOG_YIELDS
 * of them in a row (one alone may be the host running another vCPU),
 * the consumer sleeps instead of yielding for ROPCIE_LX_HOG_NS.
 */
#define ROPCIE_LX_HOG_YIELD_NS	(500 * NSEC_PER_USEC)
#define ROPCIE_LX_HOG_YIELDS	2
#define ROPCIE_LX_HOG_NS	NSEC_PER_SEC

/*
 * A user's busy poll (ropcie_lx_rx_user()) lasts this long after its
 * last empty poll: longer than a poller's turn round its loop on a slow
 * (debug, emulated) host. Meanwhile the consumers look each tick, so a
 * message that comes as the poller stops waits at most a tick.
 */
#define ROPCIE_LX_UPOLL_NS	(10 * NSEC_PER_MSEC)

/* Does @rx sleep rather than yield now (see ropcie_lx_rx_poll())? */
static bool ropcie_lx_rx_ceded(const struct ropcie_lx_rx *rx)
{
	return local_clock() < READ_ONCE(rx->hog_until);
}

/* The yield begun at @began ended: count it, long or short. */
static void ropcie_lx_rx_yielded(struct ropcie_lx_rx *rx, u64 began)
{
	u64 now = local_clock();

	if ((s64)(now - began) < ROPCIE_LX_HOG_YIELD_NS) {
		rx->long_yields = 0;
		return;
	}
	if (++rx->long_yields < ROPCIE_LX_HOG_YIELDS)
		return;
	rx->long_yields = 0;
	WRITE_ONCE(rx->hog_until, now + ROPCIE_LX_HOG_NS);
	atomic64_inc(&rx->x->stats.polls_ceded);
}

/**
 * ropcie_lx_rx_poll() - look at the ring a while before sleeping
 * @rx: the consumer, not owned, after it consumed something
 *
 * Traffic on a link comes in exchanges (a WRITE, its ACK, the answer
 * that follows) and streams (a message's fragments). Until the consumer
 * says it sleeps, the peer's producer rings no doorbell: polling for up
 * to rx_poll_us spares the peer an MMIO exit and an eventfd per
 * descriptor, and this host an interrupt and a wake-up, each of which
 * costs tens of microseconds under TCG, more than serving a short WRITE.
 *
 * Between two looks it gives way to any other task that wants this CPU:
 * on a guest with one vCPU that is the task waiting for what the peer
 * sends (krping's wlat spins on its buffer, yielding), which only runs
 * when the poller lets it. cond_resched() would not: the spinner has the
 * same priority, so the poller would keep the CPU for the rest of its
 * slice. Hence yield(), bounded by rx_poll_us of wall time.
 *
 * A task that does not yield back (a user-space busy poller: perftest
 * polls its CQ in a loop) keeps the CPU until the scheduler's tick,
 * milliseconds in which the peer rings no doorbell. After such yields
 * the consumer sleeps rather than yield, for a while: the peer's
 * doorbell then wakes it, and a woken task preempts the busy poller. It
 * still polls while the CPU is its own.
 *
 * Return: whether entries came.
 */
static bool ropcie_lx_rx_poll(struct ropcie_lx_rx *rx)
{
	u64 now, until, budget = READ_ONCE(ropcie_rx_poll_us) * NSEC_PER_USEC;

	if (!budget)
		return false;
	now = local_clock();
	until = now + budget;
	while (!kthread_should_stop()) {
		if (ropcie_lx_pending(rx->x, rx->ring, READ_ONCE(rx->cons)))
			return true;
		if (now > until)
			break;
		if (need_resched() || !single_task_running()) {
			if (ropcie_lx_rx_ceded(rx))
				break;
			yield();
			ropcie_lx_rx_yielded(rx, now);
			if (ropcie_lx_rx_ceded(rx))
				break;
		} else {
			cpu_relax();
		}
		now = local_clock();
	}
	return false;
}

/*
 * Own @rx's consumer state, for the kthread. A user's poll may hold it
 * while it waits for a QP's mutex (ropcie_lx_rx_fast()): sleep.
 */
static void ropcie_lx_rx_own(struct ropcie_lx_rx *rx)
{
	wait_on_bit_lock(&rx->owner, 0, TASK_UNINTERRUPTIBLE);
}

static void ropcie_lx_rx_disown(struct ropcie_lx_rx *rx)
{
	clear_and_wake_up_bit(0, &rx->owner);
}

/* At most this many descriptors per doorbell or user's poll. */
#define ROPCIE_LX_FAST_BUDGET	8

/*
 * May a consumer other than the kthread serve @m of ring @ring? In the
 * doorbell's tasklet (!@task), a WRITE of one fragment (a slot holds it
 * whole) of at most irq_serve_max bytes: it needs nothing that sleeps,
 * its checks and copy being the responder's (as an inline WRITE's in
 * the poster's context), its answer taking a response slot tried for
 * before. In a user's poll (@task), which may sleep, also such a SEND
 * (whose receive is taken under the QP's mutex; not a SEND with
 * invalidate, whose invalidation waits for the MR's transfers), and any
 * response but a CLOSE (which ends a connection: the kthread's).
 */
static bool ropcie_lx_fast_ok(const struct ropcie_wire_msg *m, int ring,
			      bool task)
{
	u32 whole = ROPCIE_WIRE_FIRST | ROPCIE_WIRE_LAST;

	if (ring == ROPCIE_WIRE_RSP)
		return task && m->type != ROPCIE_WIRE_CLOSE;
	if ((m->flags & whole) != whole ||
	    m->len > READ_ONCE(ropcie_irq_serve_max))
		return false;
	return m->type == ROPCIE_WIRE_WRITE ||
	       (task && m->type == ROPCIE_WIRE_SEND);
}

/**
 * ropcie_lx_rx_fast() - serve a ring's head outside its kthread
 * @rx: the ring's consumer
 * @rang_at: when profiling, the doorbell's time (0: not profiling)
 * @answered: NULL in the doorbell's tasklet; in a user's poll, where a
 *	QP whose posted requests got their answers goes, held, for the
 *	caller to complete them (ropcie_qp_reap_now()); another such QP's
 *	worker is woken
 *
 * What ropcie_lx_fast_ok() allows at the head of the ring is served
 * here, answer and all, so that it lands without waiting for the
 * consumer kthread to be woken and scheduled: on a busy host, or one
 * with a single CPU that the waiting side spins on, that is most of a
 * message's latency. Whatever else comes first (any other descriptor,
 * one the peer broke, a full response ring, a kthread consuming, a
 * generation the kthread has not taken yet, or the budget used up) is
 * left to the kthread, which then sees the same ring from the same
 * index: they consume one after the other, never at once. The peer's
 * bytes are checked as the kthread checks them (ropcie_lx_rx_peek()).
 *
 * Nothing here fails the link or a connection, or takes a lock the
 * link's state machine holds while it waits (link->lock,
 * link->db_lock): what is broken is left to the kthread, which fails
 * the link for a broken index and ends the connection a broken
 * descriptor names.
 *
 * Context: softirq (the link's doorbell tasklet); or, with @answered,
 * task, holding ropcie_lx_life for reading.
 * Return: true when the ring is empty now: the kthread has nothing to
 * consume (it is still woken to poll for what follows, see
 * ropcie_lx_rx_poll()).
 */
static bool ropcie_lx_rx_fast(struct ropcie_lx_rx *rx, u64 rang_at,
			      struct ropcie_qp **answered)
{
	struct ropcie_xport *x = rx->x;
	int budget = ROPCIE_LX_FAST_BUDGET;
	bool task = answered;
	unsigned long flags;
	bool ok, empty = false;
	u32 gen;

	if ((!task && rx->ring != ROPCIE_WIRE_REQ) ||
	    (rx->ring == ROPCIE_WIRE_REQ && !READ_ONCE(ropcie_irq_serve_max)) ||
	    test_and_set_bit_lock(0, &rx->owner))
		return false;
	spin_lock_irqsave(&x->lock, flags);
	gen = x->gen;
	ok = x->up && gen == rx->gen && gen != rx->broken;
	spin_unlock_irqrestore(&x->lock, flags);
	/* As ropcie_lx_drain(): not past the end of a generation. */
	while (ok && budget-- && READ_ONCE(x->gen) == gen) {
		struct ropcie_lx_tx slot, *rsp = &slot;
		struct ropcie_wire_msg m;
		const char *why;
		void *payload;
		int ret;
		u64 t;

		ret = ropcie_lx_rx_peek(x, rx->ring, rx->cons, &m, &payload,
					&why);
		/* Broken: the kthread reads it again and deals with it. */
		if (ret <= 0) {
			empty = !ret;
			break;
		}
		if (!ropcie_lx_fast_ok(&m, rx->ring, task))
			break;
		if (rx->ring == ROPCIE_WIRE_RSP) {
			if (ropcie_lx_rx_response(x, gen, &m, payload,
						  answered))
				break;
			atomic64_inc(&x->stats.polled);
			ropcie_lx_rx_consumed(rx);
			continue;
		}
		if (ropcie_lx_tx_try(x, ROPCIE_WIRE_RSP, gen, &slot))
			break;
		t = ropcie_prof_now();
		if (t && rang_at) {
			ropcie_prof_add(ROPCIE_PROF_LX_BELL, t - rang_at);
			rang_at = 0;
		}
		/* A whole message: no fault of order to end its connection. */
		ropcie_lx_rx_data(x, gen, &m, payload, &rsp);
		if (rsp)
			ropcie_lx_tx_abort(rsp);
		if (t)
			ropcie_prof_add(ROPCIE_PROF_LX_SERVE, ktime_get_ns() - t);
		atomic64_inc(task ? &x->stats.polled : &x->stats.irq);
		ropcie_lx_rx_consumed(rx);
	}
	ropcie_lx_rx_disown(rx);
	return empty;
}

/**
 * ropcie_lx_rx_user() - a user's poll serves @x's rings
 * @x: a link's transport
 * @busy: the poll is a busy poll (ropcie_poll_cq())
 *
 * What the kthreads would consume next is served here, each without a
 * kthread's wake-up; a busy poll also wakes a kthread that sleeps with
 * its doorbell asked for, so that it stops asking
 * (ropcie_lx_user_polling()).
 *
 * Context: task, holding ropcie_lx_life for reading.
 * Return: NULL, or a QP whose posted requests got their answers, held,
 * for the caller to complete (ropcie_qp_reap_now()) once it let go of
 * ropcie_lx_life.
 */
struct ropcie_qp *ropcie_lx_rx_user(struct ropcie_xport *x, bool busy)
{
	struct ropcie_qp *answered = NULL;
	int ring;

	if (!READ_ONCE(x->up))
		return NULL;
	if (busy)
		WRITE_ONCE(x->upoll_at, local_clock());
	for (ring = 0; ring < ROPCIE_WIRE_NR_RINGS; ring++) {
		struct ropcie_lx_rx *rx = &x->rx[ring];

		if (busy && READ_ONCE(rx->armed))
			ropcie_lx_rx_kick(rx);
		if (!ropcie_lx_pending(x, ring, READ_ONCE(rx->cons)))
			continue;
		/* Left at something: the kthread's (it may not be ringing). */
		if (!ropcie_lx_rx_fast(rx, 0, &answered))
			ropcie_lx_rx_kick(rx);
	}
	return answered;
}

/*
 * Has a user busy-polled a CQ lately (ropcie_lx_rx_user())? Its polls
 * then consume what comes, and the kthreads sleep without asking for
 * doorbells, looking again each tick.
 */
static bool ropcie_lx_user_polling(struct ropcie_xport *x)
{
	u64 at = READ_ONCE(x->upoll_at);

	return at && local_clock() - at < ROPCIE_LX_UPOLL_NS;
}

/* Wake the consumer @rx. */
void ropcie_lx_rx_kick(struct ropcie_lx_rx *rx)
{
	atomic_inc(&rx->events);
	wake_up(&rx->wq);
}

/*
 * Does a doorbell concern @rx: entries past what it consumed, or an
 * index it cannot read (the peer starting over)? A doorbell does not
 * say which ring it rang for; waking only the consumer that has work
 * spares a context switch per message. A consumer that is draining
 * sees new entries itself; one that sleeps published its index first.
 */
static bool ropcie_lx_rx_due(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	u32 prod;

	if (!READ_ONCE(x->up) ||
	    ropcie_lx_peer_index(x, &ropcie_lx_in(x)->prod[rx->ring], &prod))
		return true;
	return prod != READ_ONCE(rx->cons);
}

/*
 * Take the link's generation into the owned @rx (a new one counts from
 * index 0). Return: whether the ring may be consumed.
 */
static bool ropcie_lx_rx_sync(struct ropcie_lx_rx *rx)
{
	struct ropcie_xport *x = rx->x;
	unsigned long flags;
	bool up;
	u32 cur;

	spin_lock_irqsave(&x->lock, flags);
	up = x->up;
	cur = x->gen;
	spin_unlock_irqrestore(&x->lock, flags);
	if (cur != rx->gen) {
		rx->gen = cur;
		WRITE_ONCE(rx->cons, 0);
		rx->want_at = 0;
		rx->traffic = false;
	}
	return up && rx->gen != rx->broken;
}

/* Woken since @seen, or to stop? */
static bool ropcie_lx_rx_woken(struct ropcie_lx_rx *rx, int seen)
{
	return atomic_read(&rx->events) != seen || kthread_should_stop();
}

int ropcie_lx_rx_thread(void *arg)
{
	struct ropcie_lx_rx *rx = arg;
	struct ropcie_xport *x = rx->x;
	struct ropcie_wire_hdr *out = ropcie_lx_out(x);
	int ring = rx->ring;

	while (!kthread_should_stop()) {
		int seen = atomic_read(&rx->events);
		u64 rang_at, slept_at;
		bool live, poll;
		u32 gen;

		ropcie_lx_rx_own(rx);
		live = ropcie_lx_rx_sync(rx);
		/* A doorbell for nothing new is dropped. */
		rang_at = atomic64_xchg(&rx->rang_at, 0);
		if (live && ropcie_lx_drain(rx, rang_at)) {
			rx->broken = rx->gen;
			live = false;
		}
		gen = rx->gen;
		poll = live && rx->traffic;
		rx->traffic = false;
		ropcie_lx_rx_disown(rx);
		if (poll && ropcie_lx_rx_poll(rx))
			continue;
		/* No doorbell asked for: a look each tick instead. */
		if (live && ropcie_lx_user_polling(x)) {
			wait_event_interruptible_timeout(rx->wq,
							 ropcie_lx_rx_woken(rx, seen),
							 1);
			continue;
		}
		/* Asleep, then look again: Dekker with the producer. */
		ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 1);
		smp_mb();	/* sleep, then prod; the producer: prod, then sleep */
		if (live && ropcie_lx_pending(x, ring, READ_ONCE(rx->cons))) {
			ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 0);
			continue;
		}
		slept_at = ring == ROPCIE_WIRE_REQ ? ropcie_prof_now() : 0;
		WRITE_ONCE(rx->armed, true);
		wait_event_interruptible(rx->wq, ropcie_lx_rx_woken(rx, seen));
		WRITE_ONCE(rx->armed, false);
		ropcie_lx_set_hdr(x, gen, &out->rx_sleep[ring], 0);
		if (slept_at)
			ropcie_prof_add(ROPCIE_PROF_LX_IDLE,
					ktime_get_ns() - slept_at);
	}
	return 0;
}

/*
 * At each beat, wake the workers of the QPs with requests in flight: one
 * posted from a poster's context did not wake its worker, which checks
 * the request timeout (ropcie_lx_reap()).
 */
static void ropcie_lx_kick_posted(struct ropcie_xport *x)
{
	struct ropcie_qp *qp;
	unsigned long flags, id;

	xa_lock_irqsave(&x->conns, flags);
	xa_for_each(&x->conns, id, qp)
		if (READ_ONCE(qp->lx.nposted))
			ropcie_qp_kick(qp);
	xa_unlock_irqrestore(&x->conns, flags);
}

/**
 * ropcie_xport_doorbell() - the peer rang, or a beat passed
 * @link: the link
 * @rang: the peer rang (for the profile: the time the consumers start)
 *
 * Context: any; with @rang, the doorbell's tasklet (softirq).
 */
void ropcie_xport_doorbell(struct ropcie_link *link, bool rang)
{
	struct ropcie_xport *x = link->xport;
	u64 t = rang ? ropcie_prof_now() : 0;
	int ring;

	for (ring = 0; ring < ROPCIE_WIRE_NR_RINGS; ring++) {
		struct ropcie_lx_rx *rx = &x->rx[ring];

		if (rang && !ropcie_lx_rx_due(rx))
			continue;
		if (rang && ropcie_lx_rx_fast(rx, t, NULL)) {
			/* Served: the kthread only polls for what follows. */
			if (READ_ONCE(ropcie_rx_poll_us) &&
			    !ropcie_lx_rx_ceded(rx))
				ropcie_lx_rx_kick(rx);
			continue;
		}
		if (t)
			atomic64_cmpxchg(&rx->rang_at, 0, t);
		ropcie_lx_rx_kick(rx);
	}
	wake_up(&x->tx_wq);
	if (!rang)
		ropcie_lx_kick_posted(x);
}
