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
#include <linux/slab.h>
#include <linux/sysfs.h>

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

	spin_lock(&sess->device_lock);
	len = sysfs_emit(buf, "%s\n", sess->device);
	spin_unlock(&sess->device_lock);
	return len;
}

static struct kobj_attribute device_attr = __ATTR_RO(device);

static struct attribute *krping_session_attrs[] = {
	&state_attr.attr,
	&error_attr.attr,
	&device_attr.attr,
	NULL,
};

static const struct attribute_group krping_session_group = {
	.attrs = krping_session_attrs,
};

/* One read-only file per counter in stats/. */
#define KRPING_STAT_ATTR(_name)						\
static ssize_t _name##_show(struct kobject *kobj,			\
			    struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&kobj_to_session(kobj)->stats._name)); \
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

static const struct attribute_group *krping_results_groups[] = {
	&krping_session_group,
	&krping_stats_group,
	NULL,
};

static void krping_results_release(struct kobject *kobj)
{
	kfree(container_of(kobj, struct krping_results, kobj));
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
	kset_unregister(krping_kset);
}
