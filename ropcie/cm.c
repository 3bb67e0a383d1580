// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie connection management: the iw_cm provider ops over the loopback
 * fabric. A listener table keyed by device, address and port; a connect
 * finds the listener and hands it a connection request; accept links the
 * two QPs as peers and moves both to RTS; closing either QP ends both
 * sides (DISCONNECT and CLOSE to the peer, CLOSE to the closer).
 *
 * Every event is handed to iw_cm under ropcie_fabric_lock, so the events
 * of one connection reach iw_cm in the order they happened.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/slab.h>

#include "ropcie.h"

DEFINE_SPINLOCK(ropcie_fabric_lock);
static LIST_HEAD(ropcie_listeners);

struct ropcie_listener {
	struct list_head list;
	struct iw_cm_id *cm_id;
	struct ropcie_dev *dev;
	struct sockaddr_storage addr;
};

/*
 * A connection request between connect and accept, reject or its
 * timeout. The passive cm_id knows it by id only (its provider_data):
 * iw_cm may drop the request without telling us (a listener being
 * destroyed), and then only the timeout ever answers it. Whoever takes
 * it out of ropcie_creqs under ropcie_fabric_lock answers it.
 */
struct ropcie_creq {
	u32 id;				/* in ropcie_creqs */
	struct ropcie_qp *qp;		/* the active QP, held and claimed */
	struct iw_cm_id *cm_id;		/* the active cm_id, held */
	struct sockaddr_storage laddr, raddr;
	struct delayed_work timeout;
};

static DEFINE_XARRAY_ALLOC1(ropcie_creqs);
static struct workqueue_struct *ropcie_cm_wq;

