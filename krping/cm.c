// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A run's rdma_cm side: the client's connect and the server's accept of
 * one connection, the CM event handler, and the krping hello that the
 * connection's private data carries.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>

#include "run.h"

#define KRPING_RESOLVE_TIMEOUT_MS	2000

#ifdef CONFIG_FAULT_INJECTION
/*
 * A fault-injection knob of kernels built for it (the test bed's debug
 * kernel), so that a test can widen the windows where a server hands a
 * connection request to a run; see krping_handoff_delay()'s callers.
 */
#define KRPING_HANDOFF_DELAY_MAX_MS	10000
static unsigned int handoff_delay_ms;
module_param(handoff_delay_ms, uint, 0600);
MODULE_PARM_DESC(handoff_delay_ms,
		 "fault injection: sleep this long (ms, at most 10000) where a server hands a connection request to a run");

/* Sleep handoff_delay_ms, in process context (a CM handler or a thread). */
void krping_handoff_delay(void)
{
	unsigned int ms = min_t(unsigned int, READ_ONCE(handoff_delay_ms),
				KRPING_HANDOFF_DELAY_MAX_MS);

	if (ms)
		msleep(ms);
}

#endif

/* The krping hello in a CM event's private data, or NULL if none. */
const struct krping_hello *krping_hello_of(const struct rdma_cm_event *ev)
{
	const struct krping_hello *hello = ev->param.conn.private_data;

	if (!hello || ev->param.conn.private_data_len < KRPING_HELLO_MIN_LEN ||
	    hello->magic != cpu_to_be32(KRPING_HELLO_MAGIC))
		return NULL;
	return hello;
}

/*
 * Keep what the peer's hello announces: its count, and its whole plan if
 * it sent one (a krping before KRPING_HELLO_PLAN sends the count only).
 */
void krping_take_hello(struct krping_run *run,
		       const struct rdma_cm_event *ev,
		       const struct krping_hello *hello)
{
	struct krping_conn *conn = &run->conn;

	conn->peer_hello = true;
	conn->peer.count = be32_to_cpu(hello->count);
	conn->peer_plan = ev->param.conn.private_data_len >= sizeof(*hello) &&
			 (be32_to_cpu(hello->flags) & KRPING_HELLO_PLAN);
	if (conn->peer_plan) {
		conn->peer.warmup = be32_to_cpu(hello->warmup);
		conn->peer.duration_ms = be32_to_cpu(hello->duration_ms);
	}
}

/* The qps a hello announces: 1 for none, or one that names none. */
u32 krping_hello_qps(const struct krping_hello *hello)
{
	u32 qps = hello ? FIELD_GET(KRPING_HELLO_QPS,
				    be32_to_cpu(hello->flags)) : 0;

	return qps ? qps : 1;
}

/* The hello flags that announce the run's qps and index. */
static u32 krping_hello_group(const struct krping_run *run)
{
	return FIELD_PREP(KRPING_HELLO_QPS, run->opts->qps) |
	       FIELD_PREP(KRPING_HELLO_INDEX, run->index);
}

