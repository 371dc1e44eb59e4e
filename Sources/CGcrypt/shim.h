#ifndef TOKENCTL_CGCRYPT_SHIM_H
#define TOKENCTL_CGCRYPT_SHIM_H

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
// then finds it initialized and uses it as it is.
//
// The variadic functions (gcry_control, gcry_sexp_build) cannot be called from Swift: the
// inline functions below wrap each use, so the Swift side (JOSE/Crypto_gcrypt.swift) calls only
// fixed-argument functions.
#include <gcrypt.h>
#include <stddef.h>
#include <string.h>
#include "../CLazyLoader/lazy_loader.h"

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

struct tokenctl_gcrypt_api;
static inline void tokenctl_gcrypt_initialize(struct tokenctl_gcrypt_api *api);

TOKENCTL_LAZY_LIBRARY(tokenctl_gcrypt, TOKENCTL_GCRYPT_FUNCTIONS, TOKENCTL_GCRYPT_SONAME, tokenctl_gcrypt_initialize(&api))
#define tokenctl_gcrypt (tokenctl_gcrypt_state()->api)

static inline void tokenctl_gcrypt_initialize(struct tokenctl_gcrypt_api *api) {
    if (!api->gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        api->gcry_check_version(NULL);
        api->gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
        api->gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    }
}

// tokenctl's libgcrypt calls, one at a time: libgcrypt's first ECDSA operations, run from
// several threads at once, race in its lazy internal setup and leak a few objects (8 threads
// each generating a key and signing: 7 runs in 120 leaked under LeakSanitizer, found by
// `Scripts/test --sanitize address`; serialized, none in 120). Signing
// takes about a millisecond and happens a few times per process at most: the lock costs
// nothing. (The process's one mutex, in a weak function, as the loader's state.)
__attribute__((weak, noinline)) pthread_mutex_t *tokenctl_gcrypt_mutex(void) {
    static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    return &mutex;
}

// The text of a libgcrypt error (a static string).
static inline const char *tokenctl_gcry_error_text(gcry_error_t error) { return tokenctl_gcrypt.gcry_strerror(error); }

// SHA-256 of `length` bytes into `digest` (32 bytes).
static inline void tokenctl_gcry_sha256(const void *bytes, size_t length, unsigned char *digest) {
    pthread_mutex_lock(tokenctl_gcrypt_mutex());
    tokenctl_gcrypt.gcry_md_hash_buffer(GCRY_MD_SHA256, digest, bytes, length);
    pthread_mutex_unlock(tokenctl_gcrypt_mutex());
}

// Copy the value of token `name` of `list` into `out` (`size` bytes, left-padded with zeros;
// a leading zero byte of an MPI's encoding is dropped). 0, or -1 when missing or too long.
static inline int tokenctl_gcry_fixed(gcry_sexp_t list, const char *name, unsigned char *out, size_t size) {
    gcry_sexp_t item = tokenctl_gcrypt.gcry_sexp_find_token(list, name, 0);
    if (item == NULL) return -1;
    size_t length = 0;
    const char *data = tokenctl_gcrypt.gcry_sexp_nth_data(item, 1, &length);
    int result = -1;
    if (data != NULL) {
        while (length > size && data[0] == 0) { data++; length--; }
        if (length <= size) {
            memset(out, 0, size - length);
            memcpy(out + (size - length), data, length);
            result = 0;
        }
    }
    tokenctl_gcrypt.gcry_sexp_release(item);
    return result;
}

// The private key of a P-256 pair as an S-expression (`q`: 65 bytes, 0x04 x y; `d`: 32 bytes).
static inline gcry_error_t tokenctl_gcry_p256_private_key(gcry_sexp_t *key, const unsigned char *d, const unsigned char *q) {
    return tokenctl_gcrypt.gcry_sexp_build(key, NULL, "(private-key(ecc(curve \"NIST P-256\")(q %b)(d %b)))", 65, q, 32, d);
}

