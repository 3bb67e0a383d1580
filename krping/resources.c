// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A run's resources: its PD, CQ, QP, buffers and MRs, created once the
 * connection's id has a device (krping_setup()) and released in order
 * (krping_teardown()), and the device's events that end the run.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/rcupdate.h>
#include <linux/slab.h>

#include "run.h"

/*
 * The port under the run went down (or the device died): end the run.
 * A side that only waits for its peer's next message would not learn it
 * otherwise, as no CM message reaches it either.
 */
static void krping_port_event(struct ib_event_handler *handler,
			      struct ib_event *ev)
{
	struct krping_run *run = container_of(handler, struct krping_run,
					      conn.port_events);

	switch (ev->event) {
	case IB_EVENT_PORT_ERR:
		if (ev->element.port_num == run->conn.port_num)
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
 * The QP failed under the run (its connection lost, a request it made or
 * an access it received refused): a hard error, so that the flush that
 * follows is not taken for a peer that closed cleanly between
 * iterations. Called in any context.
 */
static void krping_qp_event(struct ib_event *ev, void *context)
{
	struct krping_run *run = context;

	pr_debug("%s: %s\n", krping_run_name(run), ib_event_msg(ev->event));
	switch (ev->event) {
	case IB_EVENT_QP_FATAL:
		krping_fail(run, -ECONNRESET);
		break;
	case IB_EVENT_QP_REQ_ERR:
		krping_fail(run, -EREMOTEIO);
		break;
	case IB_EVENT_QP_ACCESS_ERR:
		krping_fail(run, -EACCES);
		break;
	default:
		break;
	}
}

/**
 * krping_buf_alloc() - allocate and DMA-map a buffer of the run
 * @run: the run, its PD allocated
 * @b: the buffer, empty
 * @size: its size
 * @dir: the direction of its mapping
 *
 * Return: 0 or -ENOMEM, @b left empty.
 */
int krping_buf_alloc(struct krping_run *run, struct krping_buf *b,
		     u32 size, enum dma_data_direction dir)
{
	struct ib_device *dev = run->conn.pd->device;

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

/**
 * krping_buf_free() - unmap and free a buffer of krping_buf_alloc()
 * @run: the run, its PD still allocated
 * @b: the buffer; an empty one is left alone
 */
void krping_buf_free(struct krping_run *run, struct krping_buf *b)
{
	if (!b->addr)
		return;
	ib_dma_unmap_single(run->conn.pd->device, b->dma, b->size, b->dir);
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

	m->page_size = krping_mr_page_size(run->conn.pd->device, b, &pages);
	if (!m->page_size)
		return -EMSGSIZE;
	m->mr = ib_alloc_mr(run->conn.pd, IB_MR_TYPE_MEM_REG, pages);
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
	return read && rdma_protocol_iwarp(run->conn.conn_id->device,
					   run->conn.conn_id->port_num);
}

/* Queues, buffers and registrations of a run, on @id's device. */
int krping_setup(struct krping_run *run, struct rdma_cm_id *id)
{
	const struct krping_options *o = run->opts;
	bool client = o->role == KRPING_ROLE_CLIENT;
	bool bench = o->test != KRPING_TEST_PING;
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr qp_attr = {};
	u32 data_recvs;
	int ret;

	run->conn.conn_id = id;
	krping_session_set_device(run->sess, dev);

	run->conn.port_num = id->port_num;
	/*
	 * No keepalive on iWARP for now: siw completed the zero-length READ
	 * probe of a bw server with a local length error while the client's
	 * WRITEs streamed in, which broke a healthy connection.
	 */
	if (rdma_protocol_iwarp(dev, id->port_num))
		run->wait.peer_timeout = 0;
	INIT_IB_EVENT_HANDLER(&run->conn.port_events, dev, krping_port_event);
	ib_register_event_handler(&run->conn.port_events);

	if (o->read_inv && !rdma_cap_read_inv(dev, id->port_num))
		return -EOPNOTSUPP;

	run->conn.pd = ib_alloc_pd(dev, o->mem_mode == KRPING_MEM_DMA ?
				   IB_PD_UNSAFE_GLOBAL_RKEY : 0);
	if (IS_ERR(run->conn.pd)) {
		ret = PTR_ERR(run->conn.pd);
		run->conn.pd = NULL;
		return ret;
	}

	/*
	 * Room for a full send queue, the keepalive probe, the receive,
	 * an sbw server's data receives and both drain WRs.
	 */
	run->wait.poll = o->poll;
	ret = krping_bench_send_set_depth(run, &dev->attrs);
	if (ret < 0)
		return ret;
	data_recvs = ret;
	run->conn.cq = ib_alloc_cq(dev, run, o->txdepth + KRPING_RECV_DEPTH +
				   4 + data_recvs, 0,
				   o->poll ? IB_POLL_DIRECT : IB_POLL_SOFTIRQ);
	if (IS_ERR(run->conn.cq)) {
		ret = PTR_ERR(run->conn.cq);
		run->conn.cq = NULL;
		return ret;
	}

	qp_attr.send_cq = run->conn.cq;
	qp_attr.recv_cq = run->conn.cq;
	qp_attr.qp_type = IB_QPT_RC;
	qp_attr.event_handler = krping_qp_event;
	qp_attr.qp_context = run;
	qp_attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	/*
	 * One extra slot on each queue for ib_drain_qp(), and one on the
	 * send queue for the keepalive probe.
	 */
	qp_attr.cap.max_send_wr = o->txdepth + 2;
	qp_attr.cap.max_recv_wr = KRPING_RECV_DEPTH + 1 + data_recvs;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	ret = rdma_create_qp(id, run->conn.pd, &qp_attr);
	if (ret)
		return ret;
	run->conn.qp = id->qp;

	ret = krping_buf_alloc(run, &run->io.recv_buf, KRPING_MSG_SIZE,
			       DMA_FROM_DEVICE);
	if (!ret)
		ret = krping_buf_alloc(run, &run->io.send_buf, KRPING_MSG_SIZE,
				       DMA_TO_DEVICE);
	/* An sbw client's sink takes the server's grants too. */
	if (!ret)
		ret = krping_buf_alloc(run, &run->io.rdma_buf,
				       o->test == KRPING_TEST_SBW ?
				       max_t(u32, o->size, sizeof(__be64)) :
				       o->size, DMA_BIDIRECTIONAL);
	if (!ret)
		ret = krping_bench_send_alloc(run);
	if (!ret && (client || bench))
		ret = krping_buf_alloc(run, &run->io.start_buf, o->size,
				       DMA_BIDIRECTIONAL);
	if (ret)
		return ret;

	if (client || bench) {
		if (o->mem_mode != KRPING_MEM_REG)
			return 0;
		ret = krping_mr_alloc(run, &run->io.start_mr,
				      &run->io.start_buf);
		if (!ret)
			ret = krping_mr_alloc(run, &run->io.rdma_mr,
					      &run->io.rdma_buf);
	} else if (krping_server_registers(run, true)) {
		ret = krping_mr_alloc(run, &run->io.rdma_mr, &run->io.rdma_buf);
	}
	return ret;
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
	bool had_qp = run->conn.qp;

	if (run->conn.port_events.device)
		ib_unregister_event_handler(&run->conn.port_events);
	if (server && run->conn.cm_id) {
		krping_destroy_id(run->conn.cm_id);
		run->conn.cm_id = NULL;
	}
	/* The group's listener hands this run no connection any more. */
	if (server && run->grp) {
		spin_lock(&run->grp->lock);
		run->closed = true;
		spin_unlock(&run->grp->lock);
	}
	/* No handler runs any more that could set it. */
	child = READ_ONCE(run->conn.child);

	if (run->conn.qp) {
		rdma_disconnect(run->conn.conn_id);
		ib_drain_qp(run->conn.qp);
		rdma_destroy_qp(run->conn.conn_id);
		run->conn.qp = NULL;
	}
	krping_bench_fr_release(run);
	if (run->io.start_mr.mr)
		ib_dereg_mr(run->io.start_mr.mr);
	if (run->io.rdma_mr.mr)
		ib_dereg_mr(run->io.rdma_mr.mr);
	if (run->conn.pd) {
		krping_buf_free(run, &run->io.recv_buf);
		krping_buf_free(run, &run->io.send_buf);
		krping_buf_free(run, &run->io.start_buf);
		krping_buf_free(run, &run->io.rdma_buf);
		krping_bench_send_free(run);
	}
	if (run->conn.cq)
		krping_free_cq(run->conn.cq, had_qp);
	if (run->conn.pd)
		ib_dealloc_pd(run->conn.pd);
	if (child)
		krping_destroy_id(child);
	if (run->conn.cm_id)
		krping_destroy_id(run->conn.cm_id);
}

/* Called once per run before anything is posted. */
void krping_run_init(struct krping_run *run, struct krping_session *sess,
		     const struct krping_options *opts)
{
	run->sess = sess;
	run->opts = opts;
	run->stats = &sess->stats[0];
	krping_wait_init(run);
	krping_post_init(run);
}
