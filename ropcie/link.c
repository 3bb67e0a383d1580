// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie link core: bring a link up with the peer host and notice when
 * the peer is gone.
 *
 * Each host writes the header of the peer's inbound window (wire.h):
 * its epoch, a random number drawn whenever it (re)starts the link, the
 * peer epoch it has seen, and a heartbeat it bumps every
 * ROPCIE_LINK_BEAT_MS. The link is up once each side has acknowledged
 * the other's current epoch. It goes down, and this host draws a new
 * epoch (so the peer takes its side down too), when:
 *
 *  - the peer's epoch changes: it restarted;
 *  - the peer's header stops being valid: it left (its driver cleared
 *    the magic on the way out) or speaks another protocol;
 *  - the peer's heartbeat has not moved for link_timeout_ms: it lost
 *    power, hangs, or the link is cut.
 *
 * So a vanished peer is noticed within link_timeout_ms plus one beat,
 * and one that left cleanly within a beat.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <asm/byteorder.h>

#include "../compat/compat.h"
#include "link.h"

/*
 * Copy @n bytes of a window the peer writes into @dst, once: the
 * compiler may not read the window again in place of the copy.
 */
static void ropcie_link_snapshot(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	barrier();
}

static void ropcie_link_ring(struct ropcie_link *link)
{
	link->hw->ops->peer_db_set(link->hw);
}

/* A new epoch in the peer's window, every index back to 0. */
static void ropcie_link_publish(struct ropcie_link *link)
{
	struct ropcie_wire_hdr *out = link->hw->out;
	struct ropcie_wire_hdr h;

	do {
		link->epoch = get_random_u64();
	} while (!link->epoch);
	/* Epoch 0 while the rest changes: the peer waits (-EAGAIN). */
	WRITE_ONCE(out->epoch, 0);
	/* The peer sees epoch 0 before any other field changes. */
	wmb();
	ropcie_wire_hdr_init(&h, &link->gout, 0);
	h.ack_epoch = cpu_to_le64(link->peer_epoch);
	h.heartbeat = cpu_to_le64(link->beat);
	memcpy(out, &h, sizeof(h));
	/* ... and every field before the new epoch. */
	wmb();
	WRITE_ONCE(out->epoch, cpu_to_le64(link->epoch));
}

static void ropcie_link_down(struct ropcie_link *link, const char *why)
{
	lockdep_assert_held(&link->lock);
	link->state = ROPCIE_LINK_DOWN;
	link->down_reason = why;
	atomic64_inc(&link->downs);
	dev_info(link->hw->dev, "ropcie link down: %s\n", why);
	/* No index of the transport moves once the new epoch is out. */
	ropcie_xport_down(link);
	ropcie_link_publish(link);
	ropcie_link_ring(link);
}

static void ropcie_link_up(struct ropcie_link *link)
{
	lockdep_assert_held(&link->lock);
	link->state = ROPCIE_LINK_UP;
	atomic64_inc(&link->ups);
	ropcie_xport_up(link);
	dev_info(link->hw->dev, "ropcie link up: port %u, peer port %u\n",
		 link->hw->port, link->hw->peer_port);
	/* The peer may be waiting for our acknowledgment: tell it now. */
	ropcie_link_ring(link);
}

