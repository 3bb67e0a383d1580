// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie_test: negative verbs tests of a ropcie device, built for the test
 * bed only. Loading it with addr=<IPv4 of the ropcie netdev> connects QP
 * pairs through rdma_cm and checks that every bad request fails the way
 * the verbs say and leaves memory alone: bad rkey, wrong PD, out-of-bounds
 * READ and WRITE, missing access rights, posting in the wrong QP state, CQ
 * overflow. It also runs the ring stress of the KUnit suite (a producer
 * and a consumer kthread, bound to two CPUs when there are two) where the
 * KUnit build (UML) has one CPU only. The results are one line per case
 * in the read-only parameter
 * /sys/module/ropcie_test/parameters/results ("ok NAME" or
 * "not ok NAME: why"). With role=target on one host and role=initiator
 * on another, the remote access cases run with one end per host
 * (ropcie_test_remote.c). role=memcpy only measures the kernel's memcpy()
 * bandwidth, for make bench (ropcie_test_memcpy.c); role=floor a cache
 * line's round trip between two CPUs (ropcie_test_floor.c); role=hold
 * holds a kernel QP in INIT for user space to name (ropcie_test_hold.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/gfp.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "ring.h"
#include "ropcie_test.h"

static char addr[16] = "10.77.0.1";
module_param_string(addr, addr, sizeof(addr), 0444);
MODULE_PARM_DESC(addr, "IPv4 address of the ropcie device's netdev");

static char addr2[16];
module_param_string(addr2, addr2, sizeof(addr2), 0444);
MODULE_PARM_DESC(addr2, "IPv4 address of a second ropcie device's netdev (optional)");

static int port = 19999;
module_param(port, int, 0444);
MODULE_PARM_DESC(port, "TCP-style port of the test listener");

static unsigned int lost_wait_ms = 20000;
module_param(lost_wait_ms, uint, 0444);
MODULE_PARM_DESC(lost_wait_ms, "How long a dropped connection request may stay unanswered (more than ropcie's connect_timeout_ms)");

static unsigned int reset_wait_ms = 1000;
module_param(reset_wait_ms, uint, 0444);
MODULE_PARM_DESC(reset_wait_ms, "How long reset_behind_posted_writes keeps its QP in RESET (over a link: more than 4 x ropcie's link_timeout_ms, its request timeout)");

static char role[16];
module_param_string(role, role, sizeof(role), 0444);
MODULE_PARM_DESC(role, "empty: every case on this host; target or initiator: one end of the remote access cases per host, addr being the target's; memcpy: measure memcpy() bandwidth only; floor: measure a cache-line round trip between two CPUs only; hold: hold a kernel QP in INIT until unloaded");

static char results[4096];
module_param_string(results, results, sizeof(results), 0444);
MODULE_PARM_DESC(results, "one line per test case (read only)");

struct rt_pair {
	struct rdma_cm_id *cli, *srv;
	struct ib_pd *cpd, *spd;
	struct ib_cq *ccq, *scq;
	struct completion addr_done, route_done, req, est;
	int cm_err;
};

static struct rdma_cm_id *rt_listen;
static DEFINE_SPINLOCK(rt_post_lock);
static struct rt_pair *rt_cur;	/* the pair being connected */
static int rt_failed, rt_run;

void rt_result(const char *name, int err, const char *why)
{
	size_t len = strlen(results);

	rt_run++;
	if (err)
		rt_failed++;
	/* A passing case may say what it measured. */
	snprintf(results + len, sizeof(results) - len, "%s %s%s%s\n",
		 err ? "not ok" : "ok", name, why ? ": " : "", why ? why : "");
	pr_info("%s %s%s%s\n", err ? "not ok" : "ok", name, why ? ": " : "",
		why ? why : "");
}

static int rt_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rt_pair *p = READ_ONCE(rt_cur);

	if (!p)
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		complete(&p->addr_done);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		complete(&p->route_done);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		p->srv = id;
		complete(&p->req);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (id == p->cli)
			complete(&p->est);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		p->cm_err = ev->status ? ev->status : -EIO;
		complete(&p->addr_done);
		complete(&p->route_done);
		complete(&p->est);
		break;
	default:
		break;
	}
	return 0;
}

static int rt_wait(struct rt_pair *p, struct completion *c)
{
	if (!wait_for_completion_timeout(c, RT_TIMEOUT))
		return -ETIMEDOUT;
	return p->cm_err;
}

int rt_make_qp(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *cq)
{
	struct ib_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = {
			.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 2,
			.max_recv_sge = 2,
		},
	};

	return rdma_create_qp(id, pd, &attr);
}

static void rt_pair_destroy(struct rt_pair *p)
{
	if (p->cli && p->cli->qp)
		rdma_disconnect(p->cli);
	/* No drain: every completion the cases wanted was polled. */
	if (p->srv && p->srv->qp)
		rdma_destroy_qp(p->srv);
	if (p->cli && p->cli->qp)
		rdma_destroy_qp(p->cli);
	WRITE_ONCE(rt_cur, NULL);
	if (p->srv)
		rdma_destroy_id(p->srv);
	if (p->cli)
		rdma_destroy_id(p->cli);
	if (p->scq)
		ib_free_cq(p->scq);
	if (p->ccq)
		ib_free_cq(p->ccq);
	if (p->spd)
		ib_dealloc_pd(p->spd);
	if (p->cpd)
		ib_dealloc_pd(p->cpd);
	kfree(p);
}

/*
 * A connected client/server QP pair on the ropcie device; with @src, the
 * client binds to that address (and so to that address's device).
 */
static struct rt_pair *rt_pair_create_from(const char *src)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_conn_param param = {
		.initiator_depth = 1,
		.responder_resources = 1,
	};
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct ib_device *dev;
	struct rt_pair *p;
	int ret;

	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return ERR_PTR(-ENOMEM);
	init_completion(&p->addr_done);
	init_completion(&p->route_done);
	init_completion(&p->req);
	init_completion(&p->est);
	WRITE_ONCE(rt_cur, p);

	dst.sin_addr.s_addr = in_aton(addr);
	dst.sin_port = htons(port);
	p->cli = rdma_create_id(&init_net, rt_cm_handler, NULL, RDMA_PS_TCP,
				IB_QPT_RC);
	if (IS_ERR(p->cli)) {
		ret = PTR_ERR(p->cli);
		p->cli = NULL;
		goto err;
	}
	if (src)
		sin.sin_addr.s_addr = in_aton(src);
	ret = rdma_resolve_addr(p->cli, src ? (struct sockaddr *)&sin : NULL,
				(struct sockaddr *)&dst, 2000);
	if (!ret)
		ret = rt_wait(p, &p->addr_done);
	if (!ret)
		ret = rdma_resolve_route(p->cli, 2000);
	if (!ret)
		ret = rt_wait(p, &p->route_done);
	if (ret)
		goto err;
	dev = p->cli->device;
	if (strncmp(dev_name(&dev->dev), "ropcie", 6)) {
		pr_err("%s resolves to %s, not a ropcie device\n", addr,
		       dev_name(&dev->dev));
		ret = -ENODEV;
		goto err;
	}
	p->cpd = ib_alloc_pd(dev, 0);
	p->ccq = ib_alloc_cq(dev, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(p->cpd) || IS_ERR(p->ccq)) {
		ret = -ENOMEM;
		goto err_res;
	}
	ret = rt_make_qp(p->cli, p->cpd, p->ccq);
	if (!ret)
		ret = rdma_connect(p->cli, &param);
	if (!ret)
		ret = rt_wait(p, &p->req);
	if (ret)
		goto err;
	/* The server's resources on the device the request arrived on. */
	p->spd = ib_alloc_pd(p->srv->device, 0);
	p->scq = ib_alloc_cq(p->srv->device, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(p->spd) || IS_ERR(p->scq)) {
		ret = -ENOMEM;
		goto err_res;
	}
	ret = rt_make_qp(p->srv, p->spd, p->scq);
	if (!ret) {
		/* Not from the CM handler: rdma_accept() wants its lock. */
		rdma_lock_handler(p->srv);
		ret = rdma_accept(p->srv, &param);
		rdma_unlock_handler(p->srv);
	}
	if (!ret)
		ret = rt_wait(p, &p->est);
	if (ret)
		goto err;
	return p;
