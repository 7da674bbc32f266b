#!/bin/sh
# terminate.sh NAME: deletes the pod (SIGTERM: the agent drains) and its Secret.
#   terminate: "deploy/providers/kubernetes/terminate.sh {name}"
set -eu
ns=${HV_K8S_NAMESPACE:-hv}
kubectl -n "$ns" delete pod "$1" --ignore-not-found --wait=false
kubectl -n "$ns" delete secret "$1-enroll" --ignore-not-found
