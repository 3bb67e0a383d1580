// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie queue pairs: creation, the state machine, posting to the send
 * and receive rings, and the per-QP kthread that consumes the send ring,
 * runs each work request through the requester and flushes both rings when
 * the QP is in the error state.
 *
 * A small RDMA WRITE posted alone to an SQ that no one is consuming, and
 * that holds nothing but WRITEs in flight, may run in the poster's
 * context instead (module option inline_max): to completion on loopback,
 * or sent without waiting on a link (its verdict is the worker's to
 * take). Whoever consumes the SQ, the worker or such a poster, owns it
 * through sq_owner, so work requests still run, and complete, in order.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "ropcie.h"

void ropcie_qp_get(struct ropcie_qp *qp)
{
	refcount_inc(&qp->ref);
}

void ropcie_qp_put(struct ropcie_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->freed);
}

void ropcie_iw_add_ref(struct ib_qp *ibqp)
{
	ropcie_qp_get(to_rqp(ibqp));
}

void ropcie_iw_rem_ref(struct ib_qp *ibqp)
{
	ropcie_qp_put(to_rqp(ibqp));
}

/*
 * iw_cm's lookup of the QP its caller names, for connect and accept; it
 * takes its reference right after, under its own spinlock, which
 * ropcie_destroy_qp() waits out. Only a QP that may still connect is
 * found; connect and accept check the rest under ropcie_fabric_lock.
 */
struct ib_qp *ropcie_iw_get_qp(struct ib_device *ibdev, int qpn)
{
	struct ropcie_qp *qp = xa_load(&to_rdev(ibdev)->qp_xa, qpn);

	if (!qp || !ropcie_qp_connectable(qp))
		return NULL;
	return &qp->ibqp;
}

/* Wake the QP's worker. */
void ropcie_qp_kick(struct ropcie_qp *qp)
{
	atomic_inc(&qp->events);
	wake_up(&qp->wq);
}

/* Move to the error state and close the connection; the worker flushes. */
void ropcie_qp_set_error(struct ropcie_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->state_lock, flags);
	WRITE_ONCE(qp->state, IB_QPS_ERR);
	qp->close_req = true;
	qp->graceful = false;
	spin_unlock_irqrestore(&qp->state_lock, flags);
	ropcie_qp_kick(qp);
}

/**
 * ropcie_qp_fatal() - the QP's connection was lost or broken under it
 * @qp: the QP
 *
 * Tells its ULP with IB_EVENT_QP_FATAL before the flush, as hardware does
 * when its link fails (and siw when a peer's frame is malformed), so that
 * the ULP can tell the failure from a peer that closed cleanly (which
 * flushes the same receives), then moves the QP to the error state.
 *
 * Context: any; the ULP's handler runs in it, as QP events from an
 * interrupt do.
 */
void ropcie_qp_fatal(struct ropcie_qp *qp)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.event = IB_EVENT_QP_FATAL,
		.element.qp = &qp->ibqp,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	ropcie_qp_set_error(qp);
}

/* Connection established: INIT/RTR -> RTS. False in any other state. */
bool ropcie_qp_to_rts(struct ropcie_qp *qp)
{
	unsigned long flags;
	bool ok;

	spin_lock_irqsave(&qp->state_lock, flags);
	ok = qp->state == IB_QPS_INIT || qp->state == IB_QPS_RTR ||
	     qp->state == IB_QPS_RTS;
	if (ok)
		WRITE_ONCE(qp->state, IB_QPS_RTS);
	spin_unlock_irqrestore(&qp->state_lock, flags);
	return ok;
}

/**
 * ropcie_qp_target_enter() - begin a transfer into or out of @qp's memory
 * @qp: the target QP, the initiator's peer
 *
 * Counted before the state is read; a move to error stores the state
 * before the flush waits for the count (ropcie_qp_wait_inbound()): one
 * of the two always sees the other.
 *
 * Return: true when @qp is in RTS (end with ropcie_qp_target_leave()).
 */
bool ropcie_qp_target_enter(struct ropcie_qp *qp)
{
	atomic_inc(&qp->inbound);
	/* The count, then the state: pairs with ropcie_qp_wait_inbound(). */
	smp_mb__after_atomic();
	if (READ_ONCE(qp->state) == IB_QPS_RTS)
		return true;
	ropcie_qp_target_leave(qp);
	return false;
}

void ropcie_qp_target_leave(struct ropcie_qp *qp)
{
	if (atomic_dec_and_test(&qp->inbound))
		wake_up_var(&qp->inbound);
}

