// The bodies of CGcrypt.h: libgcrypt's table, its one loader state, and tokenctl's calls
// through it, each under the one mutex (CGcrypt.h says why).
#include "CGcrypt.h"
#include <string.h>

static void tokenctl_gcrypt_initialize(struct tokenctl_gcrypt_api *api);

TOKENCTL_LAZY_DEFINE(tokenctl_gcrypt, TOKENCTL_GCRYPT_FUNCTIONS, TOKENCTL_GCRYPT_SONAME, tokenctl_gcrypt_initialize(&api))
#define tokenctl_gcrypt (tokenctl_gcrypt_state.api)

static void tokenctl_gcrypt_initialize(struct tokenctl_gcrypt_api *api) {
    if (!api->gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        api->gcry_check_version(NULL);
        api->gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
        api->gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    }
}

static pthread_mutex_t tokenctl_gcrypt_mutex = PTHREAD_MUTEX_INITIALIZER;

const char *tokenctl_gcry_error_text(gcry_error_t error) { return tokenctl_gcrypt.gcry_strerror(error); }

void tokenctl_gcry_sha256(const void *bytes, size_t length, unsigned char *digest) {
    pthread_mutex_lock(&tokenctl_gcrypt_mutex);
    tokenctl_gcrypt.gcry_md_hash_buffer(GCRY_MD_SHA256, digest, bytes, length);
    pthread_mutex_unlock(&tokenctl_gcrypt_mutex);
}

// Copy the value of token `name` of `list` into `out` (`size` bytes, left-padded with zeros;
// a leading zero byte of an MPI's encoding is dropped). 0, or -1 when missing or too long.
static int fixed(gcry_sexp_t list, const char *name, unsigned char *out, size_t size) {
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
static gcry_error_t p256_private_key(gcry_sexp_t *key, const unsigned char *d, const unsigned char *q) {
    return tokenctl_gcrypt.gcry_sexp_build(key, NULL, "(private-key(ecc(curve \"NIST P-256\")(q %b)(d %b)))", 65, q, 32, d);
}

static gcry_error_t p256_generate_unlocked(unsigned char *d, unsigned char *q) {
    gcry_sexp_t parameters = NULL, pair = NULL;
    gcry_error_t error = tokenctl_gcrypt.gcry_sexp_build(&parameters, NULL, "(genkey(ecc(curve \"NIST P-256\")))");
    if (error) return error;
    error = tokenctl_gcrypt.gcry_pk_genkey(&pair, parameters);
    tokenctl_gcrypt.gcry_sexp_release(parameters);
    if (error) return error;
    gcry_sexp_t secret = tokenctl_gcrypt.gcry_sexp_find_token(pair, "private-key", 0);
    tokenctl_gcrypt.gcry_sexp_release(pair);
    if (secret == NULL) return GPG_ERR_NO_SECKEY;
    int ok = fixed(secret, "d", d, 32) == 0 && fixed(secret, "q", q, 65) == 0 && q[0] == 4;
    tokenctl_gcrypt.gcry_sexp_release(secret);
    return ok ? 0 : GPG_ERR_BAD_SECKEY;
}

static gcry_error_t p256_check_unlocked(const unsigned char *d, const unsigned char *q) {
    gcry_sexp_t key = NULL;
    gcry_error_t error = p256_private_key(&key, d, q);
    if (error) return error;
    error = tokenctl_gcrypt.gcry_pk_testkey(key);
    tokenctl_gcrypt.gcry_sexp_release(key);
    return error;
}

static gcry_error_t es256_sign_unlocked(const unsigned char *d, const unsigned char *q, const unsigned char *digest, unsigned char *signature) {
    gcry_sexp_t key = NULL, data = NULL, result = NULL;
    gcry_error_t error = p256_private_key(&key, d, q);
    if (error) return error;
    error = tokenctl_gcrypt.gcry_sexp_build(&data, NULL, "(data(flags rfc6979)(hash sha256 %b))", 32, digest);
    if (!error) error = tokenctl_gcrypt.gcry_pk_sign(&result, data, key);
    if (!error && (fixed(result, "r", signature, 32) != 0 || fixed(result, "s", signature + 32, 32) != 0)) {
        error = GPG_ERR_BAD_SIGNATURE;
    }
    tokenctl_gcrypt.gcry_sexp_release(result);
    tokenctl_gcrypt.gcry_sexp_release(data);
    tokenctl_gcrypt.gcry_sexp_release(key);
    return error;
}

gcry_error_t tokenctl_gcry_p256_generate(unsigned char *d, unsigned char *q) {
    pthread_mutex_lock(&tokenctl_gcrypt_mutex);
    gcry_error_t error = p256_generate_unlocked(d, q);
    pthread_mutex_unlock(&tokenctl_gcrypt_mutex);
    return error;
}

gcry_error_t tokenctl_gcry_p256_check(const unsigned char *d, const unsigned char *q) {
    pthread_mutex_lock(&tokenctl_gcrypt_mutex);
    gcry_error_t error = p256_check_unlocked(d, q);
    pthread_mutex_unlock(&tokenctl_gcrypt_mutex);
    return error;
}

gcry_error_t tokenctl_gcry_es256_sign(const unsigned char *d, const unsigned char *q, const unsigned char *digest, unsigned char *signature) {
    pthread_mutex_lock(&tokenctl_gcrypt_mutex);
    gcry_error_t error = es256_sign_unlocked(d, q, digest, signature);
    pthread_mutex_unlock(&tokenctl_gcrypt_mutex);
    return error;
}
