# Sourced by the tests that run a real Prometheus server against hvhead's /metrics (after
# tests/lib.sh and hv_setup): start_prometheus MPORT starts one scraping 127.0.0.1:MPORT every
# second (its own port in $PPORT, its pid in $PIDS, its data under $TMP/prom); prom_value QUERY
# prints the value of the query's first sample now ("" when there is none); prom_is QUERY V,
# prom_at_least QUERY N (integer part) and prom_between QUERY A B (A < v <= B) test it.
start_prometheus() { # MPORT
    PPORT=$(free_port)
    cat >"$TMP/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: hv
    static_configs:
      - targets: ['127.0.0.1:$1']
YML
    prometheus --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/prom" \
        --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.out" 2>&1 &
    PIDS="$PIDS $!"
}
prom_value() {
    curl -s -G --max-time 2 --data-urlencode "query=$1" "http://127.0.0.1:$PPORT/api/v1/query" |
        /usr/bin/python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null
}
prom_is() { [ "$(prom_value "$1")" = "$2" ]; }
prom_at_least() { v=$(prom_value "$1"); [ -n "$v" ] && [ "${v%.*}" -ge "$2" ]; }
prom_between() { v=$(prom_value "$1"); [ -n "$v" ] && awk -v v="$v" -v a="$2" -v b="$3" 'BEGIN { exit !(v > a && v <= b) }'; }
