// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KUnit tests of the krping option parser: every option's good values,
 * every error class with its exact errno (and proof that nothing
 * changed), every legacy option name, validation, and the canonical
 * round trip parse -> format -> parse.
 *
 * The parser is included rather than linked so that its object file is
 * not built into two modules.
 */

#include <kunit/test.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../configfs/krping_options.c"

/* Every attribute, with how a fresh session shows it (newline added). */
static const struct {
	const char *name;
	const char *show;
} krping_attrs[] = {
	{ "role", "none" },
	{ "addr", "" },
	{ "port", "7174" },
	{ "count", "0" },
	{ "size", "64" },
	{ "test", "ping" },
	{ "validate", "0" },
	{ "verbose", "0" },
	{ "mem_mode", "reg" },
	{ "txdepth", "64" },
	{ "duplex", "0" },
	{ "poll", "0" },
	{ "server_inv", "0" },
	{ "local_dma_lkey", "0" },
	{ "read_inv", "0" },
	{ "tos", "0" },
	{ "peer_timeout_ms", "30000" },
	{ "duration_ms", "0" },
	{ "warmup", "0" },
	{ "qps", "1" },
};

#define KRPING_DEFAULT_STRING \
	"port=7174,count=0,size=64,test=ping,mem_mode=reg,txdepth=64,tos=0," \
	"peer_timeout_ms=30000"

/* A session that differs from the defaults in every option. */
#define KRPING_BUSY_STRING \
	"server,addr=fe80::1%eth0,port=9999,count=5,size=100,test=bw," \
	"mem_mode=dma,txdepth=128,tos=7,peer_timeout_ms=5000,duration_ms=2500," \
	"warmup=3,qps=2,validate,verbose,duplex,poll,server_inv," \
	"local_dma_lkey,read_inv"

/* The longest canonical string there is. */
#define KRPING_LONGEST_STRING \
	"server,addr=febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff%abcdefghijklmno," \
	"port=65535,count=4294967295,size=4194304,test=wlat,mem_mode=dma," \
	"txdepth=16384,tos=255,peer_timeout_ms=3600000,duration_ms=86400000," \
	"warmup=4294967295,qps=16,validate,verbose,duplex,poll,server_inv," \
	"local_dma_lkey,read_inv"

/* Write @s into @desc with newlines, tabs and other bytes escaped. */
static void krping_escape(char *desc, size_t size, const char *prefix,
			  const char *s)
{
	size_t len = scnprintf(desc, size, "%s", prefix);

	if (!*s)
		len += scnprintf(desc + len, size - len, "<empty>");
	for (; *s && len < size - 1; s++) {
		if (*s == '\n')
			len += scnprintf(desc + len, size - len, "\\n");
		else if (*s == '\t')
			len += scnprintf(desc + len, size - len, "\\t");
		else if (*s == ' ')
			len += scnprintf(desc + len, size - len, "<sp>");
		else if (*s < ' ' || *s > '~' || *s == '#')
			len += scnprintf(desc + len, size - len, "\\x%02x",
					 (u8)*s);
		else
			len += scnprintf(desc + len, size - len, "%c", *s);
	}
}

static void krping_init_busy(struct kunit *test, struct krping_options *opts)
{
	krping_options_init(opts);
	KUNIT_ASSERT_EQ(test, krping_options_parse(opts, KRPING_BUSY_STRING), 0);
}

