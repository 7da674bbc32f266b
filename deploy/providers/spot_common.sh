# deploy/providers/spot_common.sh: shared by the cloud spot providers' launch.sh (aws-spot,
# gcp-spot), sourced after `set -eu` and their arguments (name type head token_file slots).
#
# node_type_value PREFIX TYPE WHAT: prints ${PREFIX}<TYPE> ('-' in TYPE becomes '_'), the
# provider's WHAT for node type TYPE; exits 2 saying which variable to set when it is empty
# (`x=$(node_type_value ...)` ends the script under set -e).
node_type_value() {
    var=$1$(printf %s "$2" | tr -c 'A-Za-z0-9\n' _)
    value=$(eval "printf %s \"\${$var:-}\"")
    [ -n "$value" ] || { echo "set $var to the $3 of node type $2" >&2; exit 2; }
    printf %s "$value"
}

# boot_file TOKEN_FILE: TOKEN, the instance's one-use credential (read from TOKEN_FILE), and BOOT,
# a scratch file for the boot script that carries it, removed on exit.
boot_file() {
    TOKEN=$(cat "$1")
    BOOT=$(mktemp)
    trap 'rm -f "$BOOT"' EXIT
}
