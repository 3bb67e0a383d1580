// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie as a fault-injecting device: what a real RDMA device does when
 * its network, its peer or its own resources fail, on demand, so that a
 * ULP's error paths can be tested. Per device, in debugfs
 * ropcie/<device>/ (root only, not a stable interface):
 *
 *   fail_wc/          work completions that fail with a chosen status
 *   fail_create_qp/   resource verbs that fail with -ENOMEM
 *   fail_create_cq/
 *   fail_alloc_mr/
 *   fail_reg_mr/
 *   fail_connect/     connection requests that time out or are refused
 *   fail_respond/     RDMA WRITEs and READs their target refuses
 *   fail_cq_overrun/  completions that find their CQ full and are lost
 *   event             async events: a QP's, a CQ's, the port's, the
 *                     device's, each with the state change it implies
 *   cq_delay_us       completions that come late
 *
 * Each fail_* directory decides when to strike as the kernel's fault
 * attributes do (probability, interval, times, space, verbose), without
 * CONFIG_FAULT_INJECTION, which Debian's kernels lack. Until a fault is
 * first armed, a delay first set or the port first taken down by
 * port_err, a static key keeps the data path's checks out of it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/random.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <rdma/restrack.h>

#include "ropcie.h"

DEFINE_STATIC_KEY_FALSE(ropcie_fault_armed);

/* The opcodes fail_wc/opcode names, as the completion names them. */
static const struct ropcie_fault_choice ropcie_fault_opcodes[] = {
	{ "any", -1 },
	{ "send", IB_WC_SEND },
	{ "rdma_write", IB_WC_RDMA_WRITE },
	{ "rdma_read", IB_WC_RDMA_READ },
	{ "local_inv", IB_WC_LOCAL_INV },
	{ "reg_mr", IB_WC_REG_MR },
	{ "recv", IB_WC_RECV },
};

/*
 * The statuses fail_wc/status takes: ib_wc_status's names in lower case,
 * but for WR_FLUSH_ERR, which follows a failure and is never the first.
 */
static const struct ropcie_fault_choice ropcie_fault_statuses[] = {
	{ "loc_len_err", IB_WC_LOC_LEN_ERR },
	{ "loc_qp_op_err", IB_WC_LOC_QP_OP_ERR },
	{ "loc_prot_err", IB_WC_LOC_PROT_ERR },
	{ "mw_bind_err", IB_WC_MW_BIND_ERR },
	{ "bad_resp_err", IB_WC_BAD_RESP_ERR },
	{ "loc_access_err", IB_WC_LOC_ACCESS_ERR },
	{ "rem_inv_req_err", IB_WC_REM_INV_REQ_ERR },
	{ "rem_access_err", IB_WC_REM_ACCESS_ERR },
	{ "rem_op_err", IB_WC_REM_OP_ERR },
	{ "retry_exc_err", IB_WC_RETRY_EXC_ERR },
	{ "rnr_retry_exc_err", IB_WC_RNR_RETRY_EXC_ERR },
	{ "rem_abort_err", IB_WC_REM_ABORT_ERR },
	{ "fatal_err", IB_WC_FATAL_ERR },
	{ "resp_timeout_err", IB_WC_RESP_TIMEOUT_ERR },
	{ "general_err", IB_WC_GENERAL_ERR },
};

/*
 * fail_connect/answer: how an active side hears of its request. rdma_cm
 * makes REJECTED of a refusal or reset, UNREACHABLE of a timeout and
 * CONNECT_ERROR of the rest (cma_iw_handler()).
 */
static const struct ropcie_fault_choice ropcie_fault_answers[] = {
	{ "timeout", -ETIMEDOUT },
	{ "refused", -ECONNREFUSED },
	{ "reset", -ECONNRESET },
	{ "unreachable", -EHOSTUNREACH },
};

/* The requests fail_respond/opcode names, as a requester posts them. */
static const struct ropcie_fault_choice ropcie_fault_respond_ops[] = {
	{ "any", -1 },
	{ "rdma_write", ROPCIE_OP_WRITE },
	{ "rdma_read", ROPCIE_OP_READ },
};

