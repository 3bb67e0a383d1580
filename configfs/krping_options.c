// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * krping session options: strict parsing and printing.
 *
 * Everything that reaches this file comes from user space and is treated
 * as hostile. One table (krping_opts[], generated from
 * KRPING_OPTIONS_TABLE) describes every option: its name, its kind, where
 * it lives in struct krping_options and its range. The
 * configfs attributes (krping_option_set/show), the legacy option string
 * (krping_options_parse/format) and krping_options_validate/equal all walk
 * that table, so every path accepts exactly the same values.
 *
 * Accepted syntax of one value (after at most one trailing '\n' has been
 * removed, configfs attribute writes only):
 *  - number: decimal digits only, no sign, no "0x", no leading zero
 *    ("0" itself is fine), no spaces. Anything else is -EINVAL; a
 *    well-formed number outside the option's range is -ERANGE, also when
 *    it would overflow 32 bits.
 *  - boolean: exactly "0" or "1".
 *  - enum: exactly one of the lower-case names (role: "none", "client",
 *    "server"; test: "ping", "wlat", "rlat", "bw", "fr", "slat",
 *    "sbw";
 *    mem_mode: "reg", "dma").
 *  - addr: an IPv4 dotted quad (four decimal fields 0..255, no leading
 *    zeros) or an IPv6 literal as in6_pton() takes it, with an embedded
 *    dotted quad held to the IPv4 rules. An IPv6 link-local address
 *    (fe80::/10) may carry "%ifname"; the name is 1..IFNAMSIZ-1 printable
 *    ASCII characters other than '/', ':', '%' and ',' and not "." or "..".
 *    A malformed address is -EINVAL, never -ERANGE.
 * An empty value or a NUL byte inside the written buffer is -EINVAL.
 */

#include <linux/container_of.h>
#include <linux/ctype.h>
#include <linux/errno.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/overflow.h>
#include <linux/stddef.h>
#include <linux/string.h>

#include "krping_options.h"

enum krping_opt_kind {
	KRPING_OPT_U8,		/* decimal number in [min, max] ... */
	KRPING_OPT_U16,		/* ... stored in a field of this width */
	KRPING_OPT_U32,
	KRPING_OPT_BOOL,	/* "0" or "1" */
	KRPING_OPT_ENUM,	/* one of names[], stored as its index */
	KRPING_OPT_ADDR,	/* IP literal, stored in addr and scope */
};

/**
 * struct krping_opt - one option of a session
 * @name: attribute name, also its name in the legacy string
 * @kind: how the value is written and stored
 * @offset: offset of the field in struct krping_options
 * @min: smallest accepted number (numbers)
 * @max: largest accepted number (numbers), or the last index (ENUM)
 * @names: the values of an ENUM, indexed by their enum value
 * @keyword: the legacy string shows this ENUM as its bare value, and
 *	leaves it out while it is index 0
 * @omit: the legacy string leaves this number out while it equals @omit;
 *	KRPING_ALWAYS_NAMED (negative) names it always
 */
struct krping_opt {
	const char *name;
	enum krping_opt_kind kind;
	unsigned short offset;
	u32 min;
	u32 max;
	const char * const *names;
	bool keyword;
	s64 omit;
};

static const char * const krping_role_names[] = {
	[KRPING_ROLE_NONE] = "none",
	[KRPING_ROLE_CLIENT] = "client",
	[KRPING_ROLE_SERVER] = "server",
};

static const char * const krping_test_names[] = {
	[KRPING_TEST_PING] = "ping",
	[KRPING_TEST_WLAT] = "wlat",
	[KRPING_TEST_RLAT] = "rlat",
	[KRPING_TEST_BW] = "bw",
	[KRPING_TEST_FR] = "fr",
	[KRPING_TEST_SLAT] = "slat",
	[KRPING_TEST_SBW] = "sbw",
};

static const char * const krping_mem_mode_names[] = {
	[KRPING_MEM_REG] = "reg",
	[KRPING_MEM_DMA] = "dma",
};

/* The legacy string names a NUM row whose omit is this always. */
#define KRPING_ALWAYS_NAMED	(-1)

