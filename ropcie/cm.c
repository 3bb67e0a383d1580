// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie connection management: the iw_cm provider ops, on this host
 * (loopback) and to the host across a link. A listener table keyed by
 * device, address and port; a connect to an address of this host finds
 * the listener and hands it a connection request; accept links the two
 * QPs as peers and moves both to RTS; closing either QP ends both sides
 * (DISCONNECT and CLOSE to the peer, CLOSE to the closer).
 *
 * A connect to any other address goes to the other host over the first
 * link that is up (the link transport, link_transport.h, which this
 * file sits above and which reports up through struct
 * ropcie_lx_upcalls), as CM messages in the link's
 * request ring (wire.h): REQ to the peer's listener, ACCEPT or REJECT
 * back, CLOSE either way. The two QPs know each other by their ids on
 * the link; a link that goes down fails its connections and requests.
 *
 * Every event is handed to iw_cm under ropcie_fabric_lock, so the events
 * of one connection reach iw_cm in the order they happened.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/slab.h>
#include <net/addrconf.h>
#include <net/route.h>

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
 *
 * Counted: the table holds a reference while the request is in it, and
 * a connect holds one while it sends the request over a link, which the
 * answer may come before. Ids go round (xa_alloc_cyclic()), so a late
 * accept or undo does not find a new request under an old id.
 */
struct ropcie_creq {
	struct kref ref;
	u32 id;				/* in ropcie_creqs */
	struct ropcie_qp *qp;		/* the active QP, held and claimed */
	struct iw_cm_id *cm_id;		/* the active cm_id, held */
	struct sockaddr_storage laddr, raddr;	/* the active side's */
	struct delayed_work timeout;
	/*
	 * What the timeout answers: -ETIMEDOUT after connect_timeout_ms,
	 * or at once a refusal injected in its stead (fault.c).
	 */
	int timeout_status;
	/*
	 * Over a link: the link and its generation. A request made here
	 * (qp set) has the active QP's id on the link; one that came from
	 * the other host (qp and cm_id NULL) the peer's ids.
	 */
	struct ropcie_xport *x;
	u32 gen;
	u32 conn;			/* the active QP's id, made here */
	u32 peer_creq, peer_conn;	/* the peer's, from the other host */
	struct list_head down;		/* ropcie_cm_link_down()'s list */
};

/*
 * Its lock nests inside ropcie_fabric_lock, which a ULP's post_recv
 * takes from a softirq (a CQ's completion handler reposting), so it is
 * taken with interrupts off everywhere: the _irq calls outside the
 * fabric lock, the plain ones under it.
 */
static DEFINE_XARRAY_FLAGS(ropcie_creqs, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);
static u32 ropcie_creq_next;		/* xa_alloc_cyclic()'s cursor */
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

/* Is @a an address of this host in @net? */
static bool ropcie_addr_local(struct net *net, const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return inet_addr_type(net, ((const struct sockaddr_in *)a)->sin_addr.s_addr) ==
		       RTN_LOCAL;
	return IS_ENABLED(CONFIG_IPV6) &&
	       ipv6_chk_addr(net, &((const struct sockaddr_in6 *)a)->sin6_addr,
			     NULL, 0);
}

/*
 * The listener for a connection to @dst: same port, same address, or a
 * wildcard when @dst is an address of this host (a connect to another
 * host's address goes over the link even when a wildcard listens here).
 * From @dev: a device whose netdev is in the same network namespace, and
 * the same device preferred; from the link (@dev NULL): a device in the
 * initial namespace. An exact address wins.
 */
