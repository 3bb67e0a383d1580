/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * One run of a session: its rdma_cm connection, queues, buffers and
 * memory registrations, and the helpers the tests are written with.
 * A run lives in its session's thread and is freed before it returns.
 */
#ifndef KRPING_RUN_H
#define KRPING_RUN_H

#include <linux/bitfield.h>
#include <linux/bits.h>
#include <linux/sched.h>
#include <linux/wait.h>
#include <rdma/rdma_cm.h>

#include "count.h"
#include "krping.h"
#include "latency.h"

/*
 * The message both sides exchange: the advertisement of an RDMA buffer.
 * Same 16-byte big-endian layout as rdma-core's rping, so the two interwork.
 */
struct krping_rdma_info {
	__be64 buf;
	__be32 rkey;
	__be32 size;
};

/*
 * The private data of a krping connection request, and of its accept.
 * Each side announces how many iterations it will run; the server also
 * whether it will disconnect first, as soon as its last SEND has
 * completed. Had the client left first, on receipt of that SEND, its QP
 * could enter the error state before the SEND's ACK left, and the server
 * would see its last SEND flushed. A peer that sends no hello (rping, the
 * original krping) keeps rping's ending: the client disconnects.
 *
 * With KRPING_HELLO_PLAN the hello carries the sender's whole plan
 * (struct krping_plan): a benchmark server follows its client's, or both
 * sides end with -EINVAL when their plans disagree. A krping before the
 * plan sends the first three fields only.
 */
struct krping_hello {
	__be32 magic;
	__be32 flags;
	__be32 count;
	__be32 warmup;
	__be32 duration_ms;
};

#define KRPING_HELLO_MAGIC		0x6b727067	/* "krpg" */
#define KRPING_HELLO_LEAVES_FIRST	BIT(0)		/* server: I disconnect */
#define KRPING_HELLO_PLAN		BIT(1)		/* warmup, duration_ms */
/* The shortest hello: one without the plan. */
#define KRPING_HELLO_MIN_LEN		offsetof(struct krping_hello, warmup)
/*
 * The sender's qps and the index of this connection among them; 0 in a
 * hello from a krping without qps, which means qps 1, index 0.
 */
#define KRPING_HELLO_QPS		GENMASK(15, 8)
#define KRPING_HELLO_INDEX		GENMASK(23, 16)

static_assert(KRPING_MAX_QPS <= 255);	/* fits KRPING_HELLO_QPS */

/* A kmalloc'ed buffer and its DMA mapping. */
struct krping_buf {
	void *addr;
	u64 dma;
	u32 size;
	enum dma_data_direction dir;
};

/* A fast-registration MR that covers one buffer. */
struct krping_mr {
	struct ib_mr *mr;
	struct krping_buf *buf;
	u32 page_size;	/* MR page size used to map @buf */
	bool valid;	/* registered and not yet invalidated */
};

/* Connection milestones, bits in krping_conn.cm_flags. */
enum {
	KRPING_CM_ADDR_RESOLVED,
	KRPING_CM_ROUTE_RESOLVED,
	KRPING_CM_ESTABLISHED,
	KRPING_CM_REQUEST_TAKEN,	/* server: a connection request took the run */
};

struct krping_run;

/**
 * struct krping_group - the runs of a session with qps above 1
 * @sess: the session
 * @opts: the settings of every run
 * @n: the runs (qps)
 * @runs: the runs, each its own connection, QP and thread
 * @tasks: their threads (a task reference is held), NULL if not started
 * @listen_id: server: the one listening id; its handler hands each
 *	connection request to the run of the index its hello names
 * @lock: serialises handing a connection to a run with the run closing
 * @running: runs connected so far (the session is running once all are)
 * @ready: benchmarks: runs set up and waiting to begin their test
 *	together (krping_group_barrier())
 * @done: runs ended so far
 * @measured: benchmarks: runs whose measured part has ended
 * @torn_down: the runs whose thread has run krping_teardown()
 * @error: the first error of a run (a negative errno), 0 if none
 * @stop: every run is to end now (an error, or the session was stopped)
 * @wq: the session's thread waits here for the runs
 */
