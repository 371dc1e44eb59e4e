#ifndef TOKENCTL_CCRYPTO_H
#define TOKENCTL_CCRYPTO_H

// OpenSSL's libcrypto is loaded with dlopen the first time tokenctl needs it (PKCE at login,
// ID-token signatures at login and in `status`), not linked: mapping and relocating it (~4200
// symbol relocations, bound at start) cost ~1.7 ms of every engine start, and most engine runs
// (cache misses, refresh, logout, events) never touch it. Only the headers are used at build
// time (Debian: libssl-dev); every call goes through the table that crypto.c loads. The
// constants and macros (OSSL_PKEY_PARAM_*, SN_X9_62_prime256v1, EVP_PKEY_PUBLIC_KEY,
// EVP_PKEY_ED25519, RSA_PKCS1_PSS_PADDING) are compile-time values from the headers and need
// no library.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <stddef.h>
#include <sys/types.h>
#include "CLazyLoader.h"

// The soname of OpenSSL 3's libcrypto (Debian: libssl3, libssl3t64).
#define TOKENCTL_CRYPTO_SONAME "libcrypto.so.3"

// Every libcrypto function tokenctl calls. All are real functions in OpenSSL 3 (none is a macro
// or variadic); OPENSSL_free is a macro for CRYPTO_free(pointer, __FILE__, __LINE__).
#define TOKENCTL_CRYPTO_FUNCTIONS(X) \
    X(ERR_get_error) \
    X(ERR_error_string_n) \
    X(ERR_clear_error) \
    X(CRYPTO_free) \
    X(EVP_Digest) \
    X(EVP_sha256) \
    X(BN_bin2bn) \
    X(BN_free) \
    X(OSSL_PARAM_BLD_new) \
    X(OSSL_PARAM_BLD_free) \
    X(OSSL_PARAM_BLD_push_BN) \
    X(OSSL_PARAM_BLD_push_utf8_string) \
    X(OSSL_PARAM_BLD_push_octet_string) \
    X(OSSL_PARAM_BLD_to_param) \
    X(OSSL_PARAM_free) \
    X(EVP_PKEY_new_raw_public_key) \
    X(EVP_PKEY_CTX_new_from_name) \
    X(EVP_PKEY_CTX_free) \
    X(EVP_PKEY_fromdata_init) \
    X(EVP_PKEY_fromdata) \
    X(EVP_PKEY_free) \
    X(EVP_PKEY_get_bits) \
    X(EVP_MD_CTX_new) \
    X(EVP_MD_CTX_free) \
    X(EVP_DigestVerifyInit) \
    X(EVP_DigestVerify) \
    X(EVP_PKEY_CTX_set_rsa_padding) \
    X(EVP_PKEY_CTX_set_rsa_mgf1_md) \
    X(EVP_PKEY_CTX_set_rsa_pss_saltlen) \
    X(ECDSA_SIG_new) \
    X(ECDSA_SIG_free) \
    X(ECDSA_SIG_set0) \
    X(i2d_ECDSA_SIG)

// struct tokenctl_crypto_api, tokenctl_crypto_open (a test points it at another library) and
// tokenctl_crypto_load (CLazyLoader.h).
TOKENCTL_LAZY_DECLARE(tokenctl_crypto, TOKENCTL_CRYPTO_FUNCTIONS)

// The functions tokenctl calls, through the table (call tokenctl_crypto_load first).
unsigned long tokenctl_err_get_error(void);
void tokenctl_err_error_string_n(unsigned long code, char *buffer, size_t length);
void tokenctl_err_clear_error(void);

// OPENSSL_free is a macro (it passes __FILE__/__LINE__ to CRYPTO_free): not imported by Swift.
void tokenctl_openssl_free(void *pointer);

int tokenctl_evp_digest(const void *data, size_t count, unsigned char *digest, unsigned int *length,
                        const EVP_MD *type, ENGINE *engine);
const EVP_MD *tokenctl_evp_sha256(void);

BIGNUM *tokenctl_bn_bin2bn(const unsigned char *bytes, int length, BIGNUM *result);
void tokenctl_bn_free(BIGNUM *number);