static struct ropcie_listener *ropcie_find_listener(struct ropcie_dev *dev,
						    const struct sockaddr_storage *dst)
{
	struct net *net = dev ? dev_net(dev->netdev) : &init_net;
	struct ropcie_listener *l, *best = NULL;
	int score, best_score = 0;
	int local = -1;

	lockdep_assert_held(&ropcie_fabric_lock);
	list_for_each_entry(l, &ropcie_listeners, list) {
		if (l->addr.ss_family != dst->ss_family ||
		    ropcie_port(&l->addr) != ropcie_port(dst))
			continue;
		/* An address means something in its namespace only. */
		if (!net_eq(dev_net(l->dev->netdev), net))
			continue;
		if (ropcie_addr_eq(&l->addr, dst)) {
			score = 4;
		} else if (ropcie_addr_any(&l->addr)) {
			if (local < 0)
				local = dev ? ropcie_addr_local(net, dst) : 1;
			if (!local)
				continue;
			score = 2;
		} else {
			continue;
		}
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
	if (qp->peer || qp->cm_id || qp->claimed || qp->lx.x)
		return -EBUSY;
	return ropcie_qp_connectable(qp) ? 0 : -EINVAL;
}

static void ropcie_creq_expire(struct work_struct *work);

/* A new request, counted once (its maker's), with an id not in use. */
static struct ropcie_creq *ropcie_creq_new(void)
{
	struct ropcie_creq *creq = kzalloc(sizeof(*creq), GFP_KERNEL);

	if (!creq)
		return NULL;
	/* Reserved (NULL): nobody finds it before it is published. */
	if (xa_alloc_cyclic_irq(&ropcie_creqs, &creq->id, NULL, xa_limit_31b,
				&ropcie_creq_next, GFP_KERNEL) < 0) {
		kfree(creq);
		return NULL;
	}
	kref_init(&creq->ref);
	INIT_DELAYED_WORK(&creq->timeout, ropcie_creq_expire);
	creq->timeout_status = -ETIMEDOUT;
	return creq;
}

static void ropcie_creq_release(struct kref *ref)
{
	struct ropcie_creq *creq = container_of(ref, struct ropcie_creq, ref);

	if (creq->cm_id)
		creq->cm_id->rem_ref(creq->cm_id);
	if (creq->qp)
		ropcie_qp_put(creq->qp);
	kfree(creq);
}

static void ropcie_creq_put(struct ropcie_creq *creq)
{
	kref_put(&creq->ref, ropcie_creq_release);
}

/*
 * Publish @creq, its id reserved: the table's reference, and the
 * timeout that answers it if nobody else does.
 */
static void ropcie_creq_publish(struct ropcie_creq *creq)
{
	unsigned long delay = 0;

	lockdep_assert_held(&ropcie_fabric_lock);
	kref_get(&creq->ref);
	xa_store(&ropcie_creqs, creq->id, creq, GFP_ATOMIC);
	if (creq->timeout_status == -ETIMEDOUT)
		delay = msecs_to_jiffies(READ_ONCE(ropcie_connect_timeout_ms));
	queue_delayed_work(ropcie_cm_wq, &creq->timeout, delay);
}

/*
 * Take a request out of the table: its answer is ours to give, and the
 * table's reference with it (ropcie_creq_done()).
 */
static struct ropcie_creq *ropcie_creq_take(u32 id)
{
	lockdep_assert_held(&ropcie_fabric_lock);
	return id ? xa_erase(&ropcie_creqs, id) : NULL;
}

/* Take @creq out of the table if it is still there. */
static bool ropcie_creq_take_mine(struct ropcie_creq *creq)
{
	lockdep_assert_held(&ropcie_fabric_lock);
	if (xa_load(&ropcie_creqs, creq->id) != creq)
		return false;
	xa_erase(&ropcie_creqs, creq->id);
	return true;
}

/* A taken request is answered: its timeout and the table's reference go. */
static void ropcie_creq_done(struct ropcie_creq *creq, bool from_timeout)
{
	if (!from_timeout)
		cancel_delayed_work_sync(&creq->timeout);
	ropcie_creq_put(creq);
}

/*
 * Drop the link connection a request made here gave its QP, if the QP
 * still has it. Context: task, the transport alive (ropcie_lx_life).
 */
static void ropcie_creq_unlink(struct ropcie_creq *creq)
{
	struct ropcie_lx_ctrl *msg = NULL;
	struct ropcie_qp *qp = creq->qp;
	unsigned long flags;

	if (!creq->x || !creq->conn)
		return;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	if (qp->lx.x == creq->x && qp->lx.conn == creq->conn) {
		msg = qp->lx.close_msg;
		qp->lx.close_msg = NULL;
		qp->lx.x = NULL;
		ropcie_lx_conn_del(creq->x, creq->conn, qp);
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	kfree(msg);
}

/*
 * Answer a request that was taken with a refusal, and drop the table's
 * reference: the active cm_id of one made here, the other host of one
 * from there.
 * Context: task; a request over a link with its transport alive.
 */
static void ropcie_creq_refuse(struct ropcie_creq *creq, int status,
			       const void *pdata, u8 plen, bool from_timeout)
{
	unsigned long flags;

	if (!creq->qp) {
		struct ropcie_wire_cm_msg cm = {
			.op = ROPCIE_WIRE_CM_REJECT,
			.creq = creq->peer_creq,
			.peer_conn = creq->peer_conn,
			.pdata_len = plen,
		};

		memcpy(cm.pdata, pdata, plen);
		/* Dropped, the peer's own timeout answers it. */
		ropcie_lx_answer_cm(creq->x, creq->gen, &cm);
		ropcie_creq_done(creq, from_timeout);
		return;
	}
	ropcie_creq_unlink(creq);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq->qp->claimed = false;
	ropcie_cm_reply(creq->cm_id, status, &creq->laddr, &creq->raddr,
			pdata, plen);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_creq_done(creq, from_timeout);
}

static void ropcie_creq_expire(struct work_struct *work)
{
	struct ropcie_creq *creq = container_of(to_delayed_work(work),
						struct ropcie_creq, timeout);
	unsigned long flags;
	bool mine;

	/*
	 * Never sleep on the lock here: connect, accept and reject hold it
	 * for reading and may cancel this work synchronously, and a link's
	 * teardown waiting for it as a writer would block our read between
	 * the two. Try again shortly instead; a cancel cancels that too.
	 */
	if (!down_read_trylock(&ropcie_lx_life)) {
		queue_delayed_work(ropcie_cm_wq, &creq->timeout,
				   msecs_to_jiffies(10));
		return;
	}
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	mine = ropcie_creq_take_mine(creq);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	/* Else accept or reject took it and waits for us to return. */
	if (mine) {
		pr_debug("connection request %u answered by its timeout: %d\n",
			 creq->id, creq->timeout_status);
		ropcie_creq_refuse(creq, creq->timeout_status, NULL, 0, true);
	}
	up_read(&ropcie_lx_life);
}

static void ropcie_cm_addr_out(const struct sockaddr_storage *a, u8 *family,
			       u8 *addr, u16 *port)
{
	if (a->ss_family == AF_INET) {
		*family = ROPCIE_WIRE_INET;
		memcpy(addr, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else {
		*family = ROPCIE_WIRE_INET6;
		memcpy(addr, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
	*port = ropcie_port(a);
}

static void ropcie_cm_addr_in(u8 family, const u8 *addr, u16 port,
			      struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	if (family == ROPCIE_WIRE_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)a;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, addr, 4);
		sin->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)a;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
	}
}

/*
 * Send the connection request @creq, published and armed, to the other
 * host; the caller holds a reference to it. On failure take it back,
 * unless its timeout or the link's end answered it meanwhile (then 0:
 * the active side has its answer).
 * Context: task, holding ropcie_lx_life for reading.
 */
static int ropcie_link_connect(struct ropcie_creq *creq,
			       const struct iw_cm_conn_param *param)
{
	struct ropcie_wire_cm_msg cm = {
		.op = ROPCIE_WIRE_CM_REQ,
		.creq = creq->id,
		.ird = min_t(u32, param->ird, ROPCIE_WIRE_MAX_ORD),
		.ord = min_t(u32, param->ord, ROPCIE_WIRE_MAX_ORD),
		.pdata_len = param->private_data_len,
	};
	struct ropcie_lx_ctrl *msg = ropcie_lx_ctrl_alloc(GFP_KERNEL);
	struct ropcie_qp *qp = creq->qp;
	unsigned long flags;
	u32 conn = 0;
	bool mine;
	int ret;

	ret = msg ? ropcie_lx_conn_add(creq->x, creq->gen, qp, &conn) : -ENOMEM;
	if (ret)
		goto undo;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	if (!ropcie_lx_alive(creq->x, creq->gen) || !qp->claimed) {
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		ropcie_lx_conn_del(creq->x, conn, qp);
		ret = -ENETRESET;
		goto undo;
	}
	qp->lx.x = creq->x;
	qp->lx.gen = creq->gen;
	qp->lx.conn = conn;
	qp->lx.peer_conn = 0;
	qp->lx.sends = 0;
	qp->lx.peer_recvs = 0;
	qp->lx.rq_base = READ_ONCE(qp->rq.tail);
	qp->lx.close_msg = msg;
	creq->conn = conn;
	msg = NULL;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);

	cm.conn = conn;
	ropcie_cm_addr_out(&creq->laddr, &cm.family, cm.src_addr, &cm.src_port);
	ropcie_cm_addr_out(&creq->raddr, &cm.family, cm.dst_addr, &cm.dst_port);
	memcpy(cm.pdata, param->private_data, cm.pdata_len);
	ret = ropcie_lx_cm_send(creq->x, creq->gen, &cm);
	if (!ret)
		return 0;
undo:
	kfree(msg);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	mine = ropcie_creq_take_mine(creq);
	if (mine)
		qp->claimed = false;
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (!mine)
		return 0;
	ropcie_creq_unlink(creq);
	ropcie_creq_done(creq, false);
	return ret == -ENOTCONN ? -ENETRESET : ret;
}

int ropcie_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param)
{
	struct ropcie_dev *dev = to_rdev(cm_id->device);
	struct ropcie_xport *x = NULL;
	struct ropcie_listener *l;
	struct ropcie_creq *creq;
	struct ib_qp *ibqp;
	unsigned long flags;
	int ret, fault;

	ibqp = ropcie_iw_get_qp(cm_id->device, param->qpn);
	if (!ibqp)
		return -EINVAL;
	ret = ropcie_may_connect(to_rqp(ibqp), cm_id);
	if (ret)
		return ret;
	creq = ropcie_creq_new();
	if (!creq)
		return -ENOMEM;
	creq->qp = to_rqp(ibqp);
	creq->cm_id = cm_id;
	creq->laddr = cm_id->m_local_addr;
	creq->raddr = cm_id->m_remote_addr;
	ropcie_qp_get(creq->qp);
	cm_id->add_ref(cm_id);

	down_read(&ropcie_lx_life);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	ret = ropcie_qp_free_for_conn(creq->qp);
	if (ret)
		goto unlock;
	fault = ropcie_fault_connect(dev, ropcie_port(&creq->raddr));
	if (!fault && ropcie_fault_port_cut(dev))
		fault = -ETIMEDOUT;
	l = ropcie_find_listener(dev, &creq->raddr);
	if (fault) {
		/*
		 * Injected, or sent through a cut port: the request reaches
		 * no listener, here or across a link, and its timeout answers
		 * it, after connect_timeout_ms or at once with a refusal.
		 */
		creq->timeout_status = fault;
		creq->qp->claimed = true;
		ropcie_creq_publish(creq);
	} else if (!l) {
		/* Not on this host: to the other one, over a link. */
		x = ropcie_lx_pick(&creq->gen);
		if (!x) {
			ret = -ECONNREFUSED;
			goto unlock;
		}
		creq->x = x;
		creq->qp->claimed = true;
		ropcie_creq_publish(creq);
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
		 * Handed over and published in one section under the lock,
		 * which whoever takes the request holds too. Fails when the
		 * listener's backlog is full.
		 */
		if (l->cm_id->event_handler(l->cm_id, &ev)) {
			ret = -ECONNREFUSED;
		} else {
			creq->qp->claimed = true;
			ropcie_creq_publish(creq);
		}
	}
unlock:
	/* Not published: its reserved id goes. */
	if (ret)
		xa_erase(&ropcie_creqs, creq->id);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (!ret && x)
		ret = ropcie_link_connect(creq, param);
	up_read(&ropcie_lx_life);
	ropcie_creq_put(creq);
	return ret;
}

/*
 * Accept a request from the other host: @pqp joins the link, the ULP
 * learns it is established, and only then the ACCEPT goes out, in the
 * request slot taken before, so that no request of @pqp can reach the
 * peer ahead of it. Context: task, holding ropcie_lx_life for reading.
 */
static int ropcie_link_accept(struct iw_cm_id *cm_id,
			      struct iw_cm_conn_param *param,
			      struct ropcie_creq *creq, struct ropcie_qp *pqp)
{
	struct ropcie_wire_cm_msg cm = {
		.op = ROPCIE_WIRE_CM_ACCEPT,
		.creq = creq->peer_creq,
		.peer_conn = creq->peer_conn,
		.pdata_len = param->private_data_len,
	};
	struct ropcie_xport *x = creq->x;
	struct ropcie_lx_ctrl *msg = NULL;
	struct ropcie_lx_tx tx;
	unsigned long flags;
	u32 conn = 0;
	int ret;

	ret = pqp ? ropcie_may_connect(pqp, cm_id) : -EINVAL;
	if (ret)
		goto refuse;
	msg = ropcie_lx_ctrl_alloc(GFP_KERNEL);
	ret = msg ? ropcie_lx_conn_add(x, creq->gen, pqp, &conn) : -ENOMEM;
	if (ret)
		goto refuse;
	ret = ropcie_lx_cm_begin(x, creq->gen, &tx);
	if (ret)
		goto del;
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	ret = ropcie_qp_free_for_conn(pqp);
	if (!ret && !ropcie_lx_alive(x, creq->gen))
		ret = -ECONNRESET;
	if (!ret) {
		pqp->transport = &ropcie_link_transport;
		if (!ropcie_qp_to_rts(pqp))
			ret = -EINVAL;
	}
	if (ret) {
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		ropcie_lx_cm_abort(&tx);
		goto del;
	}
	pqp->lx.x = x;
	pqp->lx.gen = creq->gen;
	pqp->lx.conn = conn;
	pqp->lx.peer_conn = creq->peer_conn;
	pqp->lx.sends = 0;
	pqp->lx.peer_recvs = 0;
	pqp->lx.rq_base = READ_ONCE(pqp->rq.tail);
	pqp->lx.close_msg = msg;
	pqp->cm_id = cm_id;
	cm_id->add_ref(cm_id);
	pqp->laddr = creq->raddr;
	pqp->raddr = creq->laddr;
	ropcie_cm_event(cm_id, IW_CM_EVENT_ESTABLISHED, 0, &pqp->laddr,
			&pqp->raddr, NULL, 0, NULL);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	cm.conn = conn;
	memcpy(cm.pdata, param->private_data, cm.pdata_len);
	/* Failing, the link is down: its end fails pqp like any other. */
	ropcie_lx_cm_commit(&tx, &cm);
	ropcie_creq_done(creq, false);
	return 0;

del:
	ropcie_lx_conn_del(x, conn, pqp);
refuse:
	kfree(msg);
	ropcie_creq_refuse(creq, -ECONNREFUSED, NULL, 0, false);
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
	down_read(&ropcie_lx_life);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq = ropcie_creq_take(id);
	if (!creq) {
		/* Timed out (the active side has its answer) or bogus. */
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		up_read(&ropcie_lx_life);
		return -ETIMEDOUT;
	}
	pqp = ibqp ? to_rqp(ibqp) : NULL;
	if (!creq->qp) {
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		ret = ropcie_link_accept(cm_id, param, creq, pqp);
		up_read(&ropcie_lx_life);
		return ret;
	}
	aqp = creq->qp;
	ret = pqp ? ropcie_may_connect(pqp, cm_id) : -EINVAL;
	if (!ret)
		ret = ropcie_qp_free_for_conn(pqp);
	if (ret)
		goto refuse;
	pqp->transport = &ropcie_loopback_transport;
	aqp->transport = &ropcie_loopback_transport;
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
	creq->qp = NULL;
	aqp->cm_id = creq->cm_id;
	creq->cm_id = NULL;
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
	up_read(&ropcie_lx_life);
	if (lost)
		lost->rem_ref(lost);
	ropcie_creq_done(creq, false);
	return 0;

refuse:
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_creq_refuse(creq, -ECONNREFUSED, NULL, 0, false);
	up_read(&ropcie_lx_life);
	return ret;
}

int ropcie_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 len)
{
	u32 id = (uintptr_t)cm_id->provider_data;
	struct ropcie_creq *creq;
	unsigned long flags;

	cm_id->provider_data = NULL;
	down_read(&ropcie_lx_life);
	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq = ropcie_creq_take(id);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (creq)
		ropcie_creq_refuse(creq, -ECONNREFUSED, pdata, len, false);
	up_read(&ropcie_lx_life);
	return 0;
}

