/*
 * cluster: the head's pure decisions across jobs and nodes, beside the job machine (jobm.h, one
 * job) and the placement function (sched.h, where ranks go): how long a preemption notice lets
 * a node's members stay. No I/O, no clock (the time comes in), no allocation. The head's driver
 * (head/driver/driver.c) builds the inputs from its tables, asks, then stores and carries out
 * what comes back. Reentrant.
 */
#ifndef HV_HEAD_CLUSTER_H
#define HV_HEAD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

/* ---- preemption notices ---------------------------------------------------------------------- */

#define HV_CL_DRAIN_MARGIN_MIN_MS 2000u /* the least margin members leave before the node goes */
#define HV_CL_DRAIN_HOLD_MIN_MS 1000u   /* the least stay worth holding members for */

/* A node drains with a notice of notice_ms (0: unknown) at wall time now_ms: until when an
 * elastic job's members there may stay while replacements take their state over (hv_jm_drain's
 * hold_until), or 0: they leave at once. They stay only when replacements can come (can_buy:
 * an autoscaler can add nodes) and the notice leaves more than the margin (a tenth of the
 * notice, at least HV_CL_DRAIN_MARGIN_MIN_MS) plus HV_CL_DRAIN_HOLD_MIN_MS; they leave the
 * margin before the node goes. */
uint64_t hv_cl_drain_hold_until(uint32_t notice_ms, int can_buy, uint64_t now_ms);

#endif