static void ropcie_link_beat(struct work_struct *work)
{
	struct ropcie_link *link = container_of(to_delayed_work(work),
						struct ropcie_link, beat_work);
	unsigned long timeout = msecs_to_jiffies(READ_ONCE(ropcie_link_timeout_ms));
	struct ropcie_wire_hdr *out = link->hw->out;
	struct ropcie_wire_hdr in;
	u64 peer_epoch = 0, peer_beat;
	const char *why;
	int ret;

	mutex_lock(&link->lock);
	if (link->stopping)
		goto unlock;
	why = xchg(&link->fail_reason, NULL);
	if (why && link->state == ROPCIE_LINK_UP) {
		atomic64_inc(&link->protocol_errors);
		ropcie_link_down(link, why);
	}
	ropcie_link_snapshot(&in, link->hw->in, sizeof(in));
	ret = ropcie_wire_hdr_check(&in, &link->gin);
	if (ret == -EPROTO && link->peer_epoch)
		atomic64_inc(&link->protocol_errors);
	if (!ret)
		peer_epoch = le64_to_cpu(in.epoch);
	peer_beat = le64_to_cpu(in.heartbeat);

	if (peer_epoch != link->peer_epoch) {
		if (link->state == ROPCIE_LINK_UP)
			ropcie_link_down(link, peer_epoch ? "the peer restarted" :
					 ret == -EPROTO ? "the peer's header is not ours" :
					 "the peer left");
		link->peer_epoch = peer_epoch;
		link->peer_beat = peer_beat;
		link->peer_beat_at = jiffies;
	} else if (peer_epoch && peer_beat != link->peer_beat) {
		link->peer_beat = peer_beat;
		link->peer_beat_at = jiffies;
	} else if (link->state == ROPCIE_LINK_UP &&
		   time_after(jiffies, link->peer_beat_at + timeout)) {
		ropcie_link_down(link, "the peer's heartbeat stopped");
	}

	WRITE_ONCE(out->ack_epoch, cpu_to_le64(link->peer_epoch));
	WRITE_ONCE(out->heartbeat, cpu_to_le64(++link->beat));

	if (link->state == ROPCIE_LINK_DOWN && link->peer_epoch &&
	    le64_to_cpu(in.ack_epoch) == link->epoch &&
	    !time_after(jiffies, link->peer_beat_at + timeout))
		ropcie_link_up(link);

	/* The transport polls at each beat: a lost doorbell costs a beat. */
	ropcie_xport_doorbell(link, false);
	queue_delayed_work(system_wq, &link->beat_work,
			   msecs_to_jiffies(ROPCIE_LINK_BEAT_MS));
unlock:
	mutex_unlock(&link->lock);
}

/* Run the beat now rather than when it is due, unless unregister began. */
static void ropcie_link_beat_now(struct ropcie_link *link)
{
	unsigned long flags;

	spin_lock_irqsave(&link->db_lock, flags);
	if (!link->stopping_db)
		mod_delayed_work(system_wq, &link->beat_work, 0);
	spin_unlock_irqrestore(&link->db_lock, flags);
}

/**
 * ropcie_link_db_event() - the peer rang this host's doorbell
 * @link: the link
 *
 * Any context; the doorbell's hard interrupt. Only counts the doorbell
 * and schedules the link's doorbell tasklet: what consumes a ring,
 * serves a request or may fail the link runs there or in a task, never
 * with interrupts off.
 */
void ropcie_link_db_event(struct ropcie_link *link)
{
	unsigned long flags;

	atomic64_inc(&link->doorbells);
	spin_lock_irqsave(&link->db_lock, flags);
	if (!link->stopping_db)
		tasklet_schedule(&link->db_tasklet);
	spin_unlock_irqrestore(&link->db_lock, flags);
}

/*
 * The doorbell's bottom half (softirq): wakes the consumers whose ring
 * holds something, or serves short WRITEs at once (ropcie_lx_rx_fast()),
 * and runs the handshake now rather than at the next beat.
 */
static void ropcie_link_db_run(struct tasklet_struct *t)
{
	struct ropcie_link *link = from_tasklet(link, t, db_tasklet);

	if (READ_ONCE(link->stopping_db))
		return;
	ropcie_xport_doorbell(link, true);
	/* The handshake waits for doorbells; the rings do not. */
	if (READ_ONCE(link->state) != ROPCIE_LINK_UP)
		ropcie_link_beat_now(link);
}

/**
 * ropcie_link_fail() - the peer broke the protocol in the link's rings
 * @link: the link
 * @why: what it did, for down_reason (a string that lives for ever)
 *
 * Any context. The next beat, queued now, takes the link down and counts
 * one protocol error, however many producers and consumers reported the
 * fault before it: every connection over the link ends, and the link
 * comes up again with fresh rings if the peer still follows the handshake.
 */
void ropcie_link_fail(struct ropcie_link *link, const char *why)
{
	cmpxchg(&link->fail_reason, NULL, why);
	ropcie_link_beat_now(link);
}

/* sysfs: <device>/ropcie_link/ */
#define to_link(k) container_of(k, struct ropcie_link, kobj)

static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%s\n", READ_ONCE(to_link(kobj)->state) ==
			  ROPCIE_LINK_UP ? "up" : "down");
}

static ssize_t down_reason_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", READ_ONCE(to_link(kobj)->down_reason));
}

static ssize_t port_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", to_link(kobj)->hw->port);
}

