/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * krping session options: the settings of one test session and their
 * strict text form.
 *
 * This unit is pure C on top of the kernel's string and socket-address
 * helpers; it has no ib_core dependency so that KUnit can run it on UML.
 * The configfs attributes and the legacy "options" string both go through
 * krping_option_set(), so every input path validates the same way.
 */
#ifndef KRPING_OPTIONS_H
#define KRPING_OPTIONS_H

#include <linux/types.h>
#include <linux/socket.h>
#include <linux/if.h>

enum krping_role {
	KRPING_ROLE_NONE,
	KRPING_ROLE_CLIENT,
	KRPING_ROLE_SERVER,
};

enum krping_test {
	KRPING_TEST_PING,
	KRPING_TEST_WLAT,
	KRPING_TEST_RLAT,
	KRPING_TEST_BW,
	KRPING_TEST_FR,
	KRPING_TEST_SLAT,
	KRPING_TEST_SBW,
};

enum krping_mem_mode {
	KRPING_MEM_REG,		/* fast registration, the default */
	KRPING_MEM_DMA,		/* PD with the unsafe global rkey */
};

#define KRPING_DEFAULT_PORT	7174	/* rping's default port */
#define KRPING_DEFAULT_SIZE	64	/* rping's default size */
#define KRPING_DEFAULT_TXDEPTH	64
#define KRPING_DEFAULT_COUNT	0	/* run until stopped */
#define KRPING_DEFAULT_TOS	0
/* A peer silent this long is gone (see krping_keepalive()); 0: never. */
#define KRPING_DEFAULT_PEER_TIMEOUT_MS	30000
#define KRPING_MAX_PEER_TIMEOUT_MS	3600000		/* an hour */
#define KRPING_MAX_DURATION_MS	86400000	/* a day */
#define KRPING_MIN_SIZE		1
#define KRPING_MAX_SIZE		(4U << 20)	/* largest kmalloc on x86 */
#define KRPING_MIN_TXDEPTH	4	/* ping chains INV + REG + op + SEND */
#define KRPING_MAX_TXDEPTH	16384
/*
 * Connections (QPs) of one session. Each is a kthread with its own PD,
 * CQ, QP and two buffers of up to KRPING_MAX_SIZE: 16 bound a session's
 * buffers to 128 MiB, keep the threads within what a small host can
 * schedule, and keep sysfs per_qp (a line per QP) within one page.
 */
#define KRPING_DEFAULT_QPS	1
#define KRPING_MAX_QPS		16

/* Longest canonical options string, terminating NUL included. */
#define KRPING_OPTIONS_MAX	320

/**
 * struct krping_options - the settings of one krping session
 * @role: client or server; NONE until set
 * @addr: server address (client: where to connect, server: where to
 *	listen); ss_family is AF_UNSPEC until set. For IPv6 the port field
 *	is left zero; @port holds the port.
 * @scope: interface name of an IPv6 link-local address ("fe80::1%eth0"),
 *	empty if none. Resolved to an ifindex when the session starts.
 * @port: TCP-style port space port number, host order
 * @count: iterations to run, 0 = until stopped
 * @size: bytes per ping buffer
 * @test: which test to run
 * @mem_mode: how RDMA buffers are registered
 * @txdepth: send queue depth
 * @tos: IP type of service of the connection
 * @peer_timeout_ms: end the run with -ETIMEDOUT when the connected peer
 *	has given no sign of life for this long; 0 waits for it forever
 * @duration_ms: benchmarks: the client ends the measured part of the run
 *	after this long (and after count iterations, if count is set); the
 *	server follows it. 0: count alone ends the run
 * @warmup: benchmarks: iterations run before the measured ones, counted
 *	in stats/ but not in latency/ or bandwidth/
 * @qps: connections the session runs at once, each its own QP and
 *	thread, 1..KRPING_MAX_QPS; above 1 the peer must be krping with the
 *	same qps
 * @validate: compare the returned ping data with what was sent
 * @verbose: log each ping's data (dynamic debug)
 * @duplex: bidirectional bandwidth test (bw only)
 * @poll: busy-poll the CQ instead of sleeping on completion events
 * @server_inv: server invalidates the client's rkey with SEND_WITH_INV
 * @local_dma_lkey: use the PD's local DMA lkey instead of registering
 * @read_inv: server uses READ_WITH_INV (iWARP only, needs reg)
 */
