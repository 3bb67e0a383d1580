// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ping-pong test, as rdma-core's rping does it:
 *
 *   client                              server
 *   SEND advertisement of start_buf  -> RDMA READ it into rdma_buf
 *                                    <- SEND go-ahead
 *   SEND advertisement of rdma_buf   -> RDMA WRITE rdma_buf into it
 *                                    <- SEND go-ahead
 *   compare start_buf and rdma_buf (validate)
 *
 * With mem_mode=reg the client fast-registers each buffer before it
 * advertises it (with a new key each time); the server registers its
 * buffer before each READ and WRITE unless local_dma_lkey is set.
 *
 * After its last iteration a krping server with a krping client
 * disconnects first (struct krping_hello); with an rping peer the client
 * disconnects, as rping does.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>
#include <linux/string.h>

#include "run.h"

/* How long the side that ran its count waits for the other to leave. */
#define KRPING_LINGER_TIMEOUT	(30 * HZ)
/* Longest prefix of the ping data that verbose logs. */
#define KRPING_VERBOSE_MAX	64

/*
 * rping's data: "rdma-ping-<n>: " then the printable characters from 'A'
 * to 'z' rotating, starting one further each iteration, NUL last.
 */
static void krping_fill(char *buf, u32 size, u64 iter, char *start)
{
	u32 i;
	int len;
	char c;

	len = snprintf(buf, size, "rdma-ping-%llu: ", iter);
	for (i = min_t(u32, len, size), c = *start; i < size; i++) {
		buf[i] = c;
		if (++c > 'z')
			c = 'A';
	}
	if (++*start > 'z')
		*start = 'A';
	buf[size - 1] = '\0';
}

/*
 * Advertise @b (registered through @m in reg mode) and await the answer;
 * then post the receive for the next one, unless this was the @last: a
 * server that leaves first may have disconnected by then, and siw
 * refuses a post to a closing QP (-ENOTCONN).
 *
 * The @last SEND's ACK can be lost (rxe under 1 % loss): its
 * retransmission then reaches a server that got the SEND, wrote our
 * buffer, had its go-ahead acknowledged and left, and the SEND is flushed
 * here. The go-ahead answers this SEND, so when it has arrived and the
 * server left cleanly, the SEND counts as delivered.
 */
static int krping_advertise(struct krping_run *run, struct krping_buf *b,
			    struct krping_mr *m, int access, bool last)
{
	u64 addr = b->dma;
	u32 rkey = run->conn.pd->unsafe_global_rkey;
	int ret;

	if (run->opts->mem_mode == KRPING_MEM_REG) {
		ret = krping_post_reg(run, m, access);
		if (ret)
			return ret;
		addr = m->mr->iova;
		rkey = m->mr->rkey;
	}
	ret = krping_send_msg(run, addr, rkey, b->size, 0);
	if (ret == -ECONNRESET && last && READ_ONCE(run->wait.peer_left) &&
	    !READ_ONCE(run->wait.error) &&
	    krping_read_count(&run->counts.recv) > run->counts.recv_expected) {
		pr_debug("%s: the server left before the ACK of our last SEND\n",
			 config_item_name(&run->sess->item));
		krping_count_send(run);
		ret = 0;
	}
	if (!ret)
		ret = krping_wait_count(run, &run->counts.recv,
					++run->counts.recv_expected);
	if (ret)
		return ret;
	/* server_inv: the go-ahead already invalidated the key. */
	if (m->mr && run->io.rx_inv_rkey == m->mr->rkey)
		m->valid = false;
	return last ? 0 : krping_post_recv(run);
}

static int krping_client_loop(struct krping_run *run)
{
	const struct krping_options *o = run->opts;
	struct krping_stats *st = run->stats;
	char *src = run->io.start_buf.addr, *dst = run->io.rdma_buf.addr;
	struct ib_device *dev = run->conn.pd->device;
	char start = 'A';
	u64 iter;
	int ret;

	for (iter = 0; !o->count || iter < o->count; iter++) {
		u64 t0 = ktime_get_ns();

		krping_fill(src, o->size, iter, &start);
		/* Anything but the expected data, so that a lost WRITE shows. */
		memset(dst, ~src[0], o->size);
		ib_dma_sync_single_for_device(dev, run->io.start_buf.dma,
					      o->size, DMA_BIDIRECTIONAL);
		ib_dma_sync_single_for_device(dev, run->io.rdma_buf.dma,
					      o->size, DMA_BIDIRECTIONAL);

		ret = krping_advertise(run, &run->io.start_buf,
				       &run->io.start_mr,
				       IB_ACCESS_REMOTE_READ, false);
		if (!ret)
			ret = krping_advertise(run, &run->io.rdma_buf,
					       &run->io.rdma_mr,
					       IB_ACCESS_LOCAL_WRITE |
					       IB_ACCESS_REMOTE_WRITE,
					       o->count && iter + 1 == o->count);
		if (ret)
			return ret;

		ib_dma_sync_single_for_cpu(dev, run->io.rdma_buf.dma, o->size,
					   DMA_BIDIRECTIONAL);
		/* The peer wrote these bytes: escape what is not printable. */
		if (o->verbose)
			pr_info("%s: ping data: %*pE\n",
				config_item_name(&run->sess->item),
				(int)min_t(u32, o->size, KRPING_VERBOSE_MAX),
				dst);
		if (o->validate && memcmp(src, dst, o->size)) {
			pr_debug("%s: iteration %llu: data mismatch\n",
				 config_item_name(&run->sess->item), iter);
			return -EBADMSG;
		}
		krping_lat_add(&run->lat, ktime_get_ns() - t0);
		atomic64_inc(&st->iterations);
	}
	/* A krping server leaves once its last go-ahead has completed. */
	if (run->conn.server_leaves_first && run->conn.peer.count == o->count)
		return krping_wait_disconnect(run, KRPING_LINGER_TIMEOUT);
	return 0;
}

