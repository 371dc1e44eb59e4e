# shellcheck shell=bash
# Scripts/lib/packages.sh: what tokenctl needs from Debian to build, and a check for Swift.

# shellcheck disable=SC2034 # used by callers
TOKENCTL_BUILD_PACKAGES=(pkg-config libsecret-1-dev libcurl4-openssl-dev libssl-dev libgcrypt20-dev libqrencode-dev)
# keyctl(1): the end-to-end tests and Scripts/bench look at the kernel keyring hot cache from
# outside. tokenctl itself needs no keyutils library: it makes the two system calls directly.
# python3-cryptography: the independent verifier of DPoP proofs (DPoPTests).
# groff-base: DocumentationAgreementTests renders every manual page with warnings on.
# squid-openssl, nginx: the proxies and the private-CA issuer of the network tests
# (Scripts/lib/squid.sh, TK_SQUID_PACKAGES; squid-openssl conflicts with squid).
TOKENCTL_TEST_PACKAGES=(keyutils python3-cryptography groff-base squid-openssl nginx)

# Swift itself is not a Debian package: say so clearly instead of failing later.
tk_require_swift() {
  if ! command -v swift >/dev/null 2>&1; then
    printf 'tokenctl: a Swift 6 toolchain is required (swift not found on PATH)\n' >&2
    return 1
  fi
}