/*
 * Wait for the peer's transfers that found @qp in RTS, once it left RTS:
 * as long as the longest copy, since transfers wait for nothing.
 */
static void ropcie_qp_wait_inbound(struct ropcie_qp *qp)
{
	smp_mb();	/* the state the caller saw, then the count */
	wait_var_event(&qp->inbound, !atomic_read(&qp->inbound));
}

static enum ib_wc_opcode ropcie_wc_opcode(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_RDMA_WRITE:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		return IB_WC_RDMA_READ;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	default:
		return IB_WC_SEND;
	}
}

/*
 * Consume @sqe's entry, then complete it: a poller that sees the
 * completion may post again at once, and finds the entry free.
 */
static void ropcie_sq_retire(struct ropcie_qp *qp,
			     const struct ropcie_sqe *sqe, struct ib_wc *wc,
			     bool inline_exec)
{
	enum ib_wc_opcode opcode = ropcie_wc_opcode(sqe->opcode);
	bool signaled;

	ropcie_fault_wc(qp, opcode, &wc->status);
	/* Unsignaled work completes only when it failed. */
	signaled = wc->status != IB_WC_SUCCESS || qp->sig_all ||
		   (sqe->send_flags & IB_SEND_SIGNALED);
	wc->wr_id = sqe->wr_id;
	wc->opcode = opcode;
	wc->qp = &qp->ibqp;
	qp->sq_resend = false;
	ropcie_ring_consume(&qp->sq);
	/* A completion lost to a full CQ ends the QP, as on hardware. */
	if (signaled && ropcie_cq_post(qp->scq, wc, false, inline_exec))
		ropcie_qp_set_error(qp);
}

static void ropcie_flush(struct ropcie_qp *qp)
{
	struct ropcie_sqe *sqe;
	struct ropcie_rqe *rqe;

	/* ib_drain_qp()'s completions must mean that no byte moves. */
	ropcie_qp_wait_inbound(qp);
	while ((sqe = ropcie_ring_cons_slot(&qp->sq))) {
		struct ib_wc wc = { .status = IB_WC_WR_FLUSH_ERR };

		ropcie_sq_retire(qp, sqe, &wc, false);
	}
	/*
	 * One at a time: pushed under the lock, in the RQ's order with a
	 * SEND of the peer that took an earlier entry; the completion
	 * handler runs without our lock.
	 */
	for (;;) {
		struct ib_wc wc = {
			.status = IB_WC_WR_FLUSH_ERR,
			.opcode = IB_WC_RECV,
			.qp = &qp->ibqp,
		};
		unsigned long todo = 0;

		mutex_lock(&qp->rq_cons_lock);
		rqe = ropcie_ring_cons_slot(&qp->rq);
		if (rqe) {
			wc.wr_id = rqe->wr_id;
			ropcie_ring_consume(&qp->rq);
			todo = ropcie_cq_push(qp->rcq, &wc, false);
		}
		mutex_unlock(&qp->rq_cons_lock);
		if (!rqe)
			break;
		/* Already in error: nothing more to do when it was lost. */
		ropcie_cq_signal(qp->rcq, todo, false);
	}
}

/* Local operations: REG_MR and LOCAL_INV. */
static enum ib_wc_status ropcie_local_op(struct ropcie_qp *qp,
					 const struct ropcie_sqe *sqe)
{
	if (sqe->opcode == IB_WR_LOCAL_INV)
		return ropcie_mr_invalidate(qp->dev, qp->ibqp.pd, sqe->inv_rkey) ?
		       IB_WC_LOC_PROT_ERR : IB_WC_SUCCESS;
	return ropcie_mr_register(qp->dev, qp->ibqp.pd, sqe->reg_mr,
				  sqe->reg_key, sqe->reg_access);
}

/*
 * Run one SQE, as the SQ's owner; @inline_exec: in the poster's context,
 * which may sleep only for a user QP (ropcie_inline_ok()).
 * Return: false to try again later (nothing consumed).
 */
