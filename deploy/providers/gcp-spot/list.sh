#!/bin/sh
# list.sh: the names of this cluster's VMs that exist (a preempted spot VM is deleted).
#   list: "deploy/providers/gcp-spot/list.sh"
set -eu
gcloud compute instances list --filter "labels.hv-cluster=${HV_CLUSTER:-hv}" \
    --zones "$HV_GCP_ZONE" --format 'value(name)'