/* The table's rows (krping_options_table.h). */
#define KRPING_OPTION(_name, _kind, ...)				\
	KRPING_ROW_##_kind(_name, __VA_ARGS__),
#define KRPING_ROW_NUM(_field, type, _min, _max, _omit)			\
	{ .name = #_field, .kind = KRPING_OPT_WIDTH(type),		\
	  .offset = offsetof(struct krping_options, _field),		\
	  .min = (_min), .max = (_max), .omit = (_omit) }
#define KRPING_OPT_WIDTH(type)						\
	(sizeof(type) == 1 ? KRPING_OPT_U8 :				\
	 sizeof(type) == 2 ? KRPING_OPT_U16 : KRPING_OPT_U32)
#define KRPING_ROW_BOOL(_field, ...)					\
	{ .name = #_field, .kind = KRPING_OPT_BOOL,			\
	  .offset = offsetof(struct krping_options, _field), .max = 1 }
#define KRPING_ROW_ENUM(_field, _last, _keyword)			\
	{ .name = #_field, .kind = KRPING_OPT_ENUM,			\
	  .offset = offsetof(struct krping_options, _field),		\
	  .max = (_last), .names = krping_##_field##_names,		\
	  .keyword = (_keyword) }
#define KRPING_ROW_ADDR(_field, ...)					\
	{ .name = #_field, .kind = KRPING_OPT_ADDR }

static const struct krping_opt krping_opts[] = {
#include "krping_options_table.h"
};

/*
 * Each row holds to its field, which the table accesses with the width
 * the row says: a NUM field has the row's type, one of u8, u16 and u32,
 * whose range holds the row's min and max; a BOOL field is a bool
 * (stored through a u8); an ENUM field is its enum krping_<field>, the
 * size of a u32 (stored through one), with a name for each of its
 * values.
 * Never used at run time.
 */
#define KRPING_FIELD_IS(_field, _type)					\
	__same_type(typeof_member(struct krping_options, _field), _type)
#define KRPING_OPTION(_name, _kind, ...)				\
	KRPING_CHECK_##_kind(_name, __VA_ARGS__),
#define KRPING_CHECK_NUM(_field, type, _min, _max, ...)			\
	BUILD_BUG_ON_ZERO(!KRPING_FIELD_IS(_field, type) ||		\
			  !(__same_type(type, u8) ||			\
			    __same_type(type, u16) ||			\
			    __same_type(type, u32)) ||			\
			  (u64)(_min) > type_max(type) ||		\
			  (u64)(_max) > type_max(type))
#define KRPING_CHECK_BOOL(_field, ...)					\
	BUILD_BUG_ON_ZERO(!KRPING_FIELD_IS(_field, bool))
#define KRPING_CHECK_ENUM(_field, _last, ...)				\
	BUILD_BUG_ON_ZERO(!KRPING_FIELD_IS(_field,			\
					   enum krping_##_field) ||	\
			  sizeof(enum krping_##_field) !=		\
			  sizeof(u32) ||				\
			  ARRAY_SIZE(krping_##_field##_names) !=	\
			  (_last) + 1)
#define KRPING_CHECK_ADDR(_field, ...)					\
	BUILD_BUG_ON_ZERO(!KRPING_FIELD_IS(_field, struct sockaddr_storage))

static const int krping_opts_checked[] __maybe_unused = {
#include "krping_options_table.h"
};

static_assert(sizeof(bool) == sizeof(u8));

/* The legacy parser tracks the options it has seen in a u32. */
static_assert(ARRAY_SIZE(krping_opts) <= 32);

/**
 * struct krping_legacy_opt - a legacy name that is not an attribute name
 * @name: the name in the legacy string
 * @attr: the attribute it sets
 * @value: the value a bare keyword sets; NULL if it takes "=value"
 * @v6_only: the value must be an IPv6 literal (addr6=)
 */
struct krping_legacy_opt {
	const char *name;
	const char *attr;
	const char *value;
	bool v6_only;
};

static const struct krping_legacy_opt krping_legacy_opts[] = {
	{ .name = "client", .attr = "role", .value = "client" },
	{ .name = "server", .attr = "role", .value = "server" },
	{ .name = "addr6", .attr = "addr", .v6_only = true },
	{ .name = "wlat", .attr = "test", .value = "wlat" },
	{ .name = "rlat", .attr = "test", .value = "rlat" },
	{ .name = "bw", .attr = "test", .value = "bw" },
	{ .name = "fr", .attr = "test", .value = "fr" },
	{ .name = "slat", .attr = "test", .value = "slat" },
	{ .name = "sbw", .attr = "test", .value = "sbw" },
	{ .name = "tx-depth", .attr = "txdepth" },
};

/* Does the counted string @s of @len bytes equal the C string @str? */
static bool krping_str_eq(const char *s, size_t len, const char *str)
{
	return strlen(str) == len && !memcmp(s, str, len);
}

static const struct krping_opt *krping_opt_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++)
		if (krping_str_eq(name, len, krping_opts[i].name))
			return &krping_opts[i];
	return NULL;
}

static u32 krping_opt_load(const struct krping_options *opts,
			   const struct krping_opt *o)
{
	const void *p = (const u8 *)opts + o->offset;

	switch (o->kind) {
	case KRPING_OPT_U8:
	case KRPING_OPT_BOOL:
		return *(const u8 *)p;
	case KRPING_OPT_U16:
		return *(const u16 *)p;
	case KRPING_OPT_U32:
	case KRPING_OPT_ENUM:
		return *(const u32 *)p;
	default:
		return 0;
	}
}

static void krping_opt_store(struct krping_options *opts,
			     const struct krping_opt *o, u32 val)
{
	void *p = (u8 *)opts + o->offset;

	switch (o->kind) {
	case KRPING_OPT_U8:
	case KRPING_OPT_BOOL:
		*(u8 *)p = val;
		break;
	case KRPING_OPT_U16:
		*(u16 *)p = val;
		break;
	case KRPING_OPT_U32:
	case KRPING_OPT_ENUM:
		*(u32 *)p = val;
		break;
	default:
		break;
	}
}

/**
 * krping_parse_u32() - parse a strict decimal number
 * @s: the digits (not NUL terminated)
 * @len: their number
 * @min: smallest accepted value
 * @max: largest accepted value
 * @res: the value, written only on success
 *
 * Return: 0, -EINVAL if @s is not a plain decimal number without sign or
 * leading zero, or -ERANGE if it is one outside [@min, @max].
 */
static int krping_parse_u32(const char *s, size_t len, u32 min, u32 max,
			    u32 *res)
{
	u64 val = 0;
	size_t i;

	if (!len || (s[0] == '0' && len > 1))
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (!isdigit(s[i]))
			return -EINVAL;
		/* Past U32_MAX the exact value no longer matters. */
		if (val <= U32_MAX)
			val = val * 10 + (s[i] - '0');
	}
	if (val < min || val > max)
		return -ERANGE;
	*res = val;
	return 0;
}

/* A dotted quad of decimal fields 0..255 without leading zeros. */
static bool krping_dotted_quad_ok(const char *s, size_t len)
{
	unsigned int fields = 0;
	size_t i = 0;

	while (i <= len) {
		size_t start = i;
		u32 val;

		while (i < len && s[i] != '.')
			i++;
		if (krping_parse_u32(s + start, i - start, 0, 255, &val))
			return false;
		fields++;
		i++;	/* past the '.' or the end */
	}
	return fields == 4;
}

/* An interface name as dev_valid_name() takes it, and printable. */
static bool krping_ifname_ok(const char *s, size_t len)
{
	size_t i;

	if (!len || len >= IFNAMSIZ)
		return false;
	if (krping_str_eq(s, len, ".") || krping_str_eq(s, len, ".."))
		return false;
	for (i = 0; i < len; i++) {
		/* ',' and '%' would not survive the legacy string. */
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '/' || s[i] == ':' ||
		    s[i] == '%' || s[i] == ',')
			return false;
	}
	return true;
}