OSSL_PARAM_BLD *tokenctl_ossl_param_bld_new(void);
void tokenctl_ossl_param_bld_free(OSSL_PARAM_BLD *builder);
int tokenctl_ossl_param_bld_push_bn(OSSL_PARAM_BLD *builder, const char *key, const BIGNUM *number);
int tokenctl_ossl_param_bld_push_utf8_string(OSSL_PARAM_BLD *builder, const char *key, const char *value, size_t length);
int tokenctl_ossl_param_bld_push_octet_string(OSSL_PARAM_BLD *builder, const char *key, const void *value, size_t length);
OSSL_PARAM *tokenctl_ossl_param_bld_to_param(OSSL_PARAM_BLD *builder);
void tokenctl_ossl_param_free(OSSL_PARAM *parameters);

EVP_PKEY *tokenctl_evp_pkey_new_raw_public_key(int type, ENGINE *engine, const unsigned char *key, size_t length);
EVP_PKEY_CTX *tokenctl_evp_pkey_ctx_new_from_name(OSSL_LIB_CTX *library, const char *name, const char *properties);
void tokenctl_evp_pkey_ctx_free(EVP_PKEY_CTX *context);
int tokenctl_evp_pkey_fromdata_init(EVP_PKEY_CTX *context);
int tokenctl_evp_pkey_fromdata(EVP_PKEY_CTX *context, EVP_PKEY **key, int selection, OSSL_PARAM *parameters);
void tokenctl_evp_pkey_free(EVP_PKEY *key);
int tokenctl_evp_pkey_get_bits(const EVP_PKEY *key);

EVP_MD_CTX *tokenctl_evp_md_ctx_new(void);
void tokenctl_evp_md_ctx_free(EVP_MD_CTX *context);
int tokenctl_evp_digest_verify_init(EVP_MD_CTX *context, EVP_PKEY_CTX **keyContext, const EVP_MD *type,
                                    ENGINE *engine, EVP_PKEY *key);
int tokenctl_evp_digest_verify(EVP_MD_CTX *context, const unsigned char *signature, size_t signatureLength,
                               const unsigned char *message, size_t messageLength);
int tokenctl_evp_pkey_ctx_set_rsa_padding(EVP_PKEY_CTX *context, int padding);
int tokenctl_evp_pkey_ctx_set_rsa_mgf1_md(EVP_PKEY_CTX *context, const EVP_MD *type);
int tokenctl_evp_pkey_ctx_set_rsa_pss_saltlen(EVP_PKEY_CTX *context, int length);

ECDSA_SIG *tokenctl_ecdsa_sig_new(void);
void tokenctl_ecdsa_sig_free(ECDSA_SIG *signature);
int tokenctl_ecdsa_sig_set0(ECDSA_SIG *signature, BIGNUM *r, BIGNUM *s);
int tokenctl_i2d_ecdsa_sig(const ECDSA_SIG *signature, unsigned char **output);

// getrandom(2) is not part of Swift's Glibc module; it feeds PKCE, state and nonce. It is libc,
// not libcrypto: no loading needed.
ssize_t tokenctl_getrandom(void *buffer, size_t length);

// EVP_PKEY_PUBLIC_KEY is a macro expression (a selection bit mask): not imported by Swift.
int tokenctl_evp_pkey_public_key_selection(void);

// OSSL_PARAM_BLD_push_* keep the key (and a UTF-8 value) by pointer until
// OSSL_PARAM_BLD_to_param: a Swift string argument dies after the call, so the names
// come from C string literals with static storage.
const char *tokenctl_param_rsa_n(void);
const char *tokenctl_param_rsa_e(void);
const char *tokenctl_param_group_name(void);
const char *tokenctl_param_public_key(void);
const char *tokenctl_curve_p256(void);

// EVP_PKEY_ED25519 is a macro aliasing NID_ED25519; RSA_PKCS1_PSS_PADDING is a plain #define
// Swift imports, kept here beside the rest for one place to look.
int tokenctl_evp_pkey_ed25519(void);
int tokenctl_rsa_pkcs1_pss_padding(void);

#endif