int krping_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct krping_run *run = id->context;
	const struct krping_hello *hello;

	pr_debug("%s: %s, status %d\n", krping_run_name(run), rdma_event_msg(ev->event),
		 ev->status);

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		set_bit(KRPING_CM_ADDR_RESOLVED, &run->conn.cm_flags);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		set_bit(KRPING_CM_ROUTE_RESOLVED, &run->conn.cm_flags);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		hello = krping_hello_of(ev);
		/* A client of another qps: see krping_listen_handler(). */
		if (krping_hello_qps(hello) != 1)
			return -EINVAL;
		krping_handoff_delay();
		/*
		 * One connection per server session; refuse the others. On a
		 * wildcard address rdma_cm listens on each device with an id
		 * of its own, whose requests reach this handler in parallel:
		 * the one that sets the bit takes the run.
		 */
		if (test_and_set_bit(KRPING_CM_REQUEST_TAKEN,
				     &run->conn.cm_flags))
			return -EBUSY;
		if (hello)
			krping_take_hello(run, ev, hello);
		/* Pairs with smp_load_acquire() in krping_accept(). */
		smp_store_release(&run->conn.child, id);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* The client learns from the accept how the run ends. */
		hello = krping_hello_of(ev);
		if (run->opts->role == KRPING_ROLE_CLIENT && hello) {
			krping_take_hello(run, ev, hello);
			run->conn.server_leaves_first =
				be32_to_cpu(hello->flags) &
				KRPING_HELLO_LEAVES_FIRST;
		}
		/* Pairs with smp_rmb() in krping_wait_cm(). */
		smp_mb__before_atomic();
		set_bit(KRPING_CM_ESTABLISHED, &run->conn.cm_flags);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -ENETUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		krping_fail(run, ev->status < 0 ? ev->status : -EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		krping_fail(run, -ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		krping_fail(run, ev->status < 0 ? ev->status : -ECONNABORTED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		WRITE_ONCE(run->wait.disconnected, true);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		krping_fail(run, -ENODEV);
		break;
	default:
		break;
	}
	krping_wake(run);
	return 0;
}

void krping_set_port(struct sockaddr_storage *ss, u16 port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static int krping_create_id(struct krping_run *run)
{
	run->conn.cm_id = rdma_create_id(&init_net, krping_cm_handler, run,
					 RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(run->conn.cm_id)) {
		int ret = PTR_ERR(run->conn.cm_id);

		run->conn.cm_id = NULL;
		return ret;
	}
	if (run->opts->tos)
		rdma_set_service_type(run->conn.cm_id, run->opts->tos);
	return 0;
}

static void krping_conn_param(struct rdma_conn_param *p,
			      struct krping_hello *hello, u32 flags,
			      const struct krping_plan *plan)
{
	memset(p, 0, sizeof(*p));
	/*
	 * The server RDMA READs from the client, either side may send a
	 * keepalive READ: one read in flight each way.
	 */
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
	hello->magic = cpu_to_be32(KRPING_HELLO_MAGIC);
	hello->flags = cpu_to_be32(flags | KRPING_HELLO_PLAN);
	hello->count = cpu_to_be32(plan->count);
	hello->warmup = cpu_to_be32(plan->warmup);
	hello->duration_ms = cpu_to_be32(plan->duration_ms);
	p->private_data = hello;
	p->private_data_len = sizeof(*hello);
}

/*
 * Server: how the run ends, decided before the accept that tells the
 * client. A ping server without a count of its own runs the count its
 * krping client announced. With a count and a krping client it
 * disconnects first; an rping client disconnects first itself. A
 * benchmark's server follows the plan of a client that announced one
 * (krping_plan_follow()) and always leaves first (its client is krping).
 */
static void krping_plan_end(struct krping_run *run)
{
	struct krping_conn *conn = &run->conn;
	const struct krping_options *o = run->opts;

	krping_plan_of(o, &conn->plan);
	if (o->test != KRPING_TEST_PING) {
		if (conn->peer_plan)
			conn->plan_error = krping_plan_follow(o, &conn->peer,
							      &conn->plan);
		conn->server_leaves_first = true;
	} else {
		if (!conn->plan.count && conn->peer_hello)
			conn->plan.count = conn->peer.count;
		conn->server_leaves_first = conn->peer_hello &&
					    conn->plan.count;
	}
	pr_debug("%s: %s client, count %u, the %s disconnects first\n",
		 krping_run_name(run), conn->peer_hello ? "krping" : "foreign",
		 conn->plan.count,
		 conn->server_leaves_first ? "server" : "client");
	if (o->test != KRPING_TEST_PING)
		pr_debug("%s: plan: count %u, warmup %u, duration_ms %u%s\n",
			 krping_run_name(run), conn->plan.count,
			 conn->plan.warmup, conn->plan.duration_ms,
			 conn->plan_error ? ", not the client's" : "");
}

/**
 * krping_connect() - client: resolve, set up and connect
 * @run: the run
 *
 * Return: 0 when connected with a receive posted, or a negative errno.
 */
int krping_connect(struct krping_run *run)
{
	struct krping_conn *conn = &run->conn;
	struct sockaddr_storage dst = run->opts->addr;
	struct rdma_conn_param param;
	struct krping_hello hello;
	int ret;

	krping_set_port(&dst, run->opts->port);
	ret = krping_create_id(run);
	if (ret)
		return ret;

	ret = rdma_resolve_addr(conn->cm_id, NULL, (struct sockaddr *)&dst,
				KRPING_RESOLVE_TIMEOUT_MS);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ADDR_RESOLVED);
	if (!ret)
		ret = rdma_resolve_route(conn->cm_id,
					 KRPING_RESOLVE_TIMEOUT_MS);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ROUTE_RESOLVED);
	if (ret)
		return ret;

	krping_run_state(run, KRPING_STATE_CONNECTING);
	ret = krping_setup(run, conn->cm_id);
	if (!ret)
		ret = krping_post_recv(run);
	if (ret)
		return ret;

	krping_plan_of(run->opts, &conn->plan);
	krping_conn_param(&param, &hello, krping_hello_group(run), &conn->plan);
	ret = rdma_connect(conn->cm_id, &param);
	if (!ret)
		ret = krping_wait_cm(run, KRPING_CM_ESTABLISHED);
	/* A server that does not follow our plan ends with -EINVAL too. */
	if (!ret && run->opts->test != KRPING_TEST_PING && conn->peer_plan &&
	    !krping_plans_agree(&conn->plan, &conn->peer)) {
		pr_debug("%s: the server's plan is count %u, warmup %u, duration_ms %u\n",
			 krping_run_name(run), conn->peer.count,
			 conn->peer.warmup, conn->peer.duration_ms);
		return -EINVAL;
	}
	return ret;
}