static const char *krping_show(struct kunit *test,
			       const struct krping_options *opts,
			       const char *name)
{
	char *buf = kunit_kzalloc(test, KRPING_OPTIONS_MAX, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = krping_option_show(opts, name, buf, KRPING_OPTIONS_MAX);
	KUNIT_ASSERT_GT_MSG(test, len, 0, "show %s", name);
	KUNIT_ASSERT_EQ_MSG(test, buf[len - 1], '\n', "show %s", name);
	buf[len - 1] = '\0';
	return buf;
}

static const char *krping_format(struct kunit *test,
				 const struct krping_options *opts)
{
	char *buf = kunit_kzalloc(test, KRPING_OPTIONS_MAX, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = krping_options_format(opts, buf, KRPING_OPTIONS_MAX);
	/* It fits, with room to spare for the NUL. */
	KUNIT_ASSERT_LT(test, len, KRPING_OPTIONS_MAX - 1);
	KUNIT_ASSERT_EQ(test, len, (int)strlen(buf));
	KUNIT_ASSERT_EQ(test, buf[len - 1], '\n');
	buf[len - 1] = '\0';
	return buf;
}

/* ---- defaults and attribute names -------------------------------------- */

static void krping_test_defaults(struct kunit *test)
{
	struct krping_options opts;
	size_t i;

	memset(&opts, 0xa5, sizeof(opts));
	krping_options_init(&opts);
	for (i = 0; i < ARRAY_SIZE(krping_attrs); i++)
		KUNIT_EXPECT_STREQ_MSG(test, krping_show(test, &opts,
							 krping_attrs[i].name),
				       krping_attrs[i].show,
				       "attribute %s", krping_attrs[i].name);
	KUNIT_EXPECT_STREQ(test, krping_format(test, &opts),
			   KRPING_DEFAULT_STRING);
	KUNIT_EXPECT_EQ(test, opts.addr.ss_family, AF_UNSPEC);
	KUNIT_EXPECT_STREQ(test, opts.scope, "");
	KUNIT_EXPECT_EQ(test, krping_options_validate(&opts), -EINVAL);
}

static void krping_test_unknown_names(struct kunit *test)
{
	static const char * const names[] = {
		"", "nosuch", "Role", "ROLE", "role ", " role", "role\n",
		"options", "start", "client", "server", "addr6", "tx-depth",
		"wlat", "rlat", "bw", "fr", "slat", "sbw", "tx_depth",
		"mem-mode",
	};
	struct krping_options opts, before;
	char buf[32];
	size_t i;

	krping_init_busy(test, &opts);
	before = opts;
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		KUNIT_EXPECT_EQ_MSG(test, krping_option_set(&opts, names[i], "1"),
				    -EINVAL, "set '%s'", names[i]);
		KUNIT_EXPECT_EQ_MSG(test, krping_option_set(&opts, names[i],
							    "client"),
				    -EINVAL, "set '%s'", names[i]);
		KUNIT_EXPECT_EQ_MSG(test, krping_option_show(&opts, names[i],
							     buf, sizeof(buf)),
				    -EINVAL, "show '%s'", names[i]);
	}
	KUNIT_EXPECT_EQ(test, memcmp(&opts, &before, sizeof(opts)), 0);
}

/* ---- krping_option_set: good values ------------------------------------ */

struct krping_set_case {
	const char *name;
	const char *val;
	const char *show;	/* what the attribute shows afterwards */
};

static const struct krping_set_case krping_set_good_cases[] = {
	{ "role", "client", "client" },
	{ "role", "server", "server" },
	{ "role", "none", "none" },
	{ "role", "client\n", "client" },
	{ "role", "server\n", "server" },

	{ "addr", "10.9.0.1", "10.9.0.1" },
	{ "addr", "10.9.0.1\n", "10.9.0.1" },
	{ "addr", "0.0.0.0", "0.0.0.0" },
	{ "addr", "255.255.255.255", "255.255.255.255" },
	{ "addr", "192.168.100.200", "192.168.100.200" },
	{ "addr", "127.0.0.1", "127.0.0.1" },
	{ "addr", "::", "::" },
	{ "addr", "::1", "::1" },
	{ "addr", "::1\n", "::1" },
	{ "addr", "2001:db8::1", "2001:db8::1" },
	{ "addr", "2001:DB8::A", "2001:db8::a" },
	{ "addr", "2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1" },
	{ "addr", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8" },
	{ "addr", "1::", "1::" },
	{ "addr", "::ffff:10.9.0.1", "::ffff:10.9.0.1" },
	{ "addr", "::ffff:0.0.0.0", "::ffff:0.0.0.0" },
	{ "addr", "fe80::1", "fe80::1" },
	{ "addr", "fe80::1%eth0", "fe80::1%eth0" },
	{ "addr", "fe80::1%eth0\n", "fe80::1%eth0" },
	{ "addr", "FE80::AB%eth0", "fe80::ab%eth0" },
	{ "addr", "fe80::1%a", "fe80::1%a" },
	{ "addr", "fe80::1%abcdefghijklmno", "fe80::1%abcdefghijklmno" },
	{ "addr", "fe80::1%eth0.100", "fe80::1%eth0.100" },
	{ "addr", "fe80::1%br-lan_2", "fe80::1%br-lan_2" },
	{ "addr", "fe80::1%...", "fe80::1%..." },
	{ "addr", "febf:ffff::1%x", "febf:ffff::1%x" },
	{ "addr", "fe80:0:0:0:1:2:3:4%v", "fe80::1:2:3:4%v" },

	{ "port", "1", "1" },
	{ "port", "7174", "7174" },
	{ "port", "9999\n", "9999" },
	{ "port", "65535", "65535" },

	{ "count", "0", "0" },
	{ "count", "1", "1" },
	{ "count", "100\n", "100" },
	{ "count", "4294967295", "4294967295" },

	{ "size", "1", "1" },
	{ "size", "64", "64" },
	{ "size", "65536\n", "65536" },
	{ "size", "4194304", "4194304" },

	{ "test", "ping", "ping" },
	{ "test", "wlat", "wlat" },
	{ "test", "rlat", "rlat" },
	{ "test", "bw", "bw" },
	{ "test", "fr", "fr" },
	{ "test", "slat", "slat" },
	{ "test", "bw\n", "bw" },

	{ "mem_mode", "reg", "reg" },
	{ "mem_mode", "dma", "dma" },
	{ "mem_mode", "dma\n", "dma" },

	{ "txdepth", "4", "4" },
	{ "txdepth", "64", "64" },
	{ "txdepth", "1024\n", "1024" },
	{ "txdepth", "16384", "16384" },

	{ "tos", "0", "0" },
	{ "tos", "16\n", "16" },
	{ "tos", "255", "255" },

	{ "peer_timeout_ms", "0", "0" },
	{ "peer_timeout_ms", "100\n", "100" },
	{ "peer_timeout_ms", "3600000", "3600000" },

	{ "duration_ms", "0", "0" },
	{ "duration_ms", "1500\n", "1500" },
	{ "duration_ms", "86400000", "86400000" },

	{ "warmup", "0", "0" },
	{ "warmup", "100\n", "100" },
	{ "warmup", "4294967295", "4294967295" },

	{ "qps", "1", "1" },
	{ "qps", "2\n", "2" },
	{ "qps", "16", "16" },

	{ "validate", "0", "0" },
	{ "validate", "1", "1" },
	{ "validate", "1\n", "1" },
	{ "validate", "0\n", "0" },
	{ "verbose", "0", "0" },
	{ "verbose", "1", "1" },
	{ "verbose", "1\n", "1" },
	{ "verbose", "0\n", "0" },
	{ "duplex", "0", "0" },
	{ "duplex", "1", "1" },
	{ "duplex", "1\n", "1" },
	{ "duplex", "0\n", "0" },
	{ "poll", "0", "0" },
	{ "poll", "1", "1" },
	{ "poll", "1\n", "1" },
	{ "poll", "0\n", "0" },
	{ "server_inv", "0", "0" },
	{ "server_inv", "1", "1" },
	{ "server_inv", "1\n", "1" },
	{ "server_inv", "0\n", "0" },
	{ "local_dma_lkey", "0", "0" },
	{ "local_dma_lkey", "1", "1" },
	{ "local_dma_lkey", "1\n", "1" },
	{ "local_dma_lkey", "0\n", "0" },
	{ "read_inv", "0", "0" },
	{ "read_inv", "1", "1" },
	{ "read_inv", "1\n", "1" },
	{ "read_inv", "0\n", "0" },
};

static void krping_set_case_desc(const struct krping_set_case *c, char *desc)
{
	char prefix[32];

	snprintf(prefix, sizeof(prefix), "%s=", c->name);
	krping_escape(desc, KUNIT_PARAM_DESC_SIZE, prefix, c->val);
}

KUNIT_ARRAY_PARAM(krping_set_good, krping_set_good_cases, krping_set_case_desc);

/* Set on @opts and check that only the named attribute changed. */
static void krping_check_set_good(struct kunit *test,
				  struct krping_options *opts,
				  const struct krping_set_case *c)
{
	const char *before[ARRAY_SIZE(krping_attrs)];
	size_t i;
	int err;

	for (i = 0; i < ARRAY_SIZE(krping_attrs); i++)
		before[i] = krping_show(test, opts, krping_attrs[i].name);

	err = krping_option_set(opts, c->name, c->val);
	KUNIT_ASSERT_EQ(test, err, 0);
	KUNIT_EXPECT_STREQ(test, krping_show(test, opts, c->name), c->show);

	for (i = 0; i < ARRAY_SIZE(krping_attrs); i++) {
		if (!strcmp(krping_attrs[i].name, c->name))
			continue;
		KUNIT_EXPECT_STREQ_MSG(test,
				       krping_show(test, opts,
						   krping_attrs[i].name),
				       before[i], "attribute %s changed",
				       krping_attrs[i].name);
	}

	/* Writing back what show printed gives the same settings. */
	if (c->show[0]) {
		struct krping_options again = *opts;

		KUNIT_EXPECT_EQ(test, krping_option_set(&again, c->name,
							c->show), 0);
		KUNIT_EXPECT_TRUE(test, krping_options_equal(&again, opts));
	}
}

static void krping_test_set_good(struct kunit *test)
{
	const struct krping_set_case *c = test->param_value;
	struct krping_options opts;

	krping_options_init(&opts);
	krping_check_set_good(test, &opts, c);

	krping_init_busy(test, &opts);
	krping_check_set_good(test, &opts, c);
}

/* ---- krping_option_set: every error class ------------------------------ */

struct krping_err_case {
	const char *name;
	const char *val;
	int err;
};

/* The malformed numbers every numeric option rejects. */
struct krping_val_err {
	const char *val;
	int err;
};

static const char * const krping_num_names[] = {
	"port", "count", "size", "txdepth", "tos", "peer_timeout_ms",
	"duration_ms", "warmup", "qps",
};

static const struct krping_val_err krping_num_bad_vals[] = {
	{ "", -EINVAL },
	{ "\n", -EINVAL },
	{ "\n\n", -EINVAL },
	{ "12\n\n", -EINVAL },
	{ "\n12", -EINVAL },
	{ " 12", -EINVAL },
	{ "12 ", -EINVAL },
	{ "12\t\n", -EINVAL },
	{ "\t12", -EINVAL },
	{ "12\r\n", -EINVAL },
	{ "+12", -EINVAL },
	{ "-12", -EINVAL },
	{ "-0", -EINVAL },
	{ "+0", -EINVAL },
	{ "0x10", -EINVAL },
	{ "0X10", -EINVAL },
	{ "0x", -EINVAL },
	{ "012", -EINVAL },
	{ "00", -EINVAL },
	{ "0o12", -EINVAL },
	{ "12a", -EINVAL },
	{ "a12", -EINVAL },
	{ "abc", -EINVAL },
	{ "1.5", -EINVAL },
	{ "1e3", -EINVAL },
	{ "1,2", -EINVAL },
	{ "1_000", -EINVAL },
	{ "1 2", -EINVAL },
	{ "12=", -EINVAL },
	{ "\xff", -EINVAL },
	{ "99999999999999999999999x", -EINVAL },
	{ "99999999999999999999999", -ERANGE },
	{ "18446744073709551616", -ERANGE },
	{ "4294967296", -ERANGE },
	{ "4294967296\n", -ERANGE },
};

static const char * const krping_bool_names[] = {
	"validate", "verbose", "duplex", "poll", "server_inv",
	"local_dma_lkey", "read_inv",
};

static const struct krping_val_err krping_bool_bad_vals[] = {
	{ "", -EINVAL },
	{ "\n", -EINVAL },
	{ "2", -EINVAL },
	{ "-1", -EINVAL },
	{ "+1", -EINVAL },
	{ "01", -EINVAL },
	{ "10", -EINVAL },
	{ "00", -EINVAL },
	{ "y", -EINVAL },
	{ "n", -EINVAL },
	{ "Y", -EINVAL },
	{ "yes", -EINVAL },
	{ "no", -EINVAL },
	{ "on", -EINVAL },
	{ "off", -EINVAL },
	{ "true", -EINVAL },
	{ "false", -EINVAL },
	{ " 1", -EINVAL },
	{ "1 ", -EINVAL },
	{ "1\n\n", -EINVAL },
	{ "0x1", -EINVAL },
	{ "1\t", -EINVAL },
};

static bool krping_in(const char * const *names, size_t nr, const char *name)
{
	while (nr--)
		if (!strcmp(names[nr], name))
			return true;
	return false;
}

/*
 * Exactly the documented attributes exist, and the cross-product tests
 * below cover every number and every boolean of the table.
 */
static void krping_test_attr_table(struct kunit *test)
{
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		const struct krping_opt *o = &krping_opts[i];
		bool num = o->kind == KRPING_OPT_U8 ||
			   o->kind == KRPING_OPT_U16 ||
			   o->kind == KRPING_OPT_U32;

		KUNIT_EXPECT_EQ_MSG(test, num,
				    krping_in(krping_num_names,
					      ARRAY_SIZE(krping_num_names),
					      o->name), "%s", o->name);
		KUNIT_EXPECT_EQ_MSG(test, o->kind == KRPING_OPT_BOOL,
				    krping_in(krping_bool_names,
					      ARRAY_SIZE(krping_bool_names),
					      o->name), "%s", o->name);
	}

	KUNIT_EXPECT_EQ(test, ARRAY_SIZE(krping_opts), ARRAY_SIZE(krping_attrs));
	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		bool found = false;

		for (j = 0; j < ARRAY_SIZE(krping_attrs); j++)
			found |= !strcmp(krping_opts[i].name,
					 krping_attrs[j].name);
		KUNIT_EXPECT_TRUE_MSG(test, found, "%s", krping_opts[i].name);
	}
}

/* ---- the features file --------------------------------------------------- */

/* The ABI of the features file (Documentation/ABI/testing/configfs-krping). */
static const char krping_features_text[] =
	"role enum none,client,server\n"
	"addr addr\n"
	"port number 1..65535\n"
	"count number 0..4294967295\n"
	"size number 1..4194304\n"
	"test enum ping,wlat,rlat,bw,fr,slat,sbw\n"
	"mem_mode enum reg,dma\n"
	"txdepth number 4..16384\n"
	"tos number 0..255\n"
	"peer_timeout_ms number 0..3600000\n"
	"duration_ms number 0..86400000\n"
	"warmup number 0..4294967295\n"
	"qps number 1..16\n"
	"validate bool\n"
	"verbose bool\n"
	"duplex bool\n"
	"poll bool\n"
	"server_inv bool\n"
	"local_dma_lkey bool\n"
	"read_inv bool\n";