err_res:
	if (IS_ERR(p->cpd))
		p->cpd = NULL;
	if (IS_ERR(p->ccq))
		p->ccq = NULL;
	if (IS_ERR(p->spd))
		p->spd = NULL;
	if (IS_ERR(p->scq))
		p->scq = NULL;
err:
	rt_pair_destroy(p);
	return ERR_PTR(ret);
}

static struct rt_pair *rt_pair_create(void)
{
	return rt_pair_create_from(NULL);
}

/* A pair for case @name, or NULL with the case failed for want of one. */
static struct rt_pair *rt_case_pair(const char *name, const char *src)
{
	struct rt_pair *p = rt_pair_create_from(src);
	char why[96];

	if (!IS_ERR(p))
		return p;
	snprintf(why, sizeof(why), "no connection: %ld", PTR_ERR(p));
	rt_result(name, 1, why);
	return NULL;
}

/* Poll one completion of @cq, bounded. */
int rt_poll(struct ib_cq *cq, struct ib_wc *wc)
{
	unsigned long end = jiffies + RT_TIMEOUT;

	while (time_before(jiffies, end)) {
		if (ib_poll_cq(cq, 1, wc) == 1)
			return 0;
		usleep_range(200, 1000);
	}
	return -ETIMEDOUT;
}

/*
 * Register the first @len bytes (whole pages) of the physically
 * contiguous @buf with @access, by a REG_MR on @id's QP (connected).
 */
struct ib_mr *rt_reg_on(struct rdma_cm_id *id, struct ib_pd *pd,
			struct ib_cq *cq, void *buf, u32 len, int access,
			struct scatterlist *sg)
{
	struct ib_device *dev = id->device;
	struct ib_reg_wr reg = {};
	struct ib_wc wc;
	struct ib_mr *mr;
	int ret;

	sg_init_one(sg, buf, len);
	if (ib_dma_map_sg(dev, sg, 1, DMA_BIDIRECTIONAL) != 1)
		return ERR_PTR(-EIO);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, len / PAGE_SIZE);
	if (IS_ERR(mr))
		goto unmap;
	ret = ib_map_mr_sg(mr, sg, 1, NULL, PAGE_SIZE);
	if (ret != 1) {
		ib_dereg_mr(mr);
		mr = ERR_PTR(-EIO);
		goto unmap;
	}
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.wr.wr_id = 1;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = access;
	ret = ib_post_send(id->qp, &reg.wr, NULL);
	if (!ret)
		ret = rt_poll(cq, &wc);
	if (!ret && wc.status != IB_WC_SUCCESS)
		ret = -EIO;
	if (ret) {
		ib_dereg_mr(mr);
		mr = ERR_PTR(ret);
		goto unmap;
	}
	return mr;
unmap:
	ib_dma_unmap_sg(dev, sg, 1, DMA_BIDIRECTIONAL);
	return mr;
}

/* Set @wr to one signaled RDMA @op of @sge to @raddr with @rkey. */
static void rt_rdma_wr(struct ib_rdma_wr *wr, struct ib_sge *sge,
		       enum ib_wr_opcode op, u64 raddr, u32 rkey)
{
	*wr = (struct ib_rdma_wr){
		.wr = {
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
			.sg_list = sge,
			.num_sge = 1,
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};
}

/* Post one RDMA op on @id's QP and return its completion status. */
int rt_rdma_on(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *cq,
	       enum ib_wr_opcode op, void *local, u32 len, u64 raddr, u32 rkey,
	       enum ib_wc_status *status)
{
	struct ib_device *dev = id->device;
	struct ib_sge sge = {
		.addr = ib_dma_map_single(dev, local, len, DMA_BIDIRECTIONAL),
		.length = len,
		.lkey = pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr;
	struct ib_wc wc;
	int ret;

