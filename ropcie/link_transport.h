/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie link transport: connections between the QPs of two hosts over
 * a ropcie link (link.h), in the rings of the link protocol (wire.h).
 * Shared by its files, one concern each:
 *
 *   link_transport.c  its life: created with the link, up and down with
 *                     it (a new generation each time), the sysfs view
 *   link_produce.c    producing into the peer's rings
 *   link_consume.c    consuming this host's rings: the kthreads and the
 *                     doorbell's tasklet
 *   link_serve.c      each consumed descriptor: a request served, a
 *                     response handed to its requester, a fault
 *   link_read.c       the peer's READs, answered by the read kthread
 *   link_requester.c  a QP's requests and their verdicts
 *   link_control.c    connection ids and control messages
 *   link_stream.c     the raw stream: the link's ceiling, no verbs
 *
 * Each host produces into the peer's inbound window and consumes its
 * own. Requests (SEND, WRITE and READ fragments, connection management,
 * RECV_POSTED) go into the request ring; verdicts and READ data come back
 * in the response ring. Two kthreads per link consume: one the requests,
 * as the responder of the QPs they name (responder.c decides everything
 * about the target's memory, here as on loopback), one the responses,
 * which it hands to the waiting requester. A READ's data is produced by
 * a third, the read kthread, a fragment at a time and round-robin over
 * the connections, so that the request consumer never waits for a
 * READ's transfer. The response consumer never waits for anything, and
 * the request consumer and the read kthread wait only for room in the
 * peer's response ring, so the two hosts cannot wait on each other in a
 * circle. (Each consumer also waits for its owner bit while a user's
 * poll serves its ring; the poll waits for none of these.)
 *
 * A requester (a QP's worker) writes the fragments of a SEND or WRITE
 * into the peer's request ring, a slot each, and waits for the verdict;
 * WRITEs and SENDs it may also post (up to ROPCIE_LX_POSTED in flight,
 * nothing behind a SEND the peer's credit does not cover, taking their
 * verdicts in order later), and the
 * peer refuses whatever follows
 * a failed message of the connection. Every descriptor and index the
 * peer wrote is copied out once and checked (wire.c) before use; what it
 * names (a connection, a key, a range) is checked by its owner here. A
 * peer that breaks a ring's indices takes the link down (every
 * connection over it fails, the link comes back with fresh rings); a
 * descriptor it broke ends at most the connection it names; a request
 * it leaves unanswered for request_timeout fails that request's QP.
 *
 * The link's generation changes whenever it goes down: a connection,
 * a slot or an index of an older generation is never used again.
 */
#ifndef ROPCIE_LINK_TRANSPORT_H
#define ROPCIE_LINK_TRANSPORT_H

#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <asm/byteorder.h>

#include "ropcie.h"
#include "link.h"

/* Descriptors of a QP's connection on the link: marks in xport.conns. */
#define ROPCIE_LX_NOTIFY	XA_MARK_1	/* send RECV_POSTED */

/**
 * struct ropcie_lx_rx - the consumer of one inbound ring
 * @x: its transport
 * @ring: the ring
 * @task: its kthread
 * @wq: where it sleeps
 * @events: bumped by each doorbell for this ring, and each beat
 * @owner: bit 0 set while the kthread, the doorbell's fast path or a
 *	user's poll (ropcie_lx_rx_fast()) consumes: they take turns, the
 *	last two only trying, and whoever holds it owns @cons, @gen and
 *	@broken; a poll may sleep holding it (for rq_cons_lock), so the
 *	kthread sleeps for it
 * @armed: the kthread sleeps with its doorbell asked for (rx_sleep): a
 *	user's busy poll wakes it to stop asking
 * @cons: the next index to consume; read without @owner by the
 *	doorbell, to see whether the ring holds anything new
 * @gen: the generation @cons counts in
 * @broken: a generation whose ring the peer broke: consumed no more
 * @want_at: @cons when the peer's waiting producer was last rung for
 * @traffic: a descriptor was consumed since the kthread last looked
 *	(ropcie_lx_rx_poll() follows traffic)
 * @rang_at: when profiling, the doorbell it has not yet taken
 *	(ktime_get_ns(); 0: none)
 * @hog_until: until then (local_clock()), the kthread's poll sleeps
 *	rather than yield to another task (ropcie_lx_rx_poll()); written
 *	by the kthread, read by the doorbell too
 * @long_yields: the kthread's long yields in a row
 */
struct ropcie_lx_rx {
	struct ropcie_xport *x;
	enum ropcie_wire_ring ring;
	struct task_struct *task;
	wait_queue_head_t wq;
	atomic_t events;
	unsigned long owner;
	bool armed;
	u32 cons, gen, broken;
	u32 want_at;
	bool traffic;
	atomic64_t rang_at;
	u64 hog_until;
	unsigned int long_yields;
};

/**
 * struct ropcie_xport - the transport over one link
 * @link: the link
 * @list: in ropcie_xports
 * @lock: @up, @gen, @peer_epoch, and the transport's fields of the
 *	header of the peer's window (prod, cons, rx_sleep, tx_want)
 * @up: the link is up: the rings may be used
 * @gen: the link's generation: changes when it goes down. @up and @gen
 *	change under the fabric lock too, so the connection manager sees
 *	them stable.
 * @peer_epoch: the peer's epoch in this generation
 * @tx_busy: bit @ring set while a producer holds that ring of the
 *	peer's window: a bit lock, not a mutex, because a poster and the
 *	doorbell's fast path may only try it (ropcie_lx_tx_trylock())
 * @prod: the next index to produce, in generation @tx_gen
 * @tx_gen: the generation @prod counts in
 * @tx_wq: producers waiting for room
 * @rx: the consumers of the two inbound rings (struct ropcie_lx_rx)
 * @conns: connection (QP) id on the link -> QP, held
 * @conn_next: the next id to try (xa_alloc_cyclic())
 * @ctrl: control messages to send (struct ropcie_lx_ctrl), under @lock
 * @answers: of @ctrl, the answers to the peer (at most
 *	ROPCIE_LX_ANSWERS_MAX), under @lock
 * @ctrl_work: sends them, and the RECV_POSTED notices
 * @dead: the link is going away: no more up
 * @read_lock: @reads, against the request consumer that adds to it
 * @reads: the peer's READs being answered (link_read.c), at most one
 *	per connection
 * @read_wq: where the read kthread waits for one
 * @read_task: the read kthread
 * @stream_lock: held by the raw stream this host sends (link_stream.c)
 * @stream_sink: a slot's worth of memory the peer's raw stream is
 *	copied into
 * @stream_next: the offset of the peer's raw stream expected next, owned
 *	by the request consumer
 * @upoll_at: when a user last busy-polled a CQ (local_clock(); 0:
 *	never): the consumers then leave the rings to its polls
 * @stats: descriptors produced and consumed, doorbells rung, of the
 *	consumed the WRITEs served in the doorbell's tasklet, the answers
 *	dropped for want of room in @ctrl, and the peer's faults in a
 *	descriptor: dropped (it named no connection) or ending the
 *	connection it named (ropcie_lx_rx_fault()), and the bytes of the
 *	peer's raw stream received in order or its fragments refused,
 *	the times a consumer began to cede the CPU to a task that kept it,
 *	the peer's SENDs answered "no receive posted", the SENDs credited,
 *	and the descriptors consumed in a user's poll
 */
struct ropcie_xport {
	struct ropcie_link *link;
	struct list_head list;
	spinlock_t lock;		/* see above */
	bool up;
	u32 gen;
	u64 peer_epoch;
	unsigned long tx_busy;
	u32 prod[ROPCIE_WIRE_NR_RINGS];
	u32 tx_gen[ROPCIE_WIRE_NR_RINGS];
	wait_queue_head_t tx_wq;
	struct ropcie_lx_rx rx[ROPCIE_WIRE_NR_RINGS];
	struct xarray conns;
	u32 conn_next;
	struct list_head ctrl;
	unsigned int answers;
	struct work_struct ctrl_work;
	bool dead;
	spinlock_t read_lock;		/* reads */
	struct list_head reads;
	wait_queue_head_t read_wq;
	struct task_struct *read_task;
	struct mutex stream_lock;	/* one raw stream at a time */
	void *stream_sink;
	u64 stream_next;
	u64 upoll_at;
	struct {
		atomic64_t tx, rx, db, irq, answers_dropped;
		atomic64_t rx_dropped, conn_faults;
		atomic64_t stream_rx, stream_bad, polls_ceded;
		atomic64_t rnr_answered;
		atomic64_t sends_credited;
		atomic64_t polled;
	} stats;
};

/*
 * A control message waiting to be sent: a CM message (REJECT) in the
 * request ring, or the CLOSE of connection conn, peer_conn in the
 * response ring; an answer to the peer, or a QP's own CLOSE.
 */
struct ropcie_lx_ctrl {
	struct list_head list;
	u32 gen;
	bool close, answer;
	u32 conn, peer_conn;
	struct ropcie_wire_cm_msg cm;
};

/**
 * struct ropcie_lx_wait - a requester's message in flight
 * @msn: its number
 * @read: a READ: the response carries data into @sink
 * @sink: the READ's sink, held by the requester while it waits
 * @len: bytes of the message
 * @next: a READ: where the next fragment of data goes
 * @progress: bumped by every response: the requester's timeout
 *	counts from the last one
 * @done: the verdict is in @status (or @rnr)
 * @rnr: a SEND found no receive: send it again once one is posted
 * @status: the verdict
 * @answered_at: when profiling, when @done was set (ktime_get_ns())
 */
struct ropcie_lx_wait {
	u32 msn;
	bool read;
	const struct ropcie_segs *sink;
	u64 len, next;
	unsigned long progress;
	bool done, rnr;
	enum ib_wc_status status;
	u64 answered_at;
};

static inline void *ropcie_lx_desc(void *win, const struct ropcie_wire_geom *g,
				   int ring, u32 idx)
{
	return win + g->desc_off[ring] +
	       (size_t)(idx % g->nslots) * ROPCIE_WIRE_DESC_SIZE;
}

static inline void *ropcie_lx_data(void *win, const struct ropcie_wire_geom *g,
				   int ring, u32 idx)
{
	return win + g->data_off[ring] + (size_t)(idx % g->nslots) * g->slot_size;
}

static inline struct ropcie_wire_hdr *ropcie_lx_out(struct ropcie_xport *x)
{
	return x->link->hw->out;
}

static inline const struct ropcie_wire_hdr *ropcie_lx_in(struct ropcie_xport *x)
{
	return x->link->hw->in;
}

/* link_transport.c */
extern const struct ropcie_lx_upcalls *ropcie_lx_up;
bool ropcie_lx_alive_locked(struct ropcie_xport *x, u32 gen,
			    unsigned long *flags);

/* link_produce.c */
void ropcie_lx_ring_peer(struct ropcie_xport *x);
int ropcie_lx_peer_index(struct ropcie_xport *x, const __le32 *field,
			 u32 *val);
void ropcie_lx_set_hdr(struct ropcie_xport *x, u32 gen, __le32 *field,
		       u32 val);
int ropcie_lx_tx_begin(struct ropcie_xport *x, int ring, u32 gen,
		       struct ropcie_lx_tx *tx);
int ropcie_lx_tx_try(struct ropcie_xport *x, int ring, u32 gen,
		     struct ropcie_lx_tx *tx);
void ropcie_lx_tx_abort(struct ropcie_lx_tx *tx);
int ropcie_lx_tx_commit(struct ropcie_lx_tx *tx,
			const struct ropcie_wire_msg *m);
void ropcie_lx_answer_msg(struct ropcie_xport *x, u32 gen,
			  struct ropcie_lx_tx **slot,
			  const struct ropcie_wire_msg *m);
void ropcie_lx_answer(struct ropcie_xport *x, u32 gen,
		      struct ropcie_lx_tx **slot,
		      enum ropcie_wire_type type, u32 dst, u32 src,
		      u32 msn, enum ib_wc_status status);

/* link_control.c */
struct ropcie_qp *ropcie_lx_conn_qp(struct ropcie_xport *x, u32 gen,
				    u32 dst, u32 src);
void ropcie_lx_ctrl_work(struct work_struct *work);

/* link_requester.c */
unsigned long ropcie_lx_request_timeout(void);

/* link_serve.c */
void ropcie_lx_rx_fault(struct ropcie_xport *x, u32 gen, u32 dst, u32 src,
			const char *why);
void ropcie_lx_rx_data(struct ropcie_xport *x, u32 gen,
		       const struct ropcie_wire_msg *m, void *payload,
		       struct ropcie_lx_tx **rsp);
void ropcie_lx_rx_request(struct ropcie_xport *x, u32 gen,
			  const struct ropcie_wire_msg *m, void *payload);
int ropcie_lx_rx_response(struct ropcie_xport *x, u32 gen,
			  const struct ropcie_wire_msg *m, void *payload,
			  struct ropcie_qp **answered);

/* link_read.c */
int ropcie_lx_rx_read(struct ropcie_xport *x, u32 gen,
		      const struct ropcie_wire_msg *m, struct ropcie_qp *qp);
int ropcie_lx_read_thread(void *arg);
void ropcie_lx_read_drop(struct ropcie_xport *x);

/* link_stream.c */
void ropcie_lx_rx_stream(struct ropcie_xport *x,
			 const struct ropcie_wire_msg *m, void *payload);

/* link_consume.c */
void ropcie_lx_rx_kick(struct ropcie_lx_rx *rx);
int ropcie_lx_rx_thread(void *arg);
struct ropcie_qp *ropcie_lx_rx_user(struct ropcie_xport *x, bool busy);

#endif /* ROPCIE_LINK_TRANSPORT_H */
