// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The remote access cases of ropcie_test with one end per host: the
 * target (role=target) on the host that owns the memory, the initiator
 * (role=initiator) on the other, over whatever carries the connection
 * (ropcie's PCI link between two hosts). What each case registers, forges
 * and expects is ropcie_test.h's, as on one host.
 *
 * Each case is a fresh connection. The initiator names the case in the
 * connection's private data; the target registers the first of two guard
 * pages with the case's rights and SENDs what it lends (the page's iova
 * and rkey, and for the wrong PD a valid rkey of another PD); the
 * initiator posts the forged access, checks its completion (and reads
 * the valid WRITE back) and disconnects. The target then checks its own
 * pages: a refused access must leave every byte alone. Each side writes
 * its verdict to its own results; the test bed reads both.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/gfp.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "ropcie_test.h"

#define RT_REMOTE_MAGIC	0x52545243	/* "RTRC" */

/* The connection's private data: which case. */
struct rt_wire_req {
	__be32 magic;
	u8 kind;
	u8 pad[3];
};

/* The target's SEND: struct rt_target_adv on the wire. */
struct rt_wire_adv {
	__le64 iova;
	__le32 rkey;
	__le32 other_rkey;
	__le64 other_addr;
};

/* One end of a case's connection and its events. */
struct rt_conn {
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	wait_queue_head_t wq;
	bool addr_done, route_done, established, closed;
	int err;
};

static void rt_conn_init(struct rt_conn *c)
{
	memset(c, 0, sizeof(*c));
	init_waitqueue_head(&c->wq);
}

/* Wait until *@flag, an error or a close: 0, the error, -ECONNRESET or
 * -ETIMEDOUT.
 */
static int rt_conn_wait(struct rt_conn *c, const bool *flag, long timeout)
{
	wait_event_timeout(c->wq, READ_ONCE(*flag) || READ_ONCE(c->err) ||
			   READ_ONCE(c->closed), timeout);
	if (READ_ONCE(*flag))
		return 0;
	if (READ_ONCE(c->err))
		return READ_ONCE(c->err);
	return READ_ONCE(c->closed) ? -ECONNRESET : -ETIMEDOUT;
}

static void rt_conn_event(struct rt_conn *c, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		WRITE_ONCE(c->addr_done, true);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		WRITE_ONCE(c->route_done, true);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		WRITE_ONCE(c->established, true);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		WRITE_ONCE(c->closed, true);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		WRITE_ONCE(c->err, ev->status < 0 ? ev->status : -ECONNREFUSED);
		break;
	default:
		return;
	}
	wake_up(&c->wq);
}

/* PD, CQ and QP for @c->id on its device. */
static int rt_conn_resources(struct rt_conn *c)
{
	c->pd = ib_alloc_pd(c->id->device, 0);
	if (IS_ERR(c->pd)) {
		int ret = PTR_ERR(c->pd);

		c->pd = NULL;
		return ret;
	}
	c->cq = ib_alloc_cq(c->id->device, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(c->cq)) {
		int ret = PTR_ERR(c->cq);

		c->cq = NULL;
		return ret;
	}
	return rt_make_qp(c->id, c->pd, c->cq);
}

static void rt_conn_destroy(struct rt_conn *c)
{
	if (!c->id)
		return;
	if (c->id->qp) {
		rdma_disconnect(c->id);
		rdma_destroy_qp(c->id);
	}
	rdma_destroy_id(c->id);
	if (c->cq)
		ib_free_cq(c->cq);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	c->id = NULL;
}

/* One message through a DMA-mapped copy; @recv posts a receive instead. */
static int rt_conn_msg(struct rt_conn *c, void *msg, u32 len, bool recv,
		       u64 *mapped)
{
	struct ib_device *dev = c->id->device;
	struct ib_sge sge = { .length = len, .lkey = c->pd->local_dma_lkey };
	int ret;

	sge.addr = ib_dma_map_single(dev, msg, len, recv ? DMA_FROM_DEVICE :
				     DMA_TO_DEVICE);
	if (ib_dma_mapping_error(dev, sge.addr))
		return -EIO;
	if (recv) {
		struct ib_recv_wr wr = { .wr_id = 3, .sg_list = &sge,
					 .num_sge = 1 };

		ret = ib_post_recv(c->id->qp, &wr, NULL);
	} else {
		struct ib_send_wr wr = { .wr_id = 4, .sg_list = &sge,
					 .num_sge = 1, .opcode = IB_WR_SEND,
					 .send_flags = IB_SEND_SIGNALED };

		ret = ib_post_send(c->id->qp, &wr, NULL);
	}
	if (ret)
		ib_dma_unmap_single(dev, sge.addr, len, recv ? DMA_FROM_DEVICE :
				    DMA_TO_DEVICE);
	else
		*mapped = sge.addr;
	return ret;
}