	rt_rdma_wr(&wr, &sge, op, raddr, rkey);
	wr.wr.wr_id = 2;
	/*
	 * Under a spinlock, as a ULP may post: post_send must not sleep
	 * (CONFIG_DEBUG_ATOMIC_SLEEP reports it if it does).
	 */
	spin_lock(&rt_post_lock);
	ret = ib_post_send(id->qp, &wr.wr, NULL);
	spin_unlock(&rt_post_lock);
	if (!ret)
		ret = rt_poll(cq, &wc);
	ib_dma_unmap_single(dev, sge.addr, len, DMA_BIDIRECTIONAL);
	if (!ret)
		*status = wc.status;
	return ret;
}

/* The server's end of @p. */
static struct ib_mr *rt_reg(struct rt_pair *p, void *buf, u32 len,
			    int access, struct scatterlist *sg)
{
	return rt_reg_on(p->srv, p->spd, p->scq, buf, len, access, sg);
}

/* From the client's end of @p. */
static int rt_rdma(struct rt_pair *p, enum ib_wr_opcode op, void *local,
		   u32 len, u64 raddr, u32 rkey, enum ib_wc_status *status)
{
	return rt_rdma_on(p->cli, p->cpd, p->ccq, op, local, len, raddr, rkey,
			  status);
}

const char * const rt_names[RT_NKINDS] = {
	[RT_OK] = "valid_write_and_read",
	[RT_BAD_RKEY] = "bad_rkey_write",
	[RT_BAD_KEYBYTE] = "stale_key_byte_read",
	[RT_WRONG_PD] = "wrong_pd_write",
	[RT_OOB_WRITE] = "out_of_bounds_write",
	[RT_OOB_READ] = "out_of_bounds_read",
	[RT_NO_WRITE] = "write_without_remote_write",
	[RT_NO_READ] = "read_without_remote_read",
	[RT_BEHIND_FAIL] = "write_behind_failed_write",
	[RT_RESET_POSTED] = "reset_behind_posted_writes",
};

/*
 * RT_BEHIND_FAIL's chain from @id: RT_CASE_LEN bytes of @local to @raddr
 * with @rkey, to the same place with @bad_rkey, and to @raddr +
 * RT_CASE_LEN with @rkey, all signaled. Return: 0 with the three
 * statuses in posting order, or the error of the post or a poll.
 */
static int rt_chain_on(struct rdma_cm_id *id, struct ib_pd *pd,
		       struct ib_cq *cq, void *local, u64 raddr, u32 rkey,
		       u32 bad_rkey, enum ib_wc_status st[3])
{
	struct ib_device *dev = id->device;
	struct ib_sge sge = {
		.addr = ib_dma_map_single(dev, local, RT_CASE_LEN,
					  DMA_BIDIRECTIONAL),
		.length = RT_CASE_LEN,
		.lkey = pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr[3] = {};
	struct ib_wc wc;
	int i, ret;

	for (i = 0; i < 3; i++) {
		wr[i].wr.wr_id = i;
		wr[i].wr.opcode = IB_WR_RDMA_WRITE;
		wr[i].wr.send_flags = IB_SEND_SIGNALED;
		wr[i].wr.sg_list = &sge;
		wr[i].wr.num_sge = 1;
		wr[i].wr.next = i < 2 ? &wr[i + 1].wr : NULL;
		wr[i].remote_addr = raddr + (i == 2 ? RT_CASE_LEN : 0);
		wr[i].rkey = i == 1 ? bad_rkey : rkey;
	}
	ret = ib_post_send(id->qp, &wr[0].wr, NULL);
	for (i = 0; !ret && i < 3; i++) {
		ret = rt_poll(cq, &wc);
		if (!ret && wc.wr_id != i)
			ret = -EILSEQ;
		if (!ret)
			st[i] = wc.status;
	}
	ib_dma_unmap_single(dev, sge.addr, RT_CASE_LEN, DMA_BIDIRECTIONAL);
	return ret;
}

/* rt_case_initiate() for RT_BEHIND_FAIL: the chain, then its checks. */
static void rt_case_behind_fail(struct rdma_cm_id *id, struct ib_pd *pd,
				struct ib_cq *cq, const struct rt_access *a,
				u8 *cbuf, const u8 *sbuf)
{
	static const enum ib_wc_status want[3] = {
		IB_WC_SUCCESS, IB_WC_REM_ACCESS_ERR, IB_WC_WR_FLUSH_ERR
	};
	const char *name = rt_names[RT_BEHIND_FAIL];
	enum ib_wc_status st[3];
	char why[128];
	int i, ret;

	ret = rt_chain_on(id, pd, cq, cbuf, a->raddr, a->rkey - 0x100, a->rkey,
			  st);
	if (ret) {
		snprintf(why, sizeof(why), "post/poll failed: %d", ret);
		rt_result(name, 1, why);
		return;
	}
	for (i = 0; i < 3; i++) {
		if (st[i] != want[i]) {
			snprintf(why, sizeof(why), "WRITE %d: status %s, expected %s",
				 i + 1, ib_wc_status_msg(st[i]),
				 ib_wc_status_msg(want[i]));
			rt_result(name, 1, why);
			return;
		}
	}
	if (sbuf && !rt_case_target_intact(RT_BEHIND_FAIL, sbuf))
		rt_result(name, 1, "a WRITE landed behind the failed one, or not before");
	else
		rt_result(name, 0, ib_wc_status_msg(want[1]));
}

#define RT_RESET_WRITES		4

/*
 * rt_case_initiate() for RT_RESET_POSTED. Each lone WRITE goes out from
 * the poster's context (under a spinlock, as rt_rdma_on()) over a link,
 * its verdict still to come; ERR and at once RESET follow, which on a
 * host of one CPU the QP's worker has not flushed yet. Whatever
 * completes is a success or a flush, the QP stays in RESET for
 * reset_wait_ms while the verdicts come back (or, the connection being
 * closed, their requests time out), and the target sees the WRITE or
 * nothing.
 */
static void rt_case_reset_posted(struct rdma_cm_id *id, struct ib_pd *pd,
				 struct ib_cq *cq, const struct rt_access *a,
				 u8 *cbuf, const u8 *sbuf)
{
	const char *name = rt_names[RT_RESET_POSTED];
	struct ib_device *dev = id->device;
	struct ib_sge sge = {
		.addr = ib_dma_map_single(dev, cbuf, RT_CASE_LEN, DMA_TO_DEVICE),
		.length = RT_CASE_LEN,
		.lkey = pd->local_dma_lkey,
	};
	struct ib_qp_init_attr init;
	struct ib_rdma_wr wr;
	struct ib_qp_attr attr = {};
	int i, n = 0, odd = 0, ret = 0;
	struct ib_wc wc;
	char why[96];

	rt_rdma_wr(&wr, &sge, IB_WR_RDMA_WRITE, a->raddr, a->rkey);
	spin_lock(&rt_post_lock);
	for (i = 0; !ret && i < RT_RESET_WRITES; i++) {
		wr.wr.wr_id = i;
		ret = ib_post_send(id->qp, &wr.wr, NULL);
	}
	spin_unlock(&rt_post_lock);
	attr.qp_state = IB_QPS_ERR;
	if (!ret)
		ret = ib_modify_qp(id->qp, &attr, IB_QP_STATE);
	attr.qp_state = IB_QPS_RESET;
	if (!ret)
		ret = ib_modify_qp(id->qp, &attr, IB_QP_STATE);
	/* The verdicts come back, or their requests time out, meanwhile. */
	msleep(reset_wait_ms);
	while (ib_poll_cq(cq, 1, &wc) == 1) {
		n++;
		if (wc.status != IB_WC_SUCCESS &&
		    wc.status != IB_WC_WR_FLUSH_ERR)
			odd++;
	}
	if (!ret)
		ret = ib_query_qp(id->qp, &attr, IB_QP_STATE, &init);
	ib_dma_unmap_single(dev, sge.addr, RT_CASE_LEN, DMA_TO_DEVICE);
	if (ret) {
		snprintf(why, sizeof(why), "post/modify/query failed: %d", ret);
		rt_result(name, 1, why);
	} else if (attr.qp_state != IB_QPS_RESET) {
		snprintf(why, sizeof(why), "QP in state %d after RESET",
			 attr.qp_state);
		rt_result(name, 1, why);
	} else if (n > RT_RESET_WRITES || odd) {
		snprintf(why, sizeof(why), "%d completions, %d neither success nor flush",
			 n, odd);
		rt_result(name, 1, why);
	} else if (sbuf && !rt_case_target_intact(RT_RESET_POSTED, sbuf)) {
		rt_result(name, 1, "target memory was modified");
	} else {
		snprintf(why, sizeof(why), "%d of %d completed", n,
			 RT_RESET_WRITES);
		rt_result(name, 0, why);
	}
}

/**
 * rt_case_initiate() - the initiator's half of an access case; records it
 * @id: the initiator's end of the case's connection
 * @pd: its PD
 * @cq: its CQ (polled)
 * @kind: the case
 * @a: the access to post (rt_case_access())
 * @cbuf: a page of RT_DATA, the local end
 * @sbuf: the target's two pages when they are on this host, checked right
 *	after the access; NULL when the target checks them itself
 *
 * The access completes with the status the verbs prescribe, and leaves the
 * local page alone; the valid WRITE is read back.
 */
void rt_case_initiate(struct rdma_cm_id *id, struct ib_pd *pd,
		      struct ib_cq *cq, enum rt_kind kind,
		      const struct rt_access *a, u8 *cbuf, const u8 *sbuf)
{
	enum ib_wc_status st = IB_WC_GENERAL_ERR;
	const char *name = rt_names[kind];
	char why[96];
	int ret;

	if (kind == RT_BEHIND_FAIL) {
		rt_case_behind_fail(id, pd, cq, a, cbuf, sbuf);
		return;
	}
	if (kind == RT_RESET_POSTED) {
		rt_case_reset_posted(id, pd, cq, a, cbuf, sbuf);
		return;
	}
	ret = rt_rdma_on(id, pd, cq, a->op, cbuf, a->len, a->raddr, a->rkey,
			 &st);
	if (ret) {
		snprintf(why, sizeof(why), "post/poll failed: %d", ret);
		rt_result(name, 1, why);
	} else if (st != a->want) {
		snprintf(why, sizeof(why), "status %s, expected %s",
			 ib_wc_status_msg(st), ib_wc_status_msg(a->want));
		rt_result(name, 1, why);
	} else if (sbuf && !rt_case_target_intact(kind, sbuf)) {
		rt_result(name, 1, kind == RT_OK ? "WRITE data wrong" :
			  "target memory was modified");
	} else if (kind == RT_OK) {
		/* The write landed, nothing beyond it; read it back. */
		memset(cbuf, 0, PAGE_SIZE);
		ret = rt_rdma_on(id, pd, cq, IB_WR_RDMA_READ, cbuf, a->len,
				 a->raddr, a->rkey, &st);
		if (ret || st != IB_WC_SUCCESS ||
		    !rt_all(cbuf, a->len, RT_DATA) ||
		    !rt_all(cbuf + a->len, PAGE_SIZE - a->len, 0))
			rt_result(name, 1, "READ back failed");
		else
			rt_result(name, 0, NULL);
	} else if (!rt_all(cbuf, PAGE_SIZE, RT_DATA)) {
		rt_result(name, 1, "local sink was modified");
	} else {
		rt_result(name, 0, ib_wc_status_msg(st));
	}
}

/*
 * One remote access case on a fresh connection. The server's two pages
 * hold RT_GUARD; only the first is registered. The client's buffer holds
 * RT_DATA. A refused access must leave both exactly as they were.
 */
static void rt_remote_case(enum rt_kind kind)
{
	const char *name = rt_names[kind];
	struct rt_target_adv adv = {};
	struct ib_pd *other_pd = NULL;
	struct scatterlist sg;
	u8 *sbuf, *cbuf = NULL;
	struct rt_access a;
	struct rt_pair *p;
	struct ib_mr *mr;
	char why[96];

	sbuf = (u8 *)__get_free_pages(GFP_KERNEL, 1);
	cbuf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!sbuf || !cbuf) {
		rt_result(name, -ENOMEM, "no memory");
		goto out_mem;
	}
	memset(sbuf, RT_GUARD, 2 * PAGE_SIZE);
	memset(cbuf, RT_DATA, PAGE_SIZE);

	p = rt_case_pair(name, NULL);
	if (!p)
		goto out_mem;
	mr = rt_reg(p, sbuf, PAGE_SIZE, rt_case_rights(kind), &sg);
	if (IS_ERR(mr)) {
		snprintf(why, sizeof(why), "REG_MR failed: %ld", PTR_ERR(mr));
		rt_result(name, 1, why);
		goto out_pair;
	}
	adv.iova = mr->iova;
	adv.rkey = mr->rkey;
	if (kind == RT_WRONG_PD) {
		/* A valid rkey of another PD on the same device. */
		other_pd = ib_alloc_pd(p->srv->device,
				       IB_PD_UNSAFE_GLOBAL_RKEY);
		if (IS_ERR(other_pd)) {
			rt_result(name, 1, "ib_alloc_pd failed");
			other_pd = NULL;
			goto out_mr;
		}
		adv.other_rkey = other_pd->unsafe_global_rkey;
		adv.other_addr = (u64)(uintptr_t)sbuf;
	}
	a = rt_case_access(kind, &adv);

	rt_case_initiate(p->cli, p->cpd, p->ccq, kind, &a, cbuf, sbuf);

	if (other_pd)
		ib_dealloc_pd(other_pd);
out_mr:
	if (!IS_ERR(mr)) {
		ib_dereg_mr(mr);
		ib_dma_unmap_sg(p->srv->device, &sg, 1, DMA_BIDIRECTIONAL);
	}
out_pair:
	rt_pair_destroy(p);
out_mem:
	kfree(cbuf);
	if (sbuf)
		free_pages((unsigned long)sbuf, 1);
}

/*
 * Revoking access while a transfer is in flight. WRITEs of a few MiB
 * each from the client into a fast-reg MR of the server, back to back,
 * pass their checks and place data; the server then ends the access:
 * LOCAL_INV of the MR, or its QP moved to error and drained (a flushed
 * marker, as ib_drain_qp() posts). Once that completes the server reuses
 * the memory (zeroes it): no byte of a WRITE may land after that.
 */
enum rt_revoke { RT_REVOKE_INV, RT_REVOKE_ERR };

#define RT_BIG_ORDER	10	/* 4 MiB per WRITE */
#define RT_REVOKE_WRITES 8	/* back to back: the worker keeps copying */
#define RT_REVOKE_ROUNDS 5

/* Poll @cq until the completion of @wr_id, bounded; others are dropped. */
static int rt_poll_id(struct ib_cq *cq, u64 wr_id, struct ib_wc *wc)
{
	unsigned long end = jiffies + RT_TIMEOUT;

	while (time_before(jiffies, end)) {
		if (ib_poll_cq(cq, 1, wc) == 1) {
			if (wc->wr_id == wr_id)
				return 0;
			continue;
		}
		usleep_range(100, 500);
	}
	return -ETIMEDOUT;
}

/*
 * One round. Return: 1 when a WRITE was still to complete as the
 * revocation was posted, 0 when none was (no verdict), or a negative
 * errno with @why filled: -EBUSY when a WRITE never completed, so the
 * buffers may still be written.
 */
static int rt_revoke_round(enum rt_revoke how, u8 *sbuf, u8 *cbuf, u32 len,
			   char *why, size_t wlen)
{
	int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	struct ib_qp_attr qa = { .qp_state = IB_QPS_ERR };
	struct ib_send_wr end = {
		.wr_id = 100,
		.opcode = how == RT_REVOKE_INV ? IB_WR_LOCAL_INV : IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	struct ib_rdma_wr wr[RT_REVOKE_WRITES] = {};
	struct ib_sge sge = { .length = len };
	unsigned int i, done = 0;
	unsigned long deadline;
	struct scatterlist sg;
	bool in_flight;
	struct rt_pair *p;
	struct ib_wc wc;
	struct ib_mr *mr;
	int ret;

	p = rt_pair_create();
	if (IS_ERR(p)) {
		snprintf(why, wlen, "no connection: %ld", PTR_ERR(p));
		return PTR_ERR(p);
	}
	mr = rt_reg(p, sbuf, len, access, &sg);
	if (IS_ERR(mr)) {
		snprintf(why, wlen, "REG_MR failed: %ld", PTR_ERR(mr));
		ret = PTR_ERR(mr);
		goto out_pair;
	}
	memset(sbuf, 0, len);
	memset(cbuf, RT_DATA, len);
	sge.addr = ib_dma_map_single(p->cli->device, cbuf, len,
				     DMA_BIDIRECTIONAL);
	sge.lkey = p->cpd->local_dma_lkey;
	for (i = 0; i < RT_REVOKE_WRITES; i++) {
		wr[i].wr.wr_id = i;
		wr[i].wr.opcode = IB_WR_RDMA_WRITE;
		wr[i].wr.send_flags = IB_SEND_SIGNALED;
		wr[i].wr.sg_list = &sge;
		wr[i].wr.num_sge = 1;
		wr[i].wr.next = i + 1 < RT_REVOKE_WRITES ? &wr[i + 1].wr : NULL;
		wr[i].remote_addr = mr->iova;
		wr[i].rkey = mr->rkey;
	}
	end.ex.invalidate_rkey = mr->rkey;

	ret = ib_post_send(p->cli->qp, &wr[0].wr, NULL);
	if (ret) {
		snprintf(why, wlen, "WRITE post failed: %d", ret);
		goto out_unmap;
	}
	/* Wait for the first bytes to land: the checks are behind them. */
	deadline = jiffies + RT_TIMEOUT;
	while (READ_ONCE(sbuf[0]) != RT_DATA && time_before(jiffies, deadline))
		cpu_relax();
	while (ib_poll_cq(p->ccq, 1, &wc) == 1)
		done++;
	in_flight = READ_ONCE(sbuf[0]) == RT_DATA && done < RT_REVOKE_WRITES;
	if (how == RT_REVOKE_ERR)
		ret = ib_modify_qp(p->srv->qp, &qa, IB_QP_STATE);
	if (!ret)
		ret = ib_post_send(p->srv->qp, &end, NULL);
	if (!ret)
		ret = rt_poll_id(p->scq, end.wr_id, &wc);
	if (ret) {
		snprintf(why, wlen, "revocation failed: %d", ret);
		goto out_writes;
	}
	/* LOCAL_INV succeeds; the marker on a QP in error is flushed. */
	if (wc.status != (how == RT_REVOKE_INV ? IB_WC_SUCCESS :
						 IB_WC_WR_FLUSH_ERR)) {
		snprintf(why, wlen, "revocation completed with %s",
			 ib_wc_status_msg(wc.status));
		ret = -EIO;
		goto out_writes;
	}
	memset(sbuf, 0, len);
out_writes:
	/* Every WRITE completes: placed, refused or flushed. */
	if (done < RT_REVOKE_WRITES &&
	    rt_poll_id(p->ccq, RT_REVOKE_WRITES - 1, &wc)) {
		/* The buffers cannot be freed while one may run: keep them. */
		snprintf(why, wlen, "a WRITE never completed");
		ret = -EBUSY;
		goto out_unmap;
	}
	if (!ret && !rt_all(sbuf, len, 0)) {
		snprintf(why, wlen,
			 "a WRITE kept placing data after the %s completed",
			 how == RT_REVOKE_INV ? "LOCAL_INV" : "drain");
		ret = -EIO;
	}
	if (!ret)
		ret = in_flight;
out_unmap:
	ib_dma_unmap_single(p->cli->device, sge.addr, len, DMA_BIDIRECTIONAL);
	ib_dereg_mr(mr);
	ib_dma_unmap_sg(p->srv->device, &sg, 1, DMA_BIDIRECTIONAL);
out_pair:
	rt_pair_destroy(p);
	return ret;
}

static void rt_revoke(enum rt_revoke how)
{
	const char *name = how == RT_REVOKE_INV ? "local_inv_waits_for_write" :
						  "drain_waits_for_write";
	u32 len = PAGE_SIZE << RT_BIG_ORDER;
	u8 *sbuf, *cbuf;
	char why[96] = "";
	int i, ret = 0;

	sbuf = (u8 *)__get_free_pages(GFP_KERNEL | __GFP_NOWARN, RT_BIG_ORDER);
	cbuf = (u8 *)__get_free_pages(GFP_KERNEL | __GFP_NOWARN, RT_BIG_ORDER);
	if (!sbuf || !cbuf) {
		rt_result(name, -ENOMEM, "no 4 MiB of contiguous memory");
		goto out;
	}
	for (i = 0; i < RT_REVOKE_ROUNDS; i++) {
		ret = rt_revoke_round(how, sbuf, cbuf, len, why, sizeof(why));
		if (ret == -EBUSY) {
			/* Leak the buffers rather than free them under a copy. */
			rt_result(name, ret, why);
			return;
		}
		if (ret)
			break;
	}
	if (ret < 0)
		rt_result(name, ret, why);
	else if (!ret)
		rt_result(name, 1, "the WRITE never overlapped the revocation");
	else
		rt_result(name, 0, NULL);
out:
	if (sbuf)
		free_pages((unsigned long)sbuf, RT_BIG_ORDER);
	if (cbuf)
		free_pages((unsigned long)cbuf, RT_BIG_ORDER);
}

/*
 * A REG_MR whose MR is deregistered while it waits in the SQ (behind a
 * SEND that has no receive yet) must fail with MW_BIND_ERR, and must not
 * touch the freed MR (KASAN watches on the debug kernel).
 */
static void rt_reg_after_dereg(void)
{
	const char *name = "reg_mr_after_dereg";
	struct ib_send_wr send = {
		.wr_id = 5,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	struct ib_recv_wr recv = { .wr_id = 7 };
	struct ib_reg_wr reg = {
		.wr = {
			.wr_id = 6,
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.access = IB_ACCESS_LOCAL_WRITE,
	};
	struct scatterlist sg;
	struct rt_pair *p;
	struct ib_wc wc;
	struct ib_mr *mr;
	char why[96];
	void *buf;
	int ret;

	buf = (void *)__get_free_page(GFP_KERNEL);
	if (!buf) {
		rt_result(name, -ENOMEM, "no memory");
		return;
	}
	p = rt_case_pair(name, NULL);
	if (!p)
		goto out_buf;
	sg_init_one(&sg, buf, PAGE_SIZE);
	mr = ib_alloc_mr(p->spd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(mr) || ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE) != 1) {
		rt_result(name, 1, "cannot set up the MR");
		if (!IS_ERR(mr))
			ib_dereg_mr(mr);
		goto out_pair;
	}
	reg.mr = mr;
	reg.key = mr->rkey;
	ret = ib_post_send(p->srv->qp, &send, NULL);
	if (!ret)
		ret = ib_post_send(p->srv->qp, &reg.wr, NULL);
	ib_dereg_mr(mr);
	if (!ret)
		ret = ib_post_recv(p->cli->qp, &recv, NULL);
	if (!ret)
		ret = rt_poll_id(p->scq, reg.wr.wr_id, &wc);
	if (ret) {
		snprintf(why, sizeof(why), "post/poll failed: %d", ret);
		rt_result(name, 1, why);
	} else if (wc.status != IB_WC_MW_BIND_ERR) {
		snprintf(why, sizeof(why), "REG_MR completed with %s",
			 ib_wc_status_msg(wc.status));
		rt_result(name, 1, why);
	} else {
		rt_result(name, 0, NULL);
	}
out_pair:
	rt_pair_destroy(p);
out_buf:
	free_page((unsigned long)buf);
}

/*
 * Posting to a QP that is not connected: a new QP is in INIT (an iWARP QP
 * is born idle), which takes receives and refuses sends; RESET refuses
 * both.
 */
static void rt_wrong_state(void)
{
	struct ib_qp_init_attr attr = {
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ib_qp_attr qa = { .qp_state = IB_QPS_RESET };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND };
	struct ib_recv_wr rwr = {};
	const struct ib_send_wr *bad_s;
	const struct ib_recv_wr *bad_r;
	struct ib_pd *pd = NULL;
	struct ib_cq *cq = NULL;
	struct ib_qp *qp = NULL;
	struct rt_pair *p;
	int s_reset, r_reset, s_init, r_init, to_reset;
	char why[128];

	/* Only for the device: make a pair, keep nothing of it. */
	p = rt_pair_create();
	if (IS_ERR(p)) {
		rt_result("post_in_wrong_state", 1, "no device");
		return;
	}
	pd = ib_alloc_pd(p->cli->device, 0);
	cq = ib_alloc_cq(p->cli->device, NULL, 8, 0, IB_POLL_DIRECT);
	if (IS_ERR(pd) || IS_ERR(cq)) {
		rt_result("post_in_wrong_state", 1, "no PD/CQ");
		goto out;
	}
	attr.send_cq = cq;
	attr.recv_cq = cq;
	qp = ib_create_qp(pd, &attr);
	if (IS_ERR(qp)) {
		rt_result("post_in_wrong_state", 1, "ib_create_qp failed");
		qp = NULL;
		goto out;
	}
	s_init = ib_post_send(qp, &swr, &bad_s);
	r_init = ib_post_recv(qp, &rwr, &bad_r);
	to_reset = ib_modify_qp(qp, &qa, IB_QP_STATE);
	s_reset = ib_post_send(qp, &swr, &bad_s);
	r_reset = ib_post_recv(qp, &rwr, &bad_r);
	if (s_init != -EINVAL || r_init || to_reset || s_reset != -EINVAL ||
	    r_reset != -EINVAL) {
		snprintf(why, sizeof(why),
			 "new QP: send %d, recv %d; to RESET %d: send %d, recv %d",
			 s_init, r_init, to_reset, s_reset, r_reset);
		rt_result("post_in_wrong_state", 1, why);
	} else {
		rt_result("post_in_wrong_state", 0, NULL);
	}
out:
	if (qp)
		ib_destroy_qp(qp);
	if (!IS_ERR_OR_NULL(cq))
		ib_free_cq(cq);
	if (!IS_ERR_OR_NULL(pd))
		ib_dealloc_pd(pd);
	rt_pair_destroy(p);
}

/*
 * IB_SEND_INLINE on a QP made with max_inline_data 0 (ropcie offers no
 * inline data): post_send refuses the WR with -EINVAL and names it in
 * bad_wr, and nothing completes.
 */
static void rt_inline_refused(void)
{
	const char *name = "inline_send_refused";
	struct ib_sge sge = { .length = 16 };
	struct ib_send_wr send = {
		.wr_id = 9,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
		.sg_list = &sge,
		.num_sge = 1,
	};
	const struct ib_send_wr *bad = NULL;
	struct rt_pair *p;
	struct ib_wc wc;
	char why[96];
	void *buf;
	int ret, n;

	buf = kzalloc(sge.length, GFP_KERNEL);
	if (!buf) {
		rt_result(name, -ENOMEM, "no memory");
		return;
	}
	p = rt_case_pair(name, NULL);
	if (!p)
		goto out_buf;
	/* What an inline post carries: a kernel address, no key. */
	sge.addr = (uintptr_t)buf;
	ret = ib_post_send(p->cli->qp, &send, &bad);
	msleep(100);
	n = ib_poll_cq(p->ccq, 1, &wc);
	if (ret != -EINVAL || bad != &send || n) {
		snprintf(why, sizeof(why),
			 "post_send %d, bad_wr %s, %d completions", ret,
			 bad == &send ? "the WR" : "not the WR", n);
		rt_result(name, 1, why);
	} else {
		rt_result(name, 0, NULL);
	}
	rt_pair_destroy(p);
out_buf:
	kfree(buf);
}

/*
 * A connection request that iw_cm drops must still be answered. iw_cm
 * drops the events of a listener it is destroying (IWCM_F_DROP_EVENTS):
 * one of its ordered workqueue is held up in the handler of a second
 * listener while the first one, with a request queued, is destroyed.
 * ropcie's connect timeout must then fail the request: the client gets
 * UNREACHABLE (-ETIMEDOUT), and its QP and cm_id can be destroyed.
 *
 * iw_destroy_cm_id() marks the listener's events dropped, then flushes
 * the workqueue we hold: so the handler holds it until the destroy has
 * begun and a grace more (the few steps to that mark take no sleeping
 * lock we hold), not for a fixed time the whole case would wait out.
 */
#define RT_LOST_GRACE	(2 * HZ)
struct rt_lost {
	struct rdma_cm_id *l1, *l2, *c1, *c2;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct completion resolved[2], in_handler, destroying, release;
	struct completion c1_done;
	int c1_event, c1_status, resolve_err;
	bool l1_request;
};

#define RT_LOST_L1	((void *)1)
#define RT_LOST_L2	((void *)2)
#define RT_LOST_C1	((void *)3)
#define RT_LOST_C2	((void *)4)

static struct rt_lost *rt_lost_cur;

static int rt_lost_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rt_lost *t = READ_ONCE(rt_lost_cur);
	int c = id->context == RT_LOST_C1 ? 0 : 1;

	if (!t)
		return 0;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id, 2000)) {
			t->resolve_err = -EIO;
			complete(&t->resolved[c]);
		}
		return 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		complete(&t->resolved[c]);
		return 0;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (id->context == RT_LOST_L1) {
			t->l1_request = true;
			return -ECONNREFUSED;
		}
		/* Hold iw_cm's workqueue while the first listener goes. */
		complete(&t->in_handler);
		wait_for_completion_timeout(&t->destroying, 30 * HZ);
		wait_for_completion_timeout(&t->release, RT_LOST_GRACE);
		return -ECONNREFUSED;	/* rdma_cm destroys the new id */
	default:
		break;
	}
	if (id->context == RT_LOST_C1 && ev->event != RDMA_CM_EVENT_DISCONNECTED) {
		t->c1_event = ev->event;
		t->c1_status = ev->status;
		complete(&t->c1_done);
	} else if (ev->event == RDMA_CM_EVENT_ADDR_ERROR ||
		   ev->event == RDMA_CM_EVENT_ROUTE_ERROR) {
		t->resolve_err = -EHOSTUNREACH;
		complete(&t->resolved[c]);
	}
	return 0;
}

