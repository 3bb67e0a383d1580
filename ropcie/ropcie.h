/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie: a software iWARP-style verbs provider whose queues are
 * circular buffers drained by one kthread per QP. A requester
 * (requester.c) hands each SEND, WRITE or READ to its QP's transport
 * (struct ropcie_transport_ops), which brings it to the responder of the
 * target QP (responder.c) on the host that owns the target's memory.
 */
#ifndef ROPCIE_H
#define ROPCIE_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/etherdevice.h>
#include <linux/hrtimer.h>
#include <linux/irq_work.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/refcount.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/iw_cm.h>

#include "../compat/compat.h"
#include "fault.h"
#include "ring.h"
#include "wire.h"

#define ROPCIE_MAX_QP		1024
#define ROPCIE_MAX_QP_WR	4096
#define ROPCIE_MAX_SGE		6
/* WRITEs of a QP in flight over a link at once (a quarter of its ring). */
#define ROPCIE_LX_POSTED	8
#define ROPCIE_MAX_CQ		1024
#define ROPCIE_MAX_CQE		65535
#define ROPCIE_MAX_MR		(64 * 1024)
#define ROPCIE_MAX_PD		1024
#define ROPCIE_MAX_FR_PAGES	4096
#define ROPCIE_MAX_MSG		0x80000000U
#define ROPCIE_MAX_IRD_ORD	128
/* QPs of user space per device: each one costs a kthread. */
#define ROPCIE_MAX_USER_QP	128

struct ropcie_transport_ops;
struct ropcie_xport;
struct ropcie_lx_wait;
struct ropcie_lx_ctrl;

struct ropcie_dev {
	struct ib_device ibdev;
	struct net_device *netdev;	/* held by ib_device_set_netdev() */
	u8 gid[ETH_ALEN];
	struct list_head list;		/* ropcie_devices, under its mutex */
	struct xarray qp_xa;		/* qpn -> qp */
	struct xarray mr_xa;		/* key >> 8 -> mr */
	u32 mr_next;			/* allocation cursor of mr_xa */
	u32 qp_next;			/* allocation cursor of qp_xa */
	enum ib_port_state port_state;
	atomic_t num_qp, num_cq, num_mr, num_pd;
	atomic_t num_user_qp;
	struct ropcie_faults faults;	/* fault.c */
};

/* A process's open of the device (uverbs.c). */
struct ropcie_ucontext {
	struct ib_ucontext ibuc;
	struct pid *owner;		/* the process that opened it */
	struct xarray qp_names;		/* QP number -> ropcie_uverbs_name_qp() */
};

struct ropcie_pd {
	struct ib_pd ibpd;
};

/* A CQ's entry: the completion, and when poll_cq may see it. */
struct ropcie_cqe {
	struct ib_wc wc;
	u64 due_ns;			/* ktime_get_ns(); 0: at once */
	bool solicited;			/* of a solicited receive */
};

struct ropcie_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* producers and poll_cq */
	struct ropcie_ring ring;	/* of struct ropcie_cqe */
	u8 notify;			/* armed IB_CQ_SOLICITED/NEXT_COMP */
	bool overflow;
	/* Handlers of completions posted inline, in hard IRQ context. */
	struct irq_work irq_work;
	unsigned long deferred;		/* ROPCIE_CQ_DEFER_* bits */
	atomic_t empty_polls;		/* by a user, since it last armed */
	/*
	 * Entries before this counter are due (poll_cq sees them); those
	 * from it to the ring's head wait for cq_delay_us (fault.c).
	 */
	u32 due;
	/* Reveals the entries that come due to an armed handler. */
	struct hrtimer due_timer;
};

#define ROPCIE_CQ_DEFER_COMP	0	/* call the completion handler */
#define ROPCIE_CQ_DEFER_ERR	1	/* raise IB_EVENT_CQ_ERR */
#define ROPCIE_CQ_LOST		2	/* ropcie_cq_push(): the CQ was full */