struct krping_group {
	struct krping_session *sess;
	const struct krping_options *opts;
	u32 n;
	struct krping_run *runs[KRPING_MAX_QPS];
	struct task_struct *tasks[KRPING_MAX_QPS];
	struct rdma_cm_id *listen_id;
	spinlock_t lock;	/* see the kernel-doc above */
	atomic_t running;
	atomic_t ready;
	atomic_t done;
	atomic_t measured;
	DECLARE_BITMAP(torn_down, KRPING_MAX_QPS);
	int error;
	bool stop;
	wait_queue_head_t wq;
};

/**
 * struct krping_conn - a run's connection: rdma_cm ids, verbs objects,
 *	and what the two sides agreed in their hellos
 * @cm_id: the client's id, or the server's listening id
 * @child: server: the connection being accepted (set by the CM handler)
 * @conn_id: the id that carries the QP (@cm_id or @child)
 * @pd: protection domain
 * @cq: the one CQ for sends and receives
 * @qp: the RC queue pair
 * @port_events: port events of the run's device (registered once set up)
 * @port_num: the port of @conn_id, whose PORT_ERR ends the run
 * @cm_flags: KRPING_CM_* milestones reached
 * @peer_hello: the peer sent a krping hello
 * @peer_plan: its hello carried the whole plan (KRPING_HELLO_PLAN)
 * @peer: the plan that hello announced (only the count without
 *	@peer_plan)
 * @plan: the plan of this run: a client's own; a server's decided by
 *	krping_plan_end() (ping: a server without a count of its own runs
 *	the count a krping client announced)
 * @plan_error: server: -EINVAL when the client's plan disagrees with the
 *	server's; the run ends with it once the client has been told
 * @server_leaves_first: the server disconnects first (its hello said so)
 *
 * cm.c sets up the ids and takes the hellos (the CM handler writes
 * @child, @cm_flags and the peer's hello); resources.c creates and
 * destroys the verbs objects.
 */
struct krping_conn {
	struct rdma_cm_id *cm_id;
	struct rdma_cm_id *child;
	struct rdma_cm_id *conn_id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_event_handler port_events;
	u32 port_num;
	unsigned long cm_flags;
	bool peer_hello;
	bool peer_plan;
	struct krping_plan peer;
	struct krping_plan plan;
	int plan_error;
	bool server_leaves_first;
};

/**
 * struct krping_io - a run's buffers, registrations and messages
 * @recv_buf: receive buffer, one message
 * @send_buf: send buffer, one message
 * @start_buf: ping: the client's source the server reads; benchmarks:
 *	the local end of every transfer, on both sides
 * @rdma_buf: client: the sink the server writes (sbw: its grants);
 *	server: READ sink and WRITE source
 * @start_mr: registration of @start_buf (reg mode)
 * @rdma_mr: registration of @rdma_buf
 * @rx: copy of the last message received
 * @rx_inv_rkey: rkey the last receive invalidated, 0 if none
 * @rdma_len: length of the RDMA operation in flight (for the byte counts)
 * @rdma_opcode: its verb, for the report of a failed one
 * @recv_cqe: completion handler of receives
 * @send_cqe: completion handler of SENDs
 * @rdma_cqe: completion handler of RDMA READ and WRITE
 * @reg_cqe: completion handler of REG_MR
 * @inv_cqe: completion handler of the LOCAL_INV before a REG_MR
 *
 * resources.c allocates and frees the buffers and MRs; the tests (ping.c,
 * bench*.c) post work on them through post.c, whose completion handlers
 * these are (bench.c notes the RDMA operation in flight).
 */
struct krping_io {
	struct krping_buf recv_buf;
	struct krping_buf send_buf;
	struct krping_buf start_buf;
	struct krping_buf rdma_buf;
	struct krping_mr start_mr;
	struct krping_mr rdma_mr;
	struct krping_rdma_info rx;
	u32 rx_inv_rkey;
	u32 rdma_len;
	enum ib_wr_opcode rdma_opcode;
	struct ib_cqe recv_cqe;
	struct ib_cqe send_cqe;
	struct ib_cqe rdma_cqe;
	struct ib_cqe reg_cqe;
	struct ib_cqe inv_cqe;
};

