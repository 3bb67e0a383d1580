// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie module: device creation through rdma_link_ops, the device ops
 * table, netdev events, teardown of every device on rmmod, the module
 * options, and the per-stage profile in debugfs (ropcie/profile).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/seq_file.h>
#include <net/addrconf.h>
#include <rdma/rdma_netlink.h>

#include "ropcie.h"
#include "link.h"

static LIST_HEAD(ropcie_devices);
static DEFINE_MUTEX(ropcie_devices_lock);

/* Set a uint module option within [min, max] of its kernel_param's arg. */
struct ropcie_uint_range {
	unsigned int *value;
	unsigned int min, max;
};

static int ropcie_param_set_range(const char *val,
				  const struct kernel_param *kp)
{
	const struct ropcie_uint_range *r = kp->arg;
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (v < r->min || v > r->max)
		return -ERANGE;
	WRITE_ONCE(*r->value, v);
	return 0;
}

static int ropcie_param_get_range(char *buf, const struct kernel_param *kp)
{
	const struct ropcie_uint_range *r = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(*r->value));
}

static const struct kernel_param_ops ropcie_param_range_ops = {
	.set = ropcie_param_set_range,
	.get = ropcie_param_get_range,
};

/*
 * ROPCIE_UINT_PARAM() - an unsigned module option @name, the variable
 * ropcie_@name, set within [@lo, @hi] (-ERANGE outside); its description
 * as MODULE_PARM_DESC() makes it, with the default.
 */
