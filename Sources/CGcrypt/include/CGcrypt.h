#ifndef TOKENCTL_CGCRYPT_H
#define TOKENCTL_CGCRYPT_H

// libgcrypt, for DPoP's ES256 key and proofs (RFC 9449). Why not OpenSSL's libcrypto, which
// tokenctl uses for ID-token signatures and PKCE: a DPoP `token` signs a proof on every call,
// right after a Secret Service read, and libsecret has already loaded and initialized libgcrypt
// by then (its transport encryption uses it), while loading and initializing OpenSSL 3 (dlopen,
// relocations, providers, config) cost ~3 ms of the ~16 ms of such a call (perf stat -r 60,
// task-clock 7.6 ms for a bearer `token` against 10.7 ms with the proof signed by libcrypto).
//
// Loaded with dlopen on first use like the others (CLazyLoader): the dlopen of a library the
// process already has is a lookup. If nothing has initialized libgcrypt yet (no Secret Service
// call before: a rotation served from the journal), tokenctl does the minimal initialization
// libgcrypt requires (version check, no secure memory, initialization finished); libsecret
// then finds it initialized and uses it as it is. Only the header is used at build time
// (Debian: libgcrypt20-dev); the bodies are in gcrypt.c.
//
// The variadic functions (gcry_control, gcry_sexp_build) cannot be called from Swift: the
// functions below wrap each use, so the Swift side (JOSE/Crypto_gcrypt.swift) calls only
// fixed-argument functions.
#include <gcrypt.h>
#include <stddef.h>
#include "CLazyLoader.h"

#define TOKENCTL_GCRYPT_SONAME "libgcrypt.so.20"

#define TOKENCTL_GCRYPT_FUNCTIONS(X) \
    X(gcry_check_version) \
    X(gcry_control) \
    X(gcry_strerror) \
    X(gcry_sexp_build) \
    X(gcry_sexp_release) \
    X(gcry_sexp_find_token) \
    X(gcry_sexp_nth_data) \
    X(gcry_pk_genkey) \
    X(gcry_pk_sign) \
    X(gcry_pk_testkey) \
    X(gcry_md_hash_buffer)

// struct tokenctl_gcrypt_api, tokenctl_gcrypt_open and tokenctl_gcrypt_load (CLazyLoader.h);
// the minimal initialization above runs once, right after the load.
TOKENCTL_LAZY_DECLARE(tokenctl_gcrypt, TOKENCTL_GCRYPT_FUNCTIONS)

// tokenctl's libgcrypt calls (call tokenctl_gcrypt_load first), one at a time: libgcrypt's
// first ECDSA operations, run from several threads at once, race in its lazy internal setup and
// leak a few objects (8 threads each generating a key and signing: 7 runs in 120 leaked under
// LeakSanitizer, found by `Scripts/test --sanitize address`; serialized, none in 120). Signing
// takes about a millisecond and happens a few times per process at most: the lock (gcrypt.c's
// one mutex) costs nothing.

// The text of a libgcrypt error (a static string).
const char *tokenctl_gcry_error_text(gcry_error_t error);

// SHA-256 of `length` bytes into `digest` (32 bytes).
void tokenctl_gcry_sha256(const void *bytes, size_t length, unsigned char *digest);

// A new P-256 key pair: `d` (32 bytes) and `q` (65 bytes, 0x04 x y).
gcry_error_t tokenctl_gcry_p256_generate(unsigned char *d, unsigned char *q);

// Whether `q` is the public point of `d` (gcry_pk_testkey): 0, or the error.
gcry_error_t tokenctl_gcry_p256_check(const unsigned char *d, const unsigned char *q);

// An ES256 signature (raw r || s, 64 bytes into `signature`) of the SHA-256 `digest` (32
// bytes), with RFC 6979 deterministic nonces (no random number generator needed).
gcry_error_t tokenctl_gcry_es256_sign(const unsigned char *d, const unsigned char *q, const unsigned char *digest, unsigned char *signature);

#endif