static bool krping_ipv6_linklocal(const struct in6_addr *a)
{
	return (a->s6_addr32[0] & htonl(0xffc00000)) == htonl(0xfe800000);
}

/**
 * krping_parse_addr() - parse an IP literal into @opts
 * @opts: where the address and scope go (both replaced on success)
 * @s: the literal (not NUL terminated)
 * @len: its length
 * @v6_only: refuse IPv4 (the legacy addr6= option)
 *
 * Return: 0 or -EINVAL; @opts is unchanged on error.
 */
static int krping_parse_addr(struct krping_options *opts, const char *s,
			     size_t len, bool v6_only)
{
	struct sockaddr_storage ss = { };
	const char *pct = memchr(s, '%', len);
	size_t alen = pct ? pct - s : len;
	const char *end;
	size_t i;

	if (!alen)
		return -EINVAL;

	if (memchr(s, ':', alen)) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		const char *colon = NULL;

		for (i = 0; i < alen; i++) {
			if (s[i] == ':')
				colon = s + i;
			else if (!isxdigit(s[i]) && s[i] != '.')
				return -EINVAL;
		}
		/* An embedded IPv4 tail follows the IPv4 rules. */
		if (memchr(s, '.', alen) &&
		    !krping_dotted_quad_ok(colon + 1, s + alen - colon - 1))
			return -EINVAL;
		if (!in6_pton(s, alen, sin6->sin6_addr.s6_addr, -1, &end) ||
		    end != s + alen)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		if (pct && (!krping_ipv6_linklocal(&sin6->sin6_addr) ||
			    !krping_ifname_ok(pct + 1, len - alen - 1)))
			return -EINVAL;
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		if (v6_only || pct || !krping_dotted_quad_ok(s, len))
			return -EINVAL;
		if (!in4_pton(s, len, (u8 *)&sin->sin_addr.s_addr, -1, &end) ||
		    end != s + len)
			return -EINVAL;
		sin->sin_family = AF_INET;
	}

	opts->addr = ss;
	memset(opts->scope, 0, sizeof(opts->scope));
	if (pct)
		memcpy(opts->scope, pct + 1, len - alen - 1);
	return 0;
}

