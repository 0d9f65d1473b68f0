#!/usr/bin/env bash
# scripts/extender-certs.sh DIR: a local CA, the extender's server certificate (127.0.0.1,
# localhost) and one client certificate per client of the listener (mutual TLS), each with a
# subject of its own so that the listener can tell them apart, with the openssl CLI.
# Made once: existing files are kept. Keys are mode 0600.
#   DIR/ca.crt ca.key            the CA (signs them all; the extender trusts clients it signed)
#   DIR/server.crt server.key    SCHEDWEB_EXTENDER_TLS_CERT / _TLS_KEY
#   DIR/client.crt client.key    kube-scheduler (CN=kube-scheduler): extender tlsConfig certFile / keyFile
#   DIR/webhook.crt webhook.key  kube-apiserver calling the queue webhook (CN=kube-apiserver)
#   DIR/probe.crt probe.key      the in-pod health probe and metrics proxy (CN=schedweb-probe)
set -euo pipefail
dir=${1:?usage: extender-certs.sh DIR}
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
umask 077
days=825
if [[ ! -s ca.crt || ! -s ca.key ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
    -days "$days" -subj "/CN=schedweb local extender CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  rm -f server.crt client.crt webhook.crt probe.crt   # signed by an older CA
fi
issue() {  # issue NAME SUBJECT EXTENSIONS
  [[ -s $1.crt && -s $1.key ]] && return 0
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "$2" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
    -days "$days" -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
issue server "/CN=schedweb-extender" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
issue client "/CN=kube-scheduler" "$client_ext"
issue webhook "/CN=kube-apiserver" "$client_ext"
issue probe "/CN=schedweb-probe" "$client_ext"
chmod 600 ./*.key
chmod 644 ./*.crt