#define ROPCIE_UINT_PARAM(name, def, lo, hi, desc)			\
	unsigned int ropcie_##name = def;				\
	static struct ropcie_uint_range ropcie_##name##_range = {	\
		.value = &ropcie_##name, .min = lo, .max = hi,		\
	};								\
	module_param_cb(name, &ropcie_param_range_ops,			\
			&ropcie_##name##_range, 0644);			\
	MODULE_INFO(parm, #name ":" desc " [" #def "]")

/*
 * A kernel poster's inline WRITE (over a link, or SEND) copies in its
 * context, which may be atomic: keep it short. A user QP's post may
 * sleep, so on one host its lone SEND or WRITE runs inline at any length
 * unless this is 0.
 */
ROPCIE_UINT_PARAM(inline_max, 4096, 0, 65536,
		  "Run an RDMA WRITE (over a link, or SEND) of at most this many bytes in the poster's context when the SQ is idle, 0..65536 (0: never, and no user QP's SEND either)");

/* A WRITE served in the doorbell's bottom half copies there: keep it short. */
ROPCIE_UINT_PARAM(irq_serve_max, 4096, 0, 65536,
		  "Over a PCI link, serve a peer's RDMA WRITE of at most this many bytes in the doorbell's bottom half (softirq), 0..65536 (0: never)");

/* A consumer that polls burns its CPU when nothing comes: keep it short. */
ROPCIE_UINT_PARAM(rx_poll_us, 100, 0, 1000,
		  "Over a PCI link, a ring's consumer looks for more this many us after traffic before it sleeps, 0..1000 (0: never)");

ROPCIE_UINT_PARAM(connect_timeout_ms, 10000, 100, 600000,
		  "A connection request that is neither accepted nor rejected fails after this many ms, 100..600000");

/* link.h: a peer whose heartbeat stops for this long is gone. */
ROPCIE_UINT_PARAM(link_timeout_ms, 3000, 500, 600000,
		  "A PCI link whose peer's heartbeat stops for this many ms goes down, 500..600000");

bool ropcie_profile;
module_param_named(profile, ropcie_profile, bool, 0644);
MODULE_PARM_DESC(profile,
		 "Time the stages of each work request into debugfs ropcie/profile [N]");

/*
 * The profile: per stage, a histogram with 8 buckets per power of two
 * (values below 8 ns exact), so a percentile is known within 1/16.
 */
#define ROPCIE_PROF_SUB		3
#define ROPCIE_PROF_MAX_LOG	40	/* larger values count as 2^40 - 1 */
#define ROPCIE_PROF_BUCKETS	((ROPCIE_PROF_MAX_LOG - 2) << ROPCIE_PROF_SUB)

struct ropcie_prof {
	atomic64_t count, sum, min, max;
	atomic_long_t hist[ROPCIE_PROF_BUCKETS];
};

static struct ropcie_prof ropcie_prof[ROPCIE_PROF_NR];
static atomic64_t ropcie_prof_exec[2];	/* by the worker, inline */
struct dentry *ropcie_debugfs;

static const char * const ropcie_prof_names[ROPCIE_PROF_NR] = {
	[ROPCIE_PROF_POST] = "post",
	[ROPCIE_PROF_QUEUE] = "queue",
	[ROPCIE_PROF_EXEC] = "exec",
	[ROPCIE_PROF_COMPLETE] = "complete",
	[ROPCIE_PROF_LANDED] = "landed",
	[ROPCIE_PROF_TURNAROUND] = "turnaround",
	[ROPCIE_PROF_LX_SEND] = "lx_send",
	[ROPCIE_PROF_LX_WAIT] = "lx_wait",
	[ROPCIE_PROF_LX_WAKE] = "lx_wake",
	[ROPCIE_PROF_LX_BELL] = "lx_bell",
	[ROPCIE_PROF_LX_SERVE] = "lx_serve",
	[ROPCIE_PROF_LX_COPY] = "lx_copy",
	[ROPCIE_PROF_LX_ROOM] = "lx_room",
	[ROPCIE_PROF_LX_LIMIT] = "lx_limit",
	[ROPCIE_PROF_LX_IDLE] = "lx_idle",
};

static unsigned int ropcie_prof_bucket(u64 ns)
{
	unsigned int e;

	if (ns < (1U << ROPCIE_PROF_SUB))
		return ns;
	ns = min_t(u64, ns, BIT_ULL(ROPCIE_PROF_MAX_LOG) - 1);
	e = ilog2(ns);
	return ((e - ROPCIE_PROF_SUB + 1) << ROPCIE_PROF_SUB) +
	       ((ns >> (e - ROPCIE_PROF_SUB)) & ((1U << ROPCIE_PROF_SUB) - 1));
}

/* The middle of bucket @b. */
static u64 ropcie_prof_value(unsigned int b)
{
	unsigned int e = (b >> ROPCIE_PROF_SUB) + ROPCIE_PROF_SUB - 1;
	u64 m = b & ((1U << ROPCIE_PROF_SUB) - 1);

	if (b < (1U << ROPCIE_PROF_SUB))
		return b;
	return (((1ULL << ROPCIE_PROF_SUB) + m) << (e - ROPCIE_PROF_SUB)) +
	       (1ULL << (e - ROPCIE_PROF_SUB)) / 2;
}

void ropcie_prof_add(enum ropcie_prof_stage stage, u64 ns)
{
	struct ropcie_prof *p = &ropcie_prof[stage];
	s64 old;

	atomic64_inc(&p->count);
	atomic64_add(ns, &p->sum);
	atomic_long_inc(&p->hist[ropcie_prof_bucket(ns)]);
	old = atomic64_read(&p->min);
	while ((!old || ns < old) &&
	       !atomic64_try_cmpxchg(&p->min, &old, ns))
		;
	old = atomic64_read(&p->max);
	while (ns > old && !atomic64_try_cmpxchg(&p->max, &old, ns))
		;
}

void ropcie_prof_count(bool inline_exec)
{
	atomic64_inc(&ropcie_prof_exec[inline_exec]);
}

static void ropcie_prof_reset(void)
{
	int i, b;

	for (i = 0; i < ROPCIE_PROF_NR; i++) {
		struct ropcie_prof *p = &ropcie_prof[i];

		atomic64_set(&p->count, 0);
		atomic64_set(&p->sum, 0);
		atomic64_set(&p->min, 0);
		atomic64_set(&p->max, 0);
		for (b = 0; b < ROPCIE_PROF_BUCKETS; b++)
			atomic_long_set(&p->hist[b], 0);
	}
	atomic64_set(&ropcie_prof_exec[0], 0);
	atomic64_set(&ropcie_prof_exec[1], 0);
}

/* The value below which @pct percent of the samples lie. */
static u64 ropcie_prof_pct(const struct ropcie_prof *p, u64 count,
			   unsigned int pct)
{
	u64 want = div_u64(count * pct + 99, 100), seen = 0;
	unsigned int b;

	for (b = 0; b < ROPCIE_PROF_BUCKETS; b++) {
		seen += atomic_long_read(&p->hist[b]);
		if (seen >= want)
			return ropcie_prof_value(b);
	}
	return 0;
}

static int ropcie_prof_show(struct seq_file *m, void *unused)
{
	int i;

	seq_printf(m, "%-10s %10s %10s %10s %10s %10s %10s\n", "stage",
		   "count", "avg_ns", "p50_ns", "p90_ns", "min_ns", "max_ns");
	for (i = 0; i < ROPCIE_PROF_NR; i++) {
		const struct ropcie_prof *p = &ropcie_prof[i];
		u64 n = atomic64_read(&p->count);

		seq_printf(m, "%-10s %10llu %10llu %10llu %10llu %10lld %10lld\n",
			   ropcie_prof_names[i], n,
			   n ? div64_u64(atomic64_read(&p->sum), n) : 0,
			   n ? ropcie_prof_pct(p, n, 50) : 0,
			   n ? ropcie_prof_pct(p, n, 90) : 0,
			   atomic64_read(&p->min), atomic64_read(&p->max));
	}
	seq_printf(m, "executed by worker %lld, inline %lld\n",
		   atomic64_read(&ropcie_prof_exec[0]),
		   atomic64_read(&ropcie_prof_exec[1]));
	return 0;
}

static int ropcie_prof_open(struct inode *inode, struct file *file)
{
	return single_open(file, ropcie_prof_show, NULL);
}

/* Any write clears the profile. */
static ssize_t ropcie_prof_write(struct file *file, const char __user *buf,
				 size_t len, loff_t *ppos)
{
	ropcie_prof_reset();
	return len;
}

static const struct file_operations ropcie_prof_fops = {
	.owner = THIS_MODULE,
	.open = ropcie_prof_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.write = ropcie_prof_write,
	.release = single_release,
};

static void ropcie_dealloc_driver(struct ib_device *ibdev)
{
	struct ropcie_dev *dev = to_rdev(ibdev);

	ropcie_fault_remove(dev);
	mutex_lock(&ropcie_devices_lock);
	list_del_init(&dev->list);
	mutex_unlock(&ropcie_devices_lock);
	ropcie_cm_remove_device(dev);
	WARN_ON(!xa_empty(&dev->qp_xa));
	WARN_ON(!xa_empty(&dev->mr_xa));
	xa_destroy(&dev->qp_xa);
	xa_destroy(&dev->mr_xa);
	pr_debug("%s: released\n", dev_name(&ibdev->dev));
}

static const struct ib_device_ops ropcie_dev_ops = {
	.owner = THIS_MODULE,
	/* libipathverbs's ABI 1: plain ib_uverbs commands (uverbs.c). */
	.driver_id = RDMA_DRIVER_QIB,
	.uverbs_abi_ver = 1,

	.alloc_mr = ropcie_alloc_mr,
	.alloc_pd = ropcie_alloc_pd,
	.alloc_ucontext = ropcie_alloc_ucontext,
	.create_cq = ropcie_create_cq,
	.create_qp = ropcie_create_qp,
	.dealloc_driver = ropcie_dealloc_driver,
	.dealloc_pd = ropcie_dealloc_pd,
	.dealloc_ucontext = ropcie_dealloc_ucontext,
	.dereg_mr = ropcie_dereg_mr,
	.destroy_cq = ropcie_destroy_cq,
	.destroy_qp = ropcie_destroy_qp,
	.disassociate_ucontext = ropcie_disassociate_ucontext,
	.get_dma_mr = ropcie_get_dma_mr,
	.get_port_immutable = ropcie_get_port_immutable,
	.iw_accept = ropcie_iw_accept,
	.iw_add_ref = ropcie_iw_add_ref,
	.iw_connect = ropcie_iw_connect,
	.iw_create_listen = ropcie_iw_create_listen,
	.iw_destroy_listen = ropcie_iw_destroy_listen,
	.iw_get_qp = ropcie_iw_get_qp,
	.iw_reject = ropcie_iw_reject,
	.iw_rem_ref = ropcie_iw_rem_ref,
	.map_mr_sg = ropcie_map_mr_sg,
	.modify_qp = ropcie_modify_qp,
	.poll_cq = ropcie_poll_cq,
	.post_recv = ropcie_post_recv,
	.post_send = ropcie_post_send,
	.query_device = ropcie_query_device,
	.query_gid = ropcie_query_gid,
	.query_pkey = ropcie_query_pkey,
	.query_port = ropcie_query_port,
	.query_qp = ropcie_query_qp,
	.reg_user_mr = ropcie_reg_user_mr,
	.req_notify_cq = ropcie_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_cq, ropcie_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, ropcie_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, ropcie_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, ropcie_ucontext, ibuc),
};

/* The ropcie device on @netdev, or NULL. Caller holds the list mutex. */
static struct ropcie_dev *ropcie_find_by_netdev(struct net_device *netdev)
{
	struct ropcie_dev *dev;

	list_for_each_entry(dev, &ropcie_devices, list)
		if (dev->netdev == netdev)
			return dev;
	return NULL;
}

static int ropcie_newlink(const char *name, struct net_device *netdev)
{
	struct ropcie_dev *dev;
	struct ib_device *ibdev;
	int ret;

	if (netdev->type != ARPHRD_ETHER && netdev->type != ARPHRD_LOOPBACK &&
	    netdev->type != ARPHRD_NONE)
		return -EINVAL;

	mutex_lock(&ropcie_devices_lock);
	if (ropcie_find_by_netdev(netdev)) {
		mutex_unlock(&ropcie_devices_lock);
		return -EEXIST;
	}
	dev = ib_alloc_device(ropcie_dev, ibdev);
	if (!dev) {
		mutex_unlock(&ropcie_devices_lock);
		return -ENOMEM;
	}
	ibdev = &dev->ibdev;
	INIT_LIST_HEAD(&dev->list);
	ropcie_fault_init(dev);
	/*
	 * Keys are looked up in any context, a link's doorbell interrupt
	 * among them (ropcie_mr_get()): both tables' locks (one lockdep
	 * class) are taken with interrupts off.
	 */
	xa_init_flags(&dev->qp_xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&dev->mr_xa, XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ);

	/*
	 * rdma_cm finds an iWARP device through GID 0 of its port, and the
	 * GID cache drops a zero GID: lo's all-zero MAC is replaced by a
	 * random locally administered address.
	 */
	if (netdev->addr_len >= ETH_ALEN &&
	    !is_zero_ether_addr(netdev->dev_addr))
		ether_addr_copy(dev->gid, netdev->dev_addr);
	else
		eth_random_addr(dev->gid);
	addrconf_addr_eui48((u8 *)&ibdev->node_guid, dev->gid);

	ibdev->node_type = RDMA_NODE_RNIC;
	strscpy(ibdev->node_desc, "ropcie loopback", sizeof(ibdev->node_desc));
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->iw_driver_flags = IW_F_NO_PORT_MAP;
	memcpy(ibdev->iw_ifname, netdev->name, sizeof(ibdev->iw_ifname));
	ib_set_device_ops(ibdev, &ropcie_dev_ops);
	ropcie_uverbs_setup(ibdev);

	ret = ib_device_set_netdev(ibdev, netdev, 1);
	if (ret)
		goto err_dealloc;
	dev->netdev = netdev;
	dev->port_state = netif_running(netdev) && netif_carrier_ok(netdev) ?
			  IB_PORT_ACTIVE : IB_PORT_DOWN;
	krping_compat_mark_name_assigned(ibdev);
	/* Linked before registering: a netdev event may find it at once. */
	list_add_tail(&dev->list, &ropcie_devices);
	mutex_unlock(&ropcie_devices_lock);

	ret = ib_register_device(ibdev, name, NULL);
	if (ret) {
		mutex_lock(&ropcie_devices_lock);
		list_del_init(&dev->list);
		mutex_unlock(&ropcie_devices_lock);
		ib_dealloc_device(ibdev);
		return ret;
	}
	ropcie_fault_add(dev);
	pr_info("%s: created on %s\n", dev_name(&ibdev->dev), netdev->name);
	return 0;

err_dealloc:
	mutex_unlock(&ropcie_devices_lock);
	ib_dealloc_device(ibdev);
	return ret;
}

static struct rdma_link_ops ropcie_link_ops = {
	.type = "ropcie",
	.newlink = ropcie_newlink,
};

/* Tell the ULPs of an event of @dev's port (its element is port 1). */
void ropcie_port_event(struct ropcie_dev *dev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &dev->ibdev,
		.event = type,
		.element.port_num = 1,
	};

	ib_dispatch_event(&ev);
}