// A new P-256 key pair: `d` (32 bytes) and `q` (65 bytes).
static inline gcry_error_t tokenctl_gcry_p256_generate_unlocked(unsigned char *d, unsigned char *q) {
    gcry_sexp_t parameters = NULL, pair = NULL;
    gcry_error_t error = tokenctl_gcrypt.gcry_sexp_build(&parameters, NULL, "(genkey(ecc(curve \"NIST P-256\")))");
    if (error) return error;
    error = tokenctl_gcrypt.gcry_pk_genkey(&pair, parameters);
    tokenctl_gcrypt.gcry_sexp_release(parameters);
    if (error) return error;
    gcry_sexp_t secret = tokenctl_gcrypt.gcry_sexp_find_token(pair, "private-key", 0);
    tokenctl_gcrypt.gcry_sexp_release(pair);
    if (secret == NULL) return GPG_ERR_NO_SECKEY;
    int ok = tokenctl_gcry_fixed(secret, "d", d, 32) == 0 && tokenctl_gcry_fixed(secret, "q", q, 65) == 0 && q[0] == 4;
    tokenctl_gcrypt.gcry_sexp_release(secret);
    return ok ? 0 : GPG_ERR_BAD_SECKEY;
}

// Whether `q` is the public point of `d` (gcry_pk_testkey): 0, or the error.
static inline gcry_error_t tokenctl_gcry_p256_check_unlocked(const unsigned char *d, const unsigned char *q) {
    gcry_sexp_t key = NULL;
    gcry_error_t error = tokenctl_gcry_p256_private_key(&key, d, q);
    if (error) return error;
    error = tokenctl_gcrypt.gcry_pk_testkey(key);
    tokenctl_gcrypt.gcry_sexp_release(key);
    return error;
}

// An ES256 signature (raw r || s, 64 bytes into `signature`) of the SHA-256 `digest` (32
// bytes), with RFC 6979 deterministic nonces (no random number generator needed).
static inline gcry_error_t tokenctl_gcry_es256_sign_unlocked(const unsigned char *d, const unsigned char *q, const unsigned char *digest, unsigned char *signature) {
    gcry_sexp_t key = NULL, data = NULL, result = NULL;
    gcry_error_t error = tokenctl_gcry_p256_private_key(&key, d, q);
    if (error) return error;
    error = tokenctl_gcrypt.gcry_sexp_build(&data, NULL, "(data(flags rfc6979)(hash sha256 %b))", 32, digest);
    if (!error) error = tokenctl_gcrypt.gcry_pk_sign(&result, data, key);
    if (!error && (tokenctl_gcry_fixed(result, "r", signature, 32) != 0 || tokenctl_gcry_fixed(result, "s", signature + 32, 32) != 0)) {
        error = GPG_ERR_BAD_SIGNATURE;
    }
    tokenctl_gcrypt.gcry_sexp_release(result);
    tokenctl_gcrypt.gcry_sexp_release(data);
    tokenctl_gcrypt.gcry_sexp_release(key);
    return error;
}

// The three above, under the mutex: what the Swift side calls.
static inline gcry_error_t tokenctl_gcry_p256_generate(unsigned char *d, unsigned char *q) {
    pthread_mutex_lock(tokenctl_gcrypt_mutex());
    gcry_error_t error = tokenctl_gcry_p256_generate_unlocked(d, q);
    pthread_mutex_unlock(tokenctl_gcrypt_mutex());
    return error;
}
static inline gcry_error_t tokenctl_gcry_p256_check(const unsigned char *d, const unsigned char *q) {
    pthread_mutex_lock(tokenctl_gcrypt_mutex());
    gcry_error_t error = tokenctl_gcry_p256_check_unlocked(d, q);
    pthread_mutex_unlock(tokenctl_gcrypt_mutex());
    return error;
}
static inline gcry_error_t tokenctl_gcry_es256_sign(const unsigned char *d, const unsigned char *q, const unsigned char *digest, unsigned char *signature) {
    pthread_mutex_lock(tokenctl_gcrypt_mutex());
    gcry_error_t error = tokenctl_gcry_es256_sign_unlocked(d, q, digest, signature);
    pthread_mutex_unlock(tokenctl_gcrypt_mutex());
    return error;
}

#endif
