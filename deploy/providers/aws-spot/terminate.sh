#!/bin/sh
# terminate.sh HANDLE: terminates the EC2 instance (an instance already gone is not an error).
#   terminate: "deploy/providers/aws-spot/terminate.sh {handle}"
set -eu
out=$(aws ec2 terminate-instances --instance-ids "$1" 2>&1) && exit 0
case $out in *InvalidInstanceID.NotFound*) exit 0 ;; esac
echo "$out" >&2
exit 1