/**
 * ropcie_cm_link_end() - a connection over a link ends under its QP
 * @x: the link's transport
 * @qp: the QP, held by the caller
 * @how: why: the other host closed it, the link is gone, or the other
 *	host broke the protocol in this connection's messages
 *
 * If it was established, the QP fails (with IB_EVENT_QP_FATAL first
 * when the link is gone or the other host broke the protocol, as siw
 * reports a malformed frame) and its ULP gets DISCONNECT and CLOSE; a
 * connection still being made is answered by its request (refused by
 * the link's end, or by its timeout). For a broken protocol
 * the other host gets this QP's CLOSE, so that its side ends too: the
 * link and every other connection over it go on. Idempotent.
 *
 * Context: any.
 */
static void ropcie_cm_link_end(struct ropcie_xport *x, struct ropcie_qp *qp,
			       enum ropcie_conn_end how)
{
	struct ropcie_lx_ctrl *msg = NULL;
	struct iw_cm_id *theirs = NULL;
	unsigned long flags;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	if (qp->lx.x != x)
		goto unlock;
	msg = qp->lx.close_msg;
	qp->lx.close_msg = NULL;
	qp->lx.x = NULL;
	ropcie_lx_conn_del(x, qp->lx.conn, qp);
	if (!qp->lx.peer_conn)
		goto unlock;
	if (msg && how == ROPCIE_CONN_BROKEN) {
		/* The queue owns the message, sent or not. */
		ropcie_lx_close_queue(x, qp->lx.gen, msg, qp->lx.conn,
				      qp->lx.peer_conn);
		msg = NULL;
	}
	theirs = qp->cm_id;
	qp->cm_id = NULL;
	if (how == ROPCIE_CONN_CLOSED)
		ropcie_qp_set_error(qp);
	else
		ropcie_qp_fatal(qp);
	if (theirs) {
		ropcie_cm_event(theirs, IW_CM_EVENT_DISCONNECT, 0, &qp->laddr,
				&qp->raddr, NULL, 0, NULL);
		ropcie_cm_event(theirs, IW_CM_EVENT_CLOSE, 0, &qp->laddr,
				&qp->raddr, NULL, 0, NULL);
	}
unlock:
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (theirs)
		theirs->rem_ref(theirs);
	kfree(msg);
}

