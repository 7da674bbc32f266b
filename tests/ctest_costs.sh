#!/bin/sh
# tests/ctest_costs.sh BUILD BUILD_ASAN: rewrites tests/ctest_costs.txt (its comment lines kept)
# from the cost data that ctest wrote in the two build directories of a CI run
# (BUILD/Testing/Temporary/CTestCostData.txt: "name runs seconds" lines up to "---"), the longest
# first. deploy/test.sh seeds ctest's cost data from the file in a clean clone.
set -eu
cd "$(dirname "$0")"
[ $# -eq 2 ] || { echo "usage: tests/ctest_costs.sh BUILD BUILD_ASAN" >&2; exit 64; }
costs() { # DIR: "name seconds" per test
    f=$1/Testing/Temporary/CTestCostData.txt
    [ -s "$f" ] || { echo "ctest_costs.sh: no cost data in $f" >&2; exit 1; }
    awk '$0 == "---" { exit } NF == 3 { print $1, $3 }' "$f"
}
costs "$1" | sort >ctest_costs.plain.tmp
costs "$2" | sort >ctest_costs.asan.tmp
{
    grep '^#' ctest_costs.txt
    join -a 1 -a 2 -e - -o 0,1.2,2.2 ctest_costs.plain.tmp ctest_costs.asan.tmp |
        awk '{ for (i = 2; i <= 3; i++) if ($i != "-") $i = sprintf("%.1f", $i); print }' |
        sort -k2,2gr -k3,3gr
} >ctest_costs.txt.tmp
mv ctest_costs.txt.tmp ctest_costs.txt
rm -f ctest_costs.plain.tmp ctest_costs.asan.tmp