struct krping_options {
	enum krping_role role;
	struct sockaddr_storage addr;
	char scope[IFNAMSIZ];
	u16 port;
	u32 count;
	u32 size;
	enum krping_test test;
	enum krping_mem_mode mem_mode;
	u32 txdepth;
	u8 tos;
	u32 peer_timeout_ms;
	u32 duration_ms;
	u32 warmup;
	u32 qps;
	bool validate;
	bool verbose;
	bool duplex;
	bool poll;
	bool server_inv;
	bool local_dma_lkey;
	bool read_inv;
};

/* Fill @opts with the defaults of a freshly created session. */
void krping_options_init(struct krping_options *opts);

/*
 * Set one option by its attribute name ("size", "addr", "role", ...) from
 * its text form. @val is NUL terminated; one trailing newline is allowed.
 * Returns 0, -EINVAL (malformed, unknown name or enum) or -ERANGE (a number
 * out of the option's range). On error @opts is unchanged.
 */
int krping_option_set(struct krping_options *opts, const char *name,
		      const char *val);

/*
 * As krping_option_set(), for a buffer of @len bytes that need not be NUL
 * terminated (a configfs store's page and count). A NUL byte within @len
 * is -EINVAL.
 */
int krping_option_set_buf(struct krping_options *opts, const char *name,
			  const char *buf, size_t len);

/*
 * Print one option's value as its attribute shows it, followed by a
 * newline, into @buf of @size bytes. Returns the length written (as
 * scnprintf does) or -EINVAL for an unknown name.
 */
int krping_option_show(const struct krping_options *opts, const char *name,
		       char *buf, size_t size);

/*
 * Parse a legacy krping option string ("client,addr=10.9.0.1,port=9999,
 * count=100,validate"; every option name of the original krping). The
 * string describes a whole session: options not named take their default.
 * All or nothing: on error @opts is unchanged. Returns 0, -EINVAL or -ERANGE.
 */
int krping_options_parse(struct krping_options *opts, const char *str);

/*
 * As krping_options_parse(), for a buffer of @len bytes that need not be
 * NUL terminated. A NUL byte within @len is -EINVAL.
 */
int krping_options_parse_buf(struct krping_options *opts, const char *buf,
			     size_t len);

/*
 * Print the canonical option string of @opts (parseable by
 * krping_options_parse() into equal settings) followed by a newline.
 * Returns the length written, as scnprintf does.
 */
int krping_options_format(const struct krping_options *opts, char *buf,
			  size_t size);

/*
 * Check that the settings make a runnable session: a role and an address
 * are set, and no options conflict (read_inv or server_inv without reg,
 * duplex without bw, ...). Returns 0 or -EINVAL. Whether the test itself is
 * implemented is the engine's business, not this function's.
 */
int krping_options_validate(const struct krping_options *opts);

/*
 * Print what this module's sessions accept, one option per line in the
 * order of krping_options_table.h: "NAME number MIN..MAX", "NAME bool",
 * "NAME enum VALUE,VALUE,..." or "NAME addr". Returns the length
 * written, as scnprintf does.
 */
int krping_options_features(char *buf, size_t size);

/* True if both hold the same settings (used by the round-trip tests). */
bool krping_options_equal(const struct krping_options *a,
			  const struct krping_options *b);

/**
 * struct krping_plan - how long a benchmark runs, as its sides agree it
 * @count: measured iterations, 0 = until the time is up or stopped
 * @warmup: iterations run before the measured ones
 * @duration_ms: the client's time for the measured part, 0 = untimed
 *
 * Each side announces its plan in the hello of its connection request or
 * accept (krping/run.h), so that a server can follow its client.
 */
struct krping_plan {
	u32 count;
	u32 warmup;
	u32 duration_ms;
};

/* The plan of @opts alone. */
void krping_plan_of(const struct krping_options *opts,
		    struct krping_plan *plan);

/*
 * Whether two sides with these plans end together: the same count and
 * warm-up, both timed or neither (a timed server follows its client's
 * time, whatever its own).
 */
bool krping_plans_agree(const struct krping_plan *a,
			const struct krping_plan *b);

/*
 * A benchmark server's plan for a client that announced @client: each of
 * count, warmup and duration_ms that @opts leaves 0 is the client's. Fills
 * @plan and returns 0 when it agrees with @client and keeps the limits of
 * krping_options_validate(); otherwise fills @plan with the server's own
 * and returns -EINVAL.
 */
int krping_plan_follow(const struct krping_options *opts,
		       const struct krping_plan *client,
		       struct krping_plan *plan);

#endif /* KRPING_OPTIONS_H */
