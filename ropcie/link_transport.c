// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link transport: its life. The transport of a link is created
 * with it, carries connections while the link is up, ends them all when
 * it goes down (a new generation) and goes with the link.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kthread.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "link_transport.h"

/* The connection manager above, set while any link may exist. */
const struct ropcie_lx_upcalls *ropcie_lx_up;

/**
 * ropcie_lx_set_upcalls() - the connection manager above the transport
 * @up: its calls, or NULL once it goes
 *
 * Context: module init and exit, while no link exists.
 */
void ropcie_lx_set_upcalls(const struct ropcie_lx_upcalls *up)
{
	ropcie_lx_up = up;
}

/* Links whose transport may carry a new connection, under the fabric lock. */
static LIST_HEAD(ropcie_xports);

/*
 * Held for reading by whoever uses a transport outside the fabric lock
 * (a requester, connect, accept); for writing by the link's teardown
 * before it frees the transport.
 */
DECLARE_RWSEM(ropcie_lx_life);

/**
 * ropcie_lx_alive() - may generation @gen of @x still be used?
 * @x: a transport
 * @gen: a generation
 *
 * Context: under the fabric lock, for an answer that stays true.
 */
bool ropcie_lx_alive(const struct ropcie_xport *x, u32 gen)
{
	return READ_ONCE(x->up) && READ_ONCE(x->gen) == gen;
}

bool ropcie_lx_alive_locked(struct ropcie_xport *x, u32 gen,
			    unsigned long *flags)
{
	spin_lock_irqsave(&x->lock, *flags);
	if (x->up && x->gen == gen)
		return true;
	spin_unlock_irqrestore(&x->lock, *flags);
	return false;
}

/**
 * ropcie_lx_pick() - a link to reach the other host through
 * @gen: its current generation, when one is returned
 *
 * The first link that is up: a host has one PCI link today.
 * Context: under the fabric lock, holding ropcie_lx_life for reading.
 */
struct ropcie_xport *ropcie_lx_pick(u32 *gen)
{
	struct ropcie_xport *x;

	lockdep_assert_held(&ropcie_fabric_lock);
	list_for_each_entry(x, &ropcie_xports, list) {
		if (READ_ONCE(x->up)) {
			*gen = x->gen;
			return x;
		}
	}
	return NULL;
}

/* At most this many links are served by one user's poll. */
#define ROPCIE_LX_USER_LINKS	4

/**
 * ropcie_lx_user_poll() - a user's poll found its CQ empty
 * @busy: it polls in a loop (ropcie_poll_cq())
 *
 * Over every link, what has come is consumed here (ropcie_lx_rx_user())
 * rather than by a kthread that a doorbell would wake: a user-space
 * program polls through a system call per poll (ib_uverbs), and on a
 * CPU it shares with the consumers it would hold the CPU they need. A
 * link that is going away is skipped (ropcie_lx_life is only tried).
 *
 * Context: task (a user's system call), no lock held.
 */
void ropcie_lx_user_poll(bool busy)
{
	struct ropcie_qp *answered[ROPCIE_LX_USER_LINKS];
	struct ropcie_xport *xs[ROPCIE_LX_USER_LINKS], *x;
	unsigned long flags;
	int i, n = 0;

	if (list_empty_careful(&ropcie_xports) ||
	    !down_read_trylock(&ropcie_lx_life))
		return;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_for_each_entry(x, &ropcie_xports, list) {
		if (n == ROPCIE_LX_USER_LINKS)
			break;
		xs[n++] = x;
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	/* Freed only after ropcie_lx_life is taken for writing. */
	for (i = 0; i < n; i++)
		answered[i] = ropcie_lx_rx_user(xs[i], busy);
	up_read(&ropcie_lx_life);
	/* Completion handlers run here, with no lock of the transport held. */
	for (i = 0; i < n; i++) {
		if (answered[i]) {
			ropcie_qp_reap_now(answered[i]);
			ropcie_qp_put(answered[i]);
		}
	}
}

/**
 * ropcie_xport_up() - the link came up: new connections may use it
 * @link: the link
 *
 * Context: the link's state machine (under its lock).
 */
void ropcie_xport_up(struct ropcie_link *link)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	spin_lock(&x->lock);
	if (!x->dead) {
		x->up = true;
		x->peer_epoch = link->peer_epoch;
	}
	spin_unlock(&x->lock);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_xport_doorbell(link, false);
}

