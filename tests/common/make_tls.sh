#!/bin/bash
# Test PKI in DIR: a CA (ca.pem), a certificate it signed for 127.0.0.1
# (node.pem, node.key), and a second CA with a certificate of its own
# (rogue.pem, rogue.key) that the first CA does not trust. RSA 2048, 1 day.
set -euo pipefail
dir=${1:?usage: make_tls.sh DIR}
mkdir -p "$dir" && cd "$dir"
gen() {  # NAME CA_NAME(empty: self-signed CA)
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null
  if [ -z "$2" ]; then
    openssl x509 -req -in "$1.csr" -signkey "$1.key" -days 1 -out "$1.pem" \
      -extfile <(printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign') 2>/dev/null
  else
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 1 \
      -out "$1.pem" -extfile <(printf 'subjectAltName=IP:127.0.0.1') 2>/dev/null
  fi
}
gen ca ""
gen node ca
gen rogueca ""
gen rogue rogueca