/* Set option @o of @opts from the exact value @s; no newline handling. */
static int krping_opt_apply(struct krping_options *opts,
			    const struct krping_opt *o, const char *s,
			    size_t len, bool v6_only)
{
	u32 val;
	int err;

	switch (o->kind) {
	case KRPING_OPT_U8:
	case KRPING_OPT_U16:
	case KRPING_OPT_U32:
		err = krping_parse_u32(s, len, o->min, o->max, &val);
		if (err)
			return err;
		break;
	case KRPING_OPT_BOOL:
		if (krping_str_eq(s, len, "0"))
			val = 0;
		else if (krping_str_eq(s, len, "1"))
			val = 1;
		else
			return -EINVAL;
		break;
	case KRPING_OPT_ENUM:
		for (val = 0; val <= o->max; val++)
			if (krping_str_eq(s, len, o->names[val]))
				break;
		if (val > o->max)
			return -EINVAL;
		break;
	case KRPING_OPT_ADDR:
		return krping_parse_addr(opts, s, len, v6_only);
	default:
		return -EINVAL;
	}
	krping_opt_store(opts, o, val);
	return 0;
}

static int krping_format_addr(const struct krping_options *opts, char *buf,
			      size_t size)
{
	const struct sockaddr_in6 *sin6 = (const void *)&opts->addr;
	const struct sockaddr_in *sin = (const void *)&opts->addr;

	switch (opts->addr.ss_family) {
	case AF_INET:
		return scnprintf(buf, size, "%pI4", &sin->sin_addr);
	case AF_INET6:
		if (opts->scope[0])
			return scnprintf(buf, size, "%pI6c%%%.*s",
					 &sin6->sin6_addr,
					 (int)sizeof(opts->scope), opts->scope);
		return scnprintf(buf, size, "%pI6c", &sin6->sin6_addr);
	default:
		return scnprintf(buf, size, "%s", "");
	}
}