static ssize_t peer_port_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_link(kobj)->hw->peer_port);
}

static ssize_t slot_size_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_link(kobj)->gin.slot_size);
}

static ssize_t ups_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&to_link(kobj)->ups));
}

static ssize_t downs_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&to_link(kobj)->downs));
}

static ssize_t doorbells_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_link(kobj)->doorbells));
}

static ssize_t protocol_errors_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_link(kobj)->protocol_errors));
}

static ssize_t transport_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return ropcie_xport_show(to_link(kobj), buf);
}

static struct kobj_attribute ropcie_link_attr_state = __ATTR_RO(state);
static struct kobj_attribute ropcie_link_attr_transport = __ATTR_RO(transport);
static struct kobj_attribute ropcie_link_attr_down_reason =
	__ATTR_RO(down_reason);
static struct kobj_attribute ropcie_link_attr_port = __ATTR_RO(port);
static struct kobj_attribute ropcie_link_attr_peer_port = __ATTR_RO(peer_port);
static struct kobj_attribute ropcie_link_attr_slot_size = __ATTR_RO(slot_size);
static struct kobj_attribute ropcie_link_attr_ups = __ATTR_RO(ups);
static struct kobj_attribute ropcie_link_attr_downs = __ATTR_RO(downs);
static struct kobj_attribute ropcie_link_attr_doorbells = __ATTR_RO(doorbells);
static struct kobj_attribute ropcie_link_attr_protocol_errors =
	__ATTR_RO(protocol_errors);

static struct attribute *ropcie_link_attrs[] = {
	&ropcie_link_attr_state.attr,
	&ropcie_link_attr_down_reason.attr,
	&ropcie_link_attr_port.attr,
	&ropcie_link_attr_peer_port.attr,
	&ropcie_link_attr_slot_size.attr,
	&ropcie_link_attr_ups.attr,
	&ropcie_link_attr_downs.attr,
	&ropcie_link_attr_doorbells.attr,
	&ropcie_link_attr_protocol_errors.attr,
	&ropcie_link_attr_transport.attr,
	NULL
};
ATTRIBUTE_GROUPS(ropcie_link);

/*
 * debugfs: ropcie/link-<device>/scribble, a test's hostile peer. Writing
 * "OFFSET HEX" puts the bytes HEX into the peer's inbound window at
 * OFFSET, between two heartbeats, as a buggy or malicious host would:
 * the peer must take its side of the link down and recover, never use
 * what it read. Root only, like the rest of debugfs.
 */
#define ROPCIE_SCRIBBLE_MAX	4096

static ssize_t ropcie_link_scribble(struct file *file, const char __user *ubuf,
				    size_t count, loff_t *ppos)
{
	struct ropcie_link *link = file->private_data;
	char *buf, *hex;
	u8 *data = NULL;
	size_t n;
	u64 off;
	int ret;

	if (count > 2 * ROPCIE_SCRIBBLE_MAX + 32)
		return -EINVAL;
	buf = memdup_user_nul(ubuf, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	hex = strchr(strim(buf), ' ');
	ret = -EINVAL;
	if (!hex)
		goto out;
	*hex++ = '\0';
	hex = skip_spaces(hex);
	n = strlen(hex);
	if (kstrtou64(buf, 0, &off) || !n || n % 2)
		goto out;
	n /= 2;
	data = kmalloc(n, GFP_KERNEL);
	ret = -ENOMEM;
	if (!data)
		goto out;
	ret = -EINVAL;
	if (hex2bin(data, hex, n))
		goto out;
	ret = -ERANGE;
	if (off > link->hw->out_size || n > link->hw->out_size - off)
		goto out;
	mutex_lock(&link->lock);
	memcpy(link->hw->out + off, data, n);
	mutex_unlock(&link->lock);
	ret = count;
out:
	kfree(data);
	kfree(buf);
	return ret;
}

static const struct file_operations ropcie_link_scribble_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ropcie_link_scribble,
	.llseek = noop_llseek,
};

/*
 * debugfs: ropcie/link-<device>/inject, "RING DESC [PAYLOAD]" (RING req
 * or rsp, DESC 64 bytes in hex, PAYLOAD up to 4 KiB in hex): produce a
 * descriptor of the writer's own bytes into the other host's ring, in
 * order with the real traffic, as a buggy or malicious host would.
 */
