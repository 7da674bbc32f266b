#!/bin/sh
# list.sh: the instance ids of this cluster's instances that are pending or running.
#   list: "deploy/providers/aws-spot/list.sh"
set -eu
aws ec2 describe-instances \
    --filters "Name=tag:hv-cluster,Values=${HV_CLUSTER:-hv}" "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].InstanceId' --output text | tr '\t' '\n' | sed '/^$/d'
