// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie device, port and protection domain verbs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <rdma/ib_mad.h>

#include "ropcie.h"

int ropcie_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			struct ib_udata *udata)
{
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->vendor_id = 0xffffff;
	attr->vendor_part_id = 0x0ec1;
	attr->hw_ver = 1;
	attr->sys_image_guid = ibdev->node_guid;
	attr->max_mr_size = U64_MAX;
	attr->page_size_cap = PAGE_SIZE | SZ_4K | SZ_64K | SZ_2M;
	attr->max_qp = ROPCIE_MAX_QP;
	attr->max_qp_wr = ROPCIE_MAX_QP_WR;
	attr->device_cap_flags = IB_DEVICE_MEM_MGT_EXTENSIONS;
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG |
				 IBK_LOCAL_DMA_LKEY;
	attr->max_send_sge = ROPCIE_MAX_SGE;
	attr->max_recv_sge = ROPCIE_MAX_SGE;
	attr->max_sge_rd = ROPCIE_MAX_SGE;
	attr->max_cq = ROPCIE_MAX_CQ;
	attr->max_cqe = ROPCIE_MAX_CQE;
	attr->max_mr = ROPCIE_MAX_MR;
	attr->max_pd = ROPCIE_MAX_PD;
	attr->max_qp_rd_atom = ROPCIE_MAX_IRD_ORD;
	attr->max_qp_init_rd_atom = ROPCIE_MAX_IRD_ORD;
	attr->max_res_rd_atom = ROPCIE_MAX_QP * ROPCIE_MAX_IRD_ORD;
	attr->max_fast_reg_page_list_len = ROPCIE_MAX_FR_PAGES;
	attr->max_pkeys = 1;
	attr->fw_ver = 1;
	return 0;
}

int ropcie_query_port(struct ib_device *ibdev, u32 port,
		      struct ib_port_attr *attr)
{
	struct ropcie_dev *dev = to_rdev(ibdev);
	struct net_device *ndev = dev->netdev;
	enum ib_port_state state = READ_ONCE(dev->port_state);

	memset(attr, 0, sizeof(*attr));
	attr->state = state;
	attr->phys_state = state == IB_PORT_ACTIVE ?
			   IB_PORT_PHYS_STATE_LINK_UP :
			   IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = ndev ? ib_mtu_int_to_enum(ndev->mtu) : IB_MTU_1024;
	attr->gid_tbl_len = 1;
	attr->pkey_tbl_len = 1;	/* rdma_cm's loopback binding reads one */
	attr->max_msg_sz = ROPCIE_MAX_MSG;
	attr->port_cap_flags = IB_PORT_CM_SUP | IB_PORT_DEVICE_MGMT_SUP;
	attr->active_width = IB_WIDTH_4X;
	attr->active_speed = IB_SPEED_EDR;
	return 0;
}

int ropcie_query_gid(struct ib_device *ibdev, u32 port, int idx,
		     union ib_gid *gid)
{
	struct ropcie_dev *dev = to_rdev(ibdev);

	if (idx)
		return -EINVAL;
	memset(gid, 0, sizeof(*gid));
	ether_addr_copy(gid->raw, dev->gid);
	return 0;
}

/* iWARP has no partitions; rdma_cm still reads P_Key 0 for 127.0.0.1. */
int ropcie_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

int ropcie_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable)
{
	struct ib_port_attr attr;
	int ret;

	ret = ropcie_query_port(ibdev, port, &attr);
	if (ret)
		return ret;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->core_cap_flags = RDMA_CORE_PORT_IWARP;
	return 0;
}

int ropcie_alloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	struct ropcie_dev *dev = to_rdev(pd->device);

	if (atomic_inc_return(&dev->num_pd) > ROPCIE_MAX_PD) {
		atomic_dec(&dev->num_pd);
		return -ENOMEM;
	}
	return 0;
}

int ropcie_dealloc_pd(struct ib_pd *pd, struct ib_udata *udata)
{
	atomic_dec(&to_rdev(pd->device)->num_pd);
	return 0;
}