static void krping_test_features_text(struct kunit *test)
{
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	len = krping_options_features(buf, PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, len, (int)strlen(krping_features_text));
	KUNIT_EXPECT_STREQ(test, buf, krping_features_text);
	/* A short buffer truncates, NUL terminated, and says so. */
	KUNIT_EXPECT_EQ(test, krping_options_features(buf, 8), 7);
	KUNIT_EXPECT_STREQ(test, buf, "role en");
}

/* Set @name to @val in fresh settings: the errno, and the shown value. */
static int krping_set_fresh(struct kunit *test, const char *name,
			    const char *val, const char **shown)
{
	struct krping_options opts;
	int err;

	krping_options_init(&opts);
	err = krping_option_set(&opts, name, val);
	*shown = krping_show(test, &opts, name);
	return err;
}

/*
 * Each line of the features file says what its option's attribute does:
 * a number takes MIN and MAX and refuses MIN-1 and MAX+1 with -ERANGE, a
 * bool takes 0 and 1 and refuses 2, an enum takes each listed value and
 * refuses any other. The lines come in the table's order, one per option.
 */
static void krping_test_features_agree(struct kunit *test)
{
	char *buf = kunit_kzalloc(test, PAGE_SIZE, GFP_KERNEL);
	char *line, *cursor, val[24];
	const char *shown;
	size_t i = 0;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	krping_options_features(buf, PAGE_SIZE);
	cursor = buf;
	while ((line = strsep(&cursor, "\n")) && *line) {
		char *name = strsep(&line, " ");
		char *kind = strsep(&line, " ");
		char *values = line;

		KUNIT_ASSERT_LT(test, i, ARRAY_SIZE(krping_opts));
		KUNIT_EXPECT_STREQ(test, name, krping_opts[i++].name);
		KUNIT_ASSERT_NOT_NULL(test, kind);
		if (!strcmp(kind, "number")) {
			u32 min, max;
			int n;

			n = sscanf(values, "%u..%u", &min, &max);
			KUNIT_ASSERT_EQ_MSG(test, n, 2, "%s", name);
			snprintf(val, sizeof(val), "%u", min);
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name, val,
							       &shown), 0);
			KUNIT_EXPECT_STREQ(test, shown, val);
			snprintf(val, sizeof(val), "%u", max);
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name, val,
							       &shown), 0);
			KUNIT_EXPECT_STREQ(test, shown, val);
			snprintf(val, sizeof(val), "%llu", (u64)max + 1);
			KUNIT_EXPECT_EQ_MSG(test, krping_set_fresh(test, name,
								   val,
								   &shown),
					    -ERANGE, "%s=%s", name, val);
			if (min) {
				snprintf(val, sizeof(val), "%u", min - 1);
				KUNIT_EXPECT_EQ_MSG(test,
						    krping_set_fresh(test, name,
								     val,
								     &shown),
						    -ERANGE, "%s=%s", name, val);
			}
		} else if (!strcmp(kind, "bool")) {
			KUNIT_EXPECT_NULL(test, values);
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name, "1",
							       &shown), 0);
			KUNIT_EXPECT_STREQ(test, shown, "1");
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name, "0",
							       &shown), 0);
			KUNIT_EXPECT_STREQ(test, shown, "0");
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name, "2",
							       &shown),
					-EINVAL);
		} else if (!strcmp(kind, "enum")) {
			char *v;
			int n = 0;

			KUNIT_ASSERT_NOT_NULL(test, values);
			while ((v = strsep(&values, ","))) {
				KUNIT_EXPECT_EQ_MSG(test,
						    krping_set_fresh(test, name,
								     v, &shown),
						    0, "%s=%s", name, v);
				KUNIT_EXPECT_STREQ(test, shown, v);
				n++;
			}
			KUNIT_EXPECT_EQ(test, n, krping_opts[i - 1].max + 1);
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name,
							       "other",
							       &shown),
					-EINVAL);
		} else {
			KUNIT_EXPECT_STREQ(test, kind, "addr");
			KUNIT_EXPECT_NULL(test, values);
			KUNIT_EXPECT_EQ(test, krping_set_fresh(test, name,
							       "10.0.0.1",
							       &shown), 0);
			KUNIT_EXPECT_STREQ(test, shown, "10.0.0.1");
		}
	}
	KUNIT_EXPECT_EQ(test, i, ARRAY_SIZE(krping_opts));
}

/* Every name of @names with every value of @vals, one parameter each. */
struct krping_cross {
	const char * const *names;
	size_t nr_names;
	const struct krping_val_err *vals;
	size_t nr_vals;
	struct krping_err_case *buf;	/* nr_names * nr_vals entries */
};

static void krping_err_case_desc(const struct krping_err_case *c, char *desc)
{
	char prefix[32];

	snprintf(prefix, sizeof(prefix), "%s=", c->name);
	krping_escape(desc, KUNIT_PARAM_DESC_SIZE, prefix, c->val);
}

static const void *krping_cross_next(const struct krping_cross *x,
				     const void *prev, char *desc)
{
	const struct krping_err_case *p = prev;
	size_t i = p ? p - x->buf + 1 : 0;
	struct krping_err_case *c = &x->buf[i];

	if (i >= x->nr_names * x->nr_vals)
		return NULL;
	c->name = x->names[i / x->nr_vals];
	c->val = x->vals[i % x->nr_vals].val;
	c->err = x->vals[i % x->nr_vals].err;
	krping_err_case_desc(c, desc);
	return c;
}

static struct krping_err_case
krping_num_bad_buf[ARRAY_SIZE(krping_num_names) *
		   ARRAY_SIZE(krping_num_bad_vals)];

static const struct krping_cross krping_num_bad_cross = {
	.names = krping_num_names,
	.nr_names = ARRAY_SIZE(krping_num_names),
	.vals = krping_num_bad_vals,
	.nr_vals = ARRAY_SIZE(krping_num_bad_vals),
	.buf = krping_num_bad_buf,
};

static const void *krping_num_bad_gen_params(const void *prev, char *desc)
{
	return krping_cross_next(&krping_num_bad_cross, prev, desc);
}

static struct krping_err_case
krping_bool_bad_buf[ARRAY_SIZE(krping_bool_names) *
		    ARRAY_SIZE(krping_bool_bad_vals)];

static const struct krping_cross krping_bool_bad_cross = {
	.names = krping_bool_names,
	.nr_names = ARRAY_SIZE(krping_bool_names),
	.vals = krping_bool_bad_vals,
	.nr_vals = ARRAY_SIZE(krping_bool_bad_vals),
	.buf = krping_bool_bad_buf,
};

static const void *krping_bool_bad_gen_params(const void *prev, char *desc)
{
	return krping_cross_next(&krping_bool_bad_cross, prev, desc);
}