struct ropcie_mr {
	struct ib_mr ibmr;
	refcount_t ref;			/* lookups in flight + 1 */
	struct completion released;
	/*
	 * Transfers between ropcie_mr_access() and ropcie_mr_leave(): an
	 * invalidation waits for them, so no byte moves once it completed.
	 */
	atomic_t active;
	u32 key;			/* current full key (lkey == rkey) */
	int access;
	bool dma;			/* get_dma_mr: all of kernel memory */
	/*
	 * Fast-reg: registered, not invalidated. Set with release by REG_MR
	 * and read with acquire by a transfer: what map_mr_sg and REG_MR
	 * wrote (iova, length, page list, fbo, access) is seen with it.
	 */
	bool valid;
	u64 *pages;			/* fast-reg page list (kernel VAs) */
	u32 npages, max_pages;
	u64 fbo;			/* offset of iova in pages[0] */
	/* A user's MR: its pinned pages, whose kernel VAs are in @pages. */
	struct ib_umem *umem;
};

/* A send queue entry: a copy of the posted work request. */
struct ropcie_sqe {
	u64 wr_id;
	enum ib_wr_opcode opcode;
	int send_flags;
	u32 num_sge;
	u32 rkey;
	u32 inv_rkey;			/* SEND/READ_WITH_INV, LOCAL_INV */
	u64 remote_addr;
	struct ropcie_mr *reg_mr;	/* IB_WR_REG_MR: compared, not followed */
	u32 reg_key;
	int reg_access;
	u64 t_post;			/* profile: post_send entry, or 0 */
	struct ib_sge sge[ROPCIE_MAX_SGE];
};

struct ropcie_rqe {
	u64 wr_id;
	u32 num_sge;
	struct ib_sge sge[ROPCIE_MAX_SGE];
};

/*
 * A message received in fragments (over a link), kept by the transport
 * between fragments for ropcie_respond_frag(). No reference is held.
 */
struct ropcie_inmsg {
	u32 rq_tail;			/* SEND: the RQ's tail at its receive */
	/*
	 * A receive this fragment ended, completed by ropcie_respond_done()
	 * once the transport answered the requester; the QP's rq_cons_lock
	 * is held until then, so receives still complete in order.
	 */
	bool recv_done;
	bool solicited;
	enum ib_wc_status rst;
	u64 wr_id;
	u32 len, inv;
};

/**
 * struct ropcie_qp_lx - a QP's connection over a link (link_requester.c)
 * @x: the link's transport, or NULL. Under ropcie_fabric_lock, with
 *	@gen, @conn, @peer_conn and @close_msg.
 * @gen: the link's generation the connection belongs to
 * @conn: this QP's id on the link
 * @peer_conn: the peer QP's id on the link; 0 until it accepted
 * @close_msg: the CLOSE to send when this side ends the connection
 *	(allocated at connect, so that closing needs no allocation)
 * @msn: the requester's next message number (the SQ's owner only)
 * @wait_lock: @wait against the link's response consumer
 * @wait: the request in flight, or NULL
 * @in: the peer's message being received; @in_msn, @in_active and
 *	@in_skip with it (the link's request consumer only)
 * @in_msn: its number
 * @in_active: a message is in progress
 * @in_skip: it failed: drop its later fragments
 * @in_broken: a message of the peer failed: refuse the ones behind it
 *	(posted before the peer knew; the connection is ending)
 * @posted: WRITEs and SENDs sent without waiting
 *	(ropcie_transport_ops.post), the oldest at @posted_msn, under
 *	@wait_lock; a SEND is credited when the peer's credit covered it
 * @posted_msn: the message number of the oldest
 * @nposted: how many
 * @send_posted: the newest is a SEND without credit: nothing is posted
 *	behind it, as it may have to be sent again (the SQ's owner; under
 *	@wait_lock)
 * @sends: SENDs this connection sent, each counted once (the SQ's owner;
 *	under @wait_lock)
 * @peer_recvs: the peer's credit: the receives its QP had for this
 *	connection, the newest count it gave (under @wait_lock). SEND number
 *	n finds a receive once it reached n.
 * @rq_base: the receives of this QP consumed before this connection:
 *	what it tells the peer is its RQ's head less this. The three are
 *	set when the connection is made, before any answer can come
 * @limit_at: profile: when a WRITE was first held back because
 *	ROPCIE_LX_POSTED were in flight (ns; 0: none held)
 */