/* ---- target ---- */

static struct {
	struct rdma_cm_id *listen;
	struct task_struct *thread;
	spinlock_t lock;		/* the request below */
	struct rdma_cm_id *req;		/* a request waiting for the thread */
	enum rt_kind req_kind;
	wait_queue_head_t wq;
	struct rt_conn conn;		/* the case being served */
} rt_tgt;

static int rt_target_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	const struct rt_wire_req *req = ev->param.conn.private_data;
	int refuse = 0;

	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (id == READ_ONCE(rt_tgt.conn.id))
			rt_conn_event(&rt_tgt.conn, ev);
		return 0;
	}
	/*
	 * A malformed request is refused, and so is a second one waiting
	 * beside the first: the initiator runs one case at a time.
	 */
	if (!req || ev->param.conn.private_data_len < sizeof(*req) ||
	    req->magic != cpu_to_be32(RT_REMOTE_MAGIC) ||
	    req->kind >= RT_NKINDS)
		return -EINVAL;
	spin_lock(&rt_tgt.lock);
	if (rt_tgt.req) {
		refuse = -EBUSY;
	} else {
		rt_tgt.req = id;
		rt_tgt.req_kind = req->kind;
	}
	spin_unlock(&rt_tgt.lock);
	if (!refuse)
		wake_up(&rt_tgt.wq);
	/* Non-zero: rdma_cm rejects the request and destroys @id. */
	return refuse;
}

/* Serve one case on @id (a connect request for @kind); records it. */
static void rt_target_case(struct rdma_cm_id *id, enum rt_kind kind)
{
	struct rdma_conn_param param = {
		.initiator_depth = 1,
		.responder_resources = 1,
	};
	struct rt_conn *c = &rt_tgt.conn;
	const char *name = rt_names[kind];
	struct ib_pd *other_pd = NULL;
	struct rt_wire_adv *wire;
	struct ib_mr *mr = NULL;
	struct scatterlist sg;
	struct ib_wc wc;
	u8 *sbuf;
	u64 dma = 0;
	char why[96];
	int ret;

	rt_conn_init(c);
	sbuf = (u8 *)__get_free_pages(GFP_KERNEL, 1);
	wire = kzalloc(sizeof(*wire), GFP_KERNEL);
	WRITE_ONCE(c->id, id);
	if (!sbuf || !wire) {
		ret = -ENOMEM;
		goto out;
	}
	memset(sbuf, RT_GUARD, 2 * PAGE_SIZE);
	ret = rt_conn_resources(c);
	if (!ret) {
		/* Not from the CM handler: rdma_accept() wants its lock. */
		rdma_lock_handler(id);
		ret = rdma_accept(id, &param);
		rdma_unlock_handler(id);
	}
	if (!ret)
		ret = rt_conn_wait(c, &c->established, RT_TIMEOUT);
	if (ret)
		goto out;
	mr = rt_reg_on(id, c->pd, c->cq, sbuf, PAGE_SIZE,
		       rt_case_rights(kind), &sg);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		mr = NULL;
		goto out;
	}
	wire->iova = cpu_to_le64(mr->iova);
	wire->rkey = cpu_to_le32(mr->rkey);
	if (kind == RT_WRONG_PD) {
		/* A valid rkey of another PD on the same device. */
		other_pd = ib_alloc_pd(id->device, IB_PD_UNSAFE_GLOBAL_RKEY);
		if (IS_ERR(other_pd)) {
			ret = PTR_ERR(other_pd);
			other_pd = NULL;
			goto out;
		}
		wire->other_rkey = cpu_to_le32(other_pd->unsafe_global_rkey);
		wire->other_addr = cpu_to_le64((u64)(uintptr_t)sbuf);
	}
	ret = rt_conn_msg(c, wire, sizeof(*wire), false, &dma);
	if (!ret) {
		ret = rt_poll(c->cq, &wc);
		ib_dma_unmap_single(id->device, dma, sizeof(*wire),
				    DMA_TO_DEVICE);
	}
	if (!ret && wc.status != IB_WC_SUCCESS)
		ret = -EIO;
	if (ret)
		goto out;
	/* The initiator leaves once it has tried: then look at the pages. */
	ret = rt_conn_wait(c, &c->closed, 4 * RT_TIMEOUT);