/**
 * krping_options_init() - the settings of a freshly created session
 * @opts: filled with the defaults: no role, no address, port 7174,
 *	count 0 (until stopped), size 64, test ping, mem_mode reg,
 *	txdepth 64, tos 0, peer_timeout_ms 30000, duration_ms 0, warmup 0,
 *	qps 1, every flag off
 */
void krping_options_init(struct krping_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->role = KRPING_ROLE_NONE;
	opts->addr.ss_family = AF_UNSPEC;
	opts->port = KRPING_DEFAULT_PORT;
	opts->count = KRPING_DEFAULT_COUNT;
	opts->size = KRPING_DEFAULT_SIZE;
	opts->test = KRPING_TEST_PING;
	opts->mem_mode = KRPING_MEM_REG;
	opts->txdepth = KRPING_DEFAULT_TXDEPTH;
	opts->tos = KRPING_DEFAULT_TOS;
	opts->peer_timeout_ms = KRPING_DEFAULT_PEER_TIMEOUT_MS;
	opts->qps = KRPING_DEFAULT_QPS;
}

/**
 * krping_option_set_buf() - set one option from a written buffer
 * @opts: the settings to change
 * @name: attribute name ("role", "addr", "port", ...)
 * @buf: the value as written, not necessarily NUL terminated
 * @len: bytes in @buf
 *
 * One trailing newline is dropped; a NUL byte within @len is -EINVAL.
 *
 * Return: 0, -EINVAL (unknown name, malformed value, unknown enum value)
 * or -ERANGE (a well-formed number out of range). @opts is unchanged on
 * error.
 */
int krping_option_set_buf(struct krping_options *opts, const char *name,
			  const char *buf, size_t len)
{
	const struct krping_opt *o = krping_opt_find(name, strlen(name));
	struct krping_options tmp;
	int err;

	if (!o || memchr(buf, '\0', len))
		return -EINVAL;
	if (len && buf[len - 1] == '\n')
		len--;
	tmp = *opts;
	err = krping_opt_apply(&tmp, o, buf, len, false);
	if (err)
		return err;
	*opts = tmp;
	return 0;
}

/**
 * krping_option_set() - set one option from a NUL-terminated string
 * @opts: the settings to change
 * @name: attribute name
 * @val: the value; one trailing newline is allowed
 *
 * Return: as krping_option_set_buf().
 */
int krping_option_set(struct krping_options *opts, const char *name,
		      const char *val)
{
	return krping_option_set_buf(opts, name, val, strlen(val));
}

/**
 * krping_option_show() - print one option as its attribute shows it
 * @opts: the settings
 * @name: attribute name
 * @buf: output buffer
 * @size: its size
 *
 * Numbers print in decimal, booleans as 0 or 1, enums by name (role
 * "none" while unset), the address in canonical form (%pI4, or %pI6c and
 * "%scope") or nothing while unset; always followed by a newline.
 *
 * Return: the length written, as scnprintf(), or -EINVAL for an unknown
 * name.
 */
int krping_option_show(const struct krping_options *opts, const char *name,
		       char *buf, size_t size)
{
	const struct krping_opt *o = krping_opt_find(name, strlen(name));
	int len;

	if (!o)
		return -EINVAL;
	switch (o->kind) {
	case KRPING_OPT_ADDR:
		len = krping_format_addr(opts, buf, size);
		break;
	case KRPING_OPT_ENUM: {
		u32 val = krping_opt_load(opts, o);

		len = scnprintf(buf, size, "%s",
				val <= o->max ? o->names[val] : "?");
		break;
	}
	default:
		len = scnprintf(buf, size, "%u", krping_opt_load(opts, o));
		break;
	}
	return len + scnprintf(buf + len, size - len, "\n");
}