struct ropcie_qp_lx {
	struct ropcie_xport *x;
	u32 gen, conn, peer_conn;
	struct ropcie_lx_ctrl *close_msg;
	u32 msn;
	struct mutex wait_lock;		/* see above */
	struct ropcie_lx_wait *wait;
	struct ropcie_inmsg in;
	u32 in_msn;
	bool in_active, in_skip, in_broken;
	struct ropcie_lx_posted {
		unsigned long sent_at;	/* jiffies; or of the last answer */
		u64 t_sent, answered_at;	/* profile: ns, or 0 */
		enum ib_wc_status status;
		bool send, credited, done, rnr;
	} posted[ROPCIE_LX_POSTED];
	u32 posted_msn, nposted;
	bool send_posted;
	u32 sends, peer_recvs, rq_base;
	u64 limit_at;
};

struct ropcie_qp {
	struct ib_qp ibqp;
	struct ropcie_dev *dev;
	struct pid *owner;		/* a user's QP: its process; else NULL */
	/* A user's QP: what its polled completions name (uverbs.c). */
	struct ib_qp *wc_name;
	/* How its requests reach the peer: set before the QP enters RTS. */
	const struct ropcie_transport_ops *transport;
	refcount_t ref;			/* owner + iw_cm + peer + lookups */
	struct completion freed;

	spinlock_t state_lock;		/* state, close_req, graceful */
	enum ib_qp_state state;
	bool close_req;			/* tear the connection down */
	bool graceful;			/* ... after the SQ drained (SQD) */

	spinlock_t sq_lock;		/* posters of the SQ */
	spinlock_t rq_lock;		/* posters of the RQ */
	/*
	 * The RQ's consumers: the peer's worker (a SEND copies under it),
	 * the flush and a move to RESET; all in task context.
	 */
	struct mutex rq_cons_lock;
	struct ropcie_ring sq;		/* of struct ropcie_sqe */
	struct ropcie_ring rq;		/* of struct ropcie_rqe */
	struct ropcie_cq *scq, *rcq;
	bool sig_all;
	u32 max_send_sge, max_recv_sge;

	struct task_struct *task;	/* the work consumer */
	wait_queue_head_t wq;
	atomic_t events;		/* bumped by every wake-up source */
	/*
	 * ROPCIE_SQ_*: who consumes the SQ, the worker or a poster running
	 * a WRITE inline. Only the owner reads or releases SQ entries.
	 */
	atomic_t sq_owner;
	/*
	 * The oldest SQ entries, sent by the transport's @post and not yet
	 * answered (the SQ's owner only). Nothing else runs while any are.
	 */
	u32 sq_posted;
	/*
	 * The SQ's head is a posted SEND that found no receive: it runs
	 * through ropcie_sq_execute(), which waits for one (the SQ's owner
	 * only; cleared when the head is retired).
	 */
	bool sq_resend;
	atomic64_t prof_write;		/* profile: a WRITE to here began, ns */
	/*
	 * Transfers of the peer into or out of this QP's memory (SEND,
	 * WRITE, READ) that found it in RTS; the flush of a QP in error
	 * waits for them, so ib_drain_qp() means no byte moves any more.
	 */
	atomic_t inbound;
	/*
	 * A SEND of the peer found this QP's RQ empty and waits for a
	 * receive: post_recv tells the transport only then.
	 */
	bool rnr_wait;

	/* Under ropcie_fabric_lock: */
	bool claimed;			/* a connection request is in flight */
	struct ropcie_qp *peer;
	struct iw_cm_id *cm_id;
	struct sockaddr_storage laddr, raddr;
	struct ropcie_qp_lx lx;		/* a connection over a link */
};

#define ROPCIE_SQ_FREE		0
#define ROPCIE_SQ_OWNED		1
#define ROPCIE_SQ_WANTED	2	/* owned; the worker waits for it */

/* Only a QP in INIT or RTR may take part in a new connection. */
static inline bool ropcie_qp_connectable(const struct ropcie_qp *qp)
{
	enum ib_qp_state state = READ_ONCE(qp->state);

	return state == IB_QPS_INIT || state == IB_QPS_RTR;
}

static inline struct ropcie_dev *to_rdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct ropcie_dev, ibdev);
}