static void __ropcie_set_port_state(struct ropcie_dev *dev,
				    enum ib_port_state state)
{
	lockdep_assert_held(&ropcie_devices_lock);
	if (state == IB_PORT_ACTIVE) {
		/* A cut still to come is void too. */
		cancel_delayed_work(&dev->faults.port_cut_work);
		WRITE_ONCE(dev->faults.port_cut, false);
	}
	WRITE_ONCE(dev->port_state, state);
	ropcie_port_event(dev, state == IB_PORT_ACTIVE ? IB_EVENT_PORT_ACTIVE :
							 IB_EVENT_PORT_ERR);
}

/**
 * ropcie_set_port_state() - the port goes up or down
 * @dev: the device
 * @state: IB_PORT_ACTIVE or IB_PORT_DOWN
 *
 * query_port reports @state from here on, and the ULPs hear of it
 * (PORT_ACTIVE or PORT_ERR), as on a carrier change of its netdev.
 * ACTIVE also ends a cut of event port_err (ropcie_port_cut_if_down()).
 */
void ropcie_set_port_state(struct ropcie_dev *dev, enum ib_port_state state)
{
	mutex_lock(&ropcie_devices_lock);
	__ropcie_set_port_state(dev, state);
	mutex_unlock(&ropcie_devices_lock);
}