/**
 * struct krping_wait - what the run's thread waits on, and the watch over
 *	a silent peer
 * @wq: the run's thread sleeps here; CM and CQ handlers wake it
 * @events: bumped by every CM or CQ handler, so the thread sleeps until
 *	anything happens
 * @poll: the CQ is polled by the thread (poll=1), not by softirq
 * @lazy: with @poll, waits that measure nothing sleep between polls
 * @draining: with @poll, a bandwidth stream waits for operations in
 *	flight (see krping_idle())
 * @error: first hard error (negative errno), 0 if none
 * @disconnected: the peer disconnected
 * @peer_left: the peer disconnected while we waited and nothing of ours
 *	was flushed for KRPING_DISCONNECT_GRACE, so we disconnected in turn
 *	(krping_wait_count())
 * @flushed: a work request completed with a flush error
 * @peer_timeout: jiffies of silence after which the peer counts as gone,
 *	0 for never (see krping_keepalive())
 * @heard: jiffies of the peer's last sign of life: a completion of work
 *	that needed it, or the connection itself
 * @probing: a keepalive probe is in flight
 * @probe_cqe: completion handler of the probe
 *
 * wait.c waits with it and keeps the watch over the peer. Setup
 * (resources.c) sets @poll and @peer_timeout, a benchmark's loop @lazy
 * and @draining; the CM handler (cm.c), the port and QP events
 * (resources.c) and the completion handlers record what happened
 * (krping_fail(), @disconnected, @flushed, krping_heard()) and wake the
 * thread (krping_wake()); the few waits outside wait.c (cm.c, group.c,
 * bench_send.c) sleep on @wq.
 */
struct krping_wait {
	wait_queue_head_t wq;
	atomic_t events;
	bool poll;
	bool lazy;
	bool draining;
	int error;
	bool disconnected;
	bool peer_left;
	bool flushed;
	unsigned long peer_timeout;
	unsigned long heard;
	bool probing;
	struct ib_cqe probe_cqe;
};

/**
 * struct krping_counts - the completion counters of every run
 * @recv: successful receive completions of messages (this and the other
 *	counters: see krping/count.h)
 * @recv_expected: receives the thread has waited for so far
 * @send: successful SEND completions of messages
 * @rdma: successful RDMA READ/WRITE completions (slat, sbw: data SENDs)
 *
 * A benchmark's own counters are in its state (struct krping_fr,
 * struct krping_send_bench).
 */
struct krping_counts {
	atomic64_t recv;
	u64 recv_expected;
	atomic64_t send;
	atomic64_t rdma;
};

/**
 * struct krping_bench_state - what every benchmark shares (bench.c)
 * @total: iterations to run, warm-up included; 0 runs until stopped, or
 *	until the client's time is up in a timed run
 * @warmup: the first iterations, run but not measured
 * @timed: duration_ms is set: the client ends the run, the server
 *	follows it (krping_bench_peer_done())
 * @deadline_ns: a timed run's client: when its measured part ends
 * @measuring: the measured part has begun (progress/)
 * @measured_end_ns: when the measured part ended (progress/)
 * @peer_addr: the peer's buffer, from its advertisement
 * @peer_rkey: its rkey
 * @rdma_posted: RDMA READ/WRITEs (slat, sbw: data SENDs) posted
 * @fin_empty: the closing SEND carries no bytes (a timed slat or sbw,
 *	whose server takes it into a data receive)
 * @fin_posted: the client's closing SEND is posted: the next receive is
 *	the answer to it
 * @fin_counted: that SEND is counted in the stats (on its completion or
 *	on the answer, whichever comes first)
 * @fin_cqe: completion handler of that SEND
 *
 * bench.c sets it up; post.c posts and counts the closing SEND (the
 * fin_* fields, also read, as all false, by a ping's receives).
 */
struct krping_bench_state {
	u32 total;
	u32 warmup;
	bool timed;
	u64 deadline_ns;
	bool measuring;
	u64 measured_end_ns;
	u64 peer_addr;
	u32 peer_rkey;
	u64 rdma_posted;
	bool fin_empty;
	bool fin_posted;
	atomic_t fin_counted;
	struct ib_cqe fin_cqe;
};

/**
 * struct krping_bw_result - the bandwidth figure of a run
 * @msgs: measured operations completed
 * @bytes: bytes they moved
 * @ns: the time they took
 * @start_ns: when the first was posted (ktime_get_ns())
 */
