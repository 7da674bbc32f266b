#!/bin/sh
# A real Prometheus (Debian's prometheus package) scrapes a head's /metrics every second while
# an elastic job on A(2) and B(2) loses its rank-0 worker to SIGKILL: a PromQL query through
# Prometheus' HTTP API first sees hv_resets_total{reason="failure"} at 0, then, after the kill,
# at 1 or more (the counter went up). The exposition passes `promtool check metrics`, and the
# job's world size and generation are there, labelled by job only. After the job, the workers'
# own figures (allreduce bytes and seconds, commits and their seconds) are there per job, at
# least the model's size times the steps.
. "$HV_SRC_DIR/tests/lib.sh"
. "$HV_SRC_DIR/tests/elastic.sh"
. "$HV_SRC_DIR/tests/prom.sh"
hv_setup
command -v prometheus >/dev/null && command -v promtool >/dev/null \
    || fail "prometheus and promtool are needed (deploy/install-deps.sh installs Debian's prometheus)"
MPORT=$(free_port)
start_elastic_head "metrics:" "  listen: 127.0.0.1:$MPORT"
assert_grep "$TMP/head.out" "metrics on http://127.0.0.1:$MPORT/metrics" "the head must say where its metrics are"
start_agent node-a 2
start_agent node-b 2

start_prometheus "$MPORT"

Q='hv_resets_total{reason="failure"}'
wait_for 15 prom_is "$Q" 0 || fail "Prometheus did not scrape hv_resets_total=0 from the head ($(prom_value "$Q"))"

submit kill -np 4 --min-np 2 --max-np 4 -- --epochs 2 --kill-at 1:0:0 --step-delay-ms 20
wait_for 30 prom_at_least "$Q" 1 || fail "Prometheus did not see $Q go up after a worker was killed ($(prom_value "$Q"))"
prom_at_least 'hv_rpcs_total{method="hvpb.v1.Rendezvous/JoinRound",code="OK"}' 1 \
    || fail "JoinRound calls should be counted by method and code"

# The reset's round closes a moment after it opened: then it is in the duration histogram.
scrape() { curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.txt"; }
wait_for 20 sh -c "curl -s --max-time 5 http://127.0.0.1:$MPORT/metrics |
    grep -q '^hv_reset_duration_seconds_count{phase=\"round\"} [1-9]'" \
    || fail "the reset's round must be in the duration histogram"
scrape || fail "cannot fetch /metrics"
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.out" 2>&1 \
    || { cat "$TMP/promtool.out" >&2; fail "promtool check metrics refused the exposition"; }
wait_for 10 prom_at_least 'max_over_time(hv_elastic_job_generation{job_id="1"}[5m])' 2 \
    || fail "the job's generation (2 after the reset) must be there, labelled by its id"
assert_no_grep "$TMP/metrics.txt" 'rank=\|worker=' "no series may be labelled by rank or worker"

wait_submit
[ "$SUB_RC" -eq 0 ] || fail "a SIGKILLed worker must not fail the job (rc $SUB_RC)"

# The workers' own figures, summed per job from their reports (the last ones go with Done). The
# survivors alone allreduced the whole model (235146 floats) at every step of both epochs (4000
# samples / global batch 64: at least 62 full steps each), and committed at every step.
MODEL_BYTES=$((235146 * 4))
STEPS=$((2 * 62))
wait_for 10 prom_at_least 'hv_job_allreduce_bytes_total{job_id="1"}' $((MODEL_BYTES * STEPS)) \
    || fail "hv_job_allreduce_bytes_total must be at least the model's size times the steps ($((MODEL_BYTES * STEPS))), got $(prom_value 'hv_job_allreduce_bytes_total{job_id="1"}')"
wait_for 10 prom_at_least 'hv_job_commits_total{job_id="1"}' $STEPS \
    || fail "hv_job_commits_total must count at least one commit per step ($STEPS), got $(prom_value 'hv_job_commits_total{job_id="1"}')"
for q in hv_job_allreduce_seconds_total hv_job_commit_seconds_total; do
    v=$(prom_value "$q{job_id=\"1\"}")
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 3600) }' || fail "$q must be above 0 and plausible (got '$v')"
done
scrape || fail "cannot fetch /metrics"
assert_grep "$TMP/metrics.txt" '^# TYPE hv_job_allreduce_bytes_total counter$'
assert_no_grep "$TMP/metrics.txt" 'rank=\|worker=' "no series may be labelled by rank or worker"
pass "Prometheus saw hv_resets_total{reason=\"failure\"} go from 0 to $(prom_value "$Q") after a kill; the job allreduced $(prom_value 'hv_job_allreduce_bytes_total{job_id="1"}') bytes"