static bool ropcie_sq_execute(struct ropcie_qp *qp, struct ropcie_sqe *sqe,
			      bool inline_exec)
{
	u64 t_post = sqe->t_post, t_run = 0, t_done = 0;
	bool may_sleep = !inline_exec || qp->ibqp.uobject;
	struct ib_wc wc = {};

	if (t_post) {
		t_run = ktime_get_ns();
		if (!inline_exec)
			ropcie_prof_add(ROPCIE_PROF_QUEUE, t_run - t_post);
	}
	if (sqe->opcode == IB_WR_REG_MR || sqe->opcode == IB_WR_LOCAL_INV) {
		wc.status = ropcie_local_op(qp, sqe);
	} else {
		bool write = sqe->opcode == IB_WR_RDMA_WRITE;

		if (ropcie_request(qp, sqe, &wc, may_sleep,
				   write ? t_run : 0) == -EAGAIN)
			return false;
		if (t_post)
			t_done = ktime_get_ns();
	}
	if (t_done) {
		ropcie_prof_add(ROPCIE_PROF_EXEC, t_done - t_run);
		ropcie_prof_add(ROPCIE_PROF_LANDED, t_done - t_post);
		ropcie_prof_count(inline_exec);
	}
	ropcie_sq_retire(qp, sqe, &wc, inline_exec);
	if (t_done)
		ropcie_prof_add(ROPCIE_PROF_COMPLETE, ktime_get_ns() - t_done);
	if (wc.status != IB_WC_SUCCESS)
		ropcie_qp_set_error(qp);
	return true;
}

/*
 * Own the SQ for the worker. False when a poster owns it: it is marked
 * wanted, and the poster kicks the worker when it lets go.
 */
static bool ropcie_sq_own_wait(struct ropcie_qp *qp)
{
	for (;;) {
		int old = atomic_cmpxchg_acquire(&qp->sq_owner, ROPCIE_SQ_FREE,
						 ROPCIE_SQ_OWNED);

		if (old == ROPCIE_SQ_FREE)
			return true;
		if (old == ROPCIE_SQ_WANTED ||
		    atomic_cmpxchg(&qp->sq_owner, ROPCIE_SQ_OWNED,
				   ROPCIE_SQ_WANTED) != ROPCIE_SQ_FREE)
			return false;
		/* Let go of in between: try again. */
	}
}

/* Let go of the SQ; kick the worker if it wanted the SQ meanwhile. */
static void ropcie_sq_release(struct ropcie_qp *qp)
{
	if (atomic_xchg_release(&qp->sq_owner, ROPCIE_SQ_FREE) ==
	    ROPCIE_SQ_WANTED)
		ropcie_qp_kick(qp);
}

/*
 * Complete the posted requests whose verdicts are in, oldest first, as
 * the SQ's owner. A failed one moves the QP to error (the flush ends the
 * rest); one the peer never answered fails as a lost request would. A
 * SEND that found no receive (the newest: nothing is posted behind a
 * SEND the peer's credit did not cover)
 * stays at the head, to run again through ropcie_sq_execute().
 */
static void ropcie_sq_reap(struct ropcie_qp *qp)
{
	const struct ropcie_transport_ops *transport = READ_ONCE(qp->transport);

	while (qp->sq_posted) {
		struct ropcie_sqe *sqe = ropcie_ring_cons_slot(&qp->sq);
		struct ib_wc wc = {};
		int ret, i;

		ret = transport->reap(qp, &wc.status);
		if (ret == -EINPROGRESS)
			return;
		if (ret == -EAGAIN) {
			qp->sq_posted--;
			qp->sq_resend = true;
			continue;
		}
		if (ret)
			wc.status = IB_WC_RETRY_EXC_ERR;
		if (sqe->opcode == IB_WR_RDMA_WRITE && wc.status == IB_WC_SUCCESS)
			for (i = 0; i < sqe->num_sge; i++)
				wc.byte_len += sqe->sge[i].length;
		qp->sq_posted--;
		ropcie_sq_retire(qp, sqe, &wc, false);
		if (wc.status != IB_WC_SUCCESS)
			ropcie_qp_set_error(qp);
	}
}

/**
 * ropcie_qp_reap_now() - complete @qp's answered requests here
 * @qp: a QP whose posted requests got answers (ropcie_lx_rx_user())
 *
 * As the worker would, when the SQ is free, sparing its wake-up; what
 * else the worker does (the next requests, the error state's flush) it
 * is woken for. A poster or the worker holding the SQ reaps itself.
 *
 * Context: task.
 */
