// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * One run of a session, in the session's thread: connect, run the test,
 * publish its latency and bandwidth figures, release everything.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>
#include <linux/slab.h>

#include "run.h"

/**
 * krping_run() - run one session's test to its end
 * @sess: the session
 * @opts: the settings of this run
 *
 * Called in the session's thread. Everything the run creates is released
 * before this returns. The figures, the latency histogram among them, are
 * published however the run ended.
 *
 * Return: 0 when the test completed, -EINTR when it was told to stop, or
 * the negative errno that failed it.
 */
int krping_run(struct krping_session *sess, const struct krping_options *opts)
{
	struct krping_lat_buckets *hist;
	struct krping_lat_summary lat;
	struct krping_run *run;
	int ret;

	run = kzalloc(sizeof(*run), GFP_KERNEL);
	if (!run)
		return -ENOMEM;
	ret = krping_lat_init(&run->lat);
	if (ret) {
		kfree(run);
		return ret;
	}
	krping_run_init(run, sess, opts);

	if (opts->role == KRPING_ROLE_CLIENT)
		ret = krping_connect(run);
	else
		ret = krping_accept(run);
	if (!ret) {
		krping_session_set_state(sess, KRPING_STATE_RUNNING);
		if (opts->test == KRPING_TEST_PING)
			ret = krping_ping(run);
		else
			ret = krping_bench(run);
	}

	WRITE_ONCE(sess->progress.end_ns, ktime_get_ns());
	/* The histogram file is one sysfs page; see krping_lat_export(). */
	hist = krping_lat_export(&run->lat, PAGE_SIZE - 1, GFP_KERNEL);
	krping_lat_summarize(&run->lat, &lat);
	krping_session_publish(sess, &lat, hist, run->bw_msgs, run->bw_bytes,
			       run->bw_ns);

	krping_teardown(run);
	krping_lat_free(&run->lat);
	kfree(run);
	return ret;
}