static ssize_t ropcie_link_inject(struct file *file, const char __user *ubuf,
				  size_t count, loff_t *ppos)
{
	u8 desc[ROPCIE_WIRE_DESC_SIZE], *payload = NULL;
	struct ropcie_link *link = file->private_data;
	char *buf, *word[3] = {}, *p;
	size_t len = 0;
	int ring, n = 0, ret;

	if (count > 2 * (ROPCIE_SCRIBBLE_MAX + ROPCIE_WIRE_DESC_SIZE) + 32)
		return -EINVAL;
	buf = memdup_user_nul(ubuf, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	p = strim(buf);
	while (p && *p && n < 3) {
		word[n++] = strsep(&p, " ");
		p = p ? skip_spaces(p) : NULL;
	}
	ret = -EINVAL;
	if (n < 2 || (p && *p))
		goto out;
	if (!strcmp(word[0], "req"))
		ring = ROPCIE_WIRE_REQ;
	else if (!strcmp(word[0], "rsp"))
		ring = ROPCIE_WIRE_RSP;
	else
		goto out;
	if (strlen(word[1]) != 2 * sizeof(desc) ||
	    hex2bin(desc, word[1], sizeof(desc)))
		goto out;
	if (word[2]) {
		len = strlen(word[2]);
		if (!len || len % 2 || len > 2 * ROPCIE_SCRIBBLE_MAX)
			goto out;
		len /= 2;
		payload = kmalloc(len, GFP_KERNEL);
		ret = -ENOMEM;
		if (!payload)
			goto out;
		ret = -EINVAL;
		if (hex2bin(payload, word[2], len))
			goto out;
	}
	ret = ropcie_xport_inject(link, ring, desc, payload, len);
	if (!ret)
		ret = count;
out:
	kfree(payload);
	kfree(buf);
	return ret;
}

static const struct file_operations ropcie_link_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ropcie_link_inject,
	.llseek = noop_llseek,
};

/*
 * debugfs: ropcie/link-<device>/doorbell: any write rings the other
 * host's doorbell, as a producer does after what it wrote (the
 * scribbler's "rung"); without it the other host sees a scribble at
 * its next beat.
 */
static ssize_t ropcie_link_doorbell_write(struct file *file,
					  const char __user *ubuf,
					  size_t count, loff_t *ppos)
{
	ropcie_link_ring(file->private_data);
	return count;
}

static const struct file_operations ropcie_link_doorbell_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ropcie_link_doorbell_write,
	.llseek = noop_llseek,
};

/*
 * debugfs: ropcie/link-<device>/stream. Writing BYTES streams that many
 * bytes into the other host's request ring (ropcie_xport_stream(), the
 * link's ceiling for make bench-pair) and returns when it consumed
 * them; reading says "bytes B ns N" of the last stream that ended well.
 */
static ssize_t ropcie_link_stream_write(struct file *file,
					const char __user *ubuf, size_t count,
					loff_t *ppos)
{
	struct ropcie_link *link = file->private_data;
	u64 bytes, ns;
	int ret;

	ret = kstrtou64_from_user(ubuf, count, 0, &bytes);
	if (ret)
		return ret;
	ret = ropcie_xport_stream(link, bytes, &ns);
	if (ret)
		return ret;
	mutex_lock(&link->lock);
	link->stream_bytes = bytes;
	link->stream_ns = ns;
	mutex_unlock(&link->lock);
	return count;
}

static ssize_t ropcie_link_stream_read(struct file *file, char __user *ubuf,
				       size_t count, loff_t *ppos)
{
	struct ropcie_link *link = file->private_data;
	char buf[64];
	int n;

	mutex_lock(&link->lock);
	n = scnprintf(buf, sizeof(buf), "bytes %llu ns %llu\n",
		      link->stream_bytes, link->stream_ns);
	mutex_unlock(&link->lock);
	return simple_read_from_buffer(ubuf, count, ppos, buf, n);
}

static const struct file_operations ropcie_link_stream_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ropcie_link_stream_read,
	.write = ropcie_link_stream_write,
	.llseek = default_llseek,
};