static inline struct ropcie_ucontext *to_ructx(struct ib_ucontext *uctx)
{
	return container_of(uctx, struct ropcie_ucontext, ibuc);
}

static inline struct ropcie_pd *to_rpd(struct ib_pd *pd)
{
	return container_of(pd, struct ropcie_pd, ibpd);
}

static inline struct ropcie_cq *to_rcq(struct ib_cq *cq)
{
	return container_of(cq, struct ropcie_cq, ibcq);
}

static inline struct ropcie_mr *to_rmr(struct ib_mr *mr)
{
	return container_of(mr, struct ropcie_mr, ibmr);
}

static inline struct ropcie_qp *to_rqp(struct ib_qp *qp)
{
	return container_of(qp, struct ropcie_qp, ibqp);
}

/* Serialises QP peers and cm_ids of connections and the listener table. */
extern spinlock_t ropcie_fabric_lock;

/* main.c: module options, the per-stage profile, debugfs's ropcie/ */
extern struct dentry *ropcie_debugfs;
extern unsigned int ropcie_inline_max;
extern unsigned int ropcie_irq_serve_max;
extern unsigned int ropcie_rx_poll_us;
extern unsigned int ropcie_connect_timeout_ms;
extern bool ropcie_profile;
void ropcie_port_event(struct ropcie_dev *dev, enum ib_event_type type);
void ropcie_set_port_state(struct ropcie_dev *dev, enum ib_port_state state);
bool ropcie_port_cut_if_down(struct ropcie_dev *dev);

enum ropcie_prof_stage {
	ROPCIE_PROF_POST,	/* post_send, entry to return */
	ROPCIE_PROF_QUEUE,	/* post_send entry to the worker taking the WR */
	ROPCIE_PROF_EXEC,	/* request and response: checks and copy */
	ROPCIE_PROF_COMPLETE,	/* the CQ post, completion handler included */
	ROPCIE_PROF_LANDED,	/* post_send entry to the data in place */
	ROPCIE_PROF_TURNAROUND,	/* a WRITE starting to the target's next post */
	/* Over a link, each on its own host's clock (link_*.c): */
	ROPCIE_PROF_LX_SEND,	/* transfer entry to the request in the ring */
	ROPCIE_PROF_LX_WAIT,	/* request in the ring to its verdict taken */
	ROPCIE_PROF_LX_WAKE,	/* verdict taken to the requester running */
	ROPCIE_PROF_LX_BELL,	/* doorbell interrupt to a descriptor taken */
	ROPCIE_PROF_LX_SERVE,	/* a request taken to its answer in the ring */
	ROPCIE_PROF_LX_COPY,	/* a fragment copied into the peer's ring */
	ROPCIE_PROF_LX_ROOM,	/* a producer waiting for room in a peer's ring */
	ROPCIE_PROF_LX_LIMIT,	/* a WRITE held while the most are in flight */
	ROPCIE_PROF_LX_IDLE,	/* the request consumer asleep, its ring empty */
	ROPCIE_PROF_NR
};

void ropcie_prof_add(enum ropcie_prof_stage stage, u64 ns);
void ropcie_prof_count(bool inline_exec);

/* A timestamp when profiling, else 0 (nothing is recorded). */
static inline u64 ropcie_prof_now(void)
{
	return READ_ONCE(ropcie_profile) ? ktime_get_ns() : 0;
}

/* verbs.c */
int ropcie_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			struct ib_udata *udata);
int ropcie_query_port(struct ib_device *ibdev, u32 port,
		      struct ib_port_attr *attr);
int ropcie_query_gid(struct ib_device *ibdev, u32 port, int idx,
		     union ib_gid *gid);
int ropcie_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey);
int ropcie_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable);
int ropcie_alloc_pd(struct ib_pd *pd, struct ib_udata *udata);
int ropcie_dealloc_pd(struct ib_pd *pd, struct ib_udata *udata);

/* uverbs.c */
void ropcie_uverbs_setup(struct ib_device *ibdev);
int ropcie_alloc_ucontext(struct ib_ucontext *uctx, struct ib_udata *udata);
void ropcie_dealloc_ucontext(struct ib_ucontext *uctx);
void ropcie_disassociate_ucontext(struct ib_ucontext *uctx);
int ropcie_may_connect(const struct ropcie_qp *qp,
		       const struct iw_cm_id *cm_id);
