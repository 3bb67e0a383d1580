// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ropcie over QEMU's ivshmem-doorbell device (PCI 1af4:1110): a PCI link
 * between two virtual machines that share one memory region, the
 * hardware under a ropcie link (link.h).
 *
 * BAR0 holds the registers (IVPosition, this VM's peer ID, at 8; the
 * Doorbell at 12: peer ID << 16 | vector), BAR1 the MSI-X table, BAR2
 * the shared memory. BAR2 is laid out as:
 *
 *   0         struct ropcie_ivshmem_ports, in a 4 KiB page
 *   4 KiB     port 0's inbound window  (half of the rest, 4 KiB aligned)
 *   + half    port 1's inbound window
 *
 * Which host is port 0 is not decided by the hardware (an NTB's port
 * numbers are): each host claims a free port with a compare-and-swap
 * of its random token, or takes over a port whose owner's beat has not
 * moved for link_timeout_ms (its owner died without releasing it).
 * Until then no link exists; afterwards the link core runs over the
 * two halves. Everything in BAR2 is written by a peer too, so only the
 * claim token is trusted, and only after the swap.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/align.h>
#include <linux/atomic.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "ropcie.h"
#include "link.h"

#define ROPCIE_IVSHMEM_IVPOSITION	8
#define ROPCIE_IVSHMEM_DOORBELL		12
#define ROPCIE_IVSHMEM_TABLE		4096U
#define ROPCIE_IVSHMEM_VECTOR		0

/* The port table at the start of BAR2. */
struct ropcie_ivshmem_ports {
	u64 owner[2];		/* claim token of port p's host; 0: free */
	u64 beat[2];		/* bumped by that host every beat */
	u32 position[2];	/* its IVPosition: where its doorbell rings */
};

struct ropcie_ivshmem {
	struct pci_dev *pdev;
	void __iomem *regs;
	void *shm;
	u64 shm_size;
	u32 position;
	struct ropcie_ivshmem_ports *ports;

	struct mutex lock;		/* port, token, link (changes) */
	struct delayed_work claim_work;
	int port;			/* claimed port, or -1 */
	u64 token;
	u64 beat;
	/* A claimed port whose owner's beat does not move: since when. */
	u64 seen_owner[2], seen_beat[2];
	unsigned long seen_at[2];

	spinlock_t irq_lock;		/* link, against the doorbell IRQ */
	struct ropcie_link *link;
	struct ropcie_link_hw hw;
};

static void ropcie_ivshmem_peer_db_set(struct ropcie_link_hw *hw)
{
	struct ropcie_ivshmem *iv = container_of(hw, struct ropcie_ivshmem, hw);
	int peer = 1 - (int)hw->port;
	u32 position;

	/* The peer's word: any 16-bit ID rings at most a wrong VM. */
	if (!READ_ONCE(iv->ports->owner[peer]))
		return;
	position = READ_ONCE(iv->ports->position[peer]) & 0xffff;
	iowrite32(position << 16 | ROPCIE_IVSHMEM_VECTOR,
		  iv->regs + ROPCIE_IVSHMEM_DOORBELL);
}

static const struct ropcie_link_hw_ops ropcie_ivshmem_hw_ops = {
	.peer_db_set = ropcie_ivshmem_peer_db_set,
};

static irqreturn_t ropcie_ivshmem_irq(int irq, void *data)
{
	struct ropcie_ivshmem *iv = data;

	spin_lock(&iv->irq_lock);
	if (iv->link)
		ropcie_link_db_event(iv->link);
	spin_unlock(&iv->irq_lock);
	return IRQ_HANDLED;
}

/* Start the link over the two halves, once @port is ours. */
static void ropcie_ivshmem_start_link(struct ropcie_ivshmem *iv, int port)
{
	u64 half = ALIGN_DOWN((iv->shm_size - ROPCIE_IVSHMEM_TABLE) / 2, SZ_4K);
	struct ropcie_link *link;

	iv->port = port;
	WRITE_ONCE(iv->ports->position[port], iv->position);
	WRITE_ONCE(iv->ports->beat[port], ++iv->beat);
	iv->hw.port = port;
	iv->hw.peer_port = 1 - port;
	iv->hw.in = iv->shm + ROPCIE_IVSHMEM_TABLE + port * half;
	iv->hw.out = iv->shm + ROPCIE_IVSHMEM_TABLE + (1 - port) * half;
	iv->hw.in_size = half;
	iv->hw.out_size = half;
	link = ropcie_link_register(&iv->hw);
	if (IS_ERR(link)) {
		dev_err(&iv->pdev->dev, "no link over port %d: %pe\n", port,
			link);
		return;
	}
	spin_lock_irq(&iv->irq_lock);
	iv->link = link;
	spin_unlock_irq(&iv->irq_lock);
	dev_dbg(&iv->pdev->dev, "claimed port %d\n", port);
}

static void ropcie_ivshmem_stop_link(struct ropcie_ivshmem *iv)
{
	struct ropcie_link *link;

	spin_lock_irq(&iv->irq_lock);
	link = iv->link;
	iv->link = NULL;
	spin_unlock_irq(&iv->irq_lock);
	if (link)
		ropcie_link_unregister(link);
}

