#!/bin/sh
# The tests' certificates (EC P-256), made once and kept (test keys, trusted by
# nothing but the tests): a CA, a server certificate it signed for localhost and
# 127.0.0.1 (valid to 2126), one for example.test (a second name, for SNI), a key
# that matches no certificate, and a certificate that expired in 2021. Needs
# openssl and faketime.
#     (cd tests/tls && sh make.sh)
set -eu
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.pem -days 36500 -subj "/CN=percore test CA" 2>/dev/null
leaf() { # NAME SAN DAYS [faketime date]
  openssl req $ec -keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
  printf "subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n" "$2" > "$1.ext"
  ${4:+faketime "$4"} openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out "$1.pem" -days "$3" -extfile "$1.ext" 2>/dev/null
  rm "$1.csr" "$1.ext"
}
leaf localhost "DNS:localhost,IP:127.0.0.1" 36500
leaf example.test "DNS:example.test,DNS:www.example.test" 36500
leaf expired "DNS:localhost,IP:127.0.0.1" 30 "2021-01-01 00:00:00"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.key 2>/dev/null
rm -f ca.srl
