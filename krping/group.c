// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A group of runs (qps above 1): the session's listener, which hands
 * each connection request to the run its hello names, and the barrier
 * at which the group's runs begin their tests together.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "run.h"

/**
 * krping_group_barrier() - wait until every run of the group is ready
 * @run: a benchmark's run, set up (buffers exchanged, receives posted)
 *
 * A group's runs begin their tests together, as perftest's QPs do, so
 * that the session's bandwidth (bytes over the first start to the last
 * end) measures them side by side rather than one after another as
 * they happened to connect. Each side waits for its own runs only: a
 * run is set up once its peer has answered, whatever the peer's other
 * runs do, so the two sides cannot wait for each other. Nothing is in
 * flight meanwhile. A run alone does not wait.
 *
 * Return: 0, -EINTR when told to stop, or the run's error.
 */
int krping_group_barrier(struct krping_run *run)
{
	struct krping_group *grp = run->grp;
	u32 i;
	int ret;

	if (!grp)
		return 0;
	if (atomic_inc_return(&grp->ready) == grp->n)
		for (i = 0; i < grp->n; i++)
			krping_wake(grp->runs[i]);
	ret = wait_event_interruptible(run->wait.wq,
				       atomic_read(&grp->ready) == grp->n ||
				       krping_broken(run) ||
				       krping_should_stop(run));
	if (atomic_read(&grp->ready) != grp->n || krping_told_to_stop(run))
		return krping_wait_result(run, ret);
	/* Its peer was not watched while it waited (krping_keepalive()). */
	krping_heard(run);
	return 0;
}

/*
 * The listener of a group (qps above 1). A connection request goes to
 * the run of the index its krping hello names, which accepts it in its
 * own thread; from then on the connection's events go to that run's
 * handler. A request without a hello, of another qps, for an index
 * taken, or for a run that has ended, is refused.
 */
static int krping_listen_handler(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	struct krping_group *grp = id->context;
	const struct krping_hello *hello;
	struct krping_run *run;
	u32 index;
	int ret = 0;

	pr_debug("%s: listener: %s, status %d\n",
		 config_item_name(&grp->sess->item),
		 rdma_event_msg(ev->event), ev->status);
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			krping_group_fail(grp, -ENODEV);
		return 0;
	}
	hello = krping_hello_of(ev);
	if (!hello || krping_hello_qps(hello) != grp->n)
		return -EINVAL;
	index = FIELD_GET(KRPING_HELLO_INDEX, be32_to_cpu(hello->flags));
	if (index >= grp->n)
		return -EINVAL;
	run = grp->runs[index];

	spin_lock(&grp->lock);
	if (run->closed || run->conn.child) {
		ret = -EBUSY;
	} else {
		krping_take_hello(run, ev, hello);
		id->context = run;
		id->event_handler = krping_cm_handler;
		/* Pairs with smp_load_acquire() in krping_accept(). */
		smp_store_release(&run->conn.child, id);
	}
	spin_unlock(&grp->lock);
	if (!ret)
		krping_wake(run);
	return ret;
}

/**
 * krping_listen() - a group's server: listen for all its connections
 * @grp: the group; its runs are allocated, their threads not started
 *
 * One listening id on the session's address and port takes the
 * connections of every run (krping_listen_handler()).
 *
 * Return: 0, or a negative errno with nothing left behind.
 */
int krping_listen(struct krping_group *grp)
{
	const struct krping_options *o = grp->opts;
	struct sockaddr_storage src = o->addr;
	struct rdma_cm_id *id;
	int ret;

	krping_set_port(&src, o->port);
	id = rdma_create_id(&init_net, krping_listen_handler, grp,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	if (o->tos)
		rdma_set_service_type(id, o->tos);
	ret = rdma_bind_addr(id, (struct sockaddr *)&src);
	if (!ret)
		ret = rdma_listen(id, max_t(int, grp->n, KRPING_LISTEN_BACKLOG));
	if (ret) {
		krping_destroy_id(id);
		return ret;
	}
	grp->listen_id = id;
	krping_session_set_state(grp->sess, KRPING_STATE_LISTENING);
	return 0;
}