/* debugfs link-<device>/connections: see ropcie_xport_conns_show(). */
static int ropcie_link_conns_show(struct seq_file *m, void *unused)
{
	ropcie_xport_conns_show(m->private, m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ropcie_link_conns);

static void ropcie_link_release(struct kobject *kobj)
{
	kfree(to_link(kobj));
}

static const struct kobj_type ropcie_link_ktype = {
	.release = ropcie_link_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = ropcie_link_groups,
};

/**
 * ropcie_link_register() - start a link over a hardware link
 * @hw: the mapped windows and the doorbell; must outlive the link
 *
 * Publishes this host's header in the peer's window and starts the
 * heartbeat; the link comes up once the peer does the same. The state
 * shows in @hw->dev's sysfs directory, under ropcie_link/.
 *
 * Return: the link, or an ERR_PTR: -ENOSPC when a window is too small
 * for the protocol, -ENOMEM.
 */
struct ropcie_link *ropcie_link_register(struct ropcie_link_hw *hw)
{
	struct ropcie_link *link;
	char name[64];
	int ret;

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return ERR_PTR(-ENOMEM);
	link->hw = hw;
	ret = ropcie_wire_geometry(hw->in_size, &link->gin);
	if (!ret)
		ret = ropcie_wire_geometry(hw->out_size, &link->gout);
	if (ret) {
		kfree(link);
		return ERR_PTR(ret);
	}
	mutex_init(&link->lock);
	spin_lock_init(&link->db_lock);
	tasklet_setup(&link->db_tasklet, ropcie_link_db_run);
	INIT_DELAYED_WORK(&link->beat_work, ropcie_link_beat);
	link->state = ROPCIE_LINK_DOWN;
	link->down_reason = "no peer yet";
	ret = ropcie_xport_create(link);
	if (ret) {
		kfree(link);
		return ERR_PTR(ret);
	}

	kobject_init(&link->kobj, &ropcie_link_ktype);
	ret = kobject_add(&link->kobj, &hw->dev->kobj, "ropcie_link");
	if (ret) {
		ropcie_xport_destroy(link);
		kobject_put(&link->kobj);
		return ERR_PTR(ret);
	}
	mutex_lock(&link->lock);
	ropcie_link_publish(link);
	mutex_unlock(&link->lock);
	snprintf(name, sizeof(name), "link-%s", dev_name(hw->dev));
	link->debugfs = debugfs_create_dir(name, ropcie_debugfs);
	debugfs_create_file("scribble", 0200, link->debugfs, link,
			    &ropcie_link_scribble_fops);
	debugfs_create_file("inject", 0200, link->debugfs, link,
			    &ropcie_link_inject_fops);
	debugfs_create_file("connections", 0400, link->debugfs, link,
			    &ropcie_link_conns_fops);
	debugfs_create_file("stream", 0600, link->debugfs, link,
			    &ropcie_link_stream_fops);
	debugfs_create_file("doorbell", 0200, link->debugfs, link,
			    &ropcie_link_doorbell_fops);
	queue_delayed_work(system_wq, &link->beat_work, 0);
	return link;
}

/**
 * ropcie_link_unregister() - end a link
 * @link: the link
 *
 * Tells the peer this host leaves (it clears its header's magic and
 * rings the peer, which takes the link down at once), stops the
 * heartbeat and frees the link. The caller has stopped the doorbell
 * interrupt or made sure ropcie_link_db_event() is no longer called.
 */
void ropcie_link_unregister(struct ropcie_link *link)
{
	struct ropcie_wire_hdr *out = link->hw->out;

	/* Waits for a scribble under way. */
	debugfs_remove_recursive(link->debugfs);
	spin_lock_irq(&link->db_lock);
	link->stopping_db = true;
	spin_unlock_irq(&link->db_lock);
	/* A doorbell tasklet scheduled before returns at once. */
	tasklet_kill(&link->db_tasklet);
	mutex_lock(&link->lock);
	link->stopping = true;
	WRITE_ONCE(out->magic, 0);
	/* The magic is gone before the doorbell below. */
	wmb();
	mutex_unlock(&link->lock);
	cancel_delayed_work_sync(&link->beat_work);
	ropcie_link_ring(link);
	if (link->state == ROPCIE_LINK_UP)
		dev_info(link->hw->dev, "ropcie link down: this host left\n");
	/* Its files go first: kernfs waits for their readers to leave. */
	kobject_del(&link->kobj);
	/* Ends every connection over the link and waits for its users. */
	ropcie_xport_destroy(link);
	kobject_put(&link->kobj);
}