/* A new id of the case, and addr:@lport in @sin. */
static struct rdma_cm_id *rt_lost_id(void *ctx, int lport,
				     struct sockaddr_in *sin)
{
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = in_aton(addr);
	sin->sin_port = htons(lport);
	return rdma_create_id(&init_net, rt_lost_handler, ctx, RDMA_PS_TCP,
			      IB_QPT_RC);
}

static struct rdma_cm_id *rt_lost_listen(void *ctx, int lport)
{
	struct sockaddr_in sin;
	struct rdma_cm_id *id;
	int ret;

	id = rt_lost_id(ctx, lport, &sin);
	if (IS_ERR(id))
		return id;
	ret = rdma_bind_addr(id, (struct sockaddr *)&sin);
	if (!ret)
		ret = rdma_listen(id, 4);
	if (ret) {
		rdma_destroy_id(id);
		return ERR_PTR(ret);
	}
	return id;
}

/* A client with a QP, routed to addr:@lport and connecting. */
static struct rdma_cm_id *rt_lost_connect(struct rt_lost *t, void *ctx,
					  int lport)
{
	struct rdma_conn_param param = {
		.initiator_depth = 1,
		.responder_resources = 1,
	};
	struct completion *resolved = &t->resolved[ctx == RT_LOST_C1 ? 0 : 1];
	struct rdma_cm_id *id;
	struct sockaddr_in dst;
	int ret;

	id = rt_lost_id(ctx, lport, &dst);
	if (IS_ERR(id))
		return id;
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	if (!ret && !wait_for_completion_timeout(resolved, RT_TIMEOUT))
		ret = -ETIMEDOUT;
	if (!ret)
		ret = t->resolve_err;
	if (!ret && !t->pd) {
		t->pd = ib_alloc_pd(id->device, 0);
		t->cq = ib_alloc_cq(id->device, NULL, 16, 0, IB_POLL_DIRECT);
		if (IS_ERR(t->pd) || IS_ERR(t->cq))
			ret = -ENOMEM;
	}
	if (!ret)
		ret = rt_make_qp(id, t->pd, t->cq);
	if (!ret)
		ret = rdma_connect(id, &param);
	if (ret) {
		if (id->qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
		return ERR_PTR(ret);
	}
	return id;
}

static void rt_lost_request(void)
{
	const char *name = "lost_connect_request";
	unsigned long waited;
	struct rt_lost *t;
	char why[120];
	bool leak = false;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		rt_result(name, 1, "no memory");
		return;
	}
	init_completion(&t->resolved[0]);
	init_completion(&t->resolved[1]);
	init_completion(&t->in_handler);
	init_completion(&t->destroying);
	init_completion(&t->release);
	init_completion(&t->c1_done);
	WRITE_ONCE(rt_lost_cur, t);

	t->l1 = rt_lost_listen(RT_LOST_L1, port + 1);
	t->l2 = rt_lost_listen(RT_LOST_L2, port + 2);
	if (IS_ERR(t->l1) || IS_ERR(t->l2)) {
		rt_result(name, 1, "cannot listen");
		goto out;
	}
	/* c2's request holds iw_cm's workqueue in our handler. */
	t->c2 = rt_lost_connect(t, RT_LOST_C2, port + 2);
	if (IS_ERR(t->c2)) {
		rt_result(name, 1, "cannot connect to the second listener");
		goto out;
	}
	if (!wait_for_completion_timeout(&t->in_handler, RT_TIMEOUT)) {
		rt_result(name, 1, "the second listener got no request");
		goto out;
	}
	/* c1's request is queued behind it; its listener goes away. */
	t->c1 = rt_lost_connect(t, RT_LOST_C1, port + 1);
	complete(&t->destroying);
	rdma_destroy_id(t->l1);
	t->l1 = NULL;
	complete(&t->release);
	if (IS_ERR(t->c1)) {
		rt_result(name, 1, "cannot connect to the first listener");
		goto out;
	}
	waited = jiffies;
	if (!wait_for_completion_timeout(&t->c1_done, lost_wait_ms * HZ / 1000)) {
		/* Its QP cannot be destroyed while the request holds it. */
		snprintf(why, sizeof(why),
			 "the request was never answered in %u ms (client leaked)",
			 lost_wait_ms);
		rt_result(name, 1, why);
		leak = true;
		goto out;
	}
	waited = jiffies_to_msecs(jiffies - waited);
	snprintf(why, sizeof(why), "%s (%d) after %lu ms%s",
		 rdma_event_msg(t->c1_event), t->c1_status, waited,
		 t->l1_request ? ", but the request was not dropped" : "");
	rt_result(name, t->c1_event != RDMA_CM_EVENT_UNREACHABLE ||
		  t->c1_status != -ETIMEDOUT || t->l1_request, why);
out:
	complete(&t->destroying);
	complete(&t->release);
	if (!IS_ERR_OR_NULL(t->c1) && !leak) {
		rdma_destroy_qp(t->c1);
		rdma_destroy_id(t->c1);
	}
	if (!IS_ERR_OR_NULL(t->c2)) {
		rdma_destroy_qp(t->c2);
		rdma_destroy_id(t->c2);
	}
	if (!IS_ERR_OR_NULL(t->l1))
		rdma_destroy_id(t->l1);
	if (!IS_ERR_OR_NULL(t->l2))
		rdma_destroy_id(t->l2);
	if (leak)
		return;
	WRITE_ONCE(rt_lost_cur, NULL);
	if (!IS_ERR_OR_NULL(t->cq))
		ib_free_cq(t->cq);
	if (!IS_ERR_OR_NULL(t->pd))
		ib_dealloc_pd(t->pd);
	kfree(t);
}