/* Try to claim a port: a free one, else one whose owner is dead. */
static int ropcie_ivshmem_claim(struct ropcie_ivshmem *iv)
{
	unsigned long timeout = msecs_to_jiffies(READ_ONCE(ropcie_link_timeout_ms));
	int p;

	for (p = 0; p < 2; p++)
		if (!READ_ONCE(iv->ports->owner[p]) &&
		    !cmpxchg64(&iv->ports->owner[p], 0, iv->token))
			return p;
	for (p = 0; p < 2; p++) {
		u64 owner = READ_ONCE(iv->ports->owner[p]);
		u64 beat = READ_ONCE(iv->ports->beat[p]);

		if (owner != iv->seen_owner[p] || beat != iv->seen_beat[p]) {
			iv->seen_owner[p] = owner;
			iv->seen_beat[p] = beat;
			iv->seen_at[p] = jiffies;
			continue;
		}
		if (time_after(jiffies, iv->seen_at[p] + timeout) &&
		    cmpxchg64(&iv->ports->owner[p], owner, iv->token) == owner) {
			dev_info(&iv->pdev->dev,
				 "took over port %d from a silent owner\n", p);
			return p;
		}
	}
	return -EBUSY;
}

static void ropcie_ivshmem_claim_work(struct work_struct *work)
{
	struct ropcie_ivshmem *iv = container_of(to_delayed_work(work),
						 struct ropcie_ivshmem,
						 claim_work);
	int port;

	mutex_lock(&iv->lock);
	if (iv->port >= 0) {
		if (READ_ONCE(iv->ports->owner[iv->port]) == iv->token) {
			WRITE_ONCE(iv->ports->beat[iv->port], ++iv->beat);
			goto again;
		}
		/* We were silent too long and lost the port: claim anew. */
		dev_warn(&iv->pdev->dev, "port %d was taken over\n", iv->port);
		ropcie_ivshmem_stop_link(iv);
		iv->port = -1;
		do {
			iv->token = get_random_u64();
		} while (!iv->token);
	}
	port = ropcie_ivshmem_claim(iv);
	if (port >= 0)
		ropcie_ivshmem_start_link(iv, port);
again:
	mutex_unlock(&iv->lock);
	queue_delayed_work(system_wq, &iv->claim_work,
			   msecs_to_jiffies(ROPCIE_LINK_BEAT_MS));
}

static int ropcie_ivshmem_probe(struct pci_dev *pdev,
				const struct pci_device_id *id)
{
	struct ropcie_ivshmem *iv;
	int ret;

	iv = kzalloc(sizeof(*iv), GFP_KERNEL);
	if (!iv)
		return -ENOMEM;
	iv->pdev = pdev;
	iv->hw.dev = &pdev->dev;
	iv->hw.ops = &ropcie_ivshmem_hw_ops;
	iv->port = -1;
	mutex_init(&iv->lock);
	spin_lock_init(&iv->irq_lock);
	INIT_DELAYED_WORK(&iv->claim_work, ropcie_ivshmem_claim_work);
	do {
		iv->token = get_random_u64();
	} while (!iv->token);

	ret = pci_enable_device_mem(pdev);
	if (ret)
		goto err_free;
	ret = pci_request_regions(pdev, KBUILD_MODNAME);
	if (ret)
		goto err_disable;
	iv->regs = pci_iomap(pdev, 0, 0);
	if (!iv->regs) {
		ret = -ENOMEM;
		goto err_regions;
	}
	iv->shm_size = pci_resource_len(pdev, 2);
	if (iv->shm_size < ROPCIE_IVSHMEM_TABLE + 2 * SZ_1M) {
		dev_err(&pdev->dev, "BAR2 of %llu bytes is too small\n",
			iv->shm_size);
		ret = -ENOSPC;
		goto err_unmap_regs;
	}
	iv->shm = memremap(pci_resource_start(pdev, 2), iv->shm_size,
			   MEMREMAP_WB);
	if (!iv->shm) {
		ret = -ENOMEM;
		goto err_unmap_regs;
	}
	iv->ports = iv->shm;
	iv->position = ioread32(iv->regs + ROPCIE_IVSHMEM_IVPOSITION);

	/* Doorbells arrive as MSI-X vector 0 (ivshmem-doorbell, vectors >= 1). */
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(&pdev->dev, "no MSI-X vector (an ivshmem-doorbell with vectors=0?): %d\n",
			ret);
		goto err_unmap_shm;
	}
	ret = request_irq(pci_irq_vector(pdev, 0), ropcie_ivshmem_irq, 0,
			  "ropcie-ivshmem", iv);
	if (ret)
		goto err_vectors;
	/* A doorbell is an MSI-X write by the device: it must master. */
	pci_set_master(pdev);
	pci_set_drvdata(pdev, iv);
	queue_delayed_work(system_wq, &iv->claim_work, 0);
	dev_info(&pdev->dev, "ivshmem link: position %u, %llu MiB shared\n",
		 iv->position, iv->shm_size >> 20);
	return 0;

err_vectors:
	pci_free_irq_vectors(pdev);
err_unmap_shm:
	memunmap(iv->shm);
err_unmap_regs:
	pci_iounmap(pdev, iv->regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(iv);
	return ret;
}

static void ropcie_ivshmem_remove(struct pci_dev *pdev)
{
	struct ropcie_ivshmem *iv = pci_get_drvdata(pdev);

	cancel_delayed_work_sync(&iv->claim_work);
	free_irq(pci_irq_vector(pdev, 0), iv);
	ropcie_ivshmem_stop_link(iv);
	/* Free the port for this host's next incarnation, or another. */
	if (iv->port >= 0)
		cmpxchg64(&iv->ports->owner[iv->port], iv->token, 0);
	pci_free_irq_vectors(pdev);
	memunmap(iv->shm);
	pci_iounmap(pdev, iv->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	kfree(iv);
}

static const struct pci_device_id ropcie_ivshmem_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, 0x1110) },
	{}
};
MODULE_DEVICE_TABLE(pci, ropcie_ivshmem_ids);

struct pci_driver ropcie_ivshmem_driver = {
	.name = "ropcie_ivshmem",
	.id_table = ropcie_ivshmem_ids,
	.probe = ropcie_ivshmem_probe,
	.remove = ropcie_ivshmem_remove,
};