/**
 * ropcie_cm_link_down() - refuse the requests over a link that went down
 * @x: the link's transport; it is down already
 *
 * Ours get -ECONNRESET; those of the other host are dropped, and an
 * accept of one later fails with -ETIMEDOUT.
 */
static void ropcie_cm_link_down(struct ropcie_xport *x)
{
	struct ropcie_creq *creq, *tmp;
	unsigned long flags, id;
	LIST_HEAD(gone);

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	xa_for_each(&ropcie_creqs, id, creq) {
		if (creq->x == x) {
			xa_erase(&ropcie_creqs, id);
			list_add_tail(&creq->down, &gone);
		}
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	list_for_each_entry_safe(creq, tmp, &gone, down) {
		if (creq->qp)
			ropcie_creq_refuse(creq, -ECONNRESET, NULL, 0, false);
		else
			ropcie_creq_done(creq, false);
	}
}

/* A request from the other host: to the listener here, or refused. */
static void ropcie_cm_link_req(struct ropcie_xport *x, u32 gen,
			       const struct ropcie_wire_cm_msg *m)
{
	struct ropcie_wire_cm_msg rej = {
		.op = ROPCIE_WIRE_CM_REJECT,
		.creq = m->creq,
		.peer_conn = m->conn,
	};
	struct ropcie_listener *l;
	struct ropcie_creq *creq;
	unsigned long flags;
	bool ok = false;

	creq = ropcie_creq_new();
	if (!creq)
		goto reject;
	creq->x = x;
	creq->gen = gen;
	creq->peer_creq = m->creq;
	creq->peer_conn = m->conn;
	ropcie_cm_addr_in(m->family, m->src_addr, m->src_port, &creq->laddr);
	ropcie_cm_addr_in(m->family, m->dst_addr, m->dst_port, &creq->raddr);

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	l = ropcie_lx_alive(x, gen) ? ropcie_find_listener(NULL, &creq->raddr) :
				      NULL;
	if (l) {
		struct iw_cm_event ev = {
			.event = IW_CM_EVENT_CONNECT_REQUEST,
			.local_addr = creq->raddr,
			.remote_addr = creq->laddr,
			.private_data = (void *)m->pdata,
			.private_data_len = m->pdata_len,
			.provider_data = (void *)(uintptr_t)creq->id,
			.ird = m->ird,
			.ord = m->ord,
		};

		if (!l->cm_id->event_handler(l->cm_id, &ev)) {
			ok = true;
			ropcie_creq_publish(creq);
		}
	}
	if (!ok)
		xa_erase(&ropcie_creqs, creq->id);
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	ropcie_creq_put(creq);
	if (ok)
		return;
reject:
	/* From the request consumer: never produce requests there. */
	ropcie_lx_answer_cm(x, gen, &rej);
}

/* Our request @m->creq, if it went over @x in @gen to its peer_conn. */
static struct ropcie_creq *ropcie_cm_link_take(struct ropcie_xport *x,
					       u32 gen,
					       const struct ropcie_wire_cm_msg *m)
{
	struct ropcie_creq *creq = xa_load(&ropcie_creqs, m->creq);

	lockdep_assert_held(&ropcie_fabric_lock);
	if (!creq || creq->x != x || creq->gen != gen || !creq->qp ||
	    creq->conn != m->peer_conn)
		return NULL;
	return ropcie_creq_take(m->creq);
}

/* Tell the other host that its connection @m->conn is not ours. */
static void ropcie_cm_link_unknown(struct ropcie_xport *x, u32 gen,
				   const struct ropcie_wire_cm_msg *m)
{
	ropcie_lx_answer_close(x, gen, m->peer_conn, m->conn);
}

/* The other host accepted our request: the active QP is connected. */
static void ropcie_cm_link_accepted(struct ropcie_xport *x, u32 gen,
				    const struct ropcie_wire_cm_msg *m)
{
	struct iw_cm_id *lost = NULL;
	struct ropcie_creq *creq;
	struct ropcie_qp *aqp;
	unsigned long flags;
	bool ok;

	spin_lock_irqsave(&ropcie_fabric_lock, flags);
	creq = ropcie_cm_link_take(x, gen, m);
	if (!creq) {
		/* Timed out, or not ours: the acceptor's QP must end. */
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		ropcie_cm_link_unknown(x, gen, m);
		return;
	}
	aqp = creq->qp;
	ok = aqp->lx.x == x && aqp->lx.conn == creq->conn &&
	     ropcie_lx_alive(x, gen);
	if (ok) {
		aqp->transport = &ropcie_link_transport;
		ok = ropcie_qp_to_rts(aqp);
	}
	if (!ok) {
		/* The active side left meanwhile. */
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		ropcie_cm_link_unknown(x, gen, m);
		ropcie_creq_refuse(creq, -ECONNRESET, NULL, 0, false);
		return;
	}
	aqp->claimed = false;
	aqp->lx.peer_conn = m->conn;
	aqp->cm_id = creq->cm_id;
	creq->cm_id = NULL;		/* its reference is the QP's now */
	aqp->laddr = creq->laddr;
	aqp->raddr = creq->raddr;
	if (ropcie_cm_reply(aqp->cm_id, 0, &aqp->laddr, &aqp->raddr,
			    m->pdata, m->pdata_len)) {
		/* As on loopback: no more events; the QP's error closes. */
		lost = aqp->cm_id;
		aqp->cm_id = NULL;
		ropcie_qp_set_error(aqp);
	}
	spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
	if (lost)
		lost->rem_ref(lost);
	ropcie_creq_done(creq, false);
}

/**
 * ropcie_cm_link_msg() - a CM message from the other host
 * @x: the link's transport it came over
 * @gen: the link's generation it came in
 * @m: the message, checked by ropcie_wire_cm_decode()
 *
 * Context: the link's request consumer. Every id in @m is the other
 * host's word: each is looked up here, and one that names nothing of
 * this link and generation is answered or dropped, never followed.
 */
static void ropcie_cm_link_msg(struct ropcie_xport *x, u32 gen,
			       const struct ropcie_wire_cm_msg *m)
{
	struct ropcie_creq *creq;
	unsigned long flags;

	switch (m->op) {
	case ROPCIE_WIRE_CM_REQ:
		ropcie_cm_link_req(x, gen, m);
		break;
	case ROPCIE_WIRE_CM_ACCEPT:
		ropcie_cm_link_accepted(x, gen, m);
		break;
	case ROPCIE_WIRE_CM_REJECT:
		spin_lock_irqsave(&ropcie_fabric_lock, flags);
		creq = ropcie_cm_link_take(x, gen, m);
		spin_unlock_irqrestore(&ropcie_fabric_lock, flags);
		if (creq)
			ropcie_creq_refuse(creq, -ECONNREFUSED, m->pdata,
					   m->pdata_len, false);
		break;
	}
}

/**
 * ropcie_cm_close() - end the connection of a QP, if any
 * @qp: the QP that closes (or errors, or is destroyed)
 *
 * On this host: unlinks both QPs, moves the peer to the error state (its
 * worker flushes it), and tells iw_cm: DISCONNECT and CLOSE on the
 * peer's side, CLOSE on ours. Over a link: CLOSE on ours, and a CLOSE
 * message to the other host, whose side does the same there. Idempotent.
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
	if (qp->lx.x && qp->lx.peer_conn) {
		/* The queue owns the message, sent or not. */
		if (qp->lx.close_msg)
			ropcie_lx_close_queue(qp->lx.x, qp->lx.gen,
					      qp->lx.close_msg, qp->lx.conn,
					      qp->lx.peer_conn);
		qp->lx.close_msg = NULL;
		ropcie_lx_conn_del(qp->lx.x, qp->lx.conn, qp);
		qp->lx.x = NULL;
	}
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

/* What the link transport below tells the connection manager. */
static const struct ropcie_lx_upcalls ropcie_cm_lx_upcalls = {
	.cm_msg = ropcie_cm_link_msg,
	.link_down = ropcie_cm_link_down,
	.conn_end = ropcie_cm_link_end,
};

/* Before any link exists: the PCI driver registers after this. */
int ropcie_cm_init(void)
{
	ropcie_cm_wq = alloc_workqueue("ropcie_cm", KRPING_COMPAT_WQ_PERCPU, 0);
	if (!ropcie_cm_wq)
		return -ENOMEM;
	ropcie_lx_set_upcalls(&ropcie_cm_lx_upcalls);
	return 0;
}

/* Every device and link is gone: no request is left but a timeout finishing. */
void ropcie_cm_exit(void)
{
	ropcie_lx_set_upcalls(NULL);
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
