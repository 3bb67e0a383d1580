// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Results of the sessions in sysfs: /sys/kernel/krping/<name>/.
 *
 * The directory is a kobject of its own, not part of the configfs item:
 * the two have separate reference counts. It is removed (kobject_del) at
 * rmdir after the run has stopped, which also drains every sysfs reader,
 * so the show functions may dereference the session.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/wait_bit.h>

#include "krping.h"

struct krping_results {
	struct kobject kobj;
	struct krping_session *sess;
};

static struct kset *krping_kset;

static struct krping_session *kobj_to_session(struct kobject *kobj)
{
	return container_of(kobj, struct krping_results, kobj)->sess;
}

static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct krping_session *sess = kobj_to_session(kobj);

	return sysfs_emit(buf, "%s\n",
			  krping_state_name(READ_ONCE(sess->state)));
}

static struct kobj_attribute state_attr = __ATTR_RO(state);

static ssize_t error_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(kobj_to_session(kobj)->error));
}

static struct kobj_attribute error_attr = __ATTR_RO(error);

static ssize_t device_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct krping_session *sess = kobj_to_session(kobj);
	ssize_t len;

	spin_lock(&sess->result_lock);
	len = sysfs_emit(buf, "%s\n", sess->device);
	spin_unlock(&sess->result_lock);
	return len;
}

static struct kobj_attribute device_attr = __ATTR_RO(device);

static const char * const krping_wr_names[] = {
	[KRPING_WR_SEND] = "send",
	[KRPING_WR_RECV] = "recv",
	[KRPING_WR_RDMA_WRITE] = "rdma_write",
	[KRPING_WR_RDMA_READ] = "rdma_read",
	[KRPING_WR_REG_MR] = "reg_mr",
	[KRPING_WR_LOCAL_INV] = "local_inv",
};

const char *krping_wr_name(enum krping_wr wr)
{
	return wr < ARRAY_SIZE(krping_wr_names) ? krping_wr_names[wr] : "?";
}

/* ib_wc_status's names in lower case, as ropcie's fail_wc/status takes. */
static const char * const krping_wc_status_names[] = {
	[IB_WC_SUCCESS] = "success",
	[IB_WC_LOC_LEN_ERR] = "loc_len_err",
	[IB_WC_LOC_QP_OP_ERR] = "loc_qp_op_err",
	[IB_WC_LOC_EEC_OP_ERR] = "loc_eec_op_err",
	[IB_WC_LOC_PROT_ERR] = "loc_prot_err",
	[IB_WC_WR_FLUSH_ERR] = "wr_flush_err",
	[IB_WC_MW_BIND_ERR] = "mw_bind_err",
	[IB_WC_BAD_RESP_ERR] = "bad_resp_err",
	[IB_WC_LOC_ACCESS_ERR] = "loc_access_err",
	[IB_WC_REM_INV_REQ_ERR] = "rem_inv_req_err",
	[IB_WC_REM_ACCESS_ERR] = "rem_access_err",
	[IB_WC_REM_OP_ERR] = "rem_op_err",
	[IB_WC_RETRY_EXC_ERR] = "retry_exc_err",
	[IB_WC_RNR_RETRY_EXC_ERR] = "rnr_retry_exc_err",
	[IB_WC_LOC_RDD_VIOL_ERR] = "loc_rdd_viol_err",
	[IB_WC_REM_INV_RD_REQ_ERR] = "rem_inv_rd_req_err",
	[IB_WC_REM_ABORT_ERR] = "rem_abort_err",
	[IB_WC_INV_EECN_ERR] = "inv_eecn_err",
	[IB_WC_INV_EEC_STATE_ERR] = "inv_eec_state_err",
	[IB_WC_FATAL_ERR] = "fatal_err",
	[IB_WC_RESP_TIMEOUT_ERR] = "resp_timeout_err",
	[IB_WC_GENERAL_ERR] = "general_err",
};

const char *krping_wc_status_name(enum ib_wc_status status)
{
	return status < ARRAY_SIZE(krping_wc_status_names) &&
	       krping_wc_status_names[status] ?
	       krping_wc_status_names[status] : "?";
}

/*
 * failed_wr and wc_status: the first work request of the current or
 * last run whose completion failed (not a flush), and its status; empty
 * when none did.
 */
static ssize_t failed_wr_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	enum ib_wc_status status;
	enum krping_wr wr;

	if (!krping_session_failed_wc(kobj_to_session(kobj), &wr, &status))
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%s\n", krping_wr_name(wr));
}

static struct kobj_attribute failed_wr_attr = __ATTR_RO(failed_wr);