void ropcie_qp_reap_now(struct ropcie_qp *qp)
{
	bool more;

	if (atomic_cmpxchg_acquire(&qp->sq_owner, ROPCIE_SQ_FREE,
				   ROPCIE_SQ_OWNED) != ROPCIE_SQ_FREE) {
		ropcie_qp_kick(qp);
		return;
	}
	ropcie_sq_reap(qp);
	/* A graceful close waits for the SQ to be empty: the worker's. */
	more = qp->sq_resend || READ_ONCE(qp->state) != IB_QPS_RTS ||
	       READ_ONCE(qp->close_req) ||
	       ropcie_ring_cons_slot_at(&qp->sq, qp->sq_posted);
	ropcie_sq_release(qp);
	if (more)
		ropcie_qp_kick(qp);
}

/*
 * Drop the posted requests, as the SQ's owner, when the queue they
 * belong to is flushed or emptied: their verdicts name no entry any more.
 */
static void ropcie_sq_forget_posted(struct ropcie_qp *qp)
{
	qp->sq_resend = false;
	if (qp->sq_posted) {
		READ_ONCE(qp->transport)->forget(qp);
		qp->sq_posted = 0;
	}
}

/* What ropcie_sq_post() did with a send queue entry. */
enum ropcie_sq_verdict {
	ROPCIE_SQ_POSTED,	/* handed to the transport: go on */
	ROPCIE_SQ_WAIT,		/* must wait for the posted ones' answers */
	ROPCIE_SQ_RUN,		/* to be run now by ropcie_sq_execute() */
};

/*
 * Send @sqe without waiting, if the transport can and the SQ allows:
 * WRITEs and SENDs, behind posted ones but not behind a SEND that may
 * find no receive (the transport says -EBUSY); not a SEND sent before
 * that found no receive.
 */
static enum ropcie_sq_verdict ropcie_sq_post(struct ropcie_qp *qp,
					     struct ropcie_sqe *sqe)
{
	u64 t_run = sqe->t_post ? ktime_get_ns() : 0;
	int ret;

	if (qp->sq_resend)
		return ROPCIE_SQ_RUN;
	ret = ropcie_request_post(qp, sqe, true);

	if (!ret) {
		if (t_run) {
			ropcie_prof_add(ROPCIE_PROF_QUEUE, t_run - sqe->t_post);
			ropcie_prof_count(false);
		}
		qp->sq_posted++;
		return ROPCIE_SQ_POSTED;
	}
	/* In order: nothing runs past a posted request. */
	if (ret == -EBUSY || qp->sq_posted)
		return ROPCIE_SQ_WAIT;
	return ROPCIE_SQ_RUN;
}

/* Consume what can be consumed now, as the SQ's owner. */
static void __ropcie_qp_process(struct ropcie_qp *qp)
{
	unsigned int budget = 0;

	for (;;) {
		enum ib_qp_state state;
		bool close, graceful;
		struct ropcie_sqe *sqe;
		unsigned long flags;

		ropcie_sq_reap(qp);
		spin_lock_irqsave(&qp->state_lock, flags);
		state = qp->state;
		close = qp->close_req;
		graceful = qp->graceful;
		if (state == IB_QPS_ERR)
			qp->close_req = false;
		spin_unlock_irqrestore(&qp->state_lock, flags);

		if (state == IB_QPS_ERR) {
			ropcie_sq_forget_posted(qp);
			ropcie_flush(qp);
			if (close)
				ropcie_cm_close(qp);
			return;
		}
		if (state != IB_QPS_RTS)
			return;
		sqe = ropcie_ring_cons_slot_at(&qp->sq, qp->sq_posted);
		if (!sqe) {
			if (close && graceful && !qp->sq_posted)
				ropcie_qp_set_error(qp);
			else
				return;
			continue;
		}
		switch (ropcie_sq_post(qp, sqe)) {
		case ROPCIE_SQ_POSTED:
			break;
		case ROPCIE_SQ_WAIT:
			return;
		case ROPCIE_SQ_RUN:
			if (!ropcie_sq_execute(qp, sqe, false))
				return;
			break;
		}
		if (++budget % 64 == 0)
			cond_resched();
	}
}

static void ropcie_qp_process(struct ropcie_qp *qp)
{
	if (!ropcie_sq_own_wait(qp))
		return;
	__ropcie_qp_process(qp);
	ropcie_sq_release(qp);
}

static int ropcie_qp_worker(void *arg)
{
	struct ropcie_qp *qp = arg;

	while (!kthread_should_stop()) {
		int seen = atomic_read(&qp->events);

		ropcie_qp_process(qp);
		/* Posted WRITEs: look again now and then for a lost answer. */
		wait_event_interruptible_timeout(qp->wq,
						 atomic_read(&qp->events) != seen ||
						 kthread_should_stop(),
						 qp->sq_posted ? HZ : MAX_SCHEDULE_TIMEOUT);
	}
	return 0;
}