struct krping_bw_result {
	u64 msgs;
	u64 bytes;
	u64 ns;
	u64 start_ns;
};

/**
 * struct krping_stream - a bandwidth stream (bench_bw.c): bw's, and an
 *	sbw client's
 * @cqe: completion handler of a signaled WRITE or SEND, which also
 *	completes the unsignaled ones posted before it
 * @every: one WRITE or SEND in this many is signaled
 * @total: the operations of the run once known, 0 before (a signaled
 *	completion covers those up to the next multiple of @every, the
 *	warm-up's end or this, whichever comes first); written by the
 *	thread, read by the completion handler
 * @last_ns: when its last completion was seen (ktime_get_ns())
 * @result: the figure, once the stream has ended
 *
 * Only bench_bw.c touches it; its completion handler finds it from its
 * work request's cqe (container_of()).
 */
struct krping_stream {
	struct ib_cqe cqe;
	u32 every;
	atomic64_t total;
	u64 last_ns;
	struct krping_bw_result result;
};

/**
 * struct krping_fr - the state of fr (bench_fr.c)
 * @mrs: the MRs registered and invalidated
 * @nmrs: how many of @mrs are allocated
 * @count: completed LOCAL_INVs (a completion counter, see count.h)
 * @cqe: completion handler of LOCAL_INV
 *
 * Only bench_fr.c touches it; krping_teardown() has it release the MRs
 * (krping_bench_fr_release()).
 */
struct krping_fr {
	struct krping_mr *mrs;
	u32 nmrs;
	atomic64_t count;
	struct ib_cqe cqe;
};

/**
 * struct krping_send_bench - the state of slat and sbw (bench_send.c)
 * @data_count: successful receives of the peer's data SENDs (a
 *	completion counter, see count.h)
 * @data_recv_cqe: completion handler of a data receive
 * @data_send_cqe: slat: completion handler of a data SEND
 * @grant_cqe: sbw server: completion handler of a grant WRITE
 * @grant_buf: sbw server: the source of a grant WRITE
 * @sbw_depth: sbw server: data receives kept posted
 * @sbw_posted: sbw server: data receives posted so far
 * @sbw_granted: sbw server: the last grant written to the client (the
 *	data receives it may fill), sent or in flight
 * @sbw_granting: sbw server: a grant WRITE is in flight
 * @sbw_seen: sbw client: the highest grant read so far
 * @stream: sbw client: its stream of SENDs, which bench_bw.c runs
 *	(krping_bench_stream()) and bench_send.c touches only by address
 *
 * Only bench_send.c touches it (but @stream); resources.c sizes the CQ
 * and QP by krping_bench_send_set_depth() and has the grant buffer allocated
 * and freed by krping_bench_send_alloc() and krping_bench_send_free().
 */
struct krping_send_bench {
	atomic64_t data_count;
	struct ib_cqe data_recv_cqe;
	struct ib_cqe data_send_cqe;
	struct ib_cqe grant_cqe;
	struct krping_buf grant_buf;
	u32 sbw_depth;
	u64 sbw_posted;
	u64 sbw_granted;
	bool sbw_granting;
	u64 sbw_seen;
	struct krping_stream stream;
};

/**
 * struct krping_run - state of one run
 * @sess: the session (results and state go there)
 * @opts: the run's settings
 * @grp: the group of a session with qps above 1, NULL otherwise
 * @index: the run's index in its group, 0 without one
 * @stats: the run's counters, one set of the session's
 * @closed: group server: the run takes no connection any more (under
 *	the group's lock)
 * @lat: per-iteration latency samples
 * @conn: its connection (cm.c, resources.c)
 * @io: its buffers, registrations and messages (resources.c, post.c)
 * @wait: its thread's wait state and keepalive (wait.c)
 * @counts: its completion counters (the completion handlers count, the
 *	thread waits on them)
 * @bench: benchmarks: their common state (bench.c)
 * @bw: bw: its stream (bench_bw.c)
 * @fr: fr: its MRs and counter (bench_fr.c)
 * @send_bench: slat, sbw: their receives, grants, and an sbw client's
 *	stream (bench_send.c)
 *
 * @bw, @fr and @send_bench share memory: a run uses the one of its test
 * (opts->test, which never changes: a server learns its client's plan,
 * not its test), and no other; ping, wlat and rlat use none. So code
 * outside a benchmark's file reaches its state only through that file's
 * functions, which check the test: krping_bench_bw_result(),
 * krping_bench_send_set_depth(), krping_bench_send_alloc(),
 * krping_bench_send_free() and krping_bench_fr_release(). The run is
 * kzalloc'ed, so the union starts zeroed, and a cqe in it is set and
 * posted only for a run of its test (an sbw client's stream by
 * bench_bw.c, on behalf of bench_send.c).
 */