out:
	if (ret) {
		snprintf(why, sizeof(why), "target: error %d", ret);
		rt_result(name, 1, why);
	} else if (!rt_case_target_intact(kind, sbuf)) {
		rt_result(name, 1, kind == RT_OK ? "target: WRITE data wrong" :
			  kind == RT_BEHIND_FAIL ?
			  "target: a WRITE landed behind the failed one, or not before" :
			  "target: memory was modified");
	} else {
		rt_result(name, 0, kind == RT_OK ?
			  "target: the WRITE landed, nothing beyond it" :
			  kind == RT_BEHIND_FAIL ?
			  "target: the first WRITE landed, nothing behind the failed one" :
			  kind == RT_RESET_POSTED ?
			  "target: the WRITE landed or nothing did, nothing beyond it" :
			  "target: memory untouched");
	}
	if (other_pd)
		ib_dealloc_pd(other_pd);
	if (mr) {
		ib_dereg_mr(mr);
		ib_dma_unmap_sg(id->device, &sg, 1, DMA_BIDIRECTIONAL);
	}
	rt_conn_destroy(c);
	WRITE_ONCE(c->id, NULL);
	kfree(wire);
	if (sbuf)
		free_pages((unsigned long)sbuf, 1);
}

static int rt_target_thread(void *unused)
{
	while (!kthread_should_stop()) {
		struct rdma_cm_id *id;
		enum rt_kind kind;

		wait_event_interruptible(rt_tgt.wq, READ_ONCE(rt_tgt.req) ||
					 kthread_should_stop());
		if (kthread_should_stop())
			break;
		/* Taken: the initiator's next request may wait meanwhile. */
		spin_lock(&rt_tgt.lock);
		id = rt_tgt.req;
		kind = rt_tgt.req_kind;
		rt_tgt.req = NULL;
		spin_unlock(&rt_tgt.lock);
		if (id)
			rt_target_case(id, kind);
	}
	return 0;
}

/**
 * rt_remote_target_start() - serve the access cases of another host
 * @addr: this host's address on the device that carries them
 * @port: the port to listen on
 *
 * Return: 0 or a negative errno (nothing left behind).
 */
int rt_remote_target_start(const char *addr, int port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = in_aton(addr),
		.sin_port = htons(port),
	};
	int ret;

	spin_lock_init(&rt_tgt.lock);
	init_waitqueue_head(&rt_tgt.wq);
	rt_tgt.listen = rdma_create_id(&init_net, rt_target_handler, NULL,
				       RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(rt_tgt.listen))
		return PTR_ERR(rt_tgt.listen);
	ret = rdma_bind_addr(rt_tgt.listen, (struct sockaddr *)&sin);
	if (!ret)
		ret = rdma_listen(rt_tgt.listen, 4);
	if (ret)
		goto err;
	rt_tgt.thread = kthread_run(rt_target_thread, NULL, "ropcie-rt-tgt");
	if (!IS_ERR(rt_tgt.thread))
		return 0;
	ret = PTR_ERR(rt_tgt.thread);
err:
	pr_err("cannot serve on %s:%d: %d\n", addr, port, ret);
	rdma_destroy_id(rt_tgt.listen);
	return ret;
}

/**
 * rt_remote_target_stop() - stop serving; a case under way ends first
 *
 * Bounded by the case's waits (about 7 x RT_TIMEOUT).
 */
void rt_remote_target_stop(void)
{
	/* No new request once the listener is gone. */
	rdma_destroy_id(rt_tgt.listen);
	kthread_stop(rt_tgt.thread);
	/* A request the thread never took: rdma_cm would keep its id. */
	if (rt_tgt.req)
		rdma_destroy_id(rt_tgt.req);
}

