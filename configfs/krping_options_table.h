/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Every option of a krping session, one row each, in the order of the
 * canonical legacy string: the one place that names an option. The
 * parser's table and its build-time checks (krping_options.c) and the
 * session's configfs attributes (configfs.c) are made from these rows;
 * the subsystem's "features" file prints the table. An option also has
 * its field in struct krping_options, which the checks hold to its row.
 *
 * Include this file with KRPING_OPTION(name, KIND, ...) defined; it
 * undefines it. A row is one of
 *
 *   KRPING_OPTION(field, NUM, type, min, max, omit)
 *	a decimal number in [min, max], in a field of type u8, u16 or u32;
 *	the legacy string leaves it out while it equals omit, or names it
 *	always with omit KRPING_ALWAYS_NAMED
 *   KRPING_OPTION(field, BOOL)
 *	"0" or "1", in a bool field
 *   KRPING_OPTION(field, ENUM, last, keyword)
 *	one of krping_<field>_names[0..last], in an enum field; a keyword
 *	enum is its bare value in the legacy string, left out while 0
 *   KRPING_OPTION(addr, ADDR)
 *	an IP literal, in @addr and @scope
 */
KRPING_OPTION(role, ENUM, KRPING_ROLE_SERVER, true)
KRPING_OPTION(addr, ADDR)
KRPING_OPTION(port, NUM, u16, 1, U16_MAX, KRPING_ALWAYS_NAMED)
KRPING_OPTION(count, NUM, u32, 0, U32_MAX, KRPING_ALWAYS_NAMED)
KRPING_OPTION(size, NUM, u32, KRPING_MIN_SIZE, KRPING_MAX_SIZE,
	      KRPING_ALWAYS_NAMED)
KRPING_OPTION(test, ENUM, KRPING_TEST_SBW, false)
KRPING_OPTION(mem_mode, ENUM, KRPING_MEM_DMA, false)
KRPING_OPTION(txdepth, NUM, u32, KRPING_MIN_TXDEPTH, KRPING_MAX_TXDEPTH,
	      KRPING_ALWAYS_NAMED)
KRPING_OPTION(tos, NUM, u8, 0, U8_MAX, KRPING_ALWAYS_NAMED)
KRPING_OPTION(peer_timeout_ms, NUM, u32, 0, KRPING_MAX_PEER_TIMEOUT_MS,
	      KRPING_ALWAYS_NAMED)
KRPING_OPTION(duration_ms, NUM, u32, 0, KRPING_MAX_DURATION_MS, 0)
KRPING_OPTION(warmup, NUM, u32, 0, U32_MAX, 0)
KRPING_OPTION(qps, NUM, u32, 1, KRPING_MAX_QPS, KRPING_DEFAULT_QPS)
KRPING_OPTION(validate, BOOL)
KRPING_OPTION(verbose, BOOL)
KRPING_OPTION(duplex, BOOL)
KRPING_OPTION(poll, BOOL)
KRPING_OPTION(server_inv, BOOL)
KRPING_OPTION(local_dma_lkey, BOOL)
KRPING_OPTION(read_inv, BOOL)

#undef KRPING_OPTION