static const struct krping_err_case krping_set_bad_cases[] = {
	{ "port", "0", -ERANGE },
	{ "port", "0\n", -ERANGE },
	{ "port", "65536", -ERANGE },
	{ "port", "100000", -ERANGE },

	{ "size", "0", -ERANGE },
	{ "size", "4194305", -ERANGE },
	{ "size", "4294967295", -ERANGE },

	{ "txdepth", "0", -ERANGE },
	{ "txdepth", "3", -ERANGE },
	{ "txdepth", "16385", -ERANGE },

	{ "tos", "256", -ERANGE },
	{ "tos", "65535", -ERANGE },

	{ "peer_timeout_ms", "3600001", -ERANGE },
	{ "peer_timeout_ms", "4294967295", -ERANGE },

	{ "duration_ms", "86400001", -ERANGE },
	{ "duration_ms", "4294967295", -ERANGE },

	{ "warmup", "4294967296", -ERANGE },

	{ "qps", "0", -ERANGE },
	{ "qps", "17", -ERANGE },
	{ "qps", "4294967295", -ERANGE },

	{ "count", "42949672950", -ERANGE },

	{ "role", "", -EINVAL },
	{ "role", "\n", -EINVAL },
	{ "role", "Client", -EINVAL },
	{ "role", "CLIENT", -EINVAL },
	{ "role", "client ", -EINVAL },
	{ "role", " client", -EINVAL },
	{ "role", "clients", -EINVAL },
	{ "role", "clien", -EINVAL },
	{ "role", "client\n\n", -EINVAL },
	{ "role", "client,server", -EINVAL },
	{ "role", "1", -EINVAL },
	{ "role", "0", -EINVAL },
	{ "role", "c", -EINVAL },
	{ "role", "s", -EINVAL },
	{ "role", "None", -EINVAL },

	{ "test", "", -EINVAL },
	{ "test", "PING", -EINVAL },
	{ "test", "pin", -EINVAL },
	{ "test", "pingx", -EINVAL },
	{ "test", "lat", -EINVAL },
	{ "test", "bw ", -EINVAL },
	{ "test", "bw\n\n", -EINVAL },
	{ "test", "0", -EINVAL },
	{ "test", "3", -EINVAL },
	{ "test", "none", -EINVAL },

	{ "mem_mode", "", -EINVAL },
	{ "mem_mode", "REG", -EINVAL },
	{ "mem_mode", "fastreg", -EINVAL },
	{ "mem_mode", "mr", -EINVAL },
	{ "mem_mode", "mw", -EINVAL },
	{ "mem_mode", "dma ", -EINVAL },
	{ "mem_mode", "0", -EINVAL },
	{ "mem_mode", "1", -EINVAL },

	{ "addr", "", -EINVAL },
	{ "addr", "\n", -EINVAL },
	{ "addr", "10.9.0.1\n\n", -EINVAL },
	{ "addr", " 10.9.0.1", -EINVAL },
	{ "addr", "10.9.0.1 ", -EINVAL },
	{ "addr", "10.9.0", -EINVAL },
	{ "addr", "10.9.0.", -EINVAL },
	{ "addr", ".10.9.0", -EINVAL },
	{ "addr", "10..9.0", -EINVAL },
	{ "addr", "10.9.0.1.", -EINVAL },
	{ "addr", "10.9.0.1.2", -EINVAL },
	{ "addr", "10.9.0.256", -EINVAL },
	{ "addr", "10.9.0.1000", -EINVAL },
	{ "addr", "10.9.0.99999999999", -EINVAL },
	{ "addr", "010.9.0.1", -EINVAL },
	{ "addr", "10.09.0.1", -EINVAL },
	{ "addr", "10.9.00.1", -EINVAL },
	{ "addr", "0x0a.9.0.1", -EINVAL },
	{ "addr", "+10.9.0.1", -EINVAL },
	{ "addr", "10.9.0.-1", -EINVAL },
	{ "addr", "10.9.0.1/24", -EINVAL },
	{ "addr", "10.9.0.1:80", -EINVAL },
	{ "addr", "10.9.0.1%eth0", -EINVAL },
	{ "addr", "167837953", -EINVAL },
	{ "addr", "localhost", -EINVAL },
	{ "addr", "10.9.0.1x", -EINVAL },
	{ "addr", ":", -EINVAL },
	{ "addr", ":::", -EINVAL },
	{ "addr", "1:::2", -EINVAL },
	{ "addr", "1::2::3", -EINVAL },
	{ "addr", "1:2:3:4:5:6:7", -EINVAL },
	{ "addr", "1:2:3:4:5:6:7:8:9", -EINVAL },
	{ "addr", "1:2:3:4:5:6:7::8", -EINVAL },
	{ "addr", "::1:2:3:4:5:6:7:8", -EINVAL },
	{ "addr", "12345::1", -EINVAL },
	{ "addr", "g::1", -EINVAL },
	{ "addr", "[::1]", -EINVAL },
	{ "addr", "::1 ", -EINVAL },
	{ "addr", " ::1", -EINVAL },
	{ "addr", "::1\t", -EINVAL },
	{ "addr", "::1/64", -EINVAL },
	{ "addr", "::ffff:10.9.0", -EINVAL },
	{ "addr", "::ffff:10.9.0.256", -EINVAL },
	{ "addr", "::ffff:010.9.0.1", -EINVAL },
	{ "addr", "::ffff:10.9.0.1.2", -EINVAL },
	{ "addr", "::1%eth0", -EINVAL },
	{ "addr", "2001:db8::1%eth0", -EINVAL },
	{ "addr", "fec0::1%eth0", -EINVAL },
	{ "addr", "ff02::1%eth0", -EINVAL },
	{ "addr", "fe80::1%", -EINVAL },
	{ "addr", "fe80::1%\n", -EINVAL },
	{ "addr", "fe80::1%eth0\n\n", -EINVAL },
	{ "addr", "fe80::1%eth/0", -EINVAL },
	{ "addr", "fe80::1%eth:0", -EINVAL },
	{ "addr", "fe80::1%eth 0", -EINVAL },
	{ "addr", "fe80::1%eth0 ", -EINVAL },
	{ "addr", "fe80::1%eth\t0", -EINVAL },
	{ "addr", "fe80::1%eth,0", -EINVAL },
	{ "addr", "fe80::1%eth%0", -EINVAL },
	{ "addr", "fe80::1%%eth0", -EINVAL },
	{ "addr", "fe80::1%eth\x7f", -EINVAL },
	{ "addr", "fe80::1%eth\xc3\xa9", -EINVAL },
	{ "addr", "fe80::1%.", -EINVAL },
	{ "addr", "fe80::1%..", -EINVAL },
	{ "addr", "fe80::1%abcdefghijklmnop", -EINVAL },
	{ "addr", "%eth0", -EINVAL },
	{ "addr", "fe80::1 %eth0", -EINVAL },
};

KUNIT_ARRAY_PARAM(krping_set_bad, krping_set_bad_cases, krping_err_case_desc);

static void krping_check_set_bad(struct kunit *test,
				 struct krping_options *opts,
				 const struct krping_err_case *c)
{
	struct krping_options before = *opts;

	KUNIT_EXPECT_EQ(test, krping_option_set(opts, c->name, c->val), c->err);
	KUNIT_EXPECT_EQ(test, memcmp(opts, &before, sizeof(before)), 0);
	KUNIT_EXPECT_TRUE(test, krping_options_equal(opts, &before));
}

static void krping_test_set_bad(struct kunit *test)
{
	const struct krping_err_case *c = test->param_value;
	struct krping_options opts;

	krping_options_init(&opts);
	krping_check_set_bad(test, &opts, c);

	krping_init_busy(test, &opts);
	krping_check_set_bad(test, &opts, c);
}

static void krping_test_set_num_bad(struct kunit *test)
{
	krping_test_set_bad(test);
}

static void krping_test_set_bool_bad(struct kunit *test)
{
	krping_test_set_bad(test);
}

/* Buffers as configfs hands them over: counted, maybe not terminated. */
static void krping_test_set_buf(struct kunit *test)
{
	struct krping_options opts, before;

	krping_options_init(&opts);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "12345", 3),
			0);
	KUNIT_EXPECT_EQ(test, opts.port, 123);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "99\n", 3),
			0);
	KUNIT_EXPECT_EQ(test, opts.port, 99);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "role", "clientX",
						    6), 0);
	KUNIT_EXPECT_EQ(test, opts.role, KRPING_ROLE_CLIENT);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "addr",
						    "10.9.0.1\n9", 9), 0);
	KUNIT_EXPECT_STREQ(test, krping_show(test, &opts, "addr"), "10.9.0.1");

	before = opts;
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "", 0),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "1\0", 2),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "1\0\n", 3),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "port", "\0001", 2),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "role",
						    "server\0x", 8), -EINVAL);
	KUNIT_EXPECT_EQ(test, krping_option_set_buf(&opts, "addr",
						    "10.9.0.2\0", 9), -EINVAL);
	KUNIT_EXPECT_EQ(test, memcmp(&opts, &before, sizeof(before)), 0);
}

/* Show into short buffers truncates like scnprintf and never overruns. */
static void krping_test_show_short(struct kunit *test)
{
	struct krping_options opts;
	char buf[8];

	krping_init_busy(test, &opts);
	memset(buf, 'x', sizeof(buf));
	KUNIT_EXPECT_EQ(test, krping_option_show(&opts, "addr", buf, 4), 3);
	KUNIT_EXPECT_STREQ(test, buf, "fe8");
	KUNIT_EXPECT_EQ(test, buf[4], 'x');
	KUNIT_EXPECT_EQ(test, krping_option_show(&opts, "role", buf, 1), 0);
	KUNIT_EXPECT_EQ(test, krping_option_show(&opts, "role", buf, 0), 0);
	KUNIT_EXPECT_EQ(test, krping_options_format(&opts, buf, sizeof(buf)),
			(int)sizeof(buf) - 1);
	KUNIT_EXPECT_STREQ(test, buf, "server,");
}

/* ---- krping_options_parse: legacy strings ------------------------------ */

struct krping_parse_case {
	const char *str;
	const char *canon;	/* krping_options_format() without '\n' */
};

#define D_PORT	"port=7174"
#define D_CSZ	"count=0,size=64"
#define D_TAIL	"mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000"