static ssize_t wc_status_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	enum ib_wc_status status;
	enum krping_wr wr;

	if (!krping_session_failed_wc(kobj_to_session(kobj), &wr, &status))
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%s\n", krping_wc_status_name(status));
}

static struct kobj_attribute wc_status_attr = __ATTR_RO(wc_status);

/*
 * Writing 1 zeroes the results of a session that is not running. sysfs
 * hands over a NUL-terminated copy of the write: a NUL inside it would
 * end the string early, so "1\0junk" is refused as the configfs
 * attributes refuse it.
 */
static ssize_t reset_store(struct kobject *kobj, struct kobj_attribute *attr,
			   const char *buf, size_t len)
{
	int ret;

	if (strnlen(buf, len) != len || !sysfs_streq(buf, "1"))
		return -EINVAL;
	ret = krping_session_reset(kobj_to_session(kobj));
	return ret ? ret : len;
}

static struct kobj_attribute reset_attr = __ATTR_WO(reset);

/*
 * per_qp: the counters of each connection of the current or last run, a
 * line each, "INDEX" and the nine counters of stats/ in the order of the
 * header line. One file rather than a directory per connection: their
 * number is a setting of each run, and directories that came and went
 * with every start would race their readers; one read gives every line.
 * KRPING_MAX_QPS lines of at most nine 20-digit numbers fit in a page.
 */
static const char * const krping_per_qp_header[] = {
	"send_bytes", "send_msgs", "recv_bytes", "recv_msgs", "write_bytes",
	"write_msgs", "read_bytes", "read_msgs", "iterations",
};

static ssize_t per_qp_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct krping_session *sess = kobj_to_session(kobj);
	u32 i, n = min_t(u32, READ_ONCE(sess->nr_qps), KRPING_MAX_QPS);
	ssize_t len;

	len = sysfs_emit(buf, "qp");
	for (i = 0; i < ARRAY_SIZE(krping_per_qp_header); i++)
		len += sysfs_emit_at(buf, len, " %s", krping_per_qp_header[i]);
	len += sysfs_emit_at(buf, len, "\n");
	for (i = 0; i < n; i++) {
		struct krping_stats *st = &sess->stats[i];

		len += sysfs_emit_at(buf, len,
				     "%u %lld %lld %lld %lld %lld %lld %lld %lld %lld\n",
				     i, atomic64_read(&st->send_bytes),
				     atomic64_read(&st->send_msgs),
				     atomic64_read(&st->recv_bytes),
				     atomic64_read(&st->recv_msgs),
				     atomic64_read(&st->write_bytes),
				     atomic64_read(&st->write_msgs),
				     atomic64_read(&st->read_bytes),
				     atomic64_read(&st->read_msgs),
				     atomic64_read(&st->iterations));
	}
	return len;
}

static struct kobj_attribute per_qp_attr = __ATTR_RO(per_qp);

static struct attribute *krping_session_attrs[] = {
	&state_attr.attr,
	&error_attr.attr,
	&device_attr.attr,
	&failed_wr_attr.attr,
	&wc_status_attr.attr,
	&reset_attr.attr,
	&per_qp_attr.attr,
	NULL,
};

static const struct attribute_group krping_session_group = {
	.attrs = krping_session_attrs,
};

/* Sum of one counter over the session's connections (qps). */
static s64 krping_stat_sum(const struct krping_session *sess, size_t off)
{
	s64 sum = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sess->stats); i++)
		sum += atomic64_read((const atomic64_t *)
				     ((const void *)&sess->stats[i] + off));
	return sum;
}

/*
 * One read-only file per counter in stats/: the sum over the session's
 * connections; the sets not in use stay zero.
 */
#define KRPING_STAT_ATTR(_name)						\
static ssize_t _name##_show(struct kobject *kobj,			\
			    struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  krping_stat_sum(kobj_to_session(kobj),	\
				offsetof(struct krping_stats, _name)));	\
}									\
static struct kobj_attribute _name##_attr = {				\
	.attr = { .name = #_name, .mode = 0444 },			\
	.show = _name##_show,						\
}

KRPING_STAT_ATTR(send_bytes);
KRPING_STAT_ATTR(send_msgs);
KRPING_STAT_ATTR(recv_bytes);
KRPING_STAT_ATTR(recv_msgs);
KRPING_STAT_ATTR(write_bytes);
KRPING_STAT_ATTR(write_msgs);
KRPING_STAT_ATTR(read_bytes);
KRPING_STAT_ATTR(read_msgs);
KRPING_STAT_ATTR(iterations);