/**
 * ropcie_port_cut_if_down() - a DOWN port stops carrying anything
 * @dev: the device
 *
 * For event port_err (fault.c), once the retries ran out: a port that is
 * ACTIVE again by then stays as it is.
 *
 * Return: true when the port is cut.
 */
bool ropcie_port_cut_if_down(struct ropcie_dev *dev)
{
	bool cut;

	mutex_lock(&ropcie_devices_lock);
	cut = dev->port_state == IB_PORT_DOWN;
	if (cut)
		WRITE_ONCE(dev->faults.port_cut, true);
	mutex_unlock(&ropcie_devices_lock);
	return cut;
}

static int ropcie_netdev_event(struct notifier_block *nb, unsigned long event,
			       void *arg)
{
	struct net_device *netdev = netdev_notifier_info_to_dev(arg);
	struct ropcie_dev *dev;

	mutex_lock(&ropcie_devices_lock);
	dev = ropcie_find_by_netdev(netdev);
	if (!dev)
		goto out;
	switch (event) {
	case NETDEV_UP:
	case NETDEV_CHANGE:
		if (netif_running(netdev) && netif_carrier_ok(netdev))
			__ropcie_set_port_state(dev, IB_PORT_ACTIVE);
		else if (event == NETDEV_CHANGE)
			__ropcie_set_port_state(dev, IB_PORT_DOWN);
		break;
	case NETDEV_DOWN:
		__ropcie_set_port_state(dev, IB_PORT_DOWN);
		break;
	case NETDEV_CHANGEADDR:
		ropcie_port_event(dev, IB_EVENT_GID_CHANGE);
		break;
	case NETDEV_UNREGISTER:
		/* Not from here: unregistration takes the RTNL we hold. */
		ib_unregister_device_queued(&dev->ibdev);
		break;
	default:
		break;
	}
out:
	mutex_unlock(&ropcie_devices_lock);
	return NOTIFY_OK;
}

