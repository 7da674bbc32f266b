#!/bin/sh
# list.sh: the names of this cluster's pods that are pending or running.
#   list: "deploy/providers/kubernetes/list.sh"
set -eu
kubectl -n "${HV_K8S_NAMESPACE:-hv}" get pods -l "hv-cluster=${HV_CLUSTER:-hv}" \
    --field-selector 'status.phase!=Succeeded,status.phase!=Failed' -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}'
