/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie's fault injection (fault.c): per device, in debugfs
 * ropcie/<device>/, failed work completions, failed resource verbs and
 * async events on demand, for testing the error paths of RDMA ULPs.
 */
#ifndef ROPCIE_FAULT_H
#define ROPCIE_FAULT_H

#include <linux/atomic.h>
#include <linux/jump_label.h>
#include <linux/ratelimit.h>
#include <linux/time64.h>
#include <rdma/ib_verbs.h>

struct dentry;
struct ropcie_dev;
struct ropcie_qp;

/**
 * struct ropcie_fault_attr - when a fault strikes, as the kernel's
 *	struct fault_attr decides (Documentation/fault-injection), with no
 *	need of CONFIG_FAULT_INJECTION
 * @times: failures left; -1 without limit; 0 (the default) never fails
 * @space: matching calls to let pass before the first failure
 * @count: matching calls seen; every @interval-th may fail
 * @probability: percent of the candidate calls that fail
 * @interval: see @count; 0 and 1 make every call a candidate
 * @verbose: 1 logs each failure, 2 with the caller's stack
 * @ratelimit: how many of those lines reach the log
 */
struct ropcie_fault_attr {
	atomic_t times;
	atomic_t space;
	atomic_t count;
	u32 probability;
	u32 interval;
	u32 verbose;
	struct ratelimit_state ratelimit;
};

/* The resource verbs that ropcie/<device>/fail_<verb>/ makes fail. */
enum ropcie_fault_verb {
	ROPCIE_FAULT_CREATE_QP,
	ROPCIE_FAULT_CREATE_CQ,
	ROPCIE_FAULT_ALLOC_MR,
	ROPCIE_FAULT_REG_MR,
	ROPCIE_FAULT_NR_VERBS,
};

/* A word of a debugfs file and the value it stands for. */
struct ropcie_fault_choice {
	const char *name;
	int value;
};

/* A debugfs file whose words name the values of @value (fault.c). */
struct ropcie_fault_choice_file {
	const struct ropcie_fault_choice *table;
	unsigned int n;
	int *value;
};

/**
 * struct ropcie_faults - a device's faults to inject
 * @dir: debugfs ropcie/<device>/
 * @wc: fail_wc/: the work completions to fail
 * @wc_opcode: fail_wc/opcode: the enum ib_wc_opcode to fail, or -1: any
 * @wc_qpn: fail_wc/qpn: the QP whose completions fail, or -1: any
 * @wc_status: fail_wc/status: the enum ib_wc_status they get
 * @wc_opcode_file: fail_wc/opcode's words
 * @wc_status_file: fail_wc/status's words
 * @verb: fail_<verb>/: the resource verbs to fail with -ENOMEM
 * @connect: fail_connect/: the connection requests to answer badly
 * @connect_port: fail_connect/port: their destination port, or -1: any
 * @connect_answer: fail_connect/answer: -ETIMEDOUT (no answer: the
 *	request times out) or the status the request is answered with
 * @connect_answer_file: fail_connect/answer's words
 * @cq_delay_us: cq_delay_us: how long a new completion stays out of
 *	sight of poll_cq and of the completion handler
 * @respond: fail_respond/: the RDMA WRITEs and READs a target QP of this
 *	device refuses, as the host that owns the memory decides
 * @respond_opcode: fail_respond/opcode: ROPCIE_OP_WRITE or
 *	ROPCIE_OP_READ, or -1: either
 * @respond_qpn: fail_respond/qpn: the target QP, or -1: any
 * @respond_status: fail_respond/status: what the requester's work
 *	request completes with
 * @respond_opcode_file: fail_respond/opcode's words
 * @respond_status_file: fail_respond/status's words
 * @overrun: fail_cq_overrun/: the completions that find their CQ full
 * @overrun_opcode: fail_cq_overrun/opcode: as @wc_opcode
 * @overrun_qpn: fail_cq_overrun/qpn: as @wc_qpn
 * @overrun_opcode_file: fail_cq_overrun/opcode's words
 * @port_cut: event port_err took the port down and its retries ran out:
 *	it carries nothing until it is ACTIVE again
 * @port_cut_work: sets @port_cut ROPCIE_PORT_RETRY_MS after port_err
 */
struct ropcie_faults {
	struct dentry *dir;
	struct ropcie_fault_attr wc;
	int wc_opcode;
	int wc_qpn;
	int wc_status;
	struct ropcie_fault_choice_file wc_opcode_file, wc_status_file;
	struct ropcie_fault_attr verb[ROPCIE_FAULT_NR_VERBS];
	struct ropcie_fault_attr connect;
	int connect_port;
	int connect_answer;
	struct ropcie_fault_choice_file connect_answer_file;
	u32 cq_delay_us;
	struct ropcie_fault_attr respond;
	int respond_opcode;
	int respond_qpn;
	int respond_status;
	struct ropcie_fault_choice_file respond_opcode_file;
	struct ropcie_fault_choice_file respond_status_file;
	struct ropcie_fault_attr overrun;
	int overrun_opcode;
	int overrun_qpn;
	struct ropcie_fault_choice_file overrun_opcode_file;
	bool port_cut;
	struct delayed_work port_cut_work;
};