static struct attribute *krping_stats_attrs[] = {
	&send_bytes_attr.attr,
	&send_msgs_attr.attr,
	&recv_bytes_attr.attr,
	&recv_msgs_attr.attr,
	&write_bytes_attr.attr,
	&write_msgs_attr.attr,
	&read_bytes_attr.attr,
	&read_msgs_attr.attr,
	&iterations_attr.attr,
	NULL,
};

static const struct attribute_group krping_stats_group = {
	.name = "stats",
	.attrs = krping_stats_attrs,
};

/*
 * latency/ and bandwidth/: u64 figures of the last run, stored as structs
 * in the session; each file knows the offset of its field.
 */
struct krping_figure_attr {
	struct kobj_attribute kattr;
	size_t offset;
};

static ssize_t krping_figure_show(struct kobject *kobj, void *figures,
				  struct kobj_attribute *attr, char *buf)
{
	struct krping_session *sess = kobj_to_session(kobj);
	size_t off = container_of(attr, struct krping_figure_attr,
				  kattr)->offset;
	u64 val;

	spin_lock(&sess->result_lock);
	val = *(u64 *)(figures + off);
	spin_unlock(&sess->result_lock);
	return sysfs_emit(buf, "%llu\n", val);
}

static ssize_t krping_latency_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return krping_figure_show(kobj, &kobj_to_session(kobj)->latency,
				  attr, buf);
}

static ssize_t krping_bandwidth_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	return krping_figure_show(kobj, &kobj_to_session(kobj)->bandwidth,
				  attr, buf);
}

#define KRPING_LATENCY_ATTR(_name)					\
static struct krping_figure_attr lat_##_name##_attr = {			\
	.kattr = {							\
		.attr = { .name = #_name, .mode = 0444 },		\
		.show = krping_latency_show,				\
	},								\
	.offset = offsetof(struct krping_lat_summary, _name),		\
}

#define KRPING_BANDWIDTH_ATTR(_name)					\
static struct krping_figure_attr bw_##_name##_attr = {			\
	.kattr = {							\
		.attr = { .name = #_name, .mode = 0444 },		\
		.show = krping_bandwidth_show,				\
	},								\
	.offset = offsetof(struct krping_bandwidth, _name),		\
}

/*
 * latency/histogram: one line "LOW_NS HIGH_NS COUNT" per non-empty bucket,
 * ascending. Several values in one file, deliberately: a distribution is
 * one figure, and sysfs (unlike debugfs) is there without root and
 * without CONFIG_DEBUG_FS, beside the other figures. The
 * buckets were coarsened at publish time until their lines fit in a
 * page (krping_lat_export()), so the text always fits.
 */
static ssize_t lat_histogram_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	struct krping_session *sess = kobj_to_session(kobj);
	const struct krping_lat_buckets *h;
	unsigned int i;
	ssize_t len = 0;

	spin_lock(&sess->result_lock);
	h = sess->lat_hist;
	if (IS_ERR(h))
		len = PTR_ERR(h);
	else if (h)
		for (i = 0; i < h->nr; i++)
			len += sysfs_emit_at(buf, len, KRPING_LAT_BUCKET_FMT,
					     h->b[i].low_ns, h->b[i].high_ns,
					     h->b[i].count);
	spin_unlock(&sess->result_lock);
	return len;
}

static struct kobj_attribute lat_histogram_attr = {
	.attr = { .name = "histogram", .mode = 0444 },
	.show = lat_histogram_show,
};

KRPING_LATENCY_ATTR(samples);
KRPING_LATENCY_ATTR(min_ns);
KRPING_LATENCY_ATTR(max_ns);
KRPING_LATENCY_ATTR(mean_ns);
KRPING_LATENCY_ATTR(p50_ns);
KRPING_LATENCY_ATTR(p99_ns);
KRPING_LATENCY_ATTR(p999_ns);
KRPING_LATENCY_ATTR(stdev_ns);

static struct attribute *krping_latency_attrs[] = {
	&lat_samples_attr.kattr.attr,
	&lat_min_ns_attr.kattr.attr,
	&lat_max_ns_attr.kattr.attr,
	&lat_mean_ns_attr.kattr.attr,
	&lat_p50_ns_attr.kattr.attr,
	&lat_p99_ns_attr.kattr.attr,
	&lat_p999_ns_attr.kattr.attr,
	&lat_stdev_ns_attr.kattr.attr,
	&lat_histogram_attr.attr,
	NULL,
};

static const struct attribute_group krping_latency_group = {
	.name = "latency",
	.attrs = krping_latency_attrs,
};

KRPING_BANDWIDTH_ATTR(bytes);
KRPING_BANDWIDTH_ATTR(duration_ns);
KRPING_BANDWIDTH_ATTR(mbytes_per_sec);
KRPING_BANDWIDTH_ATTR(msgs_per_sec);