struct pid *ropcie_uverbs_qp_owner(struct ib_udata *udata);
int ropcie_uverbs_name_qp(struct ropcie_qp *qp, struct ib_udata *udata);

/* cq.c */
int ropcie_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     KRPING_COMPAT_CQ_ATTRS *attrs);
int ropcie_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int ropcie_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc);
int ropcie_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int ropcie_cq_post(struct ropcie_cq *cq, const struct ib_wc *wc,
		   bool solicited, bool defer);
unsigned long ropcie_cq_push(struct ropcie_cq *cq, const struct ib_wc *wc,
			     bool solicited);
int ropcie_cq_signal(struct ropcie_cq *cq, unsigned long todo, bool defer);
void ropcie_cq_clean(struct ropcie_cq *cq, const struct ib_qp *ibqp);
void ropcie_cq_error(struct ropcie_cq *cq, const char *why);

/* mr.c */
struct ib_mr *ropcie_get_dma_mr(struct ib_pd *pd, int access);
struct ib_mr *ropcie_reg_user_mr(struct ib_pd *pd, u64 start, u64 len,
				 u64 virt, int access,
				 KRPING_COMPAT_REG_USER_MR_DMAH
				 struct ib_udata *udata);
struct ib_mr *ropcie_alloc_mr(struct ib_pd *pd, enum ib_mr_type type,
			      u32 max_num_sg);
int ropcie_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int nents,
		     unsigned int *sg_offset);
int ropcie_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ropcie_mr *ropcie_mr_get(struct ropcie_dev *dev, u32 key);
void ropcie_mr_put(struct ropcie_mr *mr);
struct ropcie_mr *ropcie_mr_access(struct ropcie_dev *dev, u32 key,
				   struct ib_pd *pd, u64 addr, u64 len,
				   int access);
void ropcie_mr_leave(struct ropcie_mr *mr);
void *ropcie_mr_va(const struct ropcie_mr *mr, u64 addr, u64 *contig);
enum ib_wc_status ropcie_mr_register(struct ropcie_dev *dev,
				     struct ib_pd *pd,
				     const struct ropcie_mr *mr, u32 key,
				     int access);
int ropcie_mr_invalidate(struct ropcie_dev *dev, struct ib_pd *pd, u32 key);

/* qp.c */
int ropcie_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		     struct ib_udata *udata);
int ropcie_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		     struct ib_udata *udata);
int ropcie_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init);
int ropcie_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int ropcie_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int ropcie_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
void ropcie_qp_get(struct ropcie_qp *qp);
void ropcie_qp_put(struct ropcie_qp *qp);
void ropcie_qp_kick(struct ropcie_qp *qp);
void ropcie_qp_reap_now(struct ropcie_qp *qp);
void ropcie_qp_set_error(struct ropcie_qp *qp);
void ropcie_qp_fatal(struct ropcie_qp *qp);
bool ropcie_qp_to_rts(struct ropcie_qp *qp);
bool ropcie_qp_target_enter(struct ropcie_qp *qp);
void ropcie_qp_target_leave(struct ropcie_qp *qp);
void ropcie_iw_add_ref(struct ib_qp *ibqp);
void ropcie_iw_rem_ref(struct ib_qp *ibqp);
struct ib_qp *ropcie_iw_get_qp(struct ib_device *ibdev, int qpn);

/* sge.c: resolved SGEs, and copies between them */
struct ropcie_seg {
	struct ropcie_mr *mr;		/* held and entered; NULL: a kernel VA */
	u64 addr;
	u64 len;
};

struct ropcie_segs {
	struct ropcie_seg seg[ROPCIE_MAX_SGE];
	u32 n;
	u64 total;
};

enum ib_wc_status ropcie_segs_get(struct ropcie_qp *qp,
				  const struct ib_sge *sge, u32 num,
				  bool sink, struct ropcie_segs *s);
void ropcie_segs_put(struct ropcie_segs *s);
bool ropcie_copy(const struct ropcie_seg *dst, u32 nd,
		 const struct ropcie_seg *src, u32 ns, u64 len,
		 bool may_sleep);
