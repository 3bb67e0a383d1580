// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The control plane: /sys/kernel/config/krping/<name>/.
 *
 * mkdir creates a session, each attribute sets one option, "options"
 * takes the legacy krping string, "start" runs or stops the session and
 * rmdir stops and removes it. The subsystem's "features" file lists the
 * options and the values they take. Values are parsed by krping_options.c, so
 * every attribute validates exactly as the legacy string does.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/configfs.h>
#include <linux/module.h>
#include <linux/string.h>

#include "../krping/krping.h"

/* No option value is anywhere near this long; longer writes are junk. */
#define KRPING_MAX_WRITE	1024

static struct krping_session *to_session(struct config_item *item)
{
	return container_of(item, struct krping_session, item);
}

/*
 * configfs silently truncates long writes to a page; refuse them rather
 * than parse a prefix. Embedded NUL bytes are the parser's to refuse.
 */
static int krping_check_write(const char *page, size_t len)
{
	if (len == 0 || len > KRPING_MAX_WRITE)
		return -EINVAL;
	return 0;
}

/*
 * Show or set one option by its attribute name, or, with a NULL @name,
 * the whole legacy option string ("options").
 */
static ssize_t krping_option_attr_show(struct config_item *item,
				       const char *name, char *page)
{
	struct krping_session *sess = to_session(item);
	ssize_t ret;

	mutex_lock(&sess->lock);
	if (name)
		ret = krping_option_show(&sess->opts, name, page, PAGE_SIZE);
	else
		ret = krping_options_format(&sess->opts, page, PAGE_SIZE);
	mutex_unlock(&sess->lock);
	return ret;
}

static ssize_t krping_option_attr_store(struct config_item *item,
					const char *name, const char *page,
					size_t len)
{
	struct krping_session *sess = to_session(item);
	int ret;

	ret = krping_check_write(page, len);
	if (ret)
		return ret;

	mutex_lock(&sess->lock);
	if (krping_session_active(sess))
		ret = -EBUSY;
	else if (name)
		ret = krping_option_set_buf(&sess->opts, name, page, len);
	else
		ret = krping_options_parse_buf(&sess->opts, page, len);
	mutex_unlock(&sess->lock);
	return ret ? ret : len;
}

/* An attribute per option of krping_options_table.h, named after it. */
#define KRPING_OPTION(_name, ...)					\
static ssize_t krping_##_name##_show(struct config_item *item,		\
				     char *page)			\
{									\
	return krping_option_attr_show(item, #_name, page);		\
}									\
static ssize_t krping_##_name##_store(struct config_item *item,		\
				      const char *page, size_t len)	\
{									\
	return krping_option_attr_store(item, #_name, page, len);	\
}

#include "krping_options_table.h"

#define KRPING_OPTION(_name, ...)	KRPING_OPTION_ATTR(_name),
#define KRPING_OPTION_ATTR(_name)					\
	{ .ca_name = #_name, .ca_owner = THIS_MODULE,			\
	  .ca_mode = 0644, .show = krping_##_name##_show,		\
	  .store = krping_##_name##_store }

static struct configfs_attribute krping_option_attrs[] = {
#include "krping_options_table.h"
};

static ssize_t krping_options_show(struct config_item *item, char *page)
{
	return krping_option_attr_show(item, NULL, page);
}

static ssize_t krping_options_store(struct config_item *item,
				    const char *page, size_t len)
{
	return krping_option_attr_store(item, NULL, page, len);
}
CONFIGFS_ATTR(krping_, options);

static ssize_t krping_start_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%d\n",
			  krping_session_active(to_session(item)));
}

static ssize_t krping_start_store(struct config_item *item,
				  const char *page, size_t len)
{
	struct krping_session *sess = to_session(item);
	int ret;

	ret = krping_check_write(page, len);
	if (ret)
		return ret;

	if (strnlen(page, len) != len)
		ret = -EINVAL;
	else if (sysfs_streq(page, "1"))
		ret = krping_session_start(sess);
	else if (sysfs_streq(page, "0"))
		krping_session_stop(sess);
	else
		ret = -EINVAL;
	return ret ? ret : len;
}
CONFIGFS_ATTR(krping_, start);

/* The options', then "options" and "start"; filled at init. */
static struct configfs_attribute *
krping_session_attrs[ARRAY_SIZE(krping_option_attrs) + 3];

static void krping_session_item_release(struct config_item *item)
{
	krping_session_free(to_session(item));
}

static struct configfs_item_operations krping_session_item_ops = {
	.release = krping_session_item_release,
};

static const struct config_item_type krping_session_type = {
	.ct_item_ops = &krping_session_item_ops,
	.ct_attrs = krping_session_attrs,
	.ct_owner = THIS_MODULE,
};

static struct config_item *krping_make_item(struct config_group *group,
					    const char *name)
{
	struct krping_session *sess;

	sess = krping_session_create(name);
	if (IS_ERR(sess))
		return ERR_CAST(sess);
	config_item_init_type_name(&sess->item, name, &krping_session_type);
	return &sess->item;
}

/* rmdir: stop a running session first; this always succeeds. */
static void krping_drop_item(struct config_group *group,
			     struct config_item *item)
{
	krping_session_drop(to_session(item));
	config_item_put(item);
}

static struct configfs_group_operations krping_group_ops = {
	.make_item = krping_make_item,
	.drop_item = krping_drop_item,
};

/* The subsystem's own file: what its sessions accept. */
static ssize_t krping_features_show(struct config_item *item, char *page)
{
	return krping_options_features(page, PAGE_SIZE);
}
CONFIGFS_ATTR_RO(krping_, features);

static struct configfs_attribute *krping_group_attrs[] = {
	&krping_attr_features,
	NULL,
};

static const struct config_item_type krping_group_type = {
	.ct_group_ops = &krping_group_ops,
	.ct_attrs = krping_group_attrs,
	.ct_owner = THIS_MODULE,
};

static struct configfs_subsystem krping_subsys = {
	.su_group = {
		.cg_item = {
			.ci_namebuf = "krping",
			.ci_type = &krping_group_type,
		},
	},
};

int krping_configfs_init(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(krping_option_attrs); i++)
		krping_session_attrs[i] = &krping_option_attrs[i];
	krping_session_attrs[i++] = &krping_attr_options;
	krping_session_attrs[i] = &krping_attr_start;
	config_group_init(&krping_subsys.su_group);
	mutex_init(&krping_subsys.su_mutex);
	return configfs_register_subsystem(&krping_subsys);
}

void krping_configfs_exit(void)
{
	configfs_unregister_subsystem(&krping_subsys);
}
