#!/bin/sh
# launch.sh NAME HEAD TOKEN_FILE SLOTS: one pod running hvagent, its credential in a Secret of its
# own. Prints NAME (the handle).
#   launch: "deploy/providers/kubernetes/launch.sh {name} {head} {token_file} {slots}"
# Environment: HV_K8S_IMAGE (the agent image of deploy/container/Containerfile.agent, hvagent in
# /usr/bin), HV_K8S_NAMESPACE (default hv),
# HV_K8S_GPUS (nvidia.com/gpu per pod, default 0), HV_CLUSTER (label, default hv).
# Deleting the pod (or a node drain) sends SIGTERM: the agent drains within the grace period.
set -eu
name=$1 head=$2 token_file=$3 slots=$4
ns=${HV_K8S_NAMESPACE:-hv}
kubectl -n "$ns" create secret generic "$name-enroll" --from-file "token=$token_file" \
    --dry-run=client -o yaml | kubectl -n "$ns" apply -f - >/dev/null
kubectl -n "$ns" apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {hv-cluster: "${HV_CLUSTER:-hv}"}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 120
  securityContext: {runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}
  containers:
  - name: hvagent
    image: $HV_K8S_IMAGE
    command: ["/usr/bin/hvagent", "join", "$head", "--name", "$name", "--slots", "$slots",
              "--token-file", "/var/run/hv/token", "--work-dir", "/var/lib/hvagent",
              "--drain-deadline", "110"]
    lifecycle:
      preStop:
        exec: {command: ["/usr/bin/hvagent", "drain", "--work-dir", "/var/lib/hvagent"]}
    resources:
      limits: {nvidia.com/gpu: "${HV_K8S_GPUS:-0}"}
    volumeMounts:
    - {name: enroll, mountPath: /var/run/hv, readOnly: true}
  volumes:
  - name: enroll
    secret: {secretName: $name-enroll, defaultMode: 0440}
POD
echo "$name"