int ropcie_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		     struct ib_udata *udata)
{
	struct ropcie_dev *dev = to_rdev(ibqp->device);
	struct ropcie_qp *qp = to_rqp(ibqp);
	struct ib_qp_cap *cap = &attr->cap;
	u32 id;
	int ret;

	if (attr->qp_type != IB_QPT_RC || attr->srq || attr->create_flags)
		return -EOPNOTSUPP;
	if (cap->max_send_wr > ROPCIE_MAX_QP_WR ||
	    cap->max_recv_wr > ROPCIE_MAX_QP_WR ||
	    cap->max_send_sge > ROPCIE_MAX_SGE ||
	    cap->max_recv_sge > ROPCIE_MAX_SGE || cap->max_inline_data)
		return -EINVAL;
	if (ropcie_fault_verb(dev, ROPCIE_FAULT_CREATE_QP))
		return -ENOMEM;
	if (udata && atomic_inc_return(&dev->num_user_qp) > ROPCIE_MAX_USER_QP) {
		ret = -ENOSPC;
		goto err_user;
	}
	if (atomic_inc_return(&dev->num_qp) > ROPCIE_MAX_QP) {
		ret = -ENOMEM;
		goto err_count;
	}

	qp->dev = dev;
	qp->owner = ropcie_uverbs_qp_owner(udata);
	qp->transport = &ropcie_loopback_transport;
	mutex_init(&qp->lx.wait_lock);
	refcount_set(&qp->ref, 1);
	init_completion(&qp->freed);
	spin_lock_init(&qp->state_lock);
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);
	mutex_init(&qp->rq_cons_lock);
	init_waitqueue_head(&qp->wq);
	atomic_set(&qp->events, 0);
	atomic_set(&qp->sq_owner, ROPCIE_SQ_FREE);
	atomic64_set(&qp->prof_write, 0);
	/*
	 * An iWARP QP is born idle, ready for receives and for its
	 * connection; ib_core shows idle as INIT (as siw does), and
	 * rdma-core's tests expect an RNIC's new QP there.
	 */
	qp->state = IB_QPS_INIT;
	qp->scq = to_rcq(attr->send_cq);
	qp->rcq = to_rcq(attr->recv_cq);
	qp->sig_all = attr->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->max_send_sge = max_t(u32, cap->max_send_sge, 1);
	qp->max_recv_sge = max_t(u32, cap->max_recv_sge, 1);

	ret = ropcie_ring_init(&qp->sq,
			       ropcie_ring_size_for(max_t(u32, cap->max_send_wr, 1)),
			       sizeof(struct ropcie_sqe), GFP_KERNEL);
	if (ret)
		goto err_count;
	ret = ropcie_ring_init(&qp->rq,
			       ropcie_ring_size_for(max_t(u32, cap->max_recv_wr, 1)),
			       sizeof(struct ropcie_rqe), GFP_KERNEL);
	if (ret)
		goto err_sq;
	/*
	 * Numbers go round, as rxe's do: a peer, a ULP's log or a late
	 * message that names a destroyed QP does not find its successor.
	 */
	ret = xa_alloc_cyclic_irq(&dev->qp_xa, &id, qp, XA_LIMIT(2, 0xffffff),
				  &dev->qp_next, GFP_KERNEL);
	if (ret < 0)
		goto err_rq;
	ibqp->qp_num = id;
	if (udata) {
		ret = ropcie_uverbs_name_qp(qp, udata);
		if (ret)
			goto err_xa;
	}

	qp->task = kthread_create(ropcie_qp_worker, qp, "ropcie-qp%u", id);
	if (IS_ERR(qp->task)) {
		ret = PTR_ERR(qp->task);
		goto err_xa;
	}
	wake_up_process(qp->task);

	cap->max_send_wr = ropcie_ring_capacity(&qp->sq);
	cap->max_recv_wr = ropcie_ring_capacity(&qp->rq);
	cap->max_send_sge = qp->max_send_sge;
	cap->max_recv_sge = qp->max_recv_sge;
	return 0;

err_xa:
	xa_erase_irq(&dev->qp_xa, id);
err_rq:
	ropcie_ring_free(&qp->rq);
err_sq:
	ropcie_ring_free(&qp->sq);
err_count:
	put_pid(qp->owner);
	atomic_dec(&dev->num_qp);
err_user:
	if (udata)
		atomic_dec(&dev->num_user_qp);
	return ret;
}