static u16 ropcie_port(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

static bool ropcie_addr_any(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return ipv6_addr_any(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static bool ropcie_addr_eq(const struct sockaddr_storage *a,
			   const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return ipv6_addr_equal(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr);
}

/*
 * The listener for a connection to @dst from @dev: same port, same
 * address or a wildcard, a device whose netdev is in the same network
 * namespace; an exact address wins, then the same device.
 */
static struct ropcie_listener *ropcie_find_listener(struct ropcie_dev *dev,
						    const struct sockaddr_storage *dst)
{
	struct ropcie_listener *l, *best = NULL;
	int score, best_score = 0;

	lockdep_assert_held(&ropcie_fabric_lock);
	list_for_each_entry(l, &ropcie_listeners, list) {
		if (l->addr.ss_family != dst->ss_family ||
		    ropcie_port(&l->addr) != ropcie_port(dst))
			continue;
		/* An address means something in its namespace only. */
		if (!net_eq(dev_net(l->dev->netdev), dev_net(dev->netdev)))
			continue;
		if (ropcie_addr_eq(&l->addr, dst))
			score = 4;
		else if (ropcie_addr_any(&l->addr))
			score = 2;
		else
			continue;
		if (l->dev == dev)
			score++;
		if (score > best_score) {
			best = l;
			best_score = score;
		}
	}
	return best;
}

static int ropcie_cm_event(struct iw_cm_id *cm_id, enum iw_cm_event_type type,
			   int status, const struct sockaddr_storage *laddr,
			   const struct sockaddr_storage *raddr,
			   const void *pdata, u8 plen, void *provider_data)
{
	struct iw_cm_event ev = {
		.event = type,
		.status = status,
		.private_data = (void *)pdata,
		.private_data_len = pdata ? plen : 0,
		.provider_data = provider_data,
		.ird = ROPCIE_MAX_IRD_ORD,
		.ord = ROPCIE_MAX_IRD_ORD,
	};
	int ret;

	if (laddr)
		ev.local_addr = *laddr;
	if (raddr)
		ev.remote_addr = *raddr;
	ret = cm_id->event_handler(cm_id, &ev);
	if (ret)
		pr_warn_ratelimited("iw_cm event %d lost: %d\n", type, ret);
	return ret;
}

/*
 * Answer the active side. iw_cm copies private data with GFP_ATOMIC and
 * drops the event when that fails; the active cm_id would then wait for
 * its reply for ever, and iw_cm_disconnect() with it. So a reply that
 * did not get through goes again without private data, as a failure
 * (@status, or -ENOMEM for an acceptance), which needs no allocation.
 * Return: 0 when the reply as given got through.
 */
static int ropcie_cm_reply(struct iw_cm_id *cm_id, int status,
			   const struct sockaddr_storage *laddr,
			   const struct sockaddr_storage *raddr,
			   const void *pdata, u8 plen)
{
	int ret = ropcie_cm_event(cm_id, IW_CM_EVENT_CONNECT_REPLY, status,
				  laddr, raddr, pdata, plen, NULL);

	if (ret && pdata && plen)
		ropcie_cm_event(cm_id, IW_CM_EVENT_CONNECT_REPLY,
				status ? status : -ENOMEM, laddr, raddr, NULL,
				0, NULL);
	return ret;
}

int ropcie_iw_create_listen(struct iw_cm_id *cm_id, int backlog)
{
	struct ropcie_dev *dev = to_rdev(cm_id->device);
	struct ropcie_listener *l, *other;
	unsigned long flags;

	if (cm_id->m_local_addr.ss_family != AF_INET &&
	    cm_id->m_local_addr.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	l->cm_id = cm_id;
	l->dev = dev;
	l->addr = cm_id->m_local_addr;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_for_each_entry(other, &ropcie_listeners, list) {
		if (other->dev == dev &&
		    ropcie_port(&other->addr) == ropcie_port(&l->addr) &&
		    ropcie_addr_eq(&other->addr, &l->addr)) {
			spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
			kfree(l);
			return -EADDRINUSE;
		}
	}
	cm_id->add_ref(cm_id);
	cm_id->provider_data = l;
	list_add_tail(&l->list, &ropcie_listeners);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	return 0;
}

int ropcie_iw_destroy_listen(struct iw_cm_id *cm_id)
{
	struct ropcie_listener *l = cm_id->provider_data;
	unsigned long flags;

	if (!l)
		return 0;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_del_init(&l->list);
	cm_id->provider_data = NULL;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	cm_id->rem_ref(cm_id);
	kfree(l);
	return 0;
}

/*
 * Can @qp take part in a new connection? Not when it has a peer, a
 * cm_id or a request in flight, or is past RTR: iw_cm takes the QP
 * number from its caller, and through rdma_ucm that is any user.
 */
static int ropcie_qp_free_for_conn(const struct ropcie_qp *qp)
{
	lockdep_assert_held(&ropcie_fabric_lock);
	if (qp->peer || qp->cm_id || qp->claimed)
		return -EBUSY;
	return ropcie_qp_connectable(qp) ? 0 : -EINVAL;
}

/* Take a request out of the table: its answer is ours to give. */
static struct ropcie_creq *ropcie_creq_take(u32 id)
{
	lockdep_assert_held(&ropcie_fabric_lock);
	return id ? xa_erase(&ropcie_creqs, id) : NULL;
}

/* Free a request that is out of the table and answered. */
static void ropcie_creq_free(struct ropcie_creq *creq, bool from_timeout)
{
	if (!from_timeout)
		cancel_delayed_work_sync(&creq->timeout);
	creq->cm_id->rem_ref(creq->cm_id);
	ropcie_qp_put(creq->qp);
	kfree(creq);
}

/* Answer a request that was taken with a refusal, and free it. */
static void ropcie_creq_refuse(struct ropcie_creq *creq, int status,
			       const void *pdata, u8 plen, bool from_timeout)
{
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq->qp->claimed = false;
	ropcie_cm_reply(creq->cm_id, status, &creq->laddr, &creq->raddr,
			pdata, plen);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_creq_free(creq, from_timeout);
}

static void ropcie_creq_expire(struct work_struct *work)
{
	struct ropcie_creq *creq = container_of(to_delayed_work(work),
						struct ropcie_creq, timeout);
	unsigned long flags;
	bool mine;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	mine = ropcie_creq_take(creq->id) == creq;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	/* Else accept or reject took it and waits for us to return. */
	if (!mine)
		return;
	pr_debug("connection request %u of QP %u timed out\n", creq->id,
		 creq->qp->ibqp.qp_num);
	ropcie_creq_refuse(creq, -ETIMEDOUT, NULL, 0, true);
}

int ropcie_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param)
{
	struct ropcie_dev *dev = to_rdev(cm_id->device);
	struct ropcie_listener *l;
	struct ropcie_creq *creq;
	struct ib_qp *ibqp;
	unsigned long flags;
	int ret;

	ibqp = ropcie_iw_get_qp(cm_id->device, param->qpn);
	if (!ibqp)
		return -EINVAL;
	creq = kzalloc(sizeof(*creq), GFP_KERNEL);
	if (!creq)
		return -ENOMEM;
	ret = xa_alloc(&ropcie_creqs, &creq->id, NULL, xa_limit_31b,
		       GFP_KERNEL);
	if (ret) {
		kfree(creq);
		return ret;
	}
	creq->qp = to_rqp(ibqp);
	creq->cm_id = cm_id;
	creq->laddr = cm_id->m_local_addr;
	creq->raddr = cm_id->m_remote_addr;
	INIT_DELAYED_WORK(&creq->timeout, ropcie_creq_expire);
	ropcie_qp_get(creq->qp);
	cm_id->add_ref(cm_id);

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	ret = ropcie_qp_free_for_conn(creq->qp);
	if (ret)
		goto unlock;
	l = ropcie_find_listener(dev, &creq->raddr);
	if (!l) {
		ret = -ECONNREFUSED;
	} else {
		struct iw_cm_event ev = {
			.event = IW_CM_EVENT_CONNECT_REQUEST,
			.local_addr = creq->raddr,
			.remote_addr = creq->laddr,
			.private_data = (void *)param->private_data,
			.private_data_len = param->private_data_len,
			.provider_data = (void *)(uintptr_t)creq->id,
			.ird = param->ird,
			.ord = param->ord,
		};

		/*
		 * Published, handed over and armed in one section under the
		 * lock, which whoever takes the request holds too.
		 */
		xa_store(&ropcie_creqs, creq->id, creq, GFP_ATOMIC);
		/* Fails when the listener's backlog is full. */
		if (l->cm_id->event_handler(l->cm_id, &ev)) {
			ret = -ECONNREFUSED;
		} else {
			creq->qp->claimed = true;
			queue_delayed_work(ropcie_cm_wq, &creq->timeout,
					   msecs_to_jiffies(READ_ONCE(ropcie_connect_timeout_ms)));
		}
	}
unlock:
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (ret) {
		xa_erase(&ropcie_creqs, creq->id);
		cm_id->rem_ref(cm_id);
		ropcie_qp_put(creq->qp);
		kfree(creq);
	}
	return ret;
}

int ropcie_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param)
{
	u32 id = (uintptr_t)cm_id->provider_data;
	struct iw_cm_id *lost = NULL;
	struct ropcie_qp *aqp, *pqp;
	struct ropcie_creq *creq;
	struct ib_qp *ibqp;
	unsigned long flags;
	int ret;

	cm_id->provider_data = NULL;
	ibqp = ropcie_iw_get_qp(cm_id->device, param->qpn);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq = ropcie_creq_take(id);
	if (!creq) {
		/* Timed out (the active side has its answer) or bogus. */
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		return -ETIMEDOUT;
	}
	aqp = creq->qp;
	pqp = ibqp ? to_rqp(ibqp) : NULL;
	ret = pqp ? ropcie_qp_free_for_conn(pqp) : -EINVAL;
	if (ret)
		goto refuse;
	if (!ropcie_qp_to_rts(pqp)) {
		ret = -EINVAL;
		goto refuse;
	}
	if (!ropcie_qp_to_rts(aqp)) {
		/* The active side left: its QP moved on meanwhile. */
		ropcie_qp_set_error(pqp);
		ret = -ECONNRESET;
		goto refuse;
	}
	/* Each side holds the other; the active side takes creq's refs. */
	aqp->claimed = false;
	aqp->peer = pqp;
	ropcie_qp_get(pqp);
	pqp->peer = aqp;
	aqp->cm_id = creq->cm_id;
	pqp->cm_id = cm_id;
	cm_id->add_ref(cm_id);
	aqp->laddr = creq->laddr;
	aqp->raddr = creq->raddr;
	pqp->laddr = creq->raddr;
	pqp->raddr = creq->laddr;
	if (ropcie_cm_reply(aqp->cm_id, 0, &aqp->laddr, &aqp->raddr,
			    param->private_data, param->private_data_len)) {
		/*
		 * The active side was told that it failed (or nothing):
		 * its cm_id gets no more events. Ours is established and
		 * then closed, by the active QP's error.
		 */
		lost = aqp->cm_id;
		aqp->cm_id = NULL;
		ropcie_qp_set_error(aqp);
	}
	ropcie_cm_event(cm_id, IW_CM_EVENT_ESTABLISHED, 0, &pqp->laddr,
			&pqp->raddr, NULL, 0, NULL);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (lost)
		lost->rem_ref(lost);
	cancel_delayed_work_sync(&creq->timeout);
	kfree(creq);
	return 0;

refuse:
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_creq_refuse(creq, -ECONNREFUSED, NULL, 0, false);
	return ret;
}

int ropcie_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 len)
{
	u32 id = (uintptr_t)cm_id->provider_data;
	struct ropcie_creq *creq;
	unsigned long flags;

	cm_id->provider_data = NULL;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq = ropcie_creq_take(id);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (creq)
		ropcie_creq_refuse(creq, -ECONNREFUSED, pdata, len, false);
	return 0;
}

/**
 * ropcie_cm_close() - end the connection of a QP, if any
 * @qp: the QP that closes (or errors, or is destroyed)
 *
 * Unlinks both QPs, moves the peer to the error state (its worker
 * flushes it), and tells iw_cm: DISCONNECT and CLOSE on the peer's side,
 * CLOSE on ours. Idempotent.
 */
void ropcie_cm_close(struct ropcie_qp *qp)
{
	struct iw_cm_id *mine, *theirs = NULL;
	struct ropcie_qp *peer;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	peer = qp->peer;
	mine = qp->cm_id;
	qp->peer = NULL;
	qp->cm_id = NULL;
	if (peer) {
		theirs = peer->cm_id;
		peer->peer = NULL;
		peer->cm_id = NULL;
		ropcie_qp_set_error(peer);
		if (theirs) {
			ropcie_cm_event(theirs, IW_CM_EVENT_DISCONNECT, 0,
					&peer->laddr, &peer->raddr, NULL, 0,
					NULL);
			ropcie_cm_event(theirs, IW_CM_EVENT_CLOSE, 0,
					&peer->laddr, &peer->raddr, NULL, 0,
					NULL);
		}
	}
	if (mine)
		ropcie_cm_event(mine, IW_CM_EVENT_CLOSE, 0, &qp->laddr,
				&qp->raddr, NULL, 0, NULL);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);

	if (theirs)
		theirs->rem_ref(theirs);
	if (mine)
		mine->rem_ref(mine);
	if (peer) {
		/* The references of the link, one each way. */
		ropcie_qp_put(peer);
		ropcie_qp_put(qp);
	}
}

int ropcie_cm_init(void)
{
	ropcie_cm_wq = alloc_workqueue("ropcie_cm", 0, 0);
	return ropcie_cm_wq ? 0 : -ENOMEM;
}

/* Every device is gone: no request is left but a timeout finishing. */
void ropcie_cm_exit(void)
{
	destroy_workqueue(ropcie_cm_wq);
	WARN_ON(!xa_empty(&ropcie_creqs));
}

/* Drop listeners of a device that goes away (rdma_cm removes its own). */
void ropcie_cm_remove_device(struct ropcie_dev *dev)
{
	struct ropcie_listener *l, *tmp;
	LIST_HEAD(gone);
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	list_for_each_entry_safe(l, tmp, &ropcie_listeners, list) {
		if (l->dev == dev) {
			l->cm_id->provider_data = NULL;
			list_move(&l->list, &gone);
		}
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	list_for_each_entry_safe(l, tmp, &gone, list) {
		l->cm_id->rem_ref(l->cm_id);
		kfree(l);
	}
}