/*
 * Receives complete in the order they were posted, even when the QP's
 * flush races a SEND of the peer that took an earlier receive: after
 * the drain marker (a receive posted in the error state) no completion
 * may come, or a ULP that frees its buffers after ib_drain_rq() would
 * get one for freed memory.
 */
#define RT_ORDER_ROUNDS	10
#define RT_ORDER_RECVS	8
#define RT_ORDER_MARKER	0xd7a1

struct rt_sender {
	struct rt_pair *p;
	void *buf;
	bool stop;
	int sent;
};

/* SENDs, one at a time, until one fails (the connection went down). */
static int rt_order_send(void *arg)
{
	struct rt_sender *s = arg;
	struct ib_device *dev = s->p->cli->device;
	struct ib_sge sge = {
		.addr = ib_dma_map_single(dev, s->buf, 16, DMA_TO_DEVICE),
		.length = 16,
		.lkey = s->p->cpd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ib_wc wc;

	while (!READ_ONCE(s->stop)) {
		if (ib_post_send(s->p->cli->qp, &wr, NULL) ||
		    rt_poll(s->p->ccq, &wc) || wc.status != IB_WC_SUCCESS)
			break;
		s->sent++;
	}
	ib_dma_unmap_single(dev, sge.addr, 16, DMA_TO_DEVICE);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ / 100);
	return 0;
}