static struct notifier_block ropcie_netdev_nb = {
	.notifier_call = ropcie_netdev_event,
};

static int __init ropcie_init(void)
{
	int ret;

	ret = ropcie_cm_init();
	if (ret)
		return ret;
	ret = register_netdevice_notifier(&ropcie_netdev_nb);
	if (ret) {
		ropcie_cm_exit();
		return ret;
	}
	/* Before the PCI driver: a link's probe adds its own directory. */
	ropcie_debugfs = debugfs_create_dir("ropcie", NULL);
	debugfs_create_file("profile", 0600, ropcie_debugfs, NULL,
			    &ropcie_prof_fops);
	ret = pci_register_driver(&ropcie_ivshmem_driver);
	if (ret) {
		debugfs_remove_recursive(ropcie_debugfs);
		unregister_netdevice_notifier(&ropcie_netdev_nb);
		ropcie_cm_exit();
		return ret;
	}
	rdma_link_register(&ropcie_link_ops);
	pr_info("loaded\n");
	return 0;
}

static void __exit ropcie_exit(void)
{
	struct ropcie_dev *dev;

	pci_unregister_driver(&ropcie_ivshmem_driver);
	rdma_link_unregister(&ropcie_link_ops);
	unregister_netdevice_notifier(&ropcie_netdev_nb);
	/*
	 * Unregister what is left; live sessions get DEVICE_REMOVAL. An
	 * unregistration already under way (link delete, netdev removal)
	 * is waited for by ib_unregister_device().
	 */
	for (;;) {
		mutex_lock(&ropcie_devices_lock);
		dev = list_first_entry_or_null(&ropcie_devices,
					       struct ropcie_dev, list);
		if (dev)
			get_device(&dev->ibdev.dev);
		mutex_unlock(&ropcie_devices_lock);
		if (!dev)
			break;
		ib_unregister_device(&dev->ibdev);
		/* dealloc_driver took it off the list. */
		put_device(&dev->ibdev.dev);
	}
	/* After the devices: each removed its own directory in it. */
	debugfs_remove_recursive(ropcie_debugfs);
	ropcie_cm_exit();
	pr_info("unloaded\n");
}

module_init(ropcie_init);
module_exit(ropcie_exit);

MODULE_AUTHOR("krping project");
MODULE_DESCRIPTION("ropcie: software iWARP-style RDMA provider on a loopback fabric");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_ALIAS_RDMA_LINK("ropcie");