/* One item of a legacy string: "name" or "name=value". */
static int krping_parse_item(struct krping_options *opts, const char *s,
			     size_t len, u32 *seen)
{
	const char *eq = memchr(s, '=', len);
	size_t nlen = eq ? eq - s : len;
	const struct krping_legacy_opt *legacy = NULL;
	const struct krping_opt *o;
	const char *val;
	size_t vlen, i;
	u32 bit;

	for (i = 0; i < ARRAY_SIZE(krping_legacy_opts); i++) {
		if (krping_str_eq(s, nlen, krping_legacy_opts[i].name)) {
			legacy = &krping_legacy_opts[i];
			break;
		}
	}
	o = krping_opt_find(legacy ? legacy->attr : s,
			    legacy ? strlen(legacy->attr) : nlen);
	if (!o)
		return -EINVAL;

	/* Each setting once, aliases included (client,server or bw,rlat). */
	bit = BIT(o - krping_opts);
	if (*seen & bit)
		return -EINVAL;
	*seen |= bit;

	if (legacy && legacy->value) {
		/* A keyword: "client", "bw", ... takes no value. */
		if (eq)
			return -EINVAL;
		val = legacy->value;
		vlen = strlen(val);
	} else if (eq) {
		val = eq + 1;
		vlen = len - nlen - 1;
	} else if (o->kind == KRPING_OPT_BOOL) {
		val = "1";
		vlen = 1;
	} else {
		return -EINVAL;
	}
	return krping_opt_apply(opts, o, val, vlen, legacy && legacy->v6_only);
}

/**
 * krping_options_parse_buf() - parse a legacy string from a written buffer
 * @opts: the settings, replaced as a whole on success
 * @buf: the string, not necessarily NUL terminated
 * @len: bytes in @buf
 *
 * The string is a comma-separated list of items, each "name" or
 * "name=value", that describes a whole session: options not named take
 * their default. Names: every attribute name, with "=value" (booleans also
 * bare, meaning =1), and the legacy names client, server (role), wlat,
 * rlat, bw, fr (test; bare only), addr6= (IPv6 only) and tx-depth=
 * (txdepth). One trailing newline is allowed. Empty strings, empty items,
 * unknown names, a value on a keyword, a bare non-boolean, an option given
 * twice (aliases count: client,server or bw,test=bw or addr=..,addr6=..)
 * and a NUL byte are -EINVAL; values are checked as krping_option_set()
 * checks them.
 *
 * Return: 0, -EINVAL or -ERANGE. All or nothing: on error @opts is
 * unchanged.
 */
int krping_options_parse_buf(struct krping_options *opts, const char *buf,
			     size_t len)
{
	struct krping_options tmp;
	const char *end;
	u32 seen = 0;
	int err;

	if (memchr(buf, '\0', len))
		return -EINVAL;
	if (len && buf[len - 1] == '\n')
		len--;
	if (!len)
		return -EINVAL;

	krping_options_init(&tmp);
	end = buf + len;
	for (;;) {
		const char *comma = memchr(buf, ',', end - buf);
		const char *item_end = comma ? comma : end;

		err = krping_parse_item(&tmp, buf, item_end - buf, &seen);
		if (err)
			return err;
		if (!comma)
			break;
		buf = comma + 1;
	}
	*opts = tmp;
	return 0;
}

/**
 * krping_options_parse() - parse a NUL-terminated legacy string
 * @opts: the settings, replaced as a whole on success
 * @str: the string
 *
 * Return: as krping_options_parse_buf().
 */
int krping_options_parse(struct krping_options *opts, const char *str)
{
	return krping_options_parse_buf(opts, str, strlen(str));
}

/**
 * krping_options_format() - print the canonical legacy string
 * @opts: the settings
 * @buf: output buffer, KRPING_OPTIONS_MAX bytes always suffice
 * @size: its size
 *
 * The fixed order is: the role keyword (client or server, left out while
 * unset), addr= (left out while unset), port=, count=, size=, test=,
 * mem_mode=, txdepth=, tos=, peer_timeout_ms=, duration_ms= and warmup=
 * (each left out while 0), qps= (left out while 1), then each boolean that is set, as a bare
 * name, in the order validate, verbose, duplex, poll, server_inv,
 * local_dma_lkey, read_inv; then a newline. For example (one line):
 * "client,addr=10.9.0.1,port=9999,count=100,size=64,test=ping,
 * mem_mode=reg,txdepth=64,tos=0,peer_timeout_ms=30000,validate".
 * krping_options_parse() reads it back into equal settings.
 *
 * Return: the length written, as scnprintf().
 */