/**
 * krping_accept() - server: listen, take one connection and accept it
 * @run: the run
 *
 * Return: 0 when connected with a receive posted, -EINVAL once a client
 * whose plan the server does not follow has seen the server's and left
 * (see krping_plan_end()), or another negative errno.
 */
int krping_accept(struct krping_run *run)
{
	struct krping_conn *conn = &run->conn;
	struct sockaddr_storage src = run->opts->addr;
	struct rdma_conn_param param;
	struct krping_hello hello;
	struct rdma_cm_id *child;
	int ret;

	/* In a group the session listens (krping_listen()). */
	if (!run->grp) {
		krping_set_port(&src, run->opts->port);
		ret = krping_create_id(run);
		if (ret)
			return ret;

		ret = rdma_bind_addr(conn->cm_id, (struct sockaddr *)&src);
		if (!ret)
			ret = rdma_listen(conn->cm_id, KRPING_LISTEN_BACKLOG);
		if (ret)
			return ret;

		krping_session_set_state(run->sess, KRPING_STATE_LISTENING);
	}
	ret = wait_event_interruptible(run->wait.wq,
				       READ_ONCE(conn->child) ||
				       krping_broken(run) ||
				       krping_should_stop(run));
	/* Pairs with smp_store_release() in krping_cm_handler(). */
	child = smp_load_acquire(&conn->child);
	if (!child)
		return krping_wait_result(run, ret);

	krping_run_state(run, KRPING_STATE_CONNECTING);
	ret = krping_setup(run, child);
	if (!ret)
		ret = krping_post_recv(run);
	/*
	 * A client that gave up (its REJ, its close) before we got here
	 * fails the QP's creation with -EINVAL, as the CM's state has moved
	 * on (ib_cm_init_qp_attr()); its REJECTED is on its way.
	 */
	if (ret && ret != -EINVAL)
		return ret;
	if (!ret) {
		krping_plan_end(run);
		krping_conn_param(&param, &hello, krping_hello_group(run) |
				  (conn->server_leaves_first ?
				   KRPING_HELLO_LEAVES_FIRST : 0), &conn->plan);
		/* Outside the CM handler rdma_accept() needs the lock. */
		rdma_lock_handler(child);
		ret = rdma_accept(child, &param);
		rdma_unlock_handler(child);
		if (!ret) {
			ret = krping_wait_cm(run, KRPING_CM_ESTABLISHED);
			if (!conn->plan_error || ret == -EINTR)
				return ret;
			/*
			 * A client whose plan we do not follow learns ours
			 * from the accept and disconnects, maybe before our
			 * ESTABLISHED (iWARP). Leave after it, so that our
			 * disconnect cannot overtake its ESTABLISHED.
			 */
			if (!ret)
				ret = krping_wait_disconnect(run,
							     KRPING_FLUSH_TIMEOUT);
			return ret == -EINTR ? ret : conn->plan_error;
		}
	}
	/*
	 * A client that gave up while we set up fails the accept with
	 * -EINVAL in the same way, before the handler lock we held let the
	 * CM tell us why. Either way, wait for the CM's verdict, which says
	 * why (KRPING_FLUSH_TIMEOUT at most).
	 */
	krping_wait_cm_verdict(run);
	if (krping_broken(run) || krping_told_to_stop(run))
		return krping_wait_result(run, 0);
	return ret;
}

/**
 * krping_destroy_id() - rdma_destroy_id(), the id's device kept meanwhile
 * @id: the id
 *
 * rdma_cm gives the id's device back (cma_release_dev()) before it puts
 * the id's GID attribute. A device being unregistered goes on as soon as
 * its last id has given it back, and if it frees its GID table before
 * that put, the put's free_gid_work() finds no table (a NULL pointer
 * dereference in ib_core, seen under a ropcie link delete with Debian's
 * 7.2). Unregistration waits for every reference on the device after
 * its clients are gone, so holding one across rdma_destroy_id() keeps
 * the table until the put has been made.
 */
void krping_destroy_id(struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	bool held = dev && ib_device_try_get(dev);

	rdma_destroy_id(id);
	if (held)
		ib_device_put(dev);
}