/* ---- initiator ---- */

static int rt_initiator_handler(struct rdma_cm_id *id,
				struct rdma_cm_event *ev)
{
	rt_conn_event(id->context, ev);
	return 0;
}

/* Connect to the target at @dst for @kind; @adv receives its SEND. */
static int rt_initiator_connect(struct rt_conn *c, struct sockaddr_in *dst,
				enum rt_kind kind, struct rt_wire_adv *adv,
				u64 *dma)
{
	struct rt_wire_req req = {
		.magic = cpu_to_be32(RT_REMOTE_MAGIC),
		.kind = kind,
	};
	struct rdma_conn_param param = {
		.initiator_depth = 1,
		.responder_resources = 1,
		.private_data = &req,
		.private_data_len = sizeof(req),
	};
	int ret;

	c->id = rdma_create_id(&init_net, rt_initiator_handler, c, RDMA_PS_TCP,
			       IB_QPT_RC);
	if (IS_ERR(c->id)) {
		ret = PTR_ERR(c->id);
		c->id = NULL;
		return ret;
	}
	ret = rdma_resolve_addr(c->id, NULL, (struct sockaddr *)dst, 2000);
	if (!ret)
		ret = rt_conn_wait(c, &c->addr_done, RT_TIMEOUT);
	if (!ret)
		ret = rdma_resolve_route(c->id, 2000);
	if (!ret)
		ret = rt_conn_wait(c, &c->route_done, RT_TIMEOUT);
	if (!ret && strncmp(dev_name(&c->id->device->dev), "ropcie", 6))
		ret = -ENODEV;
	if (!ret)
		ret = rt_conn_resources(c);
	/* The target SENDs at once: the receive must be there first. */
	if (!ret)
		ret = rt_conn_msg(c, adv, sizeof(*adv), true, dma);
	if (!ret)
		ret = rdma_connect(c->id, &param);
	if (!ret)
		ret = rt_conn_wait(c, &c->established, RT_TIMEOUT);
	return ret;
}

/* One case from this end; records it. */
static void rt_initiator_case(struct sockaddr_in *dst, enum rt_kind kind)
{
	const char *name = rt_names[kind];
	struct rt_target_adv adv = {};
	struct rt_wire_adv *wire;
	struct rt_access a;
	struct rt_conn c;
	struct ib_wc wc;
	u8 *cbuf;
	u64 dma = 0;
	char why[96];
	int ret;

	rt_conn_init(&c);
	wire = kzalloc(sizeof(*wire), GFP_KERNEL);
	cbuf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!wire || !cbuf) {
		rt_result(name, 1, "no memory");
		goto out;
	}
	memset(cbuf, RT_DATA, PAGE_SIZE);
	ret = rt_initiator_connect(&c, dst, kind, wire, &dma);
	if (!ret)
		ret = rt_poll(c.cq, &wc);
	if (dma)
		ib_dma_unmap_single(c.id->device, dma, sizeof(*wire),
				    DMA_FROM_DEVICE);
	if (!ret && (wc.status != IB_WC_SUCCESS ||
		     wc.byte_len != sizeof(*wire)))
		ret = -EPROTO;
	if (ret) {
		snprintf(why, sizeof(why), "no lent page: %d", ret);
		rt_result(name, 1, why);
		goto out;
	}
	adv.iova = le64_to_cpu(wire->iova);
	adv.rkey = le32_to_cpu(wire->rkey);
	adv.other_rkey = le32_to_cpu(wire->other_rkey);
	adv.other_addr = le64_to_cpu(wire->other_addr);
	a = rt_case_access(kind, &adv);

	rt_case_initiate(c.id, c.pd, c.cq, kind, &a, cbuf, NULL);
out:
	rt_conn_destroy(&c);
	kfree(cbuf);
	kfree(wire);
}

/**
 * rt_remote_initiator() - run every access case against another host
 * @addr: the target host's address (it loaded role=target)
 * @port: its port
 */
void rt_remote_initiator(const char *addr, int port)
{
	struct sockaddr_in dst = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = in_aton(addr),
		.sin_port = htons(port),
	};
	enum rt_kind k;

	for (k = RT_OK; k < RT_NKINDS; k++)
		rt_initiator_case(&dst, k);
}