/* One round; on a failure, @why says what was wrong. */
static void rt_order_round(unsigned int delay_us, char *why, size_t len)
{
	struct ib_qp_attr qa = { .qp_state = IB_QPS_ERR };
	struct ib_recv_wr rwr = {}, marker = { .wr_id = RT_ORDER_MARKER };
	struct rt_sender s = {};
	struct task_struct *t;
	struct ib_device *dev;
	struct rt_pair *p;
	struct ib_sge sge;
	struct ib_wc wc;
	u64 base, last = 0;
	u8 *rbuf;
	int i, n = 0;

	p = rt_pair_create();
	if (IS_ERR(p)) {
		snprintf(why, len, "no pair");
		return;
	}
	dev = p->srv->device;
	rbuf = kzalloc(RT_ORDER_RECVS * 64, GFP_KERNEL);
	s.buf = kzalloc(16, GFP_KERNEL);
	if (!rbuf || !s.buf) {
		snprintf(why, len, "no memory");
		goto out;
	}
	base = ib_dma_map_single(dev, rbuf, RT_ORDER_RECVS * 64,
				 DMA_FROM_DEVICE);
	sge.length = 64;
	sge.lkey = p->spd->local_dma_lkey;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	for (i = 0; i < RT_ORDER_RECVS; i++) {
		rwr.wr_id = i + 1;
		sge.addr = base + 64 * i;
		if (ib_post_recv(p->srv->qp, &rwr, NULL)) {
			snprintf(why, len, "post_recv %d failed", i);
			goto unmap;
		}
	}
	s.p = p;
	t = kthread_run(rt_order_send, &s, "rt_order_send");
	if (IS_ERR(t)) {
		snprintf(why, len, "no sender thread");
		goto unmap;
	}
	udelay(delay_us);
	ib_modify_qp(p->srv->qp, &qa, IB_QP_STATE);
	if (ib_post_recv(p->srv->qp, &marker, NULL))
		snprintf(why, len, "marker not posted");
	while (!why[0]) {
		if (rt_poll(p->scq, &wc)) {
			snprintf(why, len, "no marker after %d completions", n);
			break;
		}
		n++;
		if (wc.wr_id == RT_ORDER_MARKER)
			break;
		if (wc.wr_id <= last || wc.wr_id > RT_ORDER_RECVS)
			snprintf(why, len, "receive %llu completed after %llu",
				 wc.wr_id, last);
		last = wc.wr_id;
	}
	WRITE_ONCE(s.stop, true);
	kthread_stop(t);
	/* Nothing may follow the marker. */
	msleep(20);
	if (!why[0] && ib_poll_cq(p->scq, 1, &wc) == 1)
		snprintf(why, len, "receive %llu completed after the marker",
			 wc.wr_id);
unmap:
	ib_dma_unmap_single(dev, base, RT_ORDER_RECVS * 64, DMA_FROM_DEVICE);
out:
	kfree(s.buf);
	kfree(rbuf);
	rt_pair_destroy(p);
}