struct krping_run {
	struct krping_session *sess;
	const struct krping_options *opts;
	struct krping_group *grp;
	u32 index;
	struct krping_stats *stats;
	bool closed;
	struct krping_lat lat;

	struct krping_conn conn;
	struct krping_io io;
	struct krping_wait wait;
	struct krping_counts counts;
	struct krping_bench_state bench;
	union {
		struct krping_stream bw;
		struct krping_fr fr;
		struct krping_send_bench send_bench;
	};
};

/* Every message krping sends with SEND: struct krping_rdma_info. */
#define KRPING_MSG_SIZE			sizeof(struct krping_rdma_info)
/* Receives of messages a run keeps posted (beside a test's own). */
#define KRPING_RECV_DEPTH		1
/* After our disconnect, how long flushed work may take to come back. */
#define KRPING_FLUSH_TIMEOUT		(5 * HZ)
/*
 * Connection requests a listener may hold before it takes them. On
 * iWARP it is the TCP listener's backlog, and siw also sizes the
 * listener's pool of accept work by it, two items short of what a burst
 * of connections needs (fixed by the test bed's siw patch 0006): with
 * 1, a few TCP connections that open and close at once (a port scan)
 * use up the pool and a real client behind them is never accepted.
 * rping listens with 3.
 */
#define KRPING_LISTEN_BACKLOG		8

static inline const char *krping_run_name(const struct krping_run *run)
{
	return config_item_name(&run->sess->item);
}

/* wait.c */
void krping_wait_init(struct krping_run *run);
void krping_wake(struct krping_run *run);
void krping_fail(struct krping_run *run, int err);
bool krping_broken(const struct krping_run *run);
bool krping_should_stop(const struct krping_run *run);
bool krping_told_to_stop(const struct krping_run *run);
int krping_wait_result(const struct krping_run *run, int wait_ret);
int krping_wait_cm_verdict(struct krping_run *run);
int krping_wait_cm(struct krping_run *run, int milestone);
void krping_run_state(struct krping_run *run, int state);
int krping_check(struct krping_run *run);
int krping_wait_count(struct krping_run *run, const atomic64_t *counter,
		      u64 target);
int krping_wait_disconnect(struct krping_run *run, unsigned long timeout);

/*
 * What ends the thread's sleep: an event since it read @seen of
 * wait.events (a CM or CQ handler ran), or the run is to stop.
 */
static inline bool krping_woken(const struct krping_run *run, int seen)
{
	return atomic_read(&run->wait.events) != seen ||
	       krping_should_stop(run);
}

/* cm.c */
#ifdef CONFIG_FAULT_INJECTION
void krping_handoff_delay(void);
#else
static inline void krping_handoff_delay(void) { }
#endif
int krping_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
const struct krping_hello *krping_hello_of(const struct rdma_cm_event *ev);
void krping_take_hello(struct krping_run *run,
		       const struct rdma_cm_event *ev,
		       const struct krping_hello *hello);
u32 krping_hello_qps(const struct krping_hello *hello);
void krping_set_port(struct sockaddr_storage *ss, u16 port);
int krping_connect(struct krping_run *run);
int krping_accept(struct krping_run *run);
void krping_destroy_id(struct rdma_cm_id *id);

/* group.c */
int krping_listen(struct krping_group *grp);
int krping_group_barrier(struct krping_run *run);

/* resources.c */
void krping_run_init(struct krping_run *run, struct krping_session *sess,
		     const struct krping_options *opts);
int krping_setup(struct krping_run *run, struct rdma_cm_id *id);
int krping_buf_alloc(struct krping_run *run, struct krping_buf *b,
		     u32 size, enum dma_data_direction dir);
