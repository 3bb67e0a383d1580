// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A run's work requests: posting receives, SENDs, registrations and
 * RDMA operations, and the completion handlers that count them and wake
 * the run's thread.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/scatterlist.h>
#include <linux/sizes.h>

#include "run.h"

static int krping_wc_errno(enum ib_wc_status status)
{
	switch (status) {
	case IB_WC_REM_ACCESS_ERR:
	case IB_WC_LOC_PROT_ERR:
	case IB_WC_MW_BIND_ERR:
		return -EACCES;
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IB_WC_LOC_LEN_ERR:
		return -EMSGSIZE;
	case IB_WC_REM_INV_REQ_ERR:
		return -EREMOTEIO;
	default:
		return -EIO;
	}
}

/*
 * Check a completion of @wr; record what a failed one means for the run,
 * and the first that failed for the session's failed_wr and wc_status.
 */
bool krping_wc_ok(struct krping_run *run, struct ib_wc *wc, enum krping_wr wr)
{
	if (likely(wc->status == IB_WC_SUCCESS))
		return true;
	if (wc->status == IB_WC_WR_FLUSH_ERR) {
		WRITE_ONCE(run->wait.flushed, true);
		krping_wake(run);
	} else {
		pr_debug("%s: %s failed: %s (vendor error %#x)\n",
			 krping_run_name(run), krping_wr_name(wr),
			 ib_wc_status_msg(wc->status), wc->vendor_err);
		krping_session_wc_failed(run->sess, wr, wc->status);
		krping_fail(run, krping_wc_errno(wc->status));
	}
	return false;
}

/* Count the closing SEND as sent, once: on its ACK or on the answer. */
static void krping_count_fin(struct krping_run *run)
{
	struct krping_stats *st = run->stats;

	if (atomic_xchg(&run->bench.fin_counted, 1))
		return;
	atomic64_inc(&st->send_msgs);
	if (!run->bench.fin_empty)
		atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
}

static void krping_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, KRPING_WR_RECV))
		return;
	if (wc->byte_len != KRPING_MSG_SIZE) {
		krping_fail(run, -EPROTO);
		return;
	}
	ib_dma_sync_single_for_cpu(run->conn.pd->device, run->io.recv_buf.dma,
				   KRPING_MSG_SIZE, DMA_FROM_DEVICE);
	memcpy(&run->io.rx, run->io.recv_buf.addr, KRPING_MSG_SIZE);
	run->io.rx_inv_rkey = wc->wc_flags & IB_WC_WITH_INVALIDATE ?
			   wc->ex.invalidate_rkey : 0;
	atomic64_inc(&st->recv_msgs);
	atomic64_add(wc->byte_len, &st->recv_bytes);
	/* Once the closing SEND is out, the only message left is the answer. */
	if (READ_ONCE(run->bench.fin_posted))
		krping_count_fin(run);
	krping_heard(run);
	krping_count_inc(&run->counts.recv);
	krping_wake(run);
}

/*
 * The completion of a benchmark client's closing SEND. The server answers
 * it only once it has arrived, then disconnects: when the ACK of our SEND
 * was lost, its retry meets a QP that is gone, and the SEND fails or is
 * flushed after the answer has proven its delivery (1 run in about 20 over
 * a link losing 5 % of its frames). Such a failure is no failure.
 */
static void krping_fin_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS && atomic_read(&run->bench.fin_counted))
		return;
	if (!krping_wc_ok(run, wc, KRPING_WR_SEND))
		return;
	krping_count_fin(run);
	krping_heard(run);
	krping_wake(run);
}

static void krping_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, KRPING_WR_SEND))
		return;
	atomic64_inc(&st->send_msgs);
	atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
	krping_heard(run);
	krping_count_inc(&run->counts.send);
	krping_wake(run);
}

static void krping_rdma_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct krping_run *run = cq->cq_context;
	struct krping_stats *st = run->stats;

	if (!krping_wc_ok(run, wc, run->io.rdma_opcode == IB_WR_RDMA_WRITE ?
			  KRPING_WR_RDMA_WRITE : KRPING_WR_RDMA_READ))
		return;
	if (wc->opcode == IB_WC_RDMA_READ) {
		atomic64_inc(&st->read_msgs);
		atomic64_add(run->io.rdma_len, &st->read_bytes);
	} else {
		atomic64_inc(&st->write_msgs);
		atomic64_add(run->io.rdma_len, &st->write_bytes);
	}
	krping_heard(run);
	krping_count_inc(&run->counts.rdma);
	krping_wake(run);
}

