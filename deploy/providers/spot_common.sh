# deploy/providers/spot_common.sh: shared by the cloud spot providers' launch.sh (aws-spot,
# gcp-spot), sourced first with the launch template's arguments (NAME TYPE HEAD TOKEN_FILE SLOTS):
# it sets -eu and reads them into name, type, head, token_file and slots; TOKEN is the instance's
# one-use credential (read from TOKEN_FILE), and BOOT a scratch file for the boot script that
# carries it, removed on exit.
set -eu
name=$1 type=$2 head=$3 token_file=$4 slots=$5
TOKEN=$(cat "$token_file")
BOOT=$(mktemp)
trap 'rm -f "$BOOT"' EXIT

# node_type_value PREFIX TYPE WHAT: prints ${PREFIX}<TYPE> ('-' in TYPE becomes '_'), the
# provider's WHAT for node type TYPE; exits 2 saying which variable to set when it is empty
# (`x=$(node_type_value ...)` ends the script under set -e).
node_type_value() {
    var=$1$(printf %s "$2" | tr -c 'A-Za-z0-9\n' _)
    value=$(eval "printf %s \"\${$var:-}\"")
    [ -n "$value" ] || { echo "set $var to the $3 of node type $2" >&2; exit 2; }
    printf %s "$value"
}