int ropcie_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct ropcie_qp *qp = to_rqp(ibqp);
	struct ropcie_dev *dev = qp->dev;

	ropcie_qp_set_error(qp);
	kthread_stop(qp->task);
	/* The worker may have stopped before it closed the connection. */
	ropcie_cm_close(qp);
	/* No handler of an inline post runs once the QP is gone. */
	irq_work_sync(&qp->scq->irq_work);
	xa_erase_irq(&dev->qp_xa, ibqp->qp_num);
	/*
	 * A lookup that found the QP just before is followed by iw_cm's
	 * add_ref in the same spinlocked section: wait that out.
	 */
	synchronize_rcu();
	/* Wait for iw_cm's and the peer's references. */
	ropcie_qp_put(qp);
	wait_for_completion(&qp->freed);
	ropcie_cq_clean(qp->scq, ibqp);
	if (qp->rcq != qp->scq)
		ropcie_cq_clean(qp->rcq, ibqp);
	ropcie_ring_free(&qp->sq);
	ropcie_ring_free(&qp->rq);
	if (qp->owner)
		atomic_dec(&dev->num_user_qp);
	put_pid(qp->owner);
	atomic_dec(&dev->num_qp);
	return 0;
}

int ropcie_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		     struct ib_udata *udata)
{
	struct ropcie_qp *qp = to_rqp(ibqp);
	enum ib_qp_state cur, new;
	unsigned long flags;
	bool close = false;
	int ret = 0;

	if (!(mask & IB_QP_STATE))
		return 0;

	spin_lock_irqsave(&qp->state_lock, flags);
	cur = qp->state;
	new = attr->qp_state;
	switch (new) {
	case IB_QPS_RESET:
		if (cur != IB_QPS_ERR && cur != IB_QPS_RESET &&
		    cur != IB_QPS_INIT) {
			ret = -EINVAL;
			break;
		}
		WRITE_ONCE(qp->state, IB_QPS_RESET);
		/* The worker will not see ERR: close here, below. */
		close = qp->close_req;
		qp->close_req = false;
		break;
	case IB_QPS_INIT:
		if (cur != IB_QPS_RESET && cur != IB_QPS_INIT)
			ret = -EINVAL;
		else
			WRITE_ONCE(qp->state, IB_QPS_INIT);
		break;
	case IB_QPS_RTR:
		if (cur != IB_QPS_INIT && cur != IB_QPS_RTR)
			ret = -EINVAL;
		else
			WRITE_ONCE(qp->state, IB_QPS_RTR);
		break;
	case IB_QPS_RTS:
		if (cur != IB_QPS_RTR && cur != IB_QPS_RTS)
			ret = -EINVAL;
		else
			WRITE_ONCE(qp->state, IB_QPS_RTS);
		break;
	case IB_QPS_SQD:
		/* iw_cm's graceful disconnect: close once the SQ drained. */
		if (cur == IB_QPS_RTS) {
			qp->close_req = true;
			qp->graceful = true;
		}
		break;
	case IB_QPS_SQE:
	case IB_QPS_ERR:
		WRITE_ONCE(qp->state, IB_QPS_ERR);
		qp->close_req = true;
		qp->graceful = false;
		break;
	default:
		ret = -EINVAL;
	}
	spin_unlock_irqrestore(&qp->state_lock, flags);

	if (!ret && new == IB_QPS_RESET) {
		/*
		 * Nothing runs in RESET: start again with empty rings. Own
		 * the SQ to move its tail: a worker or poster that saw RTS
		 * just before may still be consuming it.
		 */
		while (atomic_cmpxchg_acquire(&qp->sq_owner, ROPCIE_SQ_FREE,
					      ROPCIE_SQ_OWNED) != ROPCIE_SQ_FREE)
			cond_resched();
		ropcie_qp_wait_inbound(qp);
		spin_lock_irqsave(&qp->sq_lock, flags);
		qp->sq.tail = qp->sq.head;
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		ropcie_sq_forget_posted(qp);
		ropcie_sq_release(qp);
		mutex_lock(&qp->rq_cons_lock);
		qp->rq.tail = qp->rq.head;
		mutex_unlock(&qp->rq_cons_lock);
		if (close)
			ropcie_cm_close(qp);
	}
	ropcie_qp_kick(qp);
	return ret;
}