/* The answers a target gives a WRITE or READ it refuses. */
static const struct ropcie_fault_choice ropcie_fault_respond_statuses[] = {
	{ "rem_access_err", IB_WC_REM_ACCESS_ERR },
	{ "rem_op_err", IB_WC_REM_OP_ERR },
	{ "rem_inv_req_err", IB_WC_REM_INV_REQ_ERR },
};

/* The directories of the resource verbs' faults, which name them. */
static const char * const ropcie_fault_verb_dirs[] = {
	[ROPCIE_FAULT_CREATE_QP] = "fail_create_qp",
	[ROPCIE_FAULT_CREATE_CQ] = "fail_create_cq",
	[ROPCIE_FAULT_ALLOC_MR] = "fail_alloc_mr",
	[ROPCIE_FAULT_REG_MR] = "fail_reg_mr",
};

/*
 * Does the fault strike on this matching call? In the order of the
 * kernel's should_fail(): times, space, interval, probability. Exactly
 * @times calls fail, however many race for the last one.
 */
static bool ropcie_fault_strikes(struct ropcie_fault_attr *a,
				 const char *what)
{
	int times = atomic_read(&a->times);
	u32 interval = READ_ONCE(a->interval);
	u32 verbose;

	if (!times)
		return false;
	if (atomic_add_unless(&a->space, -1, 0))
		return false;
	if (interval > 1 && atomic_inc_return(&a->count) % interval)
		return false;
	if (READ_ONCE(a->probability) <= get_random_u32_below(100))
		return false;
	if (times != -1 && !atomic_add_unless(&a->times, -1, 0))
		return false;
	verbose = READ_ONCE(a->verbose);
	if (verbose && __ratelimit(&a->ratelimit)) {
		pr_notice("injected fault: %s\n", what);
		if (verbose > 1)
			dump_stack();
	}
	return true;
}

void __ropcie_fault_wc(struct ropcie_qp *qp, enum ib_wc_opcode opcode,
		       enum ib_wc_status *status)
{
	struct ropcie_faults *f = &qp->dev->faults;
	int want_op = READ_ONCE(f->wc_opcode);
	int want_qpn = READ_ONCE(f->wc_qpn);
	enum ib_wc_status st;

	if (want_op >= 0 && want_op != opcode)
		return;
	if (want_qpn >= 0 && want_qpn != qp->ibqp.qp_num)
		return;
	if (!ropcie_fault_strikes(&f->wc, "fail_wc"))
		return;
	st = READ_ONCE(f->wc_status);
	pr_debug("%s: QP %u: completion of opcode %d fails with status %d\n",
		 dev_name(&qp->dev->ibdev.dev), qp->ibqp.qp_num, opcode, st);
	*status = st;
}

bool __ropcie_fault_port_cut(const struct ropcie_dev *dev)
{
	return READ_ONCE(dev->faults.port_cut);
}

bool __ropcie_fault_verb(struct ropcie_dev *dev, enum ropcie_fault_verb verb)
{
	return ropcie_fault_strikes(&dev->faults.verb[verb],
				    ropcie_fault_verb_dirs[verb]);
}

int __ropcie_fault_connect(struct ropcie_dev *dev, u16 port)
{
	struct ropcie_faults *f = &dev->faults;
	int want_port = READ_ONCE(f->connect_port);

	if (want_port >= 0 && want_port != port)
		return 0;
	if (!ropcie_fault_strikes(&f->connect, "fail_connect"))
		return 0;
	return READ_ONCE(f->connect_answer);
}

bool __ropcie_fault_respond(struct ropcie_qp *tqp, int op,
			    enum ib_wc_status *status)
{
	struct ropcie_faults *f = &tqp->dev->faults;
	int want_op = READ_ONCE(f->respond_opcode);
	int want_qpn = READ_ONCE(f->respond_qpn);

	if (want_op >= 0 && want_op != op)
		return false;
	if (want_qpn >= 0 && want_qpn != tqp->ibqp.qp_num)
		return false;
	if (!ropcie_fault_strikes(&f->respond, "fail_respond"))
		return false;
	*status = READ_ONCE(f->respond_status);
	pr_debug("%s: QP %u refuses a request of op %d with status %d\n",
		 dev_name(&tqp->dev->ibdev.dev), tqp->ibqp.qp_num, op, *status);
	return true;
}