static const struct krping_parse_case krping_parse_good_cases[] = {
	/* The README's examples. */
	{ "server,addr=192.168.69.127,port=9999",
	  "server,addr=192.168.69.127,port=9999," D_CSZ ",test=ping," D_TAIL },
	{ "client,addr=192.168.69.127,port=9999,count=100",
	  "client,addr=192.168.69.127,port=9999,count=100,size=64,test=ping,"
	  D_TAIL },
	{ "server,addr=192.168.69.127,port=9999\n",
	  "server,addr=192.168.69.127,port=9999," D_CSZ ",test=ping," D_TAIL },
	{ "client,addr=192.168.69.127,port=9999,count=100\n",
	  "client,addr=192.168.69.127,port=9999,count=100,size=64,test=ping,"
	  D_TAIL },

	/* Every legacy name. */
	{ "client", "client," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "server", "server," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "addr=10.9.0.1",
	  "addr=10.9.0.1," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "addr=2001:db8::1",
	  "addr=2001:db8::1," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "addr6=2001:db8::1",
	  "addr=2001:db8::1," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "addr6=fe80::1%eth0",
	  "addr=fe80::1%eth0," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "addr6=::ffff:10.9.0.1",
	  "addr=::ffff:10.9.0.1," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "port=9999", "port=9999," D_CSZ ",test=ping," D_TAIL },
	{ "count=100", D_PORT ",count=100,size=64,test=ping," D_TAIL },
	{ "size=4096", D_PORT ",count=0,size=4096,test=ping," D_TAIL },
	{ "verbose", D_PORT "," D_CSZ ",test=ping," D_TAIL ",verbose" },
	{ "validate", D_PORT "," D_CSZ ",test=ping," D_TAIL ",validate" },
	{ "mem_mode=dma", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=dma,txdepth=64,tos=0,peer_timeout_ms=30000" },
	{ "mem_mode=reg", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "server_inv", D_PORT "," D_CSZ ",test=ping," D_TAIL ",server_inv" },
	{ "local_dma_lkey",
	  D_PORT "," D_CSZ ",test=ping," D_TAIL ",local_dma_lkey" },
	{ "read_inv", D_PORT "," D_CSZ ",test=ping," D_TAIL ",read_inv" },
	{ "wlat", D_PORT "," D_CSZ ",test=wlat," D_TAIL },
	{ "rlat", D_PORT "," D_CSZ ",test=rlat," D_TAIL },
	{ "bw", D_PORT "," D_CSZ ",test=bw," D_TAIL },
	{ "fr", D_PORT "," D_CSZ ",test=fr," D_TAIL },
	{ "slat", D_PORT "," D_CSZ ",test=slat," D_TAIL },
	{ "duplex", D_PORT "," D_CSZ ",test=ping," D_TAIL ",duplex" },
	{ "poll", D_PORT "," D_CSZ ",test=ping," D_TAIL ",poll" },
	{ "txdepth=128", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=128,tos=0,peer_timeout_ms=30000" },
	{ "tx-depth=128", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=128,tos=0,peer_timeout_ms=30000" },
	{ "peer_timeout_ms=0", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=0" },
	{ "tos=96", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=64,tos=96,peer_timeout_ms=30000" },
	/* Timed runs and warm-up are named only when set. */
	{ "wlat,duration_ms=2000,warmup=10",
	  D_PORT "," D_CSZ ",test=wlat," D_TAIL ",duration_ms=2000,warmup=10" },
	{ "bw,duration_ms=0,warmup=0", D_PORT "," D_CSZ
	  ",test=bw," D_TAIL },
	/* qps is named only when not 1. */
	{ "bw,qps=4", D_PORT "," D_CSZ ",test=bw," D_TAIL ",qps=4" },
	{ "bw,qps=1", D_PORT "," D_CSZ ",test=bw," D_TAIL },
	{ "qps=16,duration_ms=5,wlat", D_PORT "," D_CSZ ",test=wlat," D_TAIL
	  ",duration_ms=5,qps=16" },

	/* The attribute names, for symmetry. */
	{ "role=client", "client," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "role=server", "server," D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "role=none", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "test=ping", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "test=wlat", D_PORT "," D_CSZ ",test=wlat," D_TAIL },
	{ "test=rlat", D_PORT "," D_CSZ ",test=rlat," D_TAIL },
	{ "test=bw", D_PORT "," D_CSZ ",test=bw," D_TAIL },
	{ "test=fr", D_PORT "," D_CSZ ",test=fr," D_TAIL },

	/* Flags also take =0 and =1. */
	{ "verbose=1", D_PORT "," D_CSZ ",test=ping," D_TAIL ",verbose" },
	{ "verbose=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "validate=1", D_PORT "," D_CSZ ",test=ping," D_TAIL ",validate" },
	{ "validate=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "duplex=1", D_PORT "," D_CSZ ",test=ping," D_TAIL ",duplex" },
	{ "duplex=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "poll=1", D_PORT "," D_CSZ ",test=ping," D_TAIL ",poll" },
	{ "poll=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "server_inv=1",
	  D_PORT "," D_CSZ ",test=ping," D_TAIL ",server_inv" },
	{ "server_inv=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "local_dma_lkey=1",
	  D_PORT "," D_CSZ ",test=ping," D_TAIL ",local_dma_lkey" },
	{ "local_dma_lkey=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },
	{ "read_inv=1", D_PORT "," D_CSZ ",test=ping," D_TAIL ",read_inv" },
	{ "read_inv=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },

	/* Ranges, at their ends. */
	{ "port=1", "port=1," D_CSZ ",test=ping," D_TAIL },
	{ "port=65535", "port=65535," D_CSZ ",test=ping," D_TAIL },
	{ "count=4294967295",
	  D_PORT ",count=4294967295,size=64,test=ping," D_TAIL },
	{ "size=1", D_PORT ",count=0,size=1,test=ping," D_TAIL },
	{ "size=4194304", D_PORT ",count=0,size=4194304,test=ping," D_TAIL },
	{ "txdepth=4", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=4,tos=0,peer_timeout_ms=30000" },
	{ "txdepth=16384", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=16384,tos=0,peer_timeout_ms=30000" },
	{ "tos=255", D_PORT "," D_CSZ
	  ",test=ping,mem_mode=reg,txdepth=64,tos=255,peer_timeout_ms=30000" },
	{ "tos=0", D_PORT "," D_CSZ ",test=ping," D_TAIL },

	/* Any order; the output order is fixed. */
	{
		"validate,count=10,bw,duplex,addr=10.9.0.1,client,poll,tx-depth=256",
		"client,addr=10.9.0.1,port=7174,count=10,size=64,test=bw,mem_mode=reg,txdepth=256,tos=0,peer_timeout_ms=30000,validate,duplex,poll",
	},
	{ "read_inv,server_inv,local_dma_lkey,poll,duplex,verbose,validate",
	  D_PORT "," D_CSZ ",test=ping," D_TAIL
	  ",validate,verbose,duplex,poll,server_inv,local_dma_lkey,read_inv" },
	{
		KRPING_BUSY_STRING,
		"server,addr=fe80::1%eth0,port=9999,count=5,size=100,test=bw,mem_mode=dma,txdepth=128,tos=7,peer_timeout_ms=5000,duration_ms=2500,warmup=3,qps=2,validate,verbose,duplex,poll,server_inv,local_dma_lkey,read_inv",
	},
	{ KRPING_LONGEST_STRING, KRPING_LONGEST_STRING },
	{ KRPING_DEFAULT_STRING, KRPING_DEFAULT_STRING },
	{ "addr=FE80:0::AB%eth1,server",
	  "server,addr=fe80::ab%eth1," D_PORT "," D_CSZ ",test=ping," D_TAIL },
};

static void krping_parse_case_desc(const struct krping_parse_case *c,
				   char *desc)
{
	krping_escape(desc, KUNIT_PARAM_DESC_SIZE, "", c->str);
}

KUNIT_ARRAY_PARAM(krping_parse_good, krping_parse_good_cases,
		  krping_parse_case_desc);

static void krping_test_parse_good(struct kunit *test)
{
	const struct krping_parse_case *c = test->param_value;
	struct krping_options opts, again;

	/* The string replaces the whole session, whatever was set before. */
	krping_init_busy(test, &opts);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&opts, c->str), 0);
	KUNIT_EXPECT_STREQ(test, krping_format(test, &opts), c->canon);

	krping_options_init(&again);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&again, c->canon), 0);
	KUNIT_EXPECT_TRUE(test, krping_options_equal(&opts, &again));
}

struct krping_str_err_case {
	const char *str;
	int err;
};

static const struct krping_str_err_case krping_parse_bad_cases[] = {
	/* Empty strings and items. */
	{ "", -EINVAL },
	{ "\n", -EINVAL },
	{ "\n\n", -EINVAL },
	{ ",", -EINVAL },
	{ ",\n", -EINVAL },
	{ ",,", -EINVAL },
	{ "client,", -EINVAL },
	{ "client,\n", -EINVAL },
	{ ",client", -EINVAL },
	{ "client,,port=1", -EINVAL },
	{ "client\n\n", -EINVAL },
	{ "client\n,port=1", -EINVAL },
	{ "port=1\n,client", -EINVAL },
	{ "\nclient", -EINVAL },

	/* Spaces and other separators. */
	{ " client", -EINVAL },
	{ "client ", -EINVAL },
	{ "client, port=1", -EINVAL },
	{ "client ,port=1", -EINVAL },
	{ "port =1", -EINVAL },
	{ "port= 1", -EINVAL },
	{ "client;port=1", -EINVAL },
	{ "client port=1", -EINVAL },
	{ "client\tport=1", -EINVAL },

	/* Unknown names, wrong case, names of no option. */
	{ "nosuch", -EINVAL },
	{ "nosuch=1", -EINVAL },
	{ "Client", -EINVAL },
	{ "CLIENT", -EINVAL },
	{ "Port=1", -EINVAL },
	{ "ping", -EINVAL },
	{ "dma", -EINVAL },
	{ "reg", -EINVAL },
	{ "server_invalidate", -EINVAL },
	{ "tx_depth=64", -EINVAL },
	{ "txdepth6=64", -EINVAL },
	{ "addr4=10.9.0.1", -EINVAL },
	{ "options=client", -EINVAL },
	{ "start=1", -EINVAL },
	{ "=", -EINVAL },
	{ "=1", -EINVAL },
	{ "==", -EINVAL },

	/* Keywords take no value; non-flags need one. */
	{ "client=1", -EINVAL },
	{ "client=", -EINVAL },
	{ "server=0", -EINVAL },
	{ "wlat=1", -EINVAL },
	{ "rlat=", -EINVAL },
	{ "bw=0", -EINVAL },
	{ "fr=1", -EINVAL },
	{ "role", -EINVAL },
	{ "addr", -EINVAL },
	{ "addr6", -EINVAL },
	{ "port", -EINVAL },
	{ "count", -EINVAL },
	{ "size", -EINVAL },
	{ "test", -EINVAL },
	{ "mem_mode", -EINVAL },
	{ "txdepth", -EINVAL },
	{ "tx-depth", -EINVAL },
	{ "tos", -EINVAL },
	{ "peer_timeout_ms", -EINVAL },
	{ "role=", -EINVAL },
	{ "addr=", -EINVAL },
	{ "port=", -EINVAL },
	{ "validate=", -EINVAL },
	{ "port=1=2", -EINVAL },
	{ "validate=1=1", -EINVAL },
	{ "addr=10.9.0.1=", -EINVAL },

	/* Each setting once, aliases included. */
	{ "client,server", -EINVAL },
	{ "server,client", -EINVAL },
	{ "client,client", -EINVAL },
	{ "client,role=client", -EINVAL },
	{ "role=server,client", -EINVAL },
	{ "role=none,role=none", -EINVAL },
	{ "wlat,rlat", -EINVAL },
	{ "bw,bw", -EINVAL },
	{ "fr,test=fr", -EINVAL },
	{ "test=ping,wlat", -EINVAL },
	{ "port=1,port=1", -EINVAL },
	{ "port=1,port=2", -EINVAL },
	{ "port=1,port=99999", -EINVAL },
	{ "count=1,count=2", -EINVAL },
	{ "size=1,size=1", -EINVAL },
	{ "addr=10.9.0.1,addr=10.9.0.1", -EINVAL },
	{ "addr=10.9.0.1,addr6=::1", -EINVAL },
	{ "addr6=::1,addr6=::2", -EINVAL },
	{ "txdepth=8,tx-depth=8", -EINVAL },
	{ "tx-depth=8,tx-depth=16", -EINVAL },
	{ "mem_mode=reg,mem_mode=dma", -EINVAL },
	{ "tos=1,tos=1", -EINVAL },
	{ "peer_timeout_ms=0,peer_timeout_ms=0", -EINVAL },
	{ "validate,validate", -EINVAL },
	{ "validate,validate=0", -EINVAL },
	{ "verbose=0,verbose=1", -EINVAL },
	{ "duplex,duplex", -EINVAL },
	{ "poll,poll", -EINVAL },
	{ "server_inv,server_inv", -EINVAL },
	{ "local_dma_lkey,local_dma_lkey", -EINVAL },
	{ "read_inv,read_inv", -EINVAL },

	/* Values, checked as the attributes check them. */
	{ "port=0", -ERANGE },
	{ "port=65536", -ERANGE },
	{ "port=-1", -EINVAL },
	{ "port=+1", -EINVAL },
	{ "port=0x10", -EINVAL },
	{ "port=010", -EINVAL },
	{ "port=1a", -EINVAL },
	{ "count=4294967296", -ERANGE },
	{ "count=-1", -EINVAL },
	{ "size=0", -ERANGE },
	{ "size=4194305", -ERANGE },
	{ "txdepth=3", -ERANGE },
	{ "txdepth=16385", -ERANGE },
	{ "tx-depth=0", -ERANGE },
	{ "tos=256", -ERANGE },
	{ "tos=99999999999999999999", -ERANGE },
	{ "peer_timeout_ms=3600001", -ERANGE },
	{ "duration_ms=86400001", -ERANGE },
	{ "warmup=4294967296", -ERANGE },
	{ "qps=0", -ERANGE },
	{ "qps=17", -ERANGE },
	{ "qps=", -EINVAL },
	{ "qps", -EINVAL },
	{ "client,addr=10.9.0.1,bw,count=5,qps=17", -ERANGE },
	{ "validate=2", -EINVAL },
	{ "validate=yes", -EINVAL },
	{ "poll=on", -EINVAL },
	{ "role=Client", -EINVAL },
	{ "test=lat", -EINVAL },
	{ "test=none", -EINVAL },
	{ "mem_mode=fastreg", -EINVAL },
	{ "mem_mode=mr", -EINVAL },
	{ "addr=10.9.0.256", -EINVAL },
	{ "addr=10.9.0.1%eth0", -EINVAL },
	{ "addr=10.9.0.1\n,client", -EINVAL },
	{ "addr6=10.9.0.1", -EINVAL },
	{ "addr6=::ffff:10.9.0.256", -EINVAL },
	{ "addr6=2001:db8::1%eth0", -EINVAL },
	{ "addr6=fe80::1%a/b", -EINVAL },
	{ "addr6=", -EINVAL },

	/* All or nothing: good items before a bad one change nothing. */
	{ "client,addr=10.9.0.1,port=9999,count=5,nosuch", -EINVAL },
	{ "client,addr=10.9.0.1,port=99999", -ERANGE },
	{ "server,addr=10.9.0.1,validate,size=0", -ERANGE },
	{ "client,addr=10.9.0.1,validate,", -EINVAL },
	{ "client,addr=10.9.0.1,server", -EINVAL },
};

static void krping_str_err_case_desc(const struct krping_str_err_case *c,
				     char *desc)
{
	krping_escape(desc, KUNIT_PARAM_DESC_SIZE, "", c->str);
}

KUNIT_ARRAY_PARAM(krping_parse_bad, krping_parse_bad_cases,
		  krping_str_err_case_desc);

static void krping_check_parse_bad(struct kunit *test,
				   struct krping_options *opts,
				   const struct krping_str_err_case *c)
{
	struct krping_options before = *opts;

	KUNIT_EXPECT_EQ(test, krping_options_parse(opts, c->str), c->err);
	KUNIT_EXPECT_EQ(test, memcmp(opts, &before, sizeof(before)), 0);
}

static void krping_test_parse_bad(struct kunit *test)
{
	const struct krping_str_err_case *c = test->param_value;
	struct krping_options opts;

	krping_options_init(&opts);
	krping_check_parse_bad(test, &opts, c);

	krping_init_busy(test, &opts);
	krping_check_parse_bad(test, &opts, c);
}

static void krping_test_parse_buf(struct kunit *test)
{
	struct krping_options opts, before;

	krping_options_init(&opts);
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts, "client,port=12x",
						       13), 0);
	KUNIT_EXPECT_EQ(test, opts.role, KRPING_ROLE_CLIENT);
	KUNIT_EXPECT_EQ(test, opts.port, 1);
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts, "server\n,", 7),
			0);
	KUNIT_EXPECT_EQ(test, opts.role, KRPING_ROLE_SERVER);
	KUNIT_EXPECT_EQ(test, opts.port, KRPING_DEFAULT_PORT);

	before = opts;
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts, "client", 0),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts, "client\0", 7),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts, "client\0\n", 8),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, krping_options_parse_buf(&opts,
						       "client\0,port=1", 14),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, memcmp(&opts, &before, sizeof(before)), 0);
}