bool ropcie_copy_at(const struct ropcie_seg *dst, u32 nd, u64 doff,
		    const struct ropcie_seg *src, u32 ns, u64 soff, u64 len,
		    bool may_sleep);

/*
 * What a requester asks of the responder: no pointer into either host's
 * memory, so that a transport may carry it to another host.
 */
enum ropcie_op {
	ROPCIE_OP_SEND,
	ROPCIE_OP_SEND_INV,	/* inv_rkey: the responder's MR to invalidate */
	ROPCIE_OP_WRITE,
	ROPCIE_OP_READ,		/* READ_WITH_INV invalidates on the requester */
};

struct ropcie_req {
	enum ropcie_op op;
	bool solicited;
	u32 rkey;		/* WRITE, READ */
	u32 inv_rkey;		/* SEND_INV */
	u64 remote_addr;	/* WRITE, READ */
	u64 len;		/* bytes of the message */
	u64 t_start;		/* profile, same host only: a WRITE began, ns */
};

/* requester.c and responder.c */
int ropcie_request(struct ropcie_qp *qp, const struct ropcie_sqe *sqe,
		   struct ib_wc *wc, bool may_sleep, u64 t_start);
int ropcie_request_post(struct ropcie_qp *qp, const struct ropcie_sqe *sqe,
			bool may_sleep);
int ropcie_respond(struct ropcie_qp *tqp, const struct ropcie_req *req,
		   const struct ropcie_segs *data, bool may_sleep,
		   enum ib_wc_status *status);
int ropcie_respond_frag(struct ropcie_qp *tqp, const struct ropcie_req *req,
			struct ropcie_inmsg *in, u64 off,
			const struct ropcie_segs *data, bool last,
			bool may_sleep, enum ib_wc_status *status);
void ropcie_respond_done(struct ropcie_qp *tqp, struct ropcie_inmsg *in);

/**
 * struct ropcie_transport_ops - how requests reach the target QP
 * @name: shown in the log
 * @transfer: carry @req and the requester's bytes @local (the source of
 *	a SEND or WRITE, the sink of a READ) to the peer of @qp, run
 *	ropcie_respond() there and set *@status to its verdict. Return 0,
 *	or -EAGAIN when the peer has no receive for a SEND yet.
 *	@may_sleep is false in a kernel poster's context (an inline WRITE).
 * @recv_posted: @qp got a receive while a SEND of its peer waited for
 *	one (ropcie_respond() returned -EAGAIN): let the peer try again.
 *	Any context.
 * @inline_exec: @transfer may run in the poster's context (it never
 *	waits), so a small WRITE may skip the worker, and so may a user
 *	QP's SEND or WRITE (its poster may sleep)
 * @post: optional: send a WRITE or SEND and return without its verdict,
 *	so that several are in flight (the worker's context; with
 *	!@may_sleep the poster's, where it never waits). Nothing is posted
 *	behind a SEND that may find no receive. Return 0 when sent, -EBUSY
 *	when as many are in flight as the transport takes (or such a
 *	SEND), another error when
 *	@transfer must carry it (nothing was sent; -EAGAIN: not without
 *	waiting). A transport with @post takes small WRITEs and SENDs from
 *	the poster's context this way.
 * @reap: the verdict of the oldest posted request: 0 with *@status,
 *	-EINPROGRESS while it is not in, -ETIMEDOUT when the peer has not
 *	answered it for too long, -EAGAIN for a SEND that found no receive
 *	(it is no longer in flight: @transfer sends it again, and waits)
 * @forget: drop every posted request (the QP is flushed or reset); late
 *	verdicts are ignored
 *
 * The semantics of the verbs are the requester's and the responder's;
 * a transport only moves requests, verdicts and bytes.
 */
struct ropcie_transport_ops {
	const char *name;
	int (*transfer)(struct ropcie_qp *qp, const struct ropcie_req *req,
			const struct ropcie_segs *local, bool may_sleep,
			enum ib_wc_status *status);
	void (*recv_posted)(struct ropcie_qp *qp);
	bool inline_exec;
	int (*post)(struct ropcie_qp *qp, const struct ropcie_req *req,
		    const struct ropcie_segs *local, bool may_sleep);
	int (*reap)(struct ropcie_qp *qp, enum ib_wc_status *status);
	void (*forget)(struct ropcie_qp *qp);
};