/* Take the client's next advertisement; check it fits our buffer. */
static int krping_server_recv_adv(struct krping_run *run, u64 *addr,
				  u32 *rkey, u32 *len)
{
	int ret;

	ret = krping_wait_count(run, &run->counts.recv,
				++run->counts.recv_expected);
	if (ret)
		return ret;
	*addr = be64_to_cpu(run->io.rx.buf);
	*rkey = be32_to_cpu(run->io.rx.rkey);
	*len = be32_to_cpu(run->io.rx.size);
	if (!*len || *len > run->io.rdma_buf.size)
		return -EMSGSIZE;
	return krping_post_recv(run);
}

/* RDMA READ or WRITE between rdma_buf and the client's buffer. */
static int krping_server_rdma(struct krping_run *run, bool read, u64 addr,
			      u32 rkey, u32 len)
{
	struct ib_sge sge = {
		.addr = run->io.rdma_buf.dma,
		.length = len,
		.lkey = run->conn.pd->local_dma_lkey,
	};
	struct krping_mr *reg = NULL;
	enum ib_wr_opcode opcode = IB_WR_RDMA_WRITE;
	int access = IB_ACCESS_LOCAL_WRITE;

	if (krping_server_registers(run, read))
		reg = &run->io.rdma_mr;
	if (read) {
		opcode = run->opts->read_inv && reg ?
			 IB_WR_RDMA_READ_WITH_INV : IB_WR_RDMA_READ;
		/* iWARP places READ responses into the sink like WRITEs. */
		if (rdma_protocol_iwarp(run->conn.pd->device,
					run->conn.conn_id->port_num))
			access |= IB_ACCESS_REMOTE_WRITE;
	}
	return krping_rdma(run, opcode, &sge, addr, rkey, reg, access);
}

/*
 * The SEND that ends a server's iteration, which the client waits for.
 * A client that got it may leave at once, and rxe completes a receive
 * before it sends its ACK: a client that disconnects in between can take
 * the ACK with it, and the SEND is then flushed here although it
 * arrived. So when the client disconnects cleanly while the last SEND of
 * the run (@last) waits for its ACK, and nothing is flushed before we
 * disconnect in turn (a QP that failed, as when a link goes, flushes at
 * once), it counts as delivered.
 */
static int krping_server_answer(struct krping_run *run, u32 invalidate_rkey,
				bool last)
{
	int ret;

	ret = krping_send_msg(run, 0, 0, 0, invalidate_rkey);
	if (ret != -ECONNRESET || !last || !READ_ONCE(run->wait.peer_left) ||
	    READ_ONCE(run->wait.error))
		return ret;
	pr_debug("%s: the client left before the ACK of our last SEND\n",
		 config_item_name(&run->sess->item));
	krping_count_send(run);
	return 0;
}

static int krping_server_loop(struct krping_run *run)
{
	const struct krping_plan *plan = &run->conn.plan;
	const struct krping_options *o = run->opts;
	struct krping_stats *st = run->stats;
	u64 addr, t0, iter = 0;
	u32 rkey, len;
	int ret;

	for (;;) {
		if (plan->count && iter == plan->count)
			return run->conn.server_leaves_first ? 0 :
			       krping_wait_disconnect(run,
						      KRPING_LINGER_TIMEOUT);

		ret = krping_server_recv_adv(run, &addr, &rkey, &len);
		/*
		 * A client that leaves between iterations is a clean end; a
		 * connection lost under us (run->wait.error) is not.
		 */
		if (ret == -ECONNRESET && !o->count &&
		    !READ_ONCE(run->wait.error))
			return 0;
		t0 = ktime_get_ns();
		if (!ret)
			ret = krping_server_rdma(run, true, addr, rkey, len);
		if (!ret)
			ret = krping_send_msg(run, 0, 0, 0,
					      o->server_inv ? rkey : 0);
		if (!ret)
			ret = krping_server_recv_adv(run, &addr, &rkey, &len);
		if (!ret)
			ret = krping_server_rdma(run, false, addr, rkey, len);
		/* With count=0, any iteration may be the client's last. */
		if (!ret)
			ret = krping_server_answer(run, o->server_inv ? rkey : 0,
						   !plan->count ||
						   iter + 1 == plan->count);
		if (ret)
			return ret;
		krping_lat_add(&run->lat, ktime_get_ns() - t0);
		atomic64_inc(&st->iterations);
		iter++;
	}
}

/**
 * krping_ping() - the ping-pong over a connected run
 * @run: the run
 *
 * Return: 0 when the test completed, or the negative errno that ended it.
 */
int krping_ping(struct krping_run *run)
{
	if (run->opts->role == KRPING_ROLE_CLIENT)
		return krping_client_loop(run);
	return krping_server_loop(run);
}