/* Fail every connection of the current generation; then a new one. */
static void ropcie_xport_end_gen(struct ropcie_xport *x, bool dead)
{
	struct ropcie_lx_ctrl *msg, *tmp;
	struct ropcie_qp *qp;
	unsigned long flags, id;
	LIST_HEAD(drop);
	int r;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	spin_lock(&x->lock);
	x->up = false;
	x->gen++;
	if (dead)
		x->dead = true;
	list_splice_init(&x->ctrl, &drop);
	WRITE_ONCE(x->answers, 0);
	spin_unlock(&x->lock);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);

	/*
	 * Nothing joins the old generation from here on. Its requests are
	 * refused, then its QPs fail; a request being made drops its id.
	 */
	ropcie_lx_up->link_down(x);
	for (id = 0;; id++) {
		xa_lock_irqsave(&x->conns, flags);
		qp = xa_find(&x->conns, &id, ULONG_MAX, XA_PRESENT);
		if (qp)
			ropcie_qp_get(qp);
		xa_unlock_irqrestore(&x->conns, flags);
		if (!qp)
			break;
		ropcie_lx_up->conn_end(x, qp, ROPCIE_CONN_LOST);
		ropcie_lx_conn_del(x, id, qp);
		ropcie_qp_put(qp);
	}
	list_for_each_entry_safe(msg, tmp, &drop, list)
		kfree(msg);
	wake_up(&x->tx_wq);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++)
		ropcie_lx_rx_kick(&x->rx[r]);
}

/**
 * ropcie_xport_down() - the link went down: end its connections
 * @link: the link
 *
 * Every connection over it fails (its QPs move to the error state, their
 * ULPs get DISCONNECT and CLOSE), every connection request over it is
 * refused, and no index of the old generation is written any more.
 *
 * Context: the link's state machine (under its lock).
 */
void ropcie_xport_down(struct ropcie_link *link)
{
	ropcie_xport_end_gen(link->xport, false);
}

/**
 * ropcie_xport_show() - the transport's state for sysfs
 * @link: the link
 * @buf: the sysfs buffer
 *
 * Return: bytes written.
 */
int ropcie_xport_show(struct ropcie_link *link, char *buf)
{
	struct ropcie_xport *x = link->xport;
	unsigned long id, n = 0;
	struct ropcie_qp *qp;

	xa_for_each(&x->conns, id, qp)
		n++;
	return sysfs_emit(buf,
			  "generation %u connections %lu tx %lld rx %lld doorbells_rung %lld rx_in_irq %lld answers_queued %u answers_dropped %lld rx_dropped %lld conn_faults %lld stream_rx %lld stream_bad %lld polls_ceded %lld rnr_answered %lld sends_credited %lld rx_polled %lld\n",
			  READ_ONCE(x->gen), n, atomic64_read(&x->stats.tx),
			  atomic64_read(&x->stats.rx),
			  atomic64_read(&x->stats.db),
			  atomic64_read(&x->stats.irq), READ_ONCE(x->answers),
			  atomic64_read(&x->stats.answers_dropped),
			  atomic64_read(&x->stats.rx_dropped),
			  atomic64_read(&x->stats.conn_faults),
			  atomic64_read(&x->stats.stream_rx),
			  atomic64_read(&x->stats.stream_bad),
			  atomic64_read(&x->stats.polls_ceded),
			  atomic64_read(&x->stats.rnr_answered),
			  atomic64_read(&x->stats.sends_credited),
			  atomic64_read(&x->stats.polled));
}