int krping_options_format(const struct krping_options *opts, char *buf,
			  size_t size)
{
	const char *sep = "";
	size_t i;
	int len = 0;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		const struct krping_opt *o = &krping_opts[i];
		u32 val = 0;

		if (o->kind != KRPING_OPT_ADDR)
			val = krping_opt_load(opts, o);

		switch (o->kind) {
		case KRPING_OPT_ADDR:
			if (opts->addr.ss_family == AF_UNSPEC)
				continue;
			len += scnprintf(buf + len, size - len, "%s%s=", sep,
					 o->name);
			len += krping_format_addr(opts, buf + len, size - len);
			break;
		case KRPING_OPT_BOOL:
			if (!val)
				continue;
			len += scnprintf(buf + len, size - len, "%s%s", sep,
					 o->name);
			break;
		case KRPING_OPT_ENUM: {
			const char *name = val <= o->max ? o->names[val] : "?";

			if (o->keyword && !val)
				continue;
			if (o->keyword)
				len += scnprintf(buf + len, size - len, "%s%s",
						 sep, name);
			else
				len += scnprintf(buf + len, size - len,
						 "%s%s=%s", sep, o->name, name);
			break;
		}
		default:
			if (o->omit >= 0 && val == o->omit)
				continue;
			len += scnprintf(buf + len, size - len, "%s%s=%u", sep,
					 o->name, val);
			break;
		}
		sep = ",";
	}
	return len + scnprintf(buf + len, size - len, "\n");
}

/**
 * krping_options_features() - what this module's sessions accept
 * @buf: output buffer
 * @size: its size
 *
 * One line per option, in the order of the table: "NAME number MIN..MAX",
 * "NAME bool", "NAME enum VALUE,VALUE,..." (in the order of their enum)
 * or "NAME addr". A user-space tool reads it instead of probing for files
 * and can say what a refused value should have been.
 *
 * Return: the length written, as scnprintf().
 */
int krping_options_features(char *buf, size_t size)
{
	size_t i;
	u32 v;
	int len = 0;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		const struct krping_opt *o = &krping_opts[i];

		len += scnprintf(buf + len, size - len, "%s ", o->name);
		switch (o->kind) {
		case KRPING_OPT_BOOL:
			len += scnprintf(buf + len, size - len, "bool");
			break;
		case KRPING_OPT_ENUM:
			len += scnprintf(buf + len, size - len, "enum");
			for (v = 0; v <= o->max; v++)
				len += scnprintf(buf + len, size - len, "%c%s",
						 v ? ',' : ' ', o->names[v]);
			break;
		case KRPING_OPT_ADDR:
			len += scnprintf(buf + len, size - len, "addr");
			break;
		default:
			len += scnprintf(buf + len, size - len, "number %u..%u",
					 o->min, o->max);
			break;
		}
		len += scnprintf(buf + len, size - len, "\n");
	}
	return len;
}

/**
 * krping_options_validate() - can these settings run?
 * @opts: the settings
 *
 * A role and an address must be set; read_inv and server_inv need
 * mem_mode reg; duplex needs test bw; duration_ms and warmup need a
 * benchmark, and count + warmup must fit 32 bits; an IPv6 link-local
 * address needs a scope (and only one may have one). Every field must
 * also be within its option's range, which only matters for settings
 * not made by this file.
 *
 * Return: 0 or -EINVAL.
 */