/* ---- the canonical round trip ------------------------------------------ */

static void krping_check_roundtrip(struct kunit *test,
				   const struct krping_options *x)
{
	struct krping_options y;
	const char *s, *t;
	size_t i;

	s = krping_format(test, x);
	/* Start from something else: parse must replace everything. */
	krping_init_busy(test, &y);
	KUNIT_ASSERT_EQ_MSG(test, krping_options_parse(&y, s), 0, "%s", s);
	KUNIT_EXPECT_TRUE_MSG(test, krping_options_equal(x, &y), "%s", s);
	t = krping_format(test, &y);
	KUNIT_EXPECT_STREQ(test, t, s);
	for (i = 0; i < ARRAY_SIZE(krping_attrs); i++) {
		const char *name = krping_attrs[i].name;
		char a[64], b[64];

		KUNIT_EXPECT_GT(test, krping_option_show(x, name, a, sizeof(a)),
				0);
		KUNIT_EXPECT_GT(test, krping_option_show(&y, name, b,
							 sizeof(b)), 0);
		KUNIT_EXPECT_STREQ_MSG(test, a, b, "attribute %s", name);
	}
}

static const char * const krping_roundtrip_cases[] = {
	"client",
	"server",
	"client,addr=10.9.0.1,port=9999,count=100,validate",
	"server,addr=0.0.0.0,port=9999",
	"server,addr=::,port=9999",
	"client,addr=::1",
	"client,addr=::10.9.0.1",
	"client,addr=::ffff:10.9.0.1",
	"client,addr=64:ff9b::10.9.0.1",
	"client,addr=2001:db8:0:0:1:0:0:1",
	"client,addr=2001:db8:0:1:0:0:0:1",
	"client,addr=fe80::1%eth0",
	"client,addr=fe80::1",
	"client,addr=febf:ffff::1%x",
	"addr6=1:2:3:4:5:6:7:8",
	"wlat,poll,size=1,count=1",
	"rlat,poll,size=4194304",
	"bw,duplex,txdepth=16384,tos=255",
	"fr,mem_mode=dma,local_dma_lkey",
	"server_inv,read_inv",
	"role=none,addr=10.9.0.1",
	KRPING_DEFAULT_STRING,
	KRPING_BUSY_STRING,
	KRPING_LONGEST_STRING,
};

static void krping_roundtrip_desc(const char * const *s, char *desc)
{
	krping_escape(desc, KUNIT_PARAM_DESC_SIZE, "", *s);
}

KUNIT_ARRAY_PARAM(krping_roundtrip, krping_roundtrip_cases,
		  krping_roundtrip_desc);

static void krping_test_roundtrip(struct kunit *test)
{
	const char * const *str = test->param_value;
	struct krping_options x;

	krping_options_init(&x);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&x, *str), 0);
	krping_check_roundtrip(test, &x);
}

/* Every good attribute value, from both starting points. */
static void krping_test_roundtrip_set_values(struct kunit *test)
{
	struct krping_options x;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(krping_set_good_cases); i++) {
		const struct krping_set_case *c = &krping_set_good_cases[i];

		krping_options_init(&x);
		KUNIT_ASSERT_EQ(test, krping_option_set(&x, c->name, c->val), 0);
		krping_check_roundtrip(test, &x);

		krping_init_busy(test, &x);
		KUNIT_ASSERT_EQ(test, krping_option_set(&x, c->name, c->val), 0);
		krping_check_roundtrip(test, &x);
	}
}