static void rt_recv_order(void)
{
	char why[96] = "";
	unsigned int r;

	for (r = 0; r < RT_ORDER_ROUNDS && !why[0]; r++)
		rt_order_round(r * 50, why, sizeof(why));
	rt_result("recv_order_after_flush", !!why[0], why[0] ? why : NULL);
}

static DECLARE_COMPLETION(rt_cq_err);

static void rt_cq_event(struct ib_event *ev, void *ctx)
{
	if (ev->event == IB_EVENT_CQ_ERR)
		complete(&rt_cq_err);
}

/* Three flushed sends into a one-entry CQ: one kept, CQ_ERR raised. */
static void rt_cq_overflow(void)
{
	struct ib_cq_init_attr ca = { .cqe = 1 };
	struct ib_qp_init_attr attr = {
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ib_qp_attr qa = { .qp_state = IB_QPS_ERR };
	struct ib_send_wr swr[3] = {};
	struct ib_pd *pd = NULL;
	struct ib_cq *cq = NULL, *rcq = NULL;
	struct ib_qp *qp = NULL;
	struct ib_wc wc[4];
	struct rt_pair *p;
	int ret, n, i;
	char why[96];

	p = rt_pair_create();
	if (IS_ERR(p)) {
		rt_result("cq_overflow", 1, "no device");
		return;
	}
	reinit_completion(&rt_cq_err);
	pd = ib_alloc_pd(p->cli->device, 0);
	cq = ib_create_cq(p->cli->device, NULL, rt_cq_event, NULL, &ca);
	rcq = ib_alloc_cq(p->cli->device, NULL, 4, 0, IB_POLL_DIRECT);
	if (IS_ERR(pd) || IS_ERR(cq) || IS_ERR(rcq)) {
		rt_result("cq_overflow", 1, "no PD/CQ");
		goto out;
	}
	attr.send_cq = cq;
	attr.recv_cq = rcq;
	qp = ib_create_qp(pd, &attr);
	if (IS_ERR(qp)) {
		rt_result("cq_overflow", 1, "ib_create_qp failed");
		qp = NULL;
		goto out;
	}
	ib_modify_qp(qp, &qa, IB_QP_STATE);
	for (i = 0; i < 3; i++) {
		swr[i].wr_id = 10 + i;
		swr[i].opcode = IB_WR_SEND;
		swr[i].next = i < 2 ? &swr[i + 1] : NULL;
	}
	ret = ib_post_send(qp, swr, NULL);
	if (ret) {
		snprintf(why, sizeof(why), "post in ERR failed: %d", ret);
		rt_result("cq_overflow", 1, why);
		goto out;
	}
	if (!wait_for_completion_timeout(&rt_cq_err, RT_TIMEOUT)) {
		rt_result("cq_overflow", 1, "no IB_EVENT_CQ_ERR");
		goto out;
	}
	n = ib_poll_cq(cq, 4, wc);
	if (n != 1 || wc[0].status != IB_WC_WR_FLUSH_ERR || wc[0].wr_id != 10) {
		snprintf(why, sizeof(why), "polled %d, first %s wr_id %llu", n,
			 n > 0 ? ib_wc_status_msg(wc[0].status) : "-",
			 n > 0 ? wc[0].wr_id : 0ULL);
		rt_result("cq_overflow", 1, why);
	} else {
		rt_result("cq_overflow", 0, NULL);
	}
out:
	if (qp)
		ib_destroy_qp(qp);
	if (!IS_ERR_OR_NULL(rcq))
		ib_free_cq(rcq);
	if (!IS_ERR_OR_NULL(cq))
		ib_destroy_cq(cq);
	if (!IS_ERR_OR_NULL(pd))
		ib_dealloc_pd(pd);
	rt_pair_destroy(p);
}

/*
 * The client on the device of addr2, the server on that of addr: a WRITE
 * and a READ between QPs of two ropcie devices.
 */
static void rt_cross_device(void)
{
	int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		     IB_ACCESS_REMOTE_READ;
	enum ib_wc_status st = IB_WC_GENERAL_ERR;
	const char *name = "cross_device_write_read";
	struct scatterlist sg;
	u8 *sbuf, *cbuf;
	struct rt_pair *p;
	struct ib_mr *mr;
	char why[128];
	int ret;

	if (!addr2[0]) {
		rt_result(name, 0, "skipped: no addr2");
		return;
	}
	sbuf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	cbuf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!sbuf || !cbuf) {
		rt_result(name, 1, "no memory");
		goto out_mem;
	}
	memset(cbuf, RT_DATA, PAGE_SIZE);
	p = rt_case_pair(name, addr2);
	if (!p)
		goto out_mem;
	if (p->cli->device == p->srv->device) {
		snprintf(why, sizeof(why), "both ends on %s",
			 dev_name(&p->cli->device->dev));
		rt_result(name, 1, why);
		goto out_pair;
	}
	mr = rt_reg(p, sbuf, PAGE_SIZE, access, &sg);
	if (IS_ERR(mr)) {
		rt_result(name, 1, "REG_MR failed");
		goto out_pair;
	}
	ret = rt_rdma(p, IB_WR_RDMA_WRITE, cbuf, PAGE_SIZE, mr->iova,
		      mr->rkey, &st);
	if (!ret && st == IB_WC_SUCCESS && rt_all(sbuf, PAGE_SIZE, RT_DATA)) {
		memset(cbuf, 0, PAGE_SIZE);
		ret = rt_rdma(p, IB_WR_RDMA_READ, cbuf, PAGE_SIZE, mr->iova,
			      mr->rkey, &st);
	}
	snprintf(why, sizeof(why), "%s -> %s, status %s, ret %d",
		 dev_name(&p->cli->device->dev), dev_name(&p->srv->device->dev),
		 ib_wc_status_msg(st), ret);
	rt_result(name, ret || st != IB_WC_SUCCESS ||
		  !rt_all(cbuf, PAGE_SIZE, RT_DATA), why);
	ib_dereg_mr(mr);
	ib_dma_unmap_sg(p->srv->device, &sg, 1, DMA_BIDIRECTIONAL);
out_pair:
	rt_pair_destroy(p);
out_mem:
	kfree(cbuf);
	kfree(sbuf);
}

