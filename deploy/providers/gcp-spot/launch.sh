#!/bin/sh
# launch.sh NAME TYPE HEAD TOKEN_FILE SLOTS: one Compute Engine spot VM named NAME that installs
# hv, joins the head and drains on preemption. Prints NAME (the handle).
#   launch: "deploy/providers/gcp-spot/launch.sh {name} {type} {head} {token_file} {slots}"
# Environment: HV_GCP_ZONE, HV_GCP_IMAGE (e.g. debian-12), HV_GCP_MACHINE_<TYPE> (e.g.
# HV_GCP_MACHINE_spot_a=g2-standard-4), HV_BUNDLE_URL, HV_CLUSTER (label, default hv).
# Preemption: Compute Engine gives 30 s and shuts the VM down through ACPI; systemd sends the
# agent SIGTERM, which the agent turns into a drain (--drain-deadline 25).
. "$(dirname "$0")/../spot_common.sh" # set -eu; name type head token_file slots; TOKEN, BOOT
mtype=$(node_type_value HV_GCP_MACHINE_ "$type" "machine type")
cat >"$BOOT" <<STARTUP
#!/bin/sh
set -eu
[ -x /opt/hv/hvagent ] || { mkdir -p /opt/hv && curl -fsSL '$HV_BUNDLE_URL' | tar -xz -C /opt/hv; }
mkdir -p /var/lib/hv && chmod 700 /var/lib/hv
umask 077
[ -f /var/lib/hv/enroll.token ] || printf '%s\n' '$TOKEN' >/var/lib/hv/enroll.token
cat >/etc/systemd/system/hvagent.service <<UNIT
[Unit]
Description=hv agent
After=network-online.target
[Service]
ExecStart=/opt/hv/hvagent join $head --name $name --slots $slots --preemptible --token-file /var/lib/hv/enroll.token --work-dir /var/lib/hv/agent --drain-deadline 25
KillSignal=SIGTERM
TimeoutStopSec=28
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now hvagent
STARTUP
gcloud compute instances create "$name" --zone "$HV_GCP_ZONE" --machine-type "$mtype" \
    --image-family "$HV_GCP_IMAGE" --image-project debian-cloud \
    --provisioning-model SPOT --instance-termination-action DELETE \
    --labels "hv-cluster=${HV_CLUSTER:-hv}" \
    --metadata-from-file "startup-script=$BOOT" --format 'value(name)' --quiet
