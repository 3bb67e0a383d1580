// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie_test role=hold: a kernel QP held in INIT, as a kernel consumer
 * holds its QP between rdma_create_qp() and its own connect, so that a
 * test can name that QP's number from user space. The results line is
 * "ok hold: qpn N"; unloading the module destroys the QP. The address
 * must stay up while it is held (its cm id ignores device removal).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/in.h>

#include "ropcie_test.h"

static struct {
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct completion resolved;
	int err;
} rt_hold;

static int rt_hold_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		rt_hold.err = rdma_resolve_route(id, 2000);
		if (rt_hold.err)
			complete(&rt_hold.resolved);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		complete(&rt_hold.resolved);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rt_hold.err = ev->status ? ev->status : -EIO;
		complete(&rt_hold.resolved);
		break;
	default:
		break;
	}
	return 0;
}

/**
 * rt_hold_start() - make a kernel QP on the device of @addr, left in INIT
 * @addr: IPv4 address of the ropcie device's netdev
 * @port: the port its cm id resolves to (nothing listens there)
 *
 * Return: 0 with the QP held until rt_hold_stop(), or a negative errno
 * with nothing held (the module then fails to load).
 */
int rt_hold_start(const char *addr, int port)
{
	struct sockaddr_in dst = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = in_aton(addr),
	};
	char why[32];
	int ret;

	init_completion(&rt_hold.resolved);
	rt_hold.id = rdma_create_id(&init_net, rt_hold_handler, NULL,
				    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(rt_hold.id))
		return PTR_ERR(rt_hold.id);
	ret = rdma_resolve_addr(rt_hold.id, NULL, (struct sockaddr *)&dst,
				2000);
	if (!ret && !wait_for_completion_timeout(&rt_hold.resolved,
						 RT_TIMEOUT))
		ret = -ETIMEDOUT;
	if (!ret)
		ret = rt_hold.err;
	if (ret)
		goto err_id;
	rt_hold.pd = ib_alloc_pd(rt_hold.id->device, 0);
	if (IS_ERR(rt_hold.pd)) {
		ret = PTR_ERR(rt_hold.pd);
		goto err_id;
	}
	rt_hold.cq = ib_alloc_cq(rt_hold.id->device, NULL, 16, 0,
				 IB_POLL_DIRECT);
	if (IS_ERR(rt_hold.cq)) {
		ret = PTR_ERR(rt_hold.cq);
		goto err_pd;
	}
	ret = rt_make_qp(rt_hold.id, rt_hold.pd, rt_hold.cq);
	if (ret)
		goto err_cq;
	snprintf(why, sizeof(why), "qpn %u", rt_hold.id->qp->qp_num);
	rt_result("hold", 0, why);
	return 0;

err_cq:
	ib_free_cq(rt_hold.cq);
err_pd:
	ib_dealloc_pd(rt_hold.pd);
err_id:
	rdma_destroy_id(rt_hold.id);
	pr_err("cannot hold a QP on %s: %d\n", addr, ret);
	return ret;
}

void rt_hold_stop(void)
{
	rdma_destroy_qp(rt_hold.id);
	ib_free_cq(rt_hold.cq);
	ib_dealloc_pd(rt_hold.pd);
	rdma_destroy_id(rt_hold.id);
}
