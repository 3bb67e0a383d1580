/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ropcie link: a point-to-point link to one peer host over shared
 * memory, in the shape of the kernel's NTB abstraction (memory windows,
 * doorbells, link events; include/linux/ntb.h). The hardware part
 * (ivshmem.c today; an NTB backend would be another) maps two windows
 * and rings the peer; the link core (link.c) brings the link up with the
 * peer through the window headers of the link protocol (wire.h), keeps
 * a heartbeat, and takes the link down when the peer goes quiet,
 * restarts, or writes what no correct peer writes.
 */
#ifndef ROPCIE_LINK_H
#define ROPCIE_LINK_H

#include <linux/atomic.h>
#include <linux/device.h>
#include <linux/interrupt.h>
#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "wire.h"

struct seq_file;

/* The link's heartbeat period; a peer is gone after link_timeout_ms. */
#define ROPCIE_LINK_BEAT_MS	250

struct ropcie_link_hw;
struct ropcie_xport;

/**
 * struct ropcie_link_hw_ops - what the link core needs of the hardware
 * @peer_db_set: ring the peer's doorbell (ntb_peer_db_set()); may be
 *	called in any context
 */
struct ropcie_link_hw_ops {
	void (*peer_db_set)(struct ropcie_link_hw *hw);
};

/**
 * struct ropcie_link_hw - a hardware link, as its backend describes it
 * @dev: the device whose sysfs directory shows the link (ropcie_link/)
 * @ops: see struct ropcie_link_hw_ops
 * @in: this host's inbound window, mapped: only the peer writes it
 * @in_size: its size
 * @out: the peer's inbound window, mapped: only this host writes it
 * @out_size: its size
 * @port: this host's port number on the link (ntb_port_number())
 * @peer_port: the peer's (ntb_peer_port_number())
 */
struct ropcie_link_hw {
	struct device *dev;
	const struct ropcie_link_hw_ops *ops;
	void *in;
	u64 in_size;
	void *out;
	u64 out_size;
	u32 port, peer_port;
};

enum ropcie_link_state {
	ROPCIE_LINK_DOWN,
	ROPCIE_LINK_UP,
};

/**
 * struct ropcie_link - the link core's state of one link
 * @hw: the hardware under it
 * @gin: geometry of the inbound window
 * @gout: geometry of the peer's inbound window
 * @lock: serialises the state machine (the beat work and unregister)
 * @beat_work: the heartbeat and handshake, every ROPCIE_LINK_BEAT_MS
 * @state: enum ropcie_link_state
 * @epoch: this host's incarnation on the link
 * @peer_epoch: the peer's, as last read (0: none)
 * @beat: this host's heartbeat counter
 * @peer_beat: the peer's, as last read
 * @peer_beat_at: when it last changed (jiffies)
 * @ups: transitions to up
 * @downs: transitions to down
 * @doorbells: doorbells rung by the peer
 * @protocol_errors: headers the peer wrote that no correct peer writes,
 *	and faults in its rings that took the link down (one each)
 * @down_reason: why the link last went down
 * @stopping: unregister began: the beat does nothing more
 * @db_lock: orders doorbell events against unregister
 * @stopping_db: unregister began: doorbells queue no work
 * @db_tasklet: the doorbell's bottom half (ropcie_link_db_event())
 * @fail_reason: set by the transport when the peer broke the protocol
 *	in its rings: the next beat takes the link down for it
 * @xport: the transport over this link (link_transport.c)
 * @kobj: <hw->dev>/ropcie_link/ in sysfs; its release frees the link
 * @debugfs: ropcie/link-<device>/ in debugfs: the scribbler
 * @stream_bytes: bytes of the last raw stream this host sent, under @lock
 * @stream_ns: its time (ropcie_xport_stream())
 */
struct ropcie_link {
	struct ropcie_link_hw *hw;
	struct ropcie_wire_geom gin, gout;
	struct mutex lock;		/* the state machine */
	struct delayed_work beat_work;
	enum ropcie_link_state state;
	u64 epoch, peer_epoch;
	u64 beat, peer_beat;
	unsigned long peer_beat_at;
	atomic64_t ups, downs, doorbells, protocol_errors;
	const char *down_reason;
	bool stopping;
	spinlock_t db_lock;		/* stopping_db, in IRQ context too */
	bool stopping_db;
	struct tasklet_struct db_tasklet;
	const char *fail_reason;
	struct ropcie_xport *xport;
	struct kobject kobj;
	struct dentry *debugfs;
	u64 stream_bytes, stream_ns;
};

extern unsigned int ropcie_link_timeout_ms;
extern struct dentry *ropcie_debugfs;

struct ropcie_link *ropcie_link_register(struct ropcie_link_hw *hw);
void ropcie_link_unregister(struct ropcie_link *link);
void ropcie_link_db_event(struct ropcie_link *link);
void ropcie_link_fail(struct ropcie_link *link, const char *why);

/* link_transport.c: the transport's side of the link's life */
int ropcie_xport_create(struct ropcie_link *link);
void ropcie_xport_destroy(struct ropcie_link *link);
void ropcie_xport_up(struct ropcie_link *link);
void ropcie_xport_down(struct ropcie_link *link);
void ropcie_xport_doorbell(struct ropcie_link *link, bool rang);
int ropcie_xport_show(struct ropcie_link *link, char *buf);
void ropcie_xport_conns_show(struct ropcie_link *link, struct seq_file *m);
/* The largest raw stream (link_stream.c): 1 GiB. */
#define ROPCIE_STREAM_MAX	(1ULL << 30)
int ropcie_xport_stream(struct ropcie_link *link, u64 bytes, u64 *ns);
int ropcie_xport_inject(struct ropcie_link *link, int ring, const void *desc,
			const void *payload, size_t len);

#endif /* ROPCIE_LINK_H */