void krping_buf_free(struct krping_run *run, struct krping_buf *b);
int krping_mr_alloc(struct krping_run *run, struct krping_mr *m,
		    struct krping_buf *b);
bool krping_server_registers(const struct krping_run *run, bool read);
void krping_teardown(struct krping_run *run);

/* run.c */
void krping_group_fail(struct krping_group *grp, int err);

/**
 * krping_conn_errno() - a run's errno as its session reports it
 * @err: a negative errno that ends the run
 *
 * siw refuses a post to a QP that a disconnect is moving out of RTS
 * (-ENOTCONN) where rxe and ropcie accept the work and flush it. Either
 * way the connection ended under the run, which krping reports as
 * -ECONNRESET.
 *
 * Return: @err, or -ECONNRESET for -ENOTCONN.
 */
static inline int krping_conn_errno(int err)
{
	return err == -ENOTCONN ? -ECONNRESET : err;
}

/* post.c */
void krping_post_init(struct krping_run *run);
bool krping_wc_ok(struct krping_run *run, struct ib_wc *wc, enum krping_wr wr);
int krping_post_recv(struct krping_run *run);
int krping_post_fin(struct krping_run *run);
void krping_count_send(struct krping_run *run);
int krping_send_msg(struct krping_run *run, u64 addr, u32 rkey, u32 size,
		    u32 invalidate_rkey);
int krping_post_reg(struct krping_run *run, struct krping_mr *m, int access);
int krping_rdma(struct krping_run *run, enum ib_wr_opcode opcode,
		struct ib_sge *sge, u64 remote_addr, u32 rkey,
		struct krping_mr *reg, int reg_access);

/* ping.c */
int krping_ping(struct krping_run *run);

/* bench.c, bench_lat.c, bench_bw.c, bench_fr.c, bench_send.c */
int krping_bench(struct krping_run *run);
int krping_bench_wlat(struct krping_run *run);
int krping_bench_rlat(struct krping_run *run);
int krping_bench_bw(struct krping_run *run);
int krping_bench_fr(struct krping_run *run);
int krping_bench_slat(struct krping_run *run);
int krping_bench_sbw(struct krping_run *run);
int krping_bench_send_setup(struct krping_run *run);
int krping_bench_stream(struct krping_run *run, struct krping_stream *stream,
			enum ib_wr_opcode opcode);
int krping_sbw_wait_grant(struct krping_run *run, u64 sent);
bool krping_bench_next(struct krping_run *run, u64 i);
bool krping_bench_peer_done(const struct krping_run *run);
void krping_bench_sample(struct krping_run *run, u64 i, u64 ns);
void krping_bench_started(struct krping_run *run, u64 now);
void krping_bench_progress(struct krping_run *run, u64 first, u32 n,
			   u64 bytes);
int krping_bench_post(struct krping_run *run, enum ib_wr_opcode opcode,
		      struct ib_cqe *cqe, bool signaled);
/*
 * What other files ask of a benchmark's own state (see struct
 * krping_run): each checks the run's test.
 */
void krping_bench_bw_result(const struct krping_run *run,
			    struct krping_bw_result *res);
void krping_bench_fr_release(struct krping_run *run);
int krping_bench_send_set_depth(struct krping_run *run,
				const struct ib_device_attr *attr);
int krping_bench_send_alloc(struct krping_run *run);
void krping_bench_send_free(struct krping_run *run);

/*
 * A pause in a busy loop (wlat's spin on its sink, poll=1 waits), and
 * one of the few places where yield() is right. The loop waits for work
 * that a software device does in a kworker on the same CPU (rxe places
 * the peer's WRITE and completes our requests there). cond_resched()
 * lets that kworker run only once the tick ends our slice, and a lower
 * nice value does not change it: on a one-vCPU guest (HZ 250) wlat's
 * median was 4.0 ms either way, against rlat's 52 us. yield() puts this
 * thread behind the runnable kworker at once: 51 us. With nothing else
 * runnable it returns at once, so a spin on a real NIC loses nothing.
 */
static inline void krping_spin_yield(void)
{
	yield();
}

/* The peer showed life: work that needed it completed (keepalive). */
static inline void krping_heard(struct krping_run *run)
{
	WRITE_ONCE(run->wait.heard, jiffies);
}

#endif /* KRPING_RUN_H */
