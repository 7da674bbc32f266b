#!/bin/sh
# tests/make_certs.sh DIR: makes a throwaway PKI for hv's TLS tests with the openssl command.
#   ca.pem/ca.key       a CA                      other-ca.pem   an unrelated CA
#   server.pem/.key     signed by ca, SAN IP:127.0.0.1, DNS:localhost (plus $HV_CERT_EXTRA_SAN)
#   client.pem/.key     signed by ca (mTLS: an agent's certificate)
#   wrongname.pem/.key  signed by ca, SAN DNS:elsewhere.example only
#   other.key           a key that matches none of the certificates
# Keys are 2048-bit RSA (fast to make), certificates valid for 2 days. Files are mode 0600.
set -eu
d=$1
mkdir -p "$d"
umask 077
cd "$d"
q() { "$@" >/dev/null 2>&1 || { echo "make_certs: failed: $*" >&2; exit 1; }; }
ca() { # NAME CN
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" -days 2 \
        -subj "/CN=$2" -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() { # NAME CN SAN EKU
    q openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2"
    printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$3" "$4" >"$1.ext"
    q openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
        -days 2 -extfile "$1.ext"
    rm -f "$1.csr" "$1.ext"
}
ca ca "hv test CA"
ca other-ca "some other CA"
leaf server "hv head" "IP:127.0.0.1,DNS:localhost${HV_CERT_EXTRA_SAN:+,$HV_CERT_EXTRA_SAN}" serverAuth
leaf client "node-a" "DNS:node-a" clientAuth
leaf wrongname "elsewhere" "DNS:elsewhere.example" serverAuth
q openssl genrsa -out other.key 2048