static struct attribute *krping_bandwidth_attrs[] = {
	&bw_bytes_attr.kattr.attr,
	&bw_duration_ns_attr.kattr.attr,
	&bw_mbytes_per_sec_attr.kattr.attr,
	&bw_msgs_per_sec_attr.kattr.attr,
	NULL,
};

static const struct attribute_group krping_bandwidth_group = {
	.name = "bandwidth",
	.attrs = krping_bandwidth_attrs,
};

/* progress/: the measured part of a benchmark while it runs. */
#define KRPING_PROGRESS_ATTR(_name)					\
static ssize_t prog_##_name##_show(struct kobject *kobj,		\
				   struct kobj_attribute *attr,		\
				   char *buf)				\
{									\
	return sysfs_emit(buf, "%lld\n",				\
		atomic64_read(&kobj_to_session(kobj)->progress._name));	\
}									\
static struct kobj_attribute prog_##_name##_attr = {			\
	.attr = { .name = #_name, .mode = 0444 },			\
	.show = prog_##_name##_show,					\
}

KRPING_PROGRESS_ATTR(iterations);
KRPING_PROGRESS_ATTR(bytes);
KRPING_PROGRESS_ATTR(samples);

/* From the start of the measured part to now, or to the run's end. */
static ssize_t prog_elapsed_ns_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	struct krping_progress *p = &kobj_to_session(kobj)->progress;
	u64 start = READ_ONCE(p->start_ns), end = READ_ONCE(p->end_ns);

	if (!start)
		return sysfs_emit(buf, "0\n");
	if (!end)
		end = ktime_get_ns();
	return sysfs_emit(buf, "%llu\n", end > start ? end - start : 0);
}

static struct kobj_attribute prog_elapsed_ns_attr = {
	.attr = { .name = "elapsed_ns", .mode = 0444 },
	.show = prog_elapsed_ns_show,
};

static struct attribute *krping_progress_attrs[] = {
	&prog_iterations_attr.attr,
	&prog_bytes_attr.attr,
	&prog_samples_attr.attr,
	&prog_elapsed_ns_attr.attr,
	NULL,
};

static const struct attribute_group krping_progress_group = {
	.name = "progress",
	.attrs = krping_progress_attrs,
};

static const struct attribute_group *krping_results_groups[] = {
	&krping_session_group,
	&krping_stats_group,
	&krping_latency_group,
	&krping_bandwidth_group,
	&krping_progress_group,
	NULL,
};

/*
 * Results objects not yet released. The release is code of this module,
 * and it may run after krping_results_remove() returned (a delayed
 * release with CONFIG_DEBUG_KOBJECT_RELEASE, a late reference): module
 * unload waits for the last one, as a filesystem waits for its sysfs
 * kobject's release at unmount.
 */
static atomic_t krping_results_live = ATOMIC_INIT(0);

static void krping_results_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct krping_results, kobj));
	if (atomic_dec_and_test(&krping_results_live))
		wake_up_var(&krping_results_live);
}

static const struct kobj_type krping_results_ktype = {
	.release = krping_results_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = krping_results_groups,
};

/**
 * krping_results_add() - create /sys/kernel/krping/<name>/ for a session
 * @sess: the session whose results the directory shows
 * @name: the session's name
 *
 * Return: the results object or an ERR_PTR.
 */
struct krping_results *krping_results_add(struct krping_session *sess,
					  const char *name)
{
	struct krping_results *res;
	int ret;

	res = kzalloc(sizeof(*res), GFP_KERNEL);
	if (!res)
		return ERR_PTR(-ENOMEM);
	res->sess = sess;
	res->kobj.kset = krping_kset;
	atomic_inc(&krping_results_live);	/* the release drops it */
	ret = kobject_init_and_add(&res->kobj, &krping_results_ktype, NULL,
				   "%s", name);
	if (ret) {
		kobject_put(&res->kobj);
		return ERR_PTR(ret);
	}
	kobject_uevent(&res->kobj, KOBJ_ADD);
	return res;
}

/* Remove the directory; readers are drained before this returns. */
void krping_results_remove(struct krping_results *res)
{
	kobject_del(&res->kobj);
	kobject_put(&res->kobj);
}

/* Wake poll()ers of the state file. */
void krping_results_notify_state(struct krping_results *res)
{
	if (res)
		sysfs_notify(&res->kobj, NULL, "state");
}

int krping_results_init(void)
{
	krping_kset = kset_create_and_add("krping", NULL, kernel_kobj);
	return krping_kset ? 0 : -ENOMEM;
}

void krping_results_exit(void)
{
	wait_var_event(&krping_results_live,
		       !atomic_read(&krping_results_live));
	kset_unregister(krping_kset);
}