bool __ropcie_fault_cq_overrun(struct ropcie_dev *dev, const struct ib_wc *wc)
{
	struct ropcie_faults *f = &dev->faults;
	u32 qpn = wc->qp->qp_num;
	int want_op, want_qpn;

	/* A failure or a flush only overruns a CQ that is full. */
	if (wc->status != IB_WC_SUCCESS)
		return false;
	want_op = READ_ONCE(f->overrun_opcode);
	want_qpn = READ_ONCE(f->overrun_qpn);
	if (want_op >= 0 && want_op != wc->opcode)
		return false;
	if (want_qpn >= 0 && want_qpn != qpn)
		return false;
	if (!ropcie_fault_strikes(&f->overrun, "fail_cq_overrun"))
		return false;
	pr_debug("%s: QP %u: completion of opcode %d overruns its CQ\n",
		 dev_name(&dev->ibdev.dev), qpn, wc->opcode);
	return true;
}

u64 __ropcie_fault_cq_delay_ns(struct ropcie_dev *dev)
{
	return (u64)READ_ONCE(dev->faults.cq_delay_us) * NSEC_PER_USEC;
}

/* Copy a short command from user space into @buf, without its newline. */
static int ropcie_fault_get_line(char *buf, size_t size,
				 const char __user *ubuf, size_t len)
{
	if (!len || len >= size)
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	if (strlen(buf) != len)
		return -EINVAL;
	strim(buf);
	return 0;
}

/*
 * times: arming one turns the static key on, for good, and starts the
 * count of interval over, so that "interval N, times 1" fails the N-th
 * matching call from here.
 */
static int ropcie_fault_times_get(void *data, u64 *val)
{
	struct ropcie_fault_attr *a = data;

	*val = (u64)(s64)atomic_read(&a->times);
	return 0;
}