/* Many settings: random mixes of good values (fixed seed, reproducible). */
static void krping_test_roundtrip_random(struct kunit *test)
{
	u32 seed = 0x6b72706e;	/* "krpn" */
	struct krping_options x;
	unsigned int round;
	size_t i;

	for (round = 0; round < 500; round++) {
		krping_options_init(&x);
		for (i = 0; i < ARRAY_SIZE(krping_set_good_cases); i++) {
			const struct krping_set_case *c;

			/* xorshift32 */
			seed ^= seed << 13;
			seed ^= seed >> 17;
			seed ^= seed << 5;
			if (seed % 8)
				continue;
			c = &krping_set_good_cases[seed %
				ARRAY_SIZE(krping_set_good_cases)];
			KUNIT_ASSERT_EQ(test, krping_option_set(&x, c->name,
								c->val), 0);
		}
		krping_check_roundtrip(test, &x);
	}
}

/* The longest settings still fit KRPING_OPTIONS_MAX. */
static void krping_test_format_longest(struct kunit *test)
{
	struct krping_options x;
	char *buf = kunit_kzalloc(test, 2 * KRPING_OPTIONS_MAX, GFP_KERNEL);
	int len;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	krping_options_init(&x);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&x, KRPING_LONGEST_STRING),
			0);
	len = krping_options_format(&x, buf, 2 * KRPING_OPTIONS_MAX);
	KUNIT_EXPECT_EQ(test, len, (int)strlen(KRPING_LONGEST_STRING) + 1);
	KUNIT_EXPECT_LT(test, len, KRPING_OPTIONS_MAX);
	kunit_info(test, "longest canonical string: %d of %d bytes\n",
		   len + 1, KRPING_OPTIONS_MAX);
}

/* ---- krping_options_validate ------------------------------------------- */

static const struct krping_str_err_case krping_validate_cases[] = {
	{ "client,addr=10.9.0.1", 0 },
	{ "server,addr=0.0.0.0", 0 },
	{ "server,addr=::", 0 },
	{ "client,addr=2001:db8::1", 0 },
	{ "client,addr=fe80::1%eth0", 0 },
	{ "client,addr=::ffff:10.9.0.1", 0 },
	{ "client,addr=10.9.0.1,count=0", 0 },
	{ KRPING_BUSY_STRING, -EINVAL },
	{ "server,addr=fe80::1%eth0,test=bw,duplex,server_inv,read_inv", 0 },
	{ "client,addr=fe80::1", -EINVAL },
	{ "client,addr=febf::1", -EINVAL },
	{ "addr=10.9.0.1", -EINVAL },
	{ "role=none,addr=10.9.0.1", -EINVAL },
	{ "client", -EINVAL },
	{ "server", -EINVAL },
	{ "port=9999", -EINVAL },
	{ "client,addr=10.9.0.1,read_inv", 0 },
	{ "client,addr=10.9.0.1,read_inv,mem_mode=reg", 0 },
	{ "client,addr=10.9.0.1,read_inv,mem_mode=dma", -EINVAL },
	{ "client,addr=10.9.0.1,server_inv", 0 },
	{ "client,addr=10.9.0.1,server_inv,mem_mode=dma", -EINVAL },
	{ "client,addr=10.9.0.1,test=wlat,duration_ms=1000,warmup=5", 0 },
	{ "client,addr=10.9.0.1,qps=16", 0 },
	{ "server,addr=10.9.0.1,bw,duplex,qps=16,duration_ms=5", 0 },
	{ "server,addr=10.9.0.1,sbw,duration_ms=1", 0 },
	{ "client,addr=10.9.0.1,duration_ms=1000", -EINVAL },
	{ "client,addr=10.9.0.1,warmup=1", -EINVAL },
	{ "client,addr=10.9.0.1,bw,count=4294967295,warmup=0", 0 },
	{ "client,addr=10.9.0.1,bw,count=4294967294,warmup=1", 0 },
	{ "client,addr=10.9.0.1,bw,count=4294967295,warmup=1", -EINVAL },
	{ "client,addr=10.9.0.1,bw,count=1,warmup=4294967295", -EINVAL },
	{ "client,addr=10.9.0.1,server_inv,read_inv,mem_mode=dma", -EINVAL },
	{ "client,addr=10.9.0.1,duplex", -EINVAL },
	{ "client,addr=10.9.0.1,duplex,wlat", -EINVAL },
	{ "client,addr=10.9.0.1,duplex,rlat", -EINVAL },
	{ "client,addr=10.9.0.1,duplex,fr", -EINVAL },
	{ "client,addr=10.9.0.1,duplex,bw", 0 },
	{ "client,addr=10.9.0.1,duplex=0,wlat", 0 },
	{ "client,addr=10.9.0.1,poll", 0 },
	{ "client,addr=10.9.0.1,poll,wlat", 0 },
	{ "client,addr=10.9.0.1,poll,rlat", 0 },
	{ "client,addr=10.9.0.1,poll,bw", 0 },
	{ "client,addr=10.9.0.1,poll,fr", 0 },
	{ "client,addr=10.9.0.1,local_dma_lkey", 0 },
	{ "client,addr=10.9.0.1,local_dma_lkey,mem_mode=dma", 0 },
	{ "client,addr=10.9.0.1,mem_mode=dma", 0 },
	{ "client,addr=10.9.0.1,verbose,validate", 0 },
	{ KRPING_LONGEST_STRING, -EINVAL },
};

KUNIT_ARRAY_PARAM(krping_validate, krping_validate_cases,
		  krping_str_err_case_desc);

static void krping_test_validate(struct kunit *test)
{
	const struct krping_str_err_case *c = test->param_value;
	struct krping_options opts, before;

	krping_options_init(&opts);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&opts, c->str), 0);
	before = opts;
	KUNIT_EXPECT_EQ(test, krping_options_validate(&opts), c->err);
	KUNIT_EXPECT_EQ(test, memcmp(&opts, &before, sizeof(before)), 0);
}

/* Settings this file never makes are still refused. */
static void krping_test_validate_raw(struct kunit *test)
{
	struct krping_options good, x;

	krping_options_init(&good);
	KUNIT_ASSERT_EQ(test, krping_options_parse(&good,
						   "client,addr=10.9.0.1"), 0);
	KUNIT_ASSERT_EQ(test, krping_options_validate(&good), 0);

#define KRPING_RAW(stmt) do {						\
		x = good;						\
		stmt;							\
		KUNIT_EXPECT_EQ_MSG(test, krping_options_validate(&x),	\
				    -EINVAL, "%s", #stmt);		\
	} while (0)
	KRPING_RAW(x.port = 0);
	KRPING_RAW(x.size = 0);
	KRPING_RAW(x.size = KRPING_MAX_SIZE + 1);
	KRPING_RAW(x.txdepth = KRPING_MIN_TXDEPTH - 1);
	KRPING_RAW(x.txdepth = KRPING_MAX_TXDEPTH + 1);
	KRPING_RAW(x.qps = 0);
	KRPING_RAW(x.qps = KRPING_MAX_QPS + 1);
	KRPING_RAW(x.role = 3);
	KRPING_RAW(x.test = KRPING_TEST_SBW + 1);
	KRPING_RAW(x.mem_mode = 2);
	KRPING_RAW(x.addr.ss_family = AF_UNIX);
	KRPING_RAW(x.addr.ss_family = AF_UNSPEC);
	KRPING_RAW(strscpy(x.scope, "eth0", sizeof(x.scope)));
	KRPING_RAW(krping_option_set(&x, "addr", "fe80::1");
		   strscpy(x.scope, "a/b", sizeof(x.scope)));
	KRPING_RAW(krping_option_set(&x, "addr", "fe80::1");
		   memset(x.scope, 'a', sizeof(x.scope)));
	KRPING_RAW(krping_option_set(&x, "addr", "2001:db8::1");
		   strscpy(x.scope, "eth0", sizeof(x.scope)));
#undef KRPING_RAW
}

/* ---- krping_options_equal ---------------------------------------------- */

static void krping_test_equal(struct kunit *test)
{
	struct krping_options a, b;
	struct sockaddr_in *sin = (struct sockaddr_in *)&b.addr;
	size_t i;

	krping_init_busy(test, &a);
	b = a;
	KUNIT_EXPECT_TRUE(test, krping_options_equal(&a, &b));

	/* Each attribute on its own makes a difference. */
	for (i = 0; i < ARRAY_SIZE(krping_set_good_cases); i++) {
		const struct krping_set_case *c = &krping_set_good_cases[i];
		bool same;

		b = a;
		KUNIT_ASSERT_EQ(test, krping_option_set(&b, c->name, c->val), 0);
		same = !strcmp(krping_show(test, &a, c->name),
			       krping_show(test, &b, c->name));
		KUNIT_EXPECT_EQ_MSG(test, krping_options_equal(&a, &b), same,
				    "%s=%s", c->name, c->show);
		KUNIT_EXPECT_EQ_MSG(test, krping_options_equal(&b, &a), same,
				    "%s=%s", c->name, c->show);
	}

	/* Padding and the unused port field of the address do not count. */
	krping_options_init(&a);
	KUNIT_ASSERT_EQ(test, krping_option_set(&a, "addr", "10.9.0.1"), 0);
	b = a;
	sin->sin_port = htons(80);
	memset(sin->sin_zero, 0xff, sizeof(sin->sin_zero));
	KUNIT_EXPECT_TRUE(test, krping_options_equal(&a, &b));
	KUNIT_ASSERT_EQ(test, krping_option_set(&b, "addr", "10.9.0.2"), 0);
	KUNIT_EXPECT_FALSE(test, krping_options_equal(&a, &b));
	KUNIT_ASSERT_EQ(test, krping_option_set(&b, "addr", "::ffff:10.9.0.1"),
			0);
	KUNIT_EXPECT_FALSE(test, krping_options_equal(&a, &b));

	/* Same address, different scope. */
	KUNIT_ASSERT_EQ(test, krping_option_set(&a, "addr", "fe80::1%eth0"), 0);
	KUNIT_ASSERT_EQ(test, krping_option_set(&b, "addr", "fe80::1%eth1"), 0);
	KUNIT_EXPECT_FALSE(test, krping_options_equal(&a, &b));
	KUNIT_ASSERT_EQ(test, krping_option_set(&b, "addr", "fe80::1"), 0);
	KUNIT_EXPECT_FALSE(test, krping_options_equal(&a, &b));
	KUNIT_ASSERT_EQ(test, krping_option_set(&b, "addr", "fe80::1%eth0"), 0);
	KUNIT_EXPECT_TRUE(test, krping_options_equal(&a, &b));
}

