#!/bin/sh
# terminate.sh NAME: deletes the VM (one already gone is not an error).
#   terminate: "deploy/providers/gcp-spot/terminate.sh {name}"
set -eu
out=$(gcloud compute instances delete "$1" --zone "$HV_GCP_ZONE" --quiet 2>&1) && exit 0
case $out in *"was not found"*) exit 0 ;; esac
echo "$out" >&2
exit 1
