// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie completion queues: a ring of completions with many producers
 * (the QP workers, and posters that run a WRITE inline) serialised by a
 * spinlock, consumed by poll_cq. A completion made while cq_delay_us is
 * set (fault.c) stays in the ring out of sight until it is due: poll_cq
 * does not see it, and the armed handler hears of it when it comes due.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ropcie.h"

/**
 * ropcie_cq_error() - tell the CQ's ULP that it overran (IB_EVENT_CQ_ERR)
 * @cq: the CQ
 * @why: for the log
 */
void ropcie_cq_error(struct ropcie_cq *cq, const char *why)
{
	struct ib_cq *ibcq = &cq->ibcq;
	struct ib_event ev = {
		.device = ibcq->device,
		.event = IB_EVENT_CQ_ERR,
		.element.cq = ibcq,
	};

	pr_warn_ratelimited("%s: %s\n", dev_name(&ibcq->device->dev), why);
	if (ibcq->event_handler)
		ibcq->event_handler(&ev, ibcq->cq_context);
}

/* Handlers deferred by an inline post, in hard IRQ context as on hardware. */
static void ropcie_cq_irq_work(struct irq_work *work)
{
	struct ropcie_cq *cq = container_of(work, struct ropcie_cq, irq_work);
	struct ib_cq *ibcq = &cq->ibcq;

	if (test_and_clear_bit(ROPCIE_CQ_DEFER_ERR, &cq->deferred))
		ropcie_cq_error(cq, "CQ overflow");
	if (test_and_clear_bit(ROPCIE_CQ_DEFER_COMP, &cq->deferred) &&
	    ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
}

/*
 * Make the entries that are due visible, in order: those up to the
 * first that is not. Return ROPCIE_CQ_DEFER_COMP when the armed handler
 * is to hear of one, and keep the due timer on the first that waits
 * while a handler is armed. Under cq->lock.
 */
static unsigned long ropcie_cq_reveal(struct ropcie_cq *cq, u64 now)
{
	struct ropcie_ring *r = &cq->ring;
	const struct ropcie_cqe *e;
	unsigned long todo = 0;

	for (; cq->due != r->head; cq->due++) {
		e = ropcie_ring_slot(r, cq->due);
		if (e->due_ns > now)
			break;
		if (cq->notify & IB_CQ_NEXT_COMP ||
		    (cq->notify & IB_CQ_SOLICITED && e->solicited)) {
			cq->notify = 0;
			todo |= BIT(ROPCIE_CQ_DEFER_COMP);
		}
	}
	if (cq->due == r->head || !cq->notify)
		return todo;
	/* Set for a later entry (the delay shrank, or cq_clean ran): earlier. */
	e = ropcie_ring_slot(r, cq->due);
	if (!hrtimer_is_queued(&cq->due_timer) ||
	    ktime_after(hrtimer_get_expires(&cq->due_timer),
			ns_to_ktime(e->due_ns)))
		hrtimer_start(&cq->due_timer, ns_to_ktime(e->due_ns),
			      HRTIMER_MODE_ABS);
	return todo;
}

/*
 * The timer's interrupt (a softirq on PREEMPT_RT), as a device's
 * interrupt for a completion.
 */
static enum hrtimer_restart ropcie_cq_due_timer(struct hrtimer *timer)
{
	struct ropcie_cq *cq = container_of(timer, struct ropcie_cq, due_timer);
	struct ib_cq *ibcq = &cq->ibcq;
	unsigned long flags, todo;

	spin_lock_irqsave(&cq->lock, flags);
	todo = ropcie_cq_reveal(cq, ktime_get_ns());
	spin_unlock_irqrestore(&cq->lock, flags);
	if (todo && ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return HRTIMER_NORESTART;
}

int ropcie_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     KRPING_COMPAT_CQ_ATTRS *attrs)
{
	struct ropcie_dev *dev = to_rdev(ibcq->device);
	struct ropcie_cq *cq = to_rcq(ibcq);
	u32 size;
	int ret;

	/* A user's CQ (@attrs set) is polled through ib_uverbs: no mmap. */
	if (attr->flags || !attr->cqe || attr->cqe > ROPCIE_MAX_CQE)
		return -EINVAL;
	if (ropcie_fault_verb(dev, ROPCIE_FAULT_CREATE_CQ))
		return -ENOMEM;
	if (atomic_inc_return(&dev->num_cq) > ROPCIE_MAX_CQ) {
		ret = -ENOMEM;
		goto err;
	}
	size = ropcie_ring_size_for(attr->cqe);
	ret = ropcie_ring_init(&cq->ring, size, sizeof(struct ropcie_cqe),
			       GFP_KERNEL);
	if (ret)
		goto err;
	spin_lock_init(&cq->lock);
	init_irq_work(&cq->irq_work, ropcie_cq_irq_work);
	krping_compat_hrtimer_setup(&cq->due_timer, ropcie_cq_due_timer,
				    CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
	cq->deferred = 0;
	cq->due = 0;
	/* The ring may hold more than asked for: report what it holds. */
	ibcq->cqe = ropcie_ring_capacity(&cq->ring);
	return 0;
err:
	atomic_dec(&dev->num_cq);
	return ret;
}

int ropcie_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct ropcie_cq *cq = to_rcq(ibcq);

	/* No QP produces: once cancelled, the timer is not started again. */
	hrtimer_cancel(&cq->due_timer);
	irq_work_sync(&cq->irq_work);
	ropcie_ring_free(&cq->ring);
	atomic_dec(&to_rdev(ibcq->device)->num_cq);
	return 0;
}

/**
 * ropcie_cq_push() - add a completion, without calling any handler
 * @cq: completion queue
 * @wc: the completion
 * @solicited: the completion of a solicited receive
 *
 * For a producer that must keep its completions in the order of its
 * queue: it pushes while it holds that queue's consumer lock, and calls
 * ropcie_cq_signal() with the result once it has let go of the lock.
 * A full CQ (or one that fail_cq_overrun makes look full) loses the
 * completion and raises IB_EVENT_CQ_ERR once until it is polled empty;
 * the caller moves the completion's QP to error.
 *
 * Return: ROPCIE_CQ_DEFER_* bits of what ropcie_cq_signal() must do.
 */
unsigned long ropcie_cq_push(struct ropcie_cq *cq, const struct ib_wc *wc,
			     bool solicited)
{
	struct ropcie_dev *dev = to_rdev(cq->ibcq.device);
	u64 delay = ropcie_fault_cq_delay_ns(dev);
	bool overrun = ropcie_fault_cq_overrun(dev, wc);
	unsigned long flags, todo = 0;
	struct ropcie_cqe *e;
	u64 now;

	spin_lock_irqsave(&cq->lock, flags);
	/* Under the lock: the entries' due times follow their order. */
	now = delay ? ktime_get_ns() : 0;
	e = overrun ? NULL : ropcie_ring_prod_slot(&cq->ring);
	if (!e) {
		if (!cq->overflow)
			todo |= BIT(ROPCIE_CQ_DEFER_ERR);
		cq->overflow = true;
		todo |= BIT(ROPCIE_CQ_LOST);
	} else {
		e->wc = *wc;
		e->due_ns = delay ? now + delay : 0;
		e->solicited = solicited;
		ropcie_ring_produce(&cq->ring);
		todo |= ropcie_cq_reveal(cq, now);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return todo;
}

/**
 * ropcie_cq_signal() - call the handlers a push asked for
 * @cq: completion queue
 * @todo: what ropcie_cq_push() returned
 * @defer: call the handlers from an IRQ work, not from here (the caller
 *	is a poster running a work request inline: the consumer may hold
 *	locks its handler takes, as it may while hardware interrupts are
 *	off)
 *
 * Return: 0, or -ENOSPC when the completion was lost to an overflow.
 */
int ropcie_cq_signal(struct ropcie_cq *cq, unsigned long todo, bool defer)
{
	struct ib_cq *ibcq = &cq->ibcq;
	bool overflow = todo & BIT(ROPCIE_CQ_DEFER_ERR);
	bool notify = todo & BIT(ROPCIE_CQ_DEFER_COMP);
	int ret = todo & BIT(ROPCIE_CQ_LOST) ? -ENOSPC : 0;

	if (defer && (overflow || notify)) {
		if (overflow)
			set_bit(ROPCIE_CQ_DEFER_ERR, &cq->deferred);
		if (notify)
			set_bit(ROPCIE_CQ_DEFER_COMP, &cq->deferred);
		irq_work_queue(&cq->irq_work);
		return ret;
	}
	if (overflow)
		ropcie_cq_error(cq, "CQ overflow");
	if (notify && ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return ret;
}

/**
 * ropcie_cq_post() - add a completion and call the completion handler
 * @cq: completion queue
 * @wc: the completion
 * @solicited: the completion of a solicited receive
 * @defer: as for ropcie_cq_signal()
 *
 * Return: 0, or -ENOSPC when the CQ overflowed.
 */
int ropcie_cq_post(struct ropcie_cq *cq, const struct ib_wc *wc,
		   bool solicited, bool defer)
{
	return ropcie_cq_signal(cq, ropcie_cq_push(cq, wc, solicited), defer);
}

/**
 * ropcie_cq_clean() - drop the completions of a QP being destroyed
 * @cq: a CQ of the QP
 * @ibqp: the QP; nothing produces completions for it any more
 *
 * Every completion in the ring names its QP, and ib_core frees the QP
 * when destroy_qp returns: a later poll would hand a kernel consumer a
 * dangling wc->qp, and a user the completion of a QP it destroyed. As
 * mlx4 and mlx5 clean their CQs of a destroyed QP, its entries go; the
 * others stay, in order.
 */
void ropcie_cq_clean(struct ropcie_cq *cq, const struct ib_qp *ibqp)
{
	struct ropcie_ring *r = &cq->ring;
	unsigned long flags;
	u32 src, dst, due;

	/* Producers and poll_cq use the ring only under the lock. */
	spin_lock_irqsave(&cq->lock, flags);
	dst = r->tail;
	due = r->tail;
	for (src = r->tail; src != r->head; src++) {
		const struct ropcie_cqe *e = ropcie_ring_slot(r, src);

		if (src == cq->due)
			due = dst;
		if (e->wc.qp == ibqp)
			continue;
		if (dst != src)
			memcpy(ropcie_ring_slot(r, dst), e, r->esize);
		dst++;
	}
	if (src == cq->due)
		due = dst;
	cq->due = due;
	/* As ropcie_ring_produce(): the entries moved, then head. */
	smp_store_release(&r->head, dst);
	spin_unlock_irqrestore(&cq->lock, flags);
}

/*
 * A polled completion of a user's QP names the QP's stand-in, which
 * outlives it (ropcie_uverbs_name_qp()); in the ring it names the QP.
 */
static void ropcie_wc_name_qp(struct ib_wc *wc)
{
	struct ib_qp *name = to_rqp(wc->qp)->wc_name;

	if (name)
		wc->qp = name;
}

/*
 * The handler a reveal outside a producer asked for: from an IRQ work,
 * as the caller may hold locks the handler takes.
 */
static void ropcie_cq_defer_comp(struct ropcie_cq *cq, unsigned long todo)
{
	if (todo & BIT(ROPCIE_CQ_DEFER_COMP)) {
		set_bit(ROPCIE_CQ_DEFER_COMP, &cq->deferred);
		irq_work_queue(&cq->irq_work);
	}
}

static int ropcie_cq_pop(struct ropcie_cq *cq, int num, struct ib_wc *wc)
{
	struct ropcie_ring *r = &cq->ring;
	unsigned long flags, todo = 0;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->due != r->head)
		todo = ropcie_cq_reveal(cq, ktime_get_ns());
	for (; n < num && r->tail != cq->due; n++) {
		const struct ropcie_cqe *e = ropcie_ring_cons_slot(r);

		wc[n] = e->wc;
		ropcie_ring_consume(r);
		ropcie_wc_name_qp(&wc[n]);
	}
	/* Drained: the next overflow raises its own event. */
	if (ropcie_ring_empty(r))
		cq->overflow = false;
	spin_unlock_irqrestore(&cq->lock, flags);
	ropcie_cq_defer_comp(cq, todo);
	return n;
}

/*
 * Empty polls of a user's CQ with no req_notify_cq between them that
 * make a busy poll. ib_uverbs polls a batch one entry at a time until
 * one finds nothing, so each of its system calls that returns less than
 * asked for is one; an event loop that drains and then arms makes two
 * or three per wait, more when its completions trickle in.
 */
#define ROPCIE_CQ_BUSY_POLLS	8

int ropcie_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct ropcie_cq *cq = to_rcq(ibcq);
	int n = ropcie_cq_pop(cq, num, wc);

	/*
	 * A user's poll (through ib_uverbs, a system call: it may sleep)
	 * that finds nothing consumes what the links brought, and takes
	 * what that completed (ropcie_lx_user_poll()).
	 */
	if (!n && num > 0 && ibcq->uobject) {
		ropcie_lx_user_poll(atomic_inc_return(&cq->empty_polls) >=
				    ROPCIE_CQ_BUSY_POLLS);
		n = ropcie_cq_pop(cq, num, wc);
	}
	return n;
}

int ropcie_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct ropcie_cq *cq = to_rcq(ibcq);
	struct ropcie_ring *r = &cq->ring;
	unsigned long irqflags, todo = 0;
	int ret = 0;

	/* Its user is going to wait: no busy poll (ropcie_poll_cq()). */
	atomic_set(&cq->empty_polls, 0);
	spin_lock_irqsave(&cq->lock, irqflags);
	/* NEXT_COMP includes the solicited ones. */
	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_NEXT_COMP)
		cq->notify = IB_CQ_NEXT_COMP;
	else if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = IB_CQ_SOLICITED;
	/*
	 * Entries still waiting: the reveal starts the due timer for them
	 * (or hands the handler those that came due meanwhile). Only due
	 * ones are missed events: a delayed entry is not there yet.
	 */
	if (cq->due != r->head)
		todo = ropcie_cq_reveal(cq, ktime_get_ns());
	if (flags & IB_CQ_REPORT_MISSED_EVENTS && r->tail != cq->due && !todo)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	ropcie_cq_defer_comp(cq, todo);
	return ret;
}