/* loopback.c */
extern const struct ropcie_transport_ops ropcie_loopback_transport;

/* The link transport (link_transport.h): connections across a link */
extern const struct ropcie_transport_ops ropcie_link_transport;
extern struct rw_semaphore ropcie_lx_life;

/**
 * struct ropcie_lx_tx - a slot of the peer's window being produced
 * @x: the link's transport
 * @ring: which ring
 * @gen: the link generation it is produced in
 * @idx: its ring index
 * @data: its payload slot in the peer's window
 */
struct ropcie_lx_tx {
	struct ropcie_xport *x;
	int ring;
	u32 gen;
	u32 idx;
	void *data;
};

/* Why a connection over a link ends under its QP. */
enum ropcie_conn_end {
	ROPCIE_CONN_CLOSED,		/* the other host closed it */
	ROPCIE_CONN_LOST,		/* the link went down */
	ROPCIE_CONN_BROKEN,		/* the other host broke the
					 * protocol in its messages
					 */
};

/**
 * struct ropcie_lx_upcalls - what the link transport tells the connection
 *	manager above it (cm.c), which calls down into the transport
 * @cm_msg: a CM message of the other host, decoded; any context but hard
 *	IRQ, in generation @gen of @x
 * @link_down: @x went down: refuse the connection requests over it
 * @conn_end: a connection over @x ends under @qp (held), for @how;
 *	any context
 */
struct ropcie_lx_upcalls {
	void (*cm_msg)(struct ropcie_xport *x, u32 gen,
		       const struct ropcie_wire_cm_msg *m);
	void (*link_down)(struct ropcie_xport *x);
	void (*conn_end)(struct ropcie_xport *x, struct ropcie_qp *qp,
			 enum ropcie_conn_end how);
};

void ropcie_lx_set_upcalls(const struct ropcie_lx_upcalls *up);
struct ropcie_xport *ropcie_lx_pick(u32 *gen);
void ropcie_lx_user_poll(bool busy);
bool ropcie_lx_alive(const struct ropcie_xport *x, u32 gen);
int ropcie_lx_conn_add(struct ropcie_xport *x, u32 gen, struct ropcie_qp *qp,
		       u32 *conn);
void ropcie_lx_conn_del(struct ropcie_xport *x, u32 conn, struct ropcie_qp *qp);
int ropcie_lx_cm_begin(struct ropcie_xport *x, u32 gen,
		       struct ropcie_lx_tx *tx);
int ropcie_lx_cm_commit(struct ropcie_lx_tx *tx,
			const struct ropcie_wire_cm_msg *cm);
void ropcie_lx_cm_abort(struct ropcie_lx_tx *tx);
int ropcie_lx_cm_send(struct ropcie_xport *x, u32 gen,
		      const struct ropcie_wire_cm_msg *cm);
struct ropcie_lx_ctrl *ropcie_lx_ctrl_alloc(gfp_t gfp);
void ropcie_lx_answer_cm(struct ropcie_xport *x, u32 gen,
			 const struct ropcie_wire_cm_msg *cm);
void ropcie_lx_answer_close(struct ropcie_xport *x, u32 gen, u32 conn,
			    u32 peer_conn);
void ropcie_lx_close_queue(struct ropcie_xport *x, u32 gen,
			   struct ropcie_lx_ctrl *msg, u32 conn, u32 peer_conn);

/* ivshmem.c: the PCI link of QEMU's ivshmem-doorbell */
extern struct pci_driver ropcie_ivshmem_driver;

/* cm.c */
int ropcie_iw_connect(struct iw_cm_id *cm_id,
		      struct iw_cm_conn_param *param);
int ropcie_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param);
int ropcie_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 len);
int ropcie_iw_create_listen(struct iw_cm_id *cm_id, int backlog);
int ropcie_iw_destroy_listen(struct iw_cm_id *cm_id);
void ropcie_cm_close(struct ropcie_qp *qp);
int ropcie_cm_init(void);
void ropcie_cm_exit(void);
void ropcie_cm_remove_device(struct ropcie_dev *dev);

#endif /* ROPCIE_H */