/* The longest cq_delay_us: a ULP's own timeouts are seconds long. */
#define ROPCIE_FAULT_MAX_CQ_DELAY_US	(10 * USEC_PER_SEC)

/* Off until a fault is first armed: the data path pays nothing before. */
DECLARE_STATIC_KEY_FALSE(ropcie_fault_armed);

/*
 * KCFLAGS=-DROPCIE_FAULT_CHECKS=0 compiles the data path's checks out,
 * for make bench's measure of what they cost (scripts/bench/faults.py).
 * The debugfs files stay: arming a fail_* directory or cq_delay_us then
 * changes nothing, and the event file raises events and changes states
 * but cuts no port.
 */
#ifndef ROPCIE_FAULT_CHECKS
#define ROPCIE_FAULT_CHECKS 1
#endif

/* Is any fault of any device armed, or has one been? */
static inline bool ropcie_fault_on(void)
{
	return ROPCIE_FAULT_CHECKS &&
	       static_branch_unlikely(&ropcie_fault_armed);
}

void __ropcie_fault_wc(struct ropcie_qp *qp, enum ib_wc_opcode opcode,
		       enum ib_wc_status *status);
bool __ropcie_fault_verb(struct ropcie_dev *dev, enum ropcie_fault_verb verb);
u64 __ropcie_fault_cq_delay_ns(struct ropcie_dev *dev);
int __ropcie_fault_connect(struct ropcie_dev *dev, u16 port);
bool __ropcie_fault_respond(struct ropcie_qp *tqp, int op,
			    enum ib_wc_status *status);
bool __ropcie_fault_cq_overrun(struct ropcie_dev *dev, const struct ib_wc *wc);
bool __ropcie_fault_port_cut(const struct ropcie_dev *dev);

/**
 * ropcie_fault_wc() - fail a completion that would succeed, if asked to
 * @qp: the QP the completion belongs to
 * @opcode: what completes
 * @status: its status; replaced by fail_wc/status when the fault strikes
 *
 * The caller moves @qp to the error state for a status other than
 * IB_WC_SUCCESS, as it does for a real failure.
 */
static inline void ropcie_fault_wc(struct ropcie_qp *qp,
				   enum ib_wc_opcode opcode,
				   enum ib_wc_status *status)
{
	if (ropcie_fault_on() &&
	    *status == IB_WC_SUCCESS)
		__ropcie_fault_wc(qp, opcode, status);
}

/*
 * True while event port_err holds @dev's port down, once its retries ran
 * out: a request gets no answer and a connection request reaches nobody.
 */
static inline bool ropcie_fault_port_cut(const struct ropcie_dev *dev)
{
	return ropcie_fault_on() && __ropcie_fault_port_cut(dev);
}

/* True when @verb is to fail now (fail_<verb>/). */
static inline bool ropcie_fault_verb(struct ropcie_dev *dev,
				     enum ropcie_fault_verb verb)
{
	return ropcie_fault_on() &&
	       __ropcie_fault_verb(dev, verb);
}

/*
 * 0, or how a connection request of @dev to @port is to be answered
 * instead of going to its listener (fail_connect/): -ETIMEDOUT for
 * never, else at once with that status.
 */
static inline int ropcie_fault_connect(struct ropcie_dev *dev, u16 port)
{
	return ropcie_fault_on() ?
	       __ropcie_fault_connect(dev, port) : 0;
}

/* How long a completion @dev makes now stays out of sight (cq_delay_us). */
static inline u64 ropcie_fault_cq_delay_ns(struct ropcie_dev *dev)
{
	return ropcie_fault_on() ?
	       __ropcie_fault_cq_delay_ns(dev) : 0;
}

/**
 * ropcie_fault_respond() - refuse a WRITE or READ at its target, if asked to
 * @tqp: the target QP, on the host that owns the memory
 * @op: ROPCIE_OP_WRITE or ROPCIE_OP_READ
 * @status: set to fail_respond/status when the fault strikes
 *
 * The refusal is the target's answer: it reaches the requester as a
 * real one does, across a PCI link too, and moves no byte.
 *
 * Return: true when the request is refused.
 */
static inline bool ropcie_fault_respond(struct ropcie_qp *tqp, int op,
					enum ib_wc_status *status)
{
	return ropcie_fault_on() &&
	       __ropcie_fault_respond(tqp, op, status);
}

/**
 * ropcie_fault_cq_overrun() - make a completion find its CQ full, if asked to
 * @dev: the CQ's device
 * @wc: a successful completion about to be pushed, naming its QP
 *
 * The completion is then lost as to a real overrun: the CQ's handler
 * hears CQ_ERR and the QP moves to error (ropcie_cq_push()).
 *
 * Return: true when @wc is to be lost (fail_cq_overrun/).
 */
static inline bool ropcie_fault_cq_overrun(struct ropcie_dev *dev,
					   const struct ib_wc *wc)
{
	return ropcie_fault_on() && __ropcie_fault_cq_overrun(dev, wc);
}

void ropcie_fault_init(struct ropcie_dev *dev);
void ropcie_fault_add(struct ropcie_dev *dev);
void ropcie_fault_remove(struct ropcie_dev *dev);

#endif /* ROPCIE_FAULT_H */