/**
 * ropcie_xport_conns_show() - the connections over the link, for debugfs
 * @link: the link
 * @m: one line each: this host's id of the connection, the other
 *	host's, and the QP's number here
 */
void ropcie_xport_conns_show(struct ropcie_link *link, struct seq_file *m)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags, id;
	struct ropcie_qp *qp;

	/* The table holds each QP while its entry is there. */
	xa_lock_irqsave(&x->conns, flags);
	xa_for_each(&x->conns, id, qp)
		seq_printf(m, "%lu %u %u\n", id, READ_ONCE(qp->lx.peer_conn),
			   qp->ibqp.qp_num);
	xa_unlock_irqrestore(&x->conns, flags);
}

/**
 * ropcie_xport_create() - the transport of a new link
 * @link: the link, its geometry set
 *
 * Return: 0, or -ENOMEM or a kthread's error.
 */
int ropcie_xport_create(struct ropcie_link *link)
{
	struct ropcie_xport *x;
	unsigned long flags;
	int r;

	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return -ENOMEM;
	x->link = link;
	x->stream_sink = kvmalloc(link->gin.slot_size, GFP_KERNEL);
	if (!x->stream_sink) {
		kfree(x);
		return -ENOMEM;
	}
	mutex_init(&x->stream_lock);
	spin_lock_init(&x->read_lock);
	INIT_LIST_HEAD(&x->reads);
	init_waitqueue_head(&x->read_wq);
	spin_lock_init(&x->lock);
	init_waitqueue_head(&x->tx_wq);
	xa_init_flags(&x->conns, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
	INIT_LIST_HEAD(&x->ctrl);
	INIT_WORK(&x->ctrl_work, ropcie_lx_ctrl_work);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
		x->rx[r].x = x;
		x->rx[r].ring = r;
		x->rx[r].broken = U32_MAX;	/* none yet: generations start at 0 */
		init_waitqueue_head(&x->rx[r].wq);
	}
	x->read_task = kthread_run(ropcie_lx_read_thread, x, "ropcie-link-rd");
	if (IS_ERR(x->read_task)) {
		r = PTR_ERR(x->read_task);
		goto fail;
	}
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++) {
		x->rx[r].task = kthread_run(ropcie_lx_rx_thread, &x->rx[r],
					    "ropcie-link-%s", r ? "rsp" : "req");
		if (IS_ERR(x->rx[r].task)) {
			int ret = PTR_ERR(x->rx[r].task);

			while (r--)
				kthread_stop(x->rx[r].task);
			kthread_stop(x->read_task);
			r = ret;
			goto fail;
		}
	}
	link->xport = x;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_add_tail(&x->list, &ropcie_xports);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	return 0;
fail:
	kvfree(x->stream_sink);
	kfree(x);
	return r;
}

/**
 * ropcie_xport_destroy() - end the transport of a link that goes away
 * @link: the link; its state machine has stopped
 *
 * Ends every connection (as ropcie_xport_down()), stops the consumers
 * and the read kthread, waits for every requester, connect and accept
 * that still uses the transport (each was woken and ends within a beat)
 * and frees it.
 */
void ropcie_xport_destroy(struct ropcie_link *link)
{
	struct ropcie_xport *x = link->xport;
	unsigned long flags;
	int r;

	if (!x)
		return;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_del(&x->list);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_xport_end_gen(x, true);
	for (r = 0; r < ROPCIE_WIRE_NR_RINGS; r++)
		kthread_stop(x->rx[r].task);
	/* Its wait for room ends: the generation ended. */
	kthread_stop(x->read_task);
	ropcie_lx_read_drop(x);
	cancel_work_sync(&x->ctrl_work);
	/* The users of the transport saw it down and leave. */
	down_write(&ropcie_lx_life);
	up_write(&ropcie_lx_life);
	/* A conn_add that raced the end undid itself; nothing is left. */
	WARN_ON(!xa_empty(&x->conns));
	xa_destroy(&x->conns);
	link->xport = NULL;
	kvfree(x->stream_sink);
	kfree(x);
}