static int ropcie_fault_times_set(void *data, u64 val)
{
	struct ropcie_fault_attr *a = data;
	s64 v = (s64)val;

	if (v < -1 || v > INT_MAX)
		return -ERANGE;
	if (v)
		static_branch_enable(&ropcie_fault_armed);
	atomic_set(&a->count, 0);
	atomic_set(&a->times, (int)v);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE_SIGNED(ropcie_fault_times_fops,
				ropcie_fault_times_get, ropcie_fault_times_set,
				"%lld\n");

/* space: a count of calls, 0 to INT_MAX. */
static int ropcie_fault_space_get(void *data, u64 *val)
{
	*val = (u64)(s64)atomic_read((atomic_t *)data);
	return 0;
}

static int ropcie_fault_space_set(void *data, u64 val)
{
	s64 v = (s64)val;

	if (v < 0 || v > INT_MAX)
		return -ERANGE;
	atomic_set((atomic_t *)data, (int)v);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE_SIGNED(ropcie_fault_space_fops,
				ropcie_fault_space_get, ropcie_fault_space_set,
				"%lld\n");

static void ropcie_fault_attr_add(struct ropcie_fault_attr *a,
				  struct dentry *dir)
{
	/* As the kernel's defaults: every call a candidate, none fails. */
	a->probability = 100;
	a->interval = 1;
	/*
	 * 10 lines every 5 s at most (the kernel's fault attributes do not
	 * limit by default): a fault with times -1 must not flood the log.
	 */
	ratelimit_state_init(&a->ratelimit, DEFAULT_RATELIMIT_INTERVAL,
			     DEFAULT_RATELIMIT_BURST);
	debugfs_create_u32("probability", 0600, dir, &a->probability);
	debugfs_create_u32("interval", 0600, dir, &a->interval);
	debugfs_create_file_unsafe("times", 0600, dir, a,
				   &ropcie_fault_times_fops);
	debugfs_create_file_unsafe("space", 0600, dir, &a->space,
				   &ropcie_fault_space_fops);
	debugfs_create_u32("verbose", 0600, dir, &a->verbose);
}

/*
 * The opcode, status and answer files: a word of the file's table of
 * choices, which names the value stored.
 */
static int ropcie_fault_choice_show(struct seq_file *m, void *unused)
{
	const struct ropcie_fault_choice_file *cf = m->private;
	int value = READ_ONCE(*cf->value);
	unsigned int i;

	for (i = 0; i < cf->n; i++)
		if (cf->table[i].value == value)
			seq_printf(m, "%s\n", cf->table[i].name);
	return 0;
}

static int ropcie_fault_choice_open(struct inode *inode, struct file *file)
{
	return single_open(file, ropcie_fault_choice_show, inode->i_private);
}

static ssize_t ropcie_fault_choice_write(struct file *file,
					 const char __user *ubuf, size_t len,
					 loff_t *ppos)
{
	const struct ropcie_fault_choice_file *cf = file_inode(file)->i_private;
	unsigned int i;
	char buf[24];
	int ret;

	ret = ropcie_fault_get_line(buf, sizeof(buf), ubuf, len);
	if (ret)
		return ret;
	for (i = 0; i < cf->n; i++) {
		if (!strcmp(buf, cf->table[i].name)) {
			WRITE_ONCE(*cf->value, cf->table[i].value);
			return len;
		}
	}
	return -EINVAL;
}

static const struct file_operations ropcie_fault_choice_fops = {
	.owner = THIS_MODULE,
	.open = ropcie_fault_choice_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.write = ropcie_fault_choice_write,
	.release = single_release,
};

/* The qpn and port files: a number, or -1 for any. */
static int ropcie_fault_int_get(void *data, u64 *val)
{
	*val = (u64)(s64)READ_ONCE(*(int *)data);
	return 0;
}

static int ropcie_fault_qpn_set(void *data, u64 val)
{
	s64 v = (s64)val;

	if (v < -1 || v > 0xffffff)
		return -ERANGE;
	WRITE_ONCE(*(int *)data, (int)v);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE_SIGNED(ropcie_fault_qpn_fops,
				ropcie_fault_int_get, ropcie_fault_qpn_set,
				"%lld\n");

/* fail_connect/port: a TCP-style port, or -1 for any. */
static int ropcie_fault_port_set(void *data, u64 val)
{
	s64 v = (s64)val;

	if (v < -1 || v > U16_MAX)
		return -ERANGE;
	WRITE_ONCE(*(int *)data, (int)v);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE_SIGNED(ropcie_fault_port_fops,
				ropcie_fault_int_get, ropcie_fault_port_set,
				"%lld\n");

/* cq_delay_us: 0 (the default) delays nothing. */
static int ropcie_fault_cq_delay_get(void *data, u64 *val)
{
	*val = READ_ONCE(*(u32 *)data);
	return 0;
}

static int ropcie_fault_cq_delay_set(void *data, u64 val)
{
	if (val > ROPCIE_FAULT_MAX_CQ_DELAY_US)
		return -ERANGE;
	if (val)
		static_branch_enable(&ropcie_fault_armed);
	WRITE_ONCE(*(u32 *)data, (u32)val);
	return 0;
}

DEFINE_DEBUGFS_ATTRIBUTE(ropcie_fault_cq_delay_fops,
			 ropcie_fault_cq_delay_get, ropcie_fault_cq_delay_set,
			 "%llu\n");

/* A QP of @dev by number, with a reference, or NULL. */
static struct ropcie_qp *ropcie_fault_get_qp(struct ropcie_dev *dev, u32 qpn)
{
	struct ropcie_qp *qp;
	unsigned long flags;

	/* Destroy erases the QP under this lock before it drops its ref. */
	xa_lock_irqsave(&dev->qp_xa, flags);
	qp = xa_load(&dev->qp_xa, qpn);
	if (qp)
		ropcie_qp_get(qp);
	xa_unlock_irqrestore(&dev->qp_xa, flags);
	return qp;
}

/* Tell @qp's ULP of @type, then move @qp to error, as hardware does. */
static void ropcie_fault_qp_event(struct ropcie_qp *qp,
				  enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.event = type,
		.element.qp = &qp->ibqp,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	ropcie_qp_set_error(qp);
}

/*
 * Call @fn for every QP of @dev that uses @cq (any, when NULL), holding
 * a reference: ropcie_qp_set_error() on a CQ error the device reports
 * or a fatal error of its own (a CQ that overruns, for real or by
 * fail_cq_overrun, moves only the QP whose completion it lost:
 * ropcie_cq_push()), ropcie_qp_kick() when the port is cut.
 */
static void ropcie_fault_qps_apply(struct ropcie_dev *dev,
				   struct ropcie_cq *cq,
				   void (*fn)(struct ropcie_qp *qp))
{
	struct ropcie_qp *qp;
	unsigned long index;

	xa_lock_irq(&dev->qp_xa);
	xa_for_each(&dev->qp_xa, index, qp) {
		if (cq && qp->scq != cq && qp->rcq != cq)
			continue;
		ropcie_qp_get(qp);
		xa_unlock_irq(&dev->qp_xa);
		fn(qp);
		ropcie_qp_put(qp);
		xa_lock_irq(&dev->qp_xa);
	}
	xa_unlock_irq(&dev->qp_xa);
}

/* cq_err CQN: @cqn is the CQ's number in `rdma res show cq`. */
static int ropcie_fault_cq_err(struct ropcie_dev *dev, u32 cqn)
{
	struct rdma_restrack_entry *res;
	struct ib_cq *ibcq;

	res = rdma_restrack_get_byid(&dev->ibdev, RDMA_RESTRACK_CQ, cqn);
	if (IS_ERR(res))
		return PTR_ERR(res);
	ibcq = container_of(res, struct ib_cq, res);
	ropcie_cq_error(to_rcq(ibcq), "injected CQ error");
	ropcie_fault_qps_apply(dev, to_rcq(ibcq), ropcie_qp_set_error);
	rdma_restrack_put(res);
	return 0;
}

/*
 * How long requests still go through a port after event port_err: an RC
 * requester's retries (its local ACK timeout times its retry count, as
 * ULPs set them) run out after about this long.
 */
#define ROPCIE_PORT_RETRY_MS	1000

/*
 * The retries through the DOWN port ran out: requests fail from now on,
 * and a SEND that waits for the peer's receive is woken to fail.
 */
static void ropcie_fault_port_cut_work(struct work_struct *work)
{
	struct ropcie_faults *f = container_of(to_delayed_work(work),
					       struct ropcie_faults,
					       port_cut_work);
	struct ropcie_dev *dev = container_of(f, struct ropcie_dev, faults);

	if (ropcie_port_cut_if_down(dev))
		ropcie_fault_qps_apply(dev, NULL, ropcie_qp_kick);
}

enum ropcie_fault_event {
	ROPCIE_EV_QP_FATAL,
	ROPCIE_EV_QP_REQ_ERR,
	ROPCIE_EV_QP_ACCESS_ERR,
	ROPCIE_EV_CONN_RESET,
	ROPCIE_EV_CQ_ERR,
	ROPCIE_EV_PORT_ERR,
	ROPCIE_EV_PORT_ACTIVE,
	ROPCIE_EV_DEVICE_FATAL,
};

/* The events' names in the event file; the first five take a number. */
static const char * const ropcie_fault_events[] = {
	[ROPCIE_EV_QP_FATAL] = "qp_fatal",
	[ROPCIE_EV_QP_REQ_ERR] = "qp_req_err",
	[ROPCIE_EV_QP_ACCESS_ERR] = "qp_access_err",
	[ROPCIE_EV_CONN_RESET] = "conn_reset",
	[ROPCIE_EV_CQ_ERR] = "cq_err",
	[ROPCIE_EV_PORT_ERR] = "port_err",
	[ROPCIE_EV_PORT_ACTIVE] = "port_active",
	[ROPCIE_EV_DEVICE_FATAL] = "device_fatal",
};

static const enum ib_event_type ropcie_fault_qp_events[] = {
	[ROPCIE_EV_QP_FATAL] = IB_EVENT_QP_FATAL,
	[ROPCIE_EV_QP_REQ_ERR] = IB_EVENT_QP_REQ_ERR,
	[ROPCIE_EV_QP_ACCESS_ERR] = IB_EVENT_QP_ACCESS_ERR,
};

static int ropcie_fault_event(struct ropcie_dev *dev,
			      enum ropcie_fault_event ev, u32 num)
{
	struct ropcie_qp *qp;

	switch (ev) {
	case ROPCIE_EV_QP_FATAL:
	case ROPCIE_EV_QP_REQ_ERR:
	case ROPCIE_EV_QP_ACCESS_ERR:
		qp = ropcie_fault_get_qp(dev, num);
		if (!qp)
			return -ENOENT;
		ropcie_fault_qp_event(qp, ropcie_fault_qp_events[ev]);
		ropcie_qp_put(qp);
		return 0;
	case ROPCIE_EV_CONN_RESET:
		/*
		 * The connection closes under the QP, with no event of the
		 * QP's own, as from below: the QP flushes and closes
		 * (ropcie_cm_close(): its peer hears DISCONNECT and CLOSE,
		 * its own cm_id CLOSE), so rdma_cm tells both ULPs
		 * DISCONNECTED.
		 */
		qp = ropcie_fault_get_qp(dev, num);
		if (!qp)
			return -ENOENT;
		ropcie_qp_set_error(qp);
		ropcie_qp_put(qp);
		return 0;
	case ROPCIE_EV_CQ_ERR:
		return ropcie_fault_cq_err(dev, num);
	case ROPCIE_EV_PORT_ERR:
		/*
		 * The handlers hear PORT_ERR (from ib_wq) before the port
		 * is cut, as on hardware, where requests fail only once
		 * their retries ran out.
		 */
		static_branch_enable(&ropcie_fault_armed);
		ropcie_set_port_state(dev, IB_PORT_DOWN);
		flush_workqueue(ib_wq);
		mod_delayed_work(system_wq, &dev->faults.port_cut_work,
				 msecs_to_jiffies(ROPCIE_PORT_RETRY_MS));
		return 0;
	case ROPCIE_EV_PORT_ACTIVE:
		ropcie_set_port_state(dev, IB_PORT_ACTIVE);
		return 0;
	case ROPCIE_EV_DEVICE_FATAL:
		/*
		 * ib_core hands the event to its handlers from ib_wq: they
		 * hear it before the QPs flush, so that the flushes are
		 * taken for what they follow.
		 */
		ropcie_port_event(dev, IB_EVENT_DEVICE_FATAL);
		flush_workqueue(ib_wq);
		ropcie_fault_qps_apply(dev, NULL, ropcie_qp_set_error);
		return 0;
	}
	return -EINVAL;
}

/*
 * event: "qp_fatal QPN", "qp_req_err QPN", "qp_access_err QPN",
 * "conn_reset QPN", "cq_err CQN", "port_err", "port_active" or
 * "device_fatal". -EINVAL for
 * an unknown event or a number missing or given where none belongs,
 * -ENOENT for a QP or CQ that does not exist.
 */
static ssize_t ropcie_fault_event_write(struct file *file,
					const char __user *ubuf, size_t len,
					loff_t *ppos)
{
	struct ropcie_dev *dev = file_inode(file)->i_private;
	char buf[32], *arg;
	bool needs_num;
	u32 num = 0;
	int ev, ret;

	ret = ropcie_fault_get_line(buf, sizeof(buf), ubuf, len);
	if (ret)
		return ret;
	arg = strchr(buf, ' ');
	if (arg) {
		*arg++ = '\0';
		if (kstrtou32(arg, 0, &num))
			return -EINVAL;
	}
	ev = match_string(ropcie_fault_events, ARRAY_SIZE(ropcie_fault_events),
			  buf);
	/* The QP and CQ events take a number, the others none. */
	needs_num = ev <= ROPCIE_EV_CQ_ERR;
	if (ev < 0 || !arg == needs_num)
		return -EINVAL;
	ret = ropcie_fault_event(dev, ev, num);
	if (ret)
		return ret;
	pr_debug("%s: injected %s\n", dev_name(&dev->ibdev.dev),
		 ropcie_fault_events[ev]);
	return len;
}

static const struct file_operations ropcie_fault_event_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ropcie_fault_event_write,
	.llseek = noop_llseek,
};

/**
 * ropcie_fault_init() - a new device's faults, before it is registered
 * @dev: the device
 *
 * Its port's netdev may change state at once: the cut a port_err leaves
 * pending is ready to be called off.
 */
void ropcie_fault_init(struct ropcie_dev *dev)
{
	INIT_DELAYED_WORK(&dev->faults.port_cut_work,
			  ropcie_fault_port_cut_work);
}

/**
 * ropcie_fault_add() - the debugfs directory of a registered device
 * @dev: the device; its faults are all off
 *
 * Named as the device was registered; a renamed device keeps it.
 */
void ropcie_fault_add(struct ropcie_dev *dev)
{
	struct ropcie_faults *f = &dev->faults;
	struct dentry *wc, *conn, *resp, *over;
	unsigned int i;

	f->wc_opcode = -1;
	f->wc_qpn = -1;
	f->wc_status = IB_WC_RETRY_EXC_ERR;
	f->dir = debugfs_create_dir(dev_name(&dev->ibdev.dev), ropcie_debugfs);

	wc = debugfs_create_dir("fail_wc", f->dir);
	ropcie_fault_attr_add(&f->wc, wc);
	f->wc_opcode_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_opcodes, ARRAY_SIZE(ropcie_fault_opcodes),
		&f->wc_opcode,
	};
	f->wc_status_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_statuses, ARRAY_SIZE(ropcie_fault_statuses),
		&f->wc_status,
	};
	debugfs_create_file("opcode", 0600, wc, &f->wc_opcode_file,
			    &ropcie_fault_choice_fops);
	debugfs_create_file("status", 0600, wc, &f->wc_status_file,
			    &ropcie_fault_choice_fops);
	debugfs_create_file_unsafe("qpn", 0600, wc, &f->wc_qpn,
				   &ropcie_fault_qpn_fops);
	for (i = 0; i < ROPCIE_FAULT_NR_VERBS; i++)
		ropcie_fault_attr_add(&f->verb[i],
				      debugfs_create_dir(ropcie_fault_verb_dirs[i],
							 f->dir));

	f->connect_port = -1;
	f->connect_answer = -ETIMEDOUT;
	f->connect_answer_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_answers, ARRAY_SIZE(ropcie_fault_answers),
		&f->connect_answer,
	};
	conn = debugfs_create_dir("fail_connect", f->dir);
	ropcie_fault_attr_add(&f->connect, conn);
	debugfs_create_file_unsafe("port", 0600, conn, &f->connect_port,
				   &ropcie_fault_port_fops);
	debugfs_create_file("answer", 0600, conn, &f->connect_answer_file,
			    &ropcie_fault_choice_fops);

	f->respond_opcode = -1;
	f->respond_qpn = -1;
	f->respond_status = IB_WC_REM_ACCESS_ERR;
	f->respond_opcode_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_respond_ops, ARRAY_SIZE(ropcie_fault_respond_ops),
		&f->respond_opcode,
	};
	f->respond_status_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_respond_statuses,
		ARRAY_SIZE(ropcie_fault_respond_statuses), &f->respond_status,
	};
	resp = debugfs_create_dir("fail_respond", f->dir);
	ropcie_fault_attr_add(&f->respond, resp);
	debugfs_create_file("opcode", 0600, resp, &f->respond_opcode_file,
			    &ropcie_fault_choice_fops);
	debugfs_create_file("status", 0600, resp, &f->respond_status_file,
			    &ropcie_fault_choice_fops);
	debugfs_create_file_unsafe("qpn", 0600, resp, &f->respond_qpn,
				   &ropcie_fault_qpn_fops);

	f->overrun_opcode = -1;
	f->overrun_qpn = -1;
	f->overrun_opcode_file = (struct ropcie_fault_choice_file) {
		ropcie_fault_opcodes, ARRAY_SIZE(ropcie_fault_opcodes),
		&f->overrun_opcode,
	};
	over = debugfs_create_dir("fail_cq_overrun", f->dir);
	ropcie_fault_attr_add(&f->overrun, over);
	debugfs_create_file("opcode", 0600, over, &f->overrun_opcode_file,
			    &ropcie_fault_choice_fops);
	debugfs_create_file_unsafe("qpn", 0600, over, &f->overrun_qpn,
				   &ropcie_fault_qpn_fops);

	debugfs_create_file("event", 0200, f->dir, dev,
			    &ropcie_fault_event_fops);
	debugfs_create_file_unsafe("cq_delay_us", 0600, f->dir,
				   &f->cq_delay_us, &ropcie_fault_cq_delay_fops);
}

/*
 * Waits for the writers of the device's files to return, then for a
 * port_err's cut still to come.
 */
void ropcie_fault_remove(struct ropcie_dev *dev)
{
	struct ropcie_faults *f = &dev->faults;

	/* No write of event is left, so no cut can be queued after this. */
	debugfs_remove_recursive(f->dir);
	f->dir = NULL;
	cancel_delayed_work_sync(&f->port_cut_work);
}