/* --- ring stress on two CPUs ------------------------------------------ */

#define RS_ITEMS	1048576U
#define RS_SIZE		256

struct rt_stress {
	struct ropcie_ring ring;
	wait_queue_head_t not_empty, not_full;
	struct completion done[2];
	u64 received, bad;
	int cpu[2];
	int err;
};

static int rt_stress_producer(void *arg)
{
	struct rt_stress *s = arg;
	u64 i;

	s->cpu[0] = raw_smp_processor_id();
	for (i = 0; i < RS_ITEMS && !s->err; i++) {
		u64 *slot;

		while (!(slot = ropcie_ring_prod_slot(&s->ring))) {
			/* Full: make sure the consumer runs, then sleep. */
			wake_up(&s->not_empty);
			if (!wait_event_timeout(s->not_full,
						!ropcie_ring_full(&s->ring),
						RT_TIMEOUT)) {
				s->err = -ETIMEDOUT;
				goto out;
			}
		}
		*slot = i;
		ropcie_ring_produce(&s->ring);
		/*
		 * Wake a sleeping consumer once half a ring is waiting, not
		 * per item: under TCG a wake-up per item costs more than the
		 * ring. A full ring and the end wake it in any case.
		 */
		if (ropcie_ring_count(&s->ring) >= RS_SIZE / 2 &&
		    wq_has_sleeper(&s->not_empty))
			wake_up(&s->not_empty);
	}
out:
	wake_up(&s->not_empty);
	complete(&s->done[0]);
	return 0;
}

static int rt_stress_consumer(void *arg)
{
	struct rt_stress *s = arg;
	u64 expect = 0;

	s->cpu[1] = raw_smp_processor_id();
	while (expect < RS_ITEMS && !s->err) {
		u64 *slot = ropcie_ring_cons_slot(&s->ring);

		if (!slot) {
			/* Empty: make sure the producer runs, then sleep. */
			wake_up(&s->not_full);
			if (!wait_event_timeout(s->not_empty,
						!ropcie_ring_empty(&s->ring),
						RT_TIMEOUT))
				s->err = -ETIMEDOUT;
			continue;
		}
		if (READ_ONCE(*slot) != expect)
			s->bad++;
		expect++;
		ropcie_ring_consume(&s->ring);
		if (ropcie_ring_count(&s->ring) <= RS_SIZE / 2 &&
		    wq_has_sleeper(&s->not_full))
			wake_up(&s->not_full);
	}
	wake_up(&s->not_full);
	s->received = expect;
	complete(&s->done[1]);
	return 0;
}

static void rt_ring_stress(void)
{
	struct task_struct *t[2];
	struct rt_stress *s;
	char why[160];
	ktime_t start;
	u64 ns;
	int i;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s || ropcie_ring_init_at(&s->ring, RS_SIZE, sizeof(u64),
				      U32_MAX - 4096, GFP_KERNEL)) {
		kfree(s);
		rt_result("ring_stress_smp", 1, "no memory");
		return;
	}
	init_waitqueue_head(&s->not_empty);
	init_waitqueue_head(&s->not_full);
	init_completion(&s->done[0]);
	init_completion(&s->done[1]);
	t[0] = kthread_create(rt_stress_producer, s, "ropcie-rs-p");
	t[1] = kthread_create(rt_stress_consumer, s, "ropcie-rs-c");
	if (IS_ERR(t[0]) || IS_ERR(t[1])) {
		for (i = 0; i < 2; i++)
			if (!IS_ERR(t[i]))
				kthread_stop(t[i]);
		ropcie_ring_free(&s->ring);
		kfree(s);
		rt_result("ring_stress_smp", 1, "kthread_create failed");
		return;
	}
	/* Two CPUs when there are two: the ordering is what is tested. */
	if (num_online_cpus() > 1) {
		kthread_bind(t[0], cpumask_first(cpu_online_mask));
		kthread_bind(t[1], cpumask_next(cpumask_first(cpu_online_mask),
						cpu_online_mask));
	}
	start = ktime_get();
	wake_up_process(t[1]);
	wake_up_process(t[0]);
	wait_for_completion(&s->done[0]);
	wait_for_completion(&s->done[1]);
	ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	snprintf(why, sizeof(why),
		 "%llu/%u items, %llu out of order, err %d, cpus %d/%d, %llu ns/item",
		 s->received, RS_ITEMS, s->bad, s->err, s->cpu[0], s->cpu[1],
		 ns / RS_ITEMS);
	if (s->received != RS_ITEMS || s->bad || s->err ||
	    !ropcie_ring_empty(&s->ring) ||
	    s->ring.head != (u32)(U32_MAX - 4096 + RS_ITEMS) ||
	    (num_online_cpus() > 1 && s->cpu[0] == s->cpu[1]))
		rt_result("ring_stress_smp", 1, why);
	else
		rt_result("ring_stress_smp", 0, why);
	ropcie_ring_free(&s->ring);
	kfree(s);
}

static int __init rt_init(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	enum rt_kind k;
	int ret;

	if (!strcmp(role, "target"))
		return rt_remote_target_start(addr, port);
	if (!strcmp(role, "initiator")) {
		rt_remote_initiator(addr, port);
		pr_info("%d cases, %d failed\n", rt_run, rt_failed);
		return 0;
	}
	if (!strcmp(role, "memcpy")) {
		rt_memcpy_bench();
		return 0;
	}
	if (!strcmp(role, "floor")) {
		rt_floor_bench();
		return 0;
	}
	if (!strcmp(role, "hold"))
		return rt_hold_start(addr, port);
	if (role[0])
		return -EINVAL;
	rt_listen = rdma_create_id(&init_net, rt_cm_handler, NULL, RDMA_PS_TCP,
				   IB_QPT_RC);
	if (IS_ERR(rt_listen))
		return PTR_ERR(rt_listen);
	sin.sin_addr.s_addr = in_aton(addr);
	sin.sin_port = htons(port);
	ret = rdma_bind_addr(rt_listen, (struct sockaddr *)&sin);
	if (!ret)
		ret = rdma_listen(rt_listen, 4);
	if (ret) {
		pr_err("cannot listen on %s:%d: %d\n", addr, port, ret);
		rdma_destroy_id(rt_listen);
		return ret;
	}
	for (k = RT_OK; k < RT_NKINDS; k++)
		rt_remote_case(k);
	rt_wrong_state();
	rt_inline_refused();
	rt_revoke(RT_REVOKE_INV);
	rt_revoke(RT_REVOKE_ERR);
	rt_reg_after_dereg();
	rt_cq_overflow();
	rt_lost_request();
	rt_recv_order();
	rt_cross_device();
	rt_ring_stress();
	rdma_destroy_id(rt_listen);
	pr_info("%d cases, %d failed\n", rt_run, rt_failed);
	return 0;
}

static void __exit rt_exit(void)
{
	if (!strcmp(role, "target"))
		rt_remote_target_stop();
	if (!strcmp(role, "hold"))
		rt_hold_stop();
}

module_init(rt_init);
module_exit(rt_exit);

MODULE_DESCRIPTION("Negative verbs tests of ropcie (test bed only)");
MODULE_LICENSE("Dual BSD/GPL");