/* A new address replaces the old scope; a failed one keeps it. */
static void krping_test_addr_scope(struct kunit *test)
{
	struct krping_options opts;

	krping_options_init(&opts);
	KUNIT_ASSERT_EQ(test, krping_option_set(&opts, "addr", "fe80::1%eth0"),
			0);
	KUNIT_EXPECT_STREQ(test, opts.scope, "eth0");
	KUNIT_EXPECT_EQ(test, opts.addr.ss_family, AF_INET6);
	KUNIT_EXPECT_EQ(test, ((struct sockaddr_in6 *)&opts.addr)->sin6_port,
			0);
	KUNIT_EXPECT_EQ(test, krping_option_set(&opts, "addr", "fe80::2%"),
			-EINVAL);
	KUNIT_EXPECT_STREQ(test, opts.scope, "eth0");
	KUNIT_ASSERT_EQ(test, krping_option_set(&opts, "addr", "fe80::2"), 0);
	KUNIT_EXPECT_STREQ(test, opts.scope, "");
	KUNIT_ASSERT_EQ(test, krping_option_set(&opts, "addr",
						"fe80::3%abcdefghijklmno"), 0);
	KUNIT_EXPECT_STREQ(test, opts.scope, "abcdefghijklmno");
	KUNIT_ASSERT_EQ(test, krping_option_set(&opts, "addr", "10.9.0.1"), 0);
	KUNIT_EXPECT_STREQ(test, opts.scope, "");
	KUNIT_EXPECT_EQ(test, opts.addr.ss_family, AF_INET);
	KUNIT_EXPECT_EQ(test, ((struct sockaddr_in *)&opts.addr)->sin_port, 0);
	KUNIT_EXPECT_EQ(test,
			((struct sockaddr_in *)&opts.addr)->sin_addr.s_addr,
			htonl(0x0a090001));
}

/*
 * A benchmark server's plan for its client's: what the server leaves 0
 * it follows; what it sets must agree; a hostile plan is refused.
 */
static const struct krping_plan_case {
	const char *desc;
	struct krping_plan server;	/* count, warmup, duration_ms */
	struct krping_plan client;
	int err;
	struct krping_plan result;
} krping_plan_cases[] = {
	{ "follows everything", { 0, 0, 0 }, { 100, 5, 2000 }, 0,
	  { 100, 5, 2000 } },
	{ "follows a timed endless client", { 0, 0, 0 }, { 0, 0, 2000 }, 0,
	  { 0, 0, 2000 } },
	{ "follows the count", { 0, 5, 0 }, { 100, 5, 0 }, 0, { 100, 5, 0 } },
	{ "follows the warm-up", { 100, 0, 0 }, { 100, 7, 0 }, 0,
	  { 100, 7, 0 } },
	{ "its own time counts", { 0, 0, 1 }, { 0, 0, 2000 }, 0,
	  { 0, 0, 1 } },
	{ "equal", { 100, 5, 0 }, { 100, 5, 0 }, 0, { 100, 5, 0 } },
	{ "endless both", { 0, 0, 0 }, { 0, 0, 0 }, 0, { 0, 0, 0 } },
	{ "count differs", { 100, 0, 0 }, { 200, 0, 0 }, -EINVAL,
	  { 100, 0, 0 } },
	{ "client endless", { 100, 0, 0 }, { 0, 0, 0 }, -EINVAL,
	  { 100, 0, 0 } },
	{ "warm-up differs", { 100, 5, 0 }, { 100, 6, 0 }, -EINVAL,
	  { 100, 5, 0 } },
	{ "client without warm-up", { 100, 5, 0 }, { 100, 0, 0 }, -EINVAL,
	  { 100, 5, 0 } },
	{ "server timed, client not", { 100, 0, 500 }, { 100, 0, 0 },
	  -EINVAL, { 100, 0, 500 } },
	{ "count and warm-up beyond 32 bits", { 0, 0, 0 },
	  { U32_MAX, 1, 0 }, -EINVAL, { 0, 0, 0 } },
	{ "warm-up beyond 32 bits", { 0, 0, 0 }, { 1, U32_MAX, 0 }, -EINVAL,
	  { 0, 0, 0 } },
	{ "longest count", { 0, 0, 0 }, { U32_MAX, 0, 0 }, 0,
	  { U32_MAX, 0, 0 } },
	{ "longest time", { 0, 0, 0 }, { 0, 0, KRPING_MAX_DURATION_MS }, 0,
	  { 0, 0, KRPING_MAX_DURATION_MS } },
	{ "time beyond a day", { 0, 0, 0 },
	  { 0, 0, KRPING_MAX_DURATION_MS + 1 }, -EINVAL, { 0, 0, 0 } },
	{ "time of all ones", { 0, 0, 0 }, { 0, 0, U32_MAX }, -EINVAL,
	  { 0, 0, 0 } },
};

static void krping_plan_case_desc(const struct krping_plan_case *c,
				  char *desc)
{
	strscpy(desc, c->desc, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(krping_plan, krping_plan_cases, krping_plan_case_desc);

static void krping_test_plan_follow(struct kunit *test)
{
	const struct krping_plan_case *c = test->param_value;
	struct krping_options opts;
	struct krping_plan plan, own;

	krping_options_init(&opts);
	KUNIT_ASSERT_EQ(test,
			krping_options_parse(&opts, "server,addr=10.9.0.1,wlat"),
			0);
	opts.count = c->server.count;
	opts.warmup = c->server.warmup;
	opts.duration_ms = c->server.duration_ms;
	memset(&plan, 0xa5, sizeof(plan));
	KUNIT_EXPECT_EQ(test, krping_plan_follow(&opts, &c->client, &plan),
			c->err);
	KUNIT_EXPECT_EQ(test, plan.count, c->result.count);
	KUNIT_EXPECT_EQ(test, plan.warmup, c->result.warmup);
	KUNIT_EXPECT_EQ(test, plan.duration_ms, c->result.duration_ms);
	/* A plan that follows agrees with the client's, by definition. */
	KUNIT_EXPECT_EQ(test, krping_plans_agree(&plan, &c->client), !c->err);
	krping_plan_of(&opts, &own);
	KUNIT_EXPECT_EQ(test, memcmp(&own, &c->server, sizeof(own)), 0);
}

static struct kunit_case krping_options_test_cases[] = {
	KUNIT_CASE(krping_test_defaults),
	KUNIT_CASE(krping_test_attr_table),
	KUNIT_CASE(krping_test_features_text),
	KUNIT_CASE(krping_test_features_agree),
	KUNIT_CASE(krping_test_unknown_names),
	KUNIT_CASE_PARAM(krping_test_set_good, krping_set_good_gen_params),
	KUNIT_CASE_PARAM(krping_test_set_num_bad, krping_num_bad_gen_params),
	KUNIT_CASE_PARAM(krping_test_set_bool_bad, krping_bool_bad_gen_params),
	KUNIT_CASE_PARAM(krping_test_set_bad, krping_set_bad_gen_params),
	KUNIT_CASE(krping_test_set_buf),
	KUNIT_CASE(krping_test_show_short),
	KUNIT_CASE(krping_test_addr_scope),
	KUNIT_CASE_PARAM(krping_test_parse_good, krping_parse_good_gen_params),
	KUNIT_CASE_PARAM(krping_test_parse_bad, krping_parse_bad_gen_params),
	KUNIT_CASE(krping_test_parse_buf),
	KUNIT_CASE_PARAM(krping_test_roundtrip, krping_roundtrip_gen_params),
	KUNIT_CASE(krping_test_roundtrip_set_values),
	KUNIT_CASE(krping_test_roundtrip_random),
	KUNIT_CASE(krping_test_format_longest),
	KUNIT_CASE_PARAM(krping_test_validate, krping_validate_gen_params),
	KUNIT_CASE(krping_test_validate_raw),
	KUNIT_CASE(krping_test_equal),
	KUNIT_CASE_PARAM(krping_test_plan_follow, krping_plan_gen_params),
	{}
};

static struct kunit_suite krping_options_test_suite = {
	.name = "krping_options",
	.test_cases = krping_options_test_cases,
};

kunit_test_suite(krping_options_test_suite);

MODULE_DESCRIPTION("KUnit tests of the krping option parser");
MODULE_LICENSE("Dual BSD/GPL");
