#!/bin/sh
# launch.sh NAME TYPE HEAD TOKEN_FILE SLOTS: one EC2 spot instance whose boot script installs hv,
# joins the head as NAME, and turns the spot instance-action notice into `hvagent drain`.
# Prints the EC2 instance id (the handle).
#   launch: "deploy/providers/aws-spot/launch.sh {name} {type} {head} {token_file} {slots}"
# Environment: HV_AWS_AMI (an image with the hv runtime libraries, e.g. Debian 12), HV_AWS_SUBNET,
# HV_AWS_SG (security group that lets the node reach the head's port and its peers' data
# ports), HV_AWS_INSTANCE_TYPE_<TYPE> (e.g. HV_AWS_INSTANCE_TYPE_spot_a=g5.xlarge; '-' in the
# type becomes '_'), HV_BUNDLE_URL (a tarball of build/bin that the instance can fetch),
# HV_CLUSTER (tag value, default hv).
# The credential travels in the user data: it admits this one instance once, and the boot script
# moves it to a 0600 file and does not keep it in the environment.
. "$(dirname "$0")/../spot_common.sh" # set -eu; name type head token_file slots; TOKEN, BOOT
itype=$(node_type_value HV_AWS_INSTANCE_TYPE_ "$type" "EC2 instance type")
cat >"$BOOT" <<USERDATA
#!/bin/sh
set -eu
mkdir -p /opt/hv /var/lib/hv && chmod 700 /var/lib/hv
curl -fsSL '$HV_BUNDLE_URL' | tar -xz -C /opt/hv
umask 077
printf '%s\n' '$TOKEN' >/var/lib/hv/enroll.token
# the spot notice (IMDSv2): two minutes before the reclaim, drain the node
cat >/usr/local/sbin/hv-spot-watch <<'WATCH'
#!/bin/sh
while sleep 5; do
  t=\$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) || continue
  if curl -fsS -H "X-aws-ec2-metadata-token: \$t" http://169.254.169.254/latest/meta-data/spot/instance-action >/dev/null 2>&1; then
    /opt/hv/hvagent drain --work-dir /var/lib/hv/agent; exit 0
  fi
done
WATCH
chmod 755 /usr/local/sbin/hv-spot-watch
nohup /usr/local/sbin/hv-spot-watch >/var/log/hv-spot-watch.log 2>&1 &
exec /opt/hv/hvagent join '$head' --name '$name' --slots '$slots' --preemptible \
  --token-file /var/lib/hv/enroll.token --work-dir /var/lib/hv/agent --drain-deadline 110 \
  >>/var/log/hvagent.log 2>&1
USERDATA
aws ec2 run-instances --count 1 --image-id "$HV_AWS_AMI" --instance-type "$itype" \
    --subnet-id "$HV_AWS_SUBNET" --security-group-ids "$HV_AWS_SG" \
    --instance-market-options 'MarketType=spot,SpotOptions={SpotInstanceType=one-time,InstanceInterruptionBehavior=terminate}' \
    --metadata-options 'HttpTokens=required' \
    --tag-specifications "ResourceType=instance,Tags=[{Key=Name,Value=$name},{Key=hv-cluster,Value=${HV_CLUSTER:-hv}}]" \
    --user-data "file://$BOOT" --query 'Instances[0].InstanceId' --output text