int ropcie_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init)
{
	struct ropcie_qp *qp = to_rqp(ibqp);

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = READ_ONCE(qp->state);
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = IB_MTU_4096;
	attr->qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
				IB_ACCESS_REMOTE_READ;
	attr->cap.max_send_wr = ropcie_ring_capacity(&qp->sq);
	attr->cap.max_recv_wr = ropcie_ring_capacity(&qp->rq);
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	attr->max_rd_atomic = ROPCIE_MAX_IRD_ORD;
	attr->max_dest_rd_atomic = ROPCIE_MAX_IRD_ORD;
	init->qp_type = IB_QPT_RC;
	init->send_cq = &qp->scq->ibcq;
	init->recv_cq = &qp->rcq->ibcq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}

static int ropcie_sqe_fill(struct ropcie_qp *qp, struct ropcie_sqe *sqe,
			   const struct ib_send_wr *wr, u64 t_post)
{
	/*
	 * No inline data (max_inline_data is 0): its bytes would be read
	 * after post_send returned, from an address without a key.
	 */
	if (wr->num_sge > qp->max_send_sge || wr->send_flags & IB_SEND_INLINE)
		return -EINVAL;
	memset(sqe, 0, offsetof(struct ropcie_sqe, sge));
	sqe->t_post = t_post;
	sqe->wr_id = wr->wr_id;
	sqe->opcode = wr->opcode;
	sqe->send_flags = wr->send_flags;
	sqe->num_sge = wr->num_sge;
	switch (wr->opcode) {
	case IB_WR_SEND_WITH_INV:
		sqe->inv_rkey = wr->ex.invalidate_rkey;
		fallthrough;
	case IB_WR_SEND:
		break;
	case IB_WR_RDMA_READ_WITH_INV:
		sqe->inv_rkey = wr->ex.invalidate_rkey;
		fallthrough;
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_WRITE:
		sqe->remote_addr = rdma_wr(wr)->remote_addr;
		sqe->rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_LOCAL_INV:
		sqe->inv_rkey = wr->ex.invalidate_rkey;
		sqe->num_sge = 0;
		break;
	case IB_WR_REG_MR:
		sqe->reg_mr = to_rmr(reg_wr(wr)->mr);
		sqe->reg_key = reg_wr(wr)->key;
		sqe->reg_access = reg_wr(wr)->access;
		sqe->num_sge = 0;
		break;
	default:
		/* No immediate data, atomics or memory windows on iWARP. */
		return -EINVAL;
	}
	memcpy(sqe->sge, wr->sg_list, sqe->num_sge * sizeof(struct ib_sge));
	return 0;
}

/*
 * Can @wr run inline, in the poster's context? A lone RDMA WRITE of at
 * most inline_max bytes, posted from task context (the key lookups take
 * locks that interrupt context must not wait for); over a link, which
 * posts it without waiting, a SEND too. A user QP's post comes from
 * ib_uverbs' system call, which may sleep: on a transport that runs work
 * at once (one host) its lone SEND or WRITE of any length runs inline
 * too. inline_max 0 turns all of them off.
 */
static bool ropcie_inline_ok(const struct ropcie_qp *qp,
			     const struct ib_send_wr *wr)
{
	u32 max = READ_ONCE(ropcie_inline_max);
	u64 len = 0;
	int i;
	const struct ropcie_transport_ops *transport = READ_ONCE(qp->transport);

	if (!max || wr->next || wr->num_sge > qp->max_send_sge ||
	    wr->send_flags & IB_SEND_INLINE || !in_task())
		return false;
	if (qp->ibqp.uobject && transport->inline_exec)
		return wr->opcode == IB_WR_SEND ||
		       wr->opcode == IB_WR_RDMA_WRITE;
	if (!(wr->opcode == IB_WR_RDMA_WRITE &&
	      (transport->inline_exec || transport->post)) &&
	    !(wr->opcode == IB_WR_SEND && transport->post))
		return false;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len <= max;
}

/*
 * Send @sqe, the SQ's newest entry, from the poster's context as a
 * posted WRITE or SEND (ropcie_transport_ops.post); else leave it to the worker.
 */
static void ropcie_sq_post_inline(struct ropcie_qp *qp, struct ropcie_sqe *sqe)
{
	if (ropcie_request_post(qp, sqe, false)) {
		ropcie_qp_kick(qp);
		return;
	}
	qp->sq_posted++;
	if (sqe->t_post)
		ropcie_prof_count(true);
}

/*
 * Run @wr in the poster's context when the SQ holds nothing but posted
 * requests, in RTS, and no one consumes it: the worker is idle, so order
 * is kept. Return: false when @wr must go through the SQ and the worker
 * instead.
 */