static void krping_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	krping_wc_ok(cq->cq_context, wc, KRPING_WR_REG_MR);
}

static void krping_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	krping_wc_ok(cq->cq_context, wc, KRPING_WR_LOCAL_INV);
}

int krping_post_recv(struct krping_run *run)
{
	struct ib_sge sge = {
		.addr = run->io.recv_buf.dma,
		.length = KRPING_MSG_SIZE,
		.lkey = run->conn.pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &run->io.recv_cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	ib_dma_sync_single_for_device(run->conn.pd->device,
				      run->io.recv_buf.dma, KRPING_MSG_SIZE,
				      DMA_FROM_DEVICE);
	return ib_post_recv(run->conn.qp, &wr, NULL);
}

/* Post one advertisement, signaled, completing on @cqe. */
static int krping_post_msg(struct krping_run *run, struct ib_cqe *cqe,
			   u64 addr, u32 rkey, u32 size, u32 invalidate_rkey)
{
	struct krping_rdma_info *info = run->io.send_buf.addr;
	struct ib_sge sge = {
		.addr = run->io.send_buf.dma,
		.length = KRPING_MSG_SIZE,
		.lkey = run->conn.pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = invalidate_rkey ? IB_WR_SEND_WITH_INV : IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = invalidate_rkey,
	};

	if (rkey)
		pr_debug("%s: advertises addr %#llx rkey %#x size %u\n",
			 krping_run_name(run), addr, rkey, size);
	info->buf = cpu_to_be64(addr);
	info->rkey = cpu_to_be32(rkey);
	info->size = cpu_to_be32(size);
	ib_dma_sync_single_for_device(run->conn.pd->device,
				      run->io.send_buf.dma, KRPING_MSG_SIZE,
				      DMA_TO_DEVICE);
	return ib_post_send(run->conn.qp, &wr, NULL);
}

/**
 * krping_send_msg() - SEND one advertisement and wait for its completion
 * @run: the run
 * @addr: advertised buffer address
 * @rkey: advertised rkey
 * @size: advertised length
 * @invalidate_rkey: if not 0, SEND_WITH_INV invalidating this rkey
 *
 * Return: 0 or a negative errno (see krping_wait_count()).
 */
int krping_send_msg(struct krping_run *run, u64 addr, u32 rkey, u32 size,
		    u32 invalidate_rkey)
{
	u64 target = krping_read_count(&run->counts.send) + 1;
	int ret;

	ret = krping_post_msg(run, &run->io.send_cqe, addr, rkey, size,
			      invalidate_rkey);
	if (ret)
		return ret;
	return krping_wait_count(run, &run->counts.send, target);
}

/**
 * krping_count_send() - count a SEND whose delivery the caller vouches for
 * @run: the run
 *
 * For a SEND flushed after the peer had it (krping_server_answer()).
 */
void krping_count_send(struct krping_run *run)
{
	struct krping_stats *st = run->stats;

	atomic64_inc(&st->send_msgs);
	atomic64_add(KRPING_MSG_SIZE, &st->send_bytes);
}

/**
 * krping_post_fin() - post a benchmark client's closing SEND
 * @run: the run
 *
 * Does not wait for its completion: the server's answer, which the caller
 * waits for, proves its delivery (krping_fin_done()).
 *
 * Return: 0 or the negative errno of ib_post_send().
 */
int krping_post_fin(struct krping_run *run)
{
	struct ib_send_wr wr = {
		.wr_cqe = &run->bench.fin_cqe,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};

	WRITE_ONCE(run->bench.fin_posted, true);
	/* A timed slat or sbw: into a data receive, told apart by size. */
	if (run->bench.fin_empty)
		return ib_post_send(run->conn.qp, &wr, NULL);
	return krping_post_msg(run, &run->bench.fin_cqe, 0, 0, 0, 0);
}

/*
 * Build [LOCAL_INV +] REG_MR for @m: a still valid registration is
 * invalidated first and the MR gets a new key, so that a peer can never
 * use a stale rkey. Returns the first WR of the chain in @first.
 */
static int krping_build_reg(struct krping_run *run, struct krping_mr *m,
			    int access, struct ib_send_wr *inv,
			    struct ib_reg_wr *reg, struct ib_send_wr **first)
{
	struct scatterlist sg;
	int n;

	*first = &reg->wr;
	if (m->valid) {
		inv->opcode = IB_WR_LOCAL_INV;
		inv->ex.invalidate_rkey = m->mr->rkey;
		inv->wr_cqe = &run->io.inv_cqe;
		inv->send_flags = IB_SEND_SIGNALED;
		inv->next = &reg->wr;
		*first = inv;
	}
	ib_update_fast_reg_key(m->mr, (u8)ib_inc_rkey(m->mr->rkey));

	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = m->buf->dma;
	sg_dma_len(&sg) = m->buf->size;
	n = ib_map_mr_sg(m->mr, &sg, 1, NULL, m->page_size);
	if (n != 1)
		return n < 0 ? n : -EINVAL;
	/*
	 * The peer sees iova: keep only its offset in the first page, not
	 * the kernel address. Not zero-based (ib_map_mr_sg_zbva()): rxe
	 * takes the in-page offset of a registered address from iova.
	 */
	m->mr->iova &= m->page_size - 1;

	reg->wr.opcode = IB_WR_REG_MR;
	reg->wr.wr_cqe = &run->io.reg_cqe;
	reg->wr.send_flags = IB_SEND_SIGNALED;
	reg->mr = m->mr;
	reg->key = m->mr->rkey;
	reg->access = access;
	return 0;
}

/**
 * krping_post_reg() - fast-register the buffer of @m
 * @run: the run
 * @m: the MR and the buffer it covers
 * @access: IB_ACCESS_* rights of the new registration
 *
 * Work on the send queue executes in order, so a SEND posted after this
 * may advertise the new key at once.
 *
 * Return: 0 or a negative errno from mapping or posting.
 */
int krping_post_reg(struct krping_run *run, struct krping_mr *m, int access)
{
	struct ib_send_wr inv = {}, *first;
	struct ib_reg_wr reg = {};
	int ret;

	ret = krping_build_reg(run, m, access, &inv, &reg, &first);
	if (!ret)
		ret = ib_post_send(run->conn.qp, first, NULL);
	if (!ret)
		m->valid = true;
	return ret;
}

/**
 * krping_rdma() - one RDMA READ or WRITE, and wait for its completion
 * @run: the run
 * @opcode: IB_WR_RDMA_READ, IB_WR_RDMA_READ_WITH_INV or IB_WR_RDMA_WRITE
 * @sge: the local side; with @reg its address and lkey are filled in
 * @remote_addr: the peer's buffer
 * @rkey: the peer's key
 * @reg: if not NULL, fast-register this MR first (chained) and use it
 * @reg_access: access rights of that registration
 *
 * READ_WITH_INV invalidates @reg's registration when it completes.
 *
 * Return: 0 or a negative errno.
 */
int krping_rdma(struct krping_run *run, enum ib_wr_opcode opcode,
		struct ib_sge *sge, u64 remote_addr, u32 rkey,
		struct krping_mr *reg, int reg_access)
{
	struct ib_send_wr inv = {}, *first;
	struct ib_reg_wr regwr = {};
	struct ib_rdma_wr wr = {};
	u64 target = krping_read_count(&run->counts.rdma) + 1;
	int ret;

	wr.wr.opcode = opcode;
	wr.wr.wr_cqe = &run->io.rdma_cqe;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.wr.sg_list = sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = remote_addr;
	wr.rkey = rkey;
	first = &wr.wr;

	if (reg) {
		ret = krping_build_reg(run, reg, reg_access, &inv, &regwr,
				       &first);
		if (ret)
			return ret;
		regwr.wr.next = &wr.wr;
		sge->addr = reg->mr->iova;
		sge->lkey = reg->mr->lkey;
		if (opcode == IB_WR_RDMA_READ_WITH_INV)
			wr.wr.ex.invalidate_rkey = reg->mr->lkey;
	}
	run->io.rdma_len = sge->length;
	run->io.rdma_opcode = opcode;

	ret = ib_post_send(run->conn.qp, first, NULL);
	if (ret)
		return ret;
	/* READ_WITH_INV leaves the registration invalid when it is done. */
	if (reg)
		reg->valid = opcode != IB_WR_RDMA_READ_WITH_INV;
	return krping_wait_count(run, &run->counts.rdma, target);
}

/* The completion handlers of the run's own messages (run_init). */
void krping_post_init(struct krping_run *run)
{
	run->io.recv_cqe.done = krping_recv_done;
	run->io.send_cqe.done = krping_send_done;
	run->bench.fin_cqe.done = krping_fin_done;
	run->io.rdma_cqe.done = krping_rdma_done;
	run->io.reg_cqe.done = krping_reg_done;
	run->io.inv_cqe.done = krping_inv_done;
}