int krping_options_validate(const struct krping_options *opts)
{
	const struct sockaddr_in6 *sin6 = (const void *)&opts->addr;
	bool scoped = strnlen(opts->scope, sizeof(opts->scope)) != 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		const struct krping_opt *o = &krping_opts[i];
		u32 val;

		if (o->kind == KRPING_OPT_ADDR)
			continue;
		val = krping_opt_load(opts, o);
		if (val < o->min || val > o->max)
			return -EINVAL;
	}

	if (opts->role == KRPING_ROLE_NONE)
		return -EINVAL;
	switch (opts->addr.ss_family) {
	case AF_INET:
		if (scoped)
			return -EINVAL;
		break;
	case AF_INET6:
		if (krping_ipv6_linklocal(&sin6->sin6_addr) != scoped)
			return -EINVAL;
		if (scoped && !krping_ifname_ok(opts->scope,
						strnlen(opts->scope,
							sizeof(opts->scope))))
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if ((opts->read_inv || opts->server_inv) &&
	    opts->mem_mode != KRPING_MEM_REG)
		return -EINVAL;
	if (opts->duplex && opts->test != KRPING_TEST_BW)
		return -EINVAL;
	/* Timed runs and warm-up are the benchmarks'. */
	if ((opts->duration_ms || opts->warmup) &&
	    opts->test == KRPING_TEST_PING)
		return -EINVAL;
	/* A run counts its iterations, warm-up included, in 32 bits. */
	if ((u64)opts->count + opts->warmup > U32_MAX)
		return -EINVAL;
	return 0;
}

/**
 * krping_options_equal() - do two settings hold the same values?
 * @a: one
 * @b: the other
 *
 * Compares every option; addresses by family, address and scope (not by
 * padding or the unused port field).
 *
 * Return: true if equal.
 */
bool krping_options_equal(const struct krping_options *a,
			  const struct krping_options *b)
{
	const struct sockaddr_in6 *a6 = (const void *)&a->addr;
	const struct sockaddr_in6 *b6 = (const void *)&b->addr;
	const struct sockaddr_in *a4 = (const void *)&a->addr;
	const struct sockaddr_in *b4 = (const void *)&b->addr;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(krping_opts); i++) {
		const struct krping_opt *o = &krping_opts[i];

		if (o->kind == KRPING_OPT_ADDR)
			continue;
		if (krping_opt_load(a, o) != krping_opt_load(b, o))
			return false;
	}

	if (a->addr.ss_family != b->addr.ss_family ||
	    strncmp(a->scope, b->scope, sizeof(a->scope)))
		return false;
	switch (a->addr.ss_family) {
	case AF_INET:
		return a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	case AF_INET6:
		return !memcmp(&a6->sin6_addr, &b6->sin6_addr,
			       sizeof(a6->sin6_addr));
	default:
		return true;
	}
}

/**
 * krping_plan_of() - the plan a side's own settings make
 * @opts: the settings
 * @plan: filled with their count, warmup and duration_ms
 */
void krping_plan_of(const struct krping_options *opts,
		    struct krping_plan *plan)
{
	plan->count = opts->count;
	plan->warmup = opts->warmup;
	plan->duration_ms = opts->duration_ms;
}

/**
 * krping_plans_agree() - do two sides with these plans end together?
 * @a: one side's plan
 * @b: the other's
 *
 * Return: true for the same count and warm-up, both timed or neither.
 */
bool krping_plans_agree(const struct krping_plan *a,
			const struct krping_plan *b)
{
	return a->count == b->count && a->warmup == b->warmup &&
	       !a->duration_ms == !b->duration_ms;
}

/**
 * krping_plan_follow() - a benchmark server's plan for its client's
 * @opts: the server's settings
 * @client: the plan its client announced (from the network: any values)
 * @plan: the plan to run
 *
 * What the server was not given (0) it takes from the client; what it
 * was given must agree. Nothing the client announces takes a plan beyond
 * the limits of the server's own settings.
 *
 * Return: 0, or -EINVAL with @plan the server's own.
 */
int krping_plan_follow(const struct krping_options *opts,
		       const struct krping_plan *client,
		       struct krping_plan *plan)
{
	struct krping_plan p = {
		.count = opts->count ? opts->count : client->count,
		.warmup = opts->warmup ? opts->warmup : client->warmup,
		.duration_ms = opts->duration_ms ? opts->duration_ms :
						   client->duration_ms,
	};

	if (krping_plans_agree(&p, client) &&
	    (u64)p.count + p.warmup <= U32_MAX &&
	    p.duration_ms <= KRPING_MAX_DURATION_MS) {
		*plan = p;
		return 0;
	}
	krping_plan_of(opts, plan);
	return -EINVAL;
}