static bool ropcie_post_inline(struct ropcie_qp *qp,
			       const struct ib_send_wr *wr, u64 t_post)
{
	struct ropcie_sqe *sqe = NULL;
	unsigned long flags;
	bool rts, ran = false;

	if (atomic_cmpxchg_acquire(&qp->sq_owner, ROPCIE_SQ_FREE,
				   ROPCIE_SQ_OWNED) != ROPCIE_SQ_FREE)
		return false;
	spin_lock_irqsave(&qp->state_lock, flags);
	rts = qp->state == IB_QPS_RTS && !qp->close_req;
	spin_unlock_irqrestore(&qp->state_lock, flags);
	if (rts) {
		spin_lock_irqsave(&qp->sq_lock, flags);
		/* Exact: we are the consumer, and producers hold the lock. */
		if (!ropcie_ring_cons_slot_at(&qp->sq, qp->sq_posted)) {
			sqe = ropcie_ring_prod_slot(&qp->sq);
			if (sqe) {
				ropcie_sqe_fill(qp, sqe, wr, t_post);
				ropcie_ring_produce(&qp->sq);
			}
		}
		spin_unlock_irqrestore(&qp->sq_lock, flags);
	}
	if (sqe && READ_ONCE(qp->transport)->post) {
		ran = true;
		ropcie_sq_post_inline(qp, sqe);
	} else if (sqe) {
		/* Consumes the entry: completes it or moves the QP to error. */
		ran = true;
		if (!ropcie_sq_execute(qp, sqe, true))
			ropcie_qp_kick(qp);	/* left for the worker */
	}
	ropcie_sq_release(qp);
	return ran;
}

int ropcie_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct ropcie_qp *qp = to_rqp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	u64 t_post = ropcie_prof_now();
	unsigned long flags;
	int ret = 0;

	if (t_post) {
		u64 began = atomic64_xchg(&qp->prof_write, 0);

		if (began && began < t_post)
			ropcie_prof_add(ROPCIE_PROF_TURNAROUND,
					t_post - began);
	}
	/* The error state takes work only to flush it (ib_drain_sq). */
	if (state != IB_QPS_RTS && state != IB_QPS_ERR) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (state == IB_QPS_RTS && ropcie_inline_ok(qp, wr) &&
	    ropcie_post_inline(qp, wr, t_post))
		goto out;
	spin_lock_irqsave(&qp->sq_lock, flags);
	for (; wr; wr = wr->next) {
		struct ropcie_sqe *sqe = ropcie_ring_prod_slot(&qp->sq);

		if (!sqe) {
			ret = -ENOMEM;
			break;
		}
		ret = ropcie_sqe_fill(qp, sqe, wr, t_post);
		if (ret)
			break;
		ropcie_ring_produce(&qp->sq);
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (ret)
		*bad_wr = wr;
	ropcie_qp_kick(qp);
out:
	if (t_post)
		ropcie_prof_add(ROPCIE_PROF_POST, ktime_get_ns() - t_post);
	return ret;
}

int ropcie_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	struct ropcie_qp *qp = to_rqp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	unsigned long flags;
	int ret = 0;

	if (state == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&qp->rq_lock, flags);
	for (; wr; wr = wr->next) {
		struct ropcie_rqe *rqe = ropcie_ring_prod_slot(&qp->rq);

		if (!rqe) {
			ret = -ENOMEM;
			break;
		}
		if (wr->num_sge > qp->max_recv_sge) {
			ret = -EINVAL;
			break;
		}
		rqe->wr_id = wr->wr_id;
		rqe->num_sge = wr->num_sge;
		memcpy(rqe->sge, wr->sg_list, wr->num_sge * sizeof(struct ib_sge));
		ropcie_ring_produce(&qp->rq);
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	if (ret)
		*bad_wr = wr;

	if (state == IB_QPS_ERR) {
		ropcie_qp_kick(qp);	/* flush it (ib_drain_rq) */
	} else {
		/*
		 * A SEND of the peer may wait for this receive: tell the
		 * transport then, not for every receive (on loopback, a
		 * woken worker owns its SQ for a moment, and the WRITEs
		 * posted meanwhile miss the inline path). The entry is
		 * produced before the flag is read; ropcie_respond_send()
		 * sets the flag before it looks.
		 */
		smp_mb();
		if (READ_ONCE(qp->rnr_wait))
			READ_ONCE(qp->transport)->recv_posted(qp);
	}
	return ret;
}
