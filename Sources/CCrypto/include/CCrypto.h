#ifndef TOKENCTL_CCRYPTO_H
#define TOKENCTL_CCRYPTO_H

// EC_KEY_METHOD and the EC_KEY calls are deprecated in OpenSSL 3 but kept: they are the one way
// to give libssl, whose SSL_CTX libcurl makes in the default library context, a key whose
// signatures are made elsewhere (a TPM key in the tpm2 provider's own context; below).
#define OPENSSL_SUPPRESS_DEPRECATED

// OpenSSL's libcrypto is loaded with dlopen the first time tokenctl needs it (PKCE at login,
// ID-token signatures at login and in `status`), not linked: mapping and relocating it (~4200
// symbol relocations, bound at start) cost ~1.7 ms of every engine start, and most engine runs
// (cache misses, refresh, logout, events) never touch it. Only the headers are used at build
// time (Debian: libssl-dev); every call goes through the table that crypto.c loads. The
// constants and macros (OSSL_PKEY_PARAM_*, SN_X9_62_prime256v1, EVP_PKEY_PUBLIC_KEY,
// EVP_PKEY_ED25519, RSA_PKCS1_PSS_PADDING) are compile-time values from the headers and need
// no library.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/x509.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include <openssl/ssl.h>
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
    X(i2d_ECDSA_SIG) \
    X(HMAC) \
    X(CRYPTO_malloc) \
    X(CRYPTO_clear_free) \
    X(OSSL_LIB_CTX_new) \
    X(OSSL_PROVIDER_load) \
    X(EVP_PKEY_keygen_init) \
    X(EVP_PKEY_CTX_set_group_name) \
    X(EVP_PKEY_CTX_set_rsa_keygen_bits) \
    X(EVP_PKEY_generate) \
    X(EVP_PKEY_is_a) \
    X(EVP_PKEY_get_group_name) \
    X(EVP_PKEY_get_bn_param) \
    X(BN_num_bits) \
    X(BN_bn2binpad) \
    X(BN_to_ASN1_INTEGER) \
    X(BIO_new) \
    X(BIO_s_mem) \
    X(BIO_s_secmem) \
    X(BIO_new_mem_buf) \
    X(BIO_ctrl) \
    X(BIO_free) \
    X(PEM_read_bio_PrivateKey_ex) \
    X(PEM_write_bio_PrivateKey) \
    X(PEM_write_bio_PUBKEY) \
    X(i2d_PUBKEY) \
    X(d2i_PUBKEY) \
    X(EVP_DigestSignInit_ex) \
    X(EVP_DigestSign) \
    X(d2i_ECDSA_SIG) \
    X(ECDSA_SIG_get0) \
    X(X509_new) \
    X(X509_free) \
    X(X509_set_version) \
    X(X509_get_serialNumber) \
    X(X509_getm_notBefore) \
    X(X509_getm_notAfter) \
    X(X509_gmtime_adj) \
    X(X509_set_pubkey) \
    X(X509_get_subject_name) \
    X(X509_get_issuer_name) \
    X(X509_set_issuer_name) \
    X(X509_NAME_add_entry_by_txt) \
    X(X509_sign_ctx) \
    X(i2d_X509) \
    X(d2i_X509) \
    X(PEM_read_bio_X509) \
    X(PEM_write_bio_X509) \
    X(X509_NAME_print_ex) \
    X(X509_get0_notBefore) \
    X(X509_get0_notAfter) \
    X(ASN1_TIME_to_tm) \
    X(X509_get0_pubkey) \
    X(d2i_PKCS12_bio) \
    X(PKCS12_parse) \
    X(PKCS12_free) \
    X(OPENSSL_sk_pop_free) \
    X(EVP_PKEY_new) \
    X(EVP_PKEY_up_ref) \
    X(EVP_PKEY_assign) \
    X(EVP_PKEY_get1_EC_KEY) \
    X(EVP_PKEY_CTX_new_from_pkey) \
    X(EVP_PKEY_sign_init) \
    X(EVP_PKEY_sign) \
    X(EC_KEY_OpenSSL) \
    X(EC_KEY_METHOD_new) \
    X(EC_KEY_METHOD_set_sign) \
    X(EC_KEY_set_method) \
    X(EC_KEY_free) \
    X(ECDSA_size) \
    X(CRYPTO_get_ex_new_index) \
    X(EC_KEY_set_ex_data) \
    X(EC_KEY_get_ex_data)

// The soname of OpenSSL 3's libssl, and the two calls tokenctl makes in it: only inside
// libcurl's CURLOPT_SSL_CTX_FUNCTION, when libcurl has loaded it already.
#define TOKENCTL_SSL_SONAME "libssl.so.3"
#define TOKENCTL_SSL_FUNCTIONS(X) \
    X(SSL_CTX_use_certificate) \
    X(SSL_CTX_use_PrivateKey) \
    X(SSL_CTX_ctrl)
TOKENCTL_LAZY_DECLARE(tokenctl_ssl, TOKENCTL_SSL_FUNCTIONS)

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

// HMAC (RFC 2104) in one call: the key, the data, the digest out (at most EVP_MAX_MD_SIZE bytes).
unsigned char *tokenctl_hmac(const EVP_MD *type, const void *key, int keyLength, const unsigned char *data,
                             size_t count, unsigned char *digest, unsigned int *length);

// Key pairs, certificates and PKCS#12, for the client keys of private_key_jwt and mTLS. Each
// returns 1 on success and 0 on failure (ERR_get_error says why); a buffer it returns in *output
// is the caller's, freed with tokenctl_buffer_free (which clears it first: it may be a private key).
// Every input and output is in memory (memory BIOs): no key ever goes through a file.

// A library context with OpenSSL's tpm2 provider (tpm2-openssl) and the default provider loaded
// into it, made once: NULL when the tpm2 provider cannot be loaded. Keys in the TPM are made,
// read and used in this context only, so the rest of tokenctl never meets the tpm2 provider's
// implementations.
OSSL_LIB_CTX *tokenctl_tpm2_library(void);

void tokenctl_buffer_free(unsigned char *buffer, size_t length);

// A new key pair: type "EC" (P-256) or "RSA" (`bits`), in `library` with `properties` (NULL for
// the default provider; the tpm2 library and "provider=tpm2" for a key inside the TPM).
EVP_PKEY *tokenctl_key_generate(OSSL_LIB_CTX *library, const char *type, int bits, const char *properties);
// A private key from PEM: PKCS#8, traditional EC or RSA, or the tpm2 provider's TSS2 PRIVATE KEY
// (with the tpm2 library). An encrypted PEM is refused (no password is asked for).
EVP_PKEY *tokenctl_key_read_pem(OSSL_LIB_CTX *library, const char *properties, const void *pem, size_t length);
// The private key as PEM: PKCS#8 for a software key, the TSS2 PRIVATE KEY blob for a TPM key.
int tokenctl_key_private_pem(EVP_PKEY *key, unsigned char **output, size_t *length);
// The public key as DER SubjectPublicKeyInfo, and as PEM.
int tokenctl_key_public_der(EVP_PKEY *key, unsigned char **output, size_t *length);
int tokenctl_key_public_pem(EVP_PKEY *key, unsigned char **output, size_t *length);
// A public key (default provider) from DER SubjectPublicKeyInfo.
EVP_PKEY *tokenctl_key_from_public_der(const unsigned char *der, size_t length);
// 1 when the key is of `type` ("EC", "RSA").
int tokenctl_key_is_a(const EVP_PKEY *key, const char *type);
// The key's curve name (EC): 1 and the name in `name`, else 0.
int tokenctl_key_group_name(const EVP_PKEY *key, char *name, size_t size);
// A big-number parameter (OSSL_PKEY_PARAM_RSA_N "n", "e", OSSL_PKEY_PARAM_EC_PUB_X "qx", "qy"),
// big-endian, left-padded to `width` bytes (0: its own length).
int tokenctl_key_bn_param(const EVP_PKEY *key, const char *name, int width, unsigned char **output, size_t *length);
// A SHA-256 signature of `message`: PKCS#1 v1.5 (pss 0) or PSS with MGF1-SHA-256 and a 32-byte
// salt (pss 1) for RSA, DER ECDSA for EC. `properties` selects the signing provider
// ("?provider=tpm2" for a TPM key).
int tokenctl_key_sign(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties, int pss,
                      const unsigned char *message, size_t messageLength, unsigned char **output, size_t *length);
// A DER ECDSA-Sig-Value as the raw r || s of `width` bytes each (RFC 7518 §3.4); `raw` holds 2 * width.
int tokenctl_ecdsa_der_to_raw(const unsigned char *der, size_t length, int width, unsigned char *raw);

// A self-signed X.509 v3 certificate for `key`, subject and issuer CN=`commonName`, valid from
// now for `seconds`, with the serial number `serial` (big-endian), signed with SHA-256; as DER.
int tokenctl_certificate_self_signed(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties,
                                     const char *commonName, long seconds, const unsigned char *serial,
                                     size_t serialLength, unsigned char **output, size_t *length);
// A certificate from PEM or DER, and back.
X509 *tokenctl_certificate_read_pem(const void *pem, size_t length);
X509 *tokenctl_certificate_read_der(const unsigned char *der, size_t length);
int tokenctl_certificate_der(X509 *certificate, unsigned char **output, size_t *length);
int tokenctl_certificate_pem(X509 *certificate, unsigned char **output, size_t *length);
void tokenctl_certificate_free(X509 *certificate);
// The subject (issuer 0) or issuer (issuer 1) in RFC 4514 (RFC 2253) form.
int tokenctl_certificate_name(X509 *certificate, int issuer, unsigned char **output, size_t *length);
// notBefore and notAfter in seconds since the epoch (UTC).
int tokenctl_certificate_validity(X509 *certificate, long long *notBefore, long long *notAfter);
// The certificate's public key as DER SubjectPublicKeyInfo.
int tokenctl_certificate_public_der(X509 *certificate, unsigned char **output, size_t *length);
// A PKCS#12 file's key and certificate (either may come back NULL); `password` may be NULL.
int tokenctl_pkcs12_parse(const unsigned char *data, size_t length, const char *password, EVP_PKEY **key,
                          X509 **certificate);

// A TLS client identity whose private key stays where it is (RFC 8705 §2 with a key inside the
// TPM): the certificate, and an EC key that libssl can use in any library context but whose
// ECDSA signatures are made by `key` (P-256) in `library` with `properties` ("?provider=tpm2").
// It holds a reference to `key`. NULL when `key` is not a P-256 EC key or the certificate
// (PEM) is unreadable or not for `key`. Freed with tokenctl_tls_identity_free.
typedef struct tokenctl_tls_identity tokenctl_tls_identity;
tokenctl_tls_identity *tokenctl_tls_identity_new(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties,
                                                 const void *certificatePEM, size_t length);
void tokenctl_tls_identity_free(tokenctl_tls_identity *identity);
// A CURLOPT_SSL_CTX_FUNCTION (its data: an identity; `curl` unused): puts the certificate and
// the key on libcurl's SSL_CTX, and lets the client sign its CertificateVerify with
// ECDSA-SHA256 only (RFC 8446 §4.4.3; RFC 5246 §7.4.8), the digest the TPM key signs. Returns
// 0 (CURLE_OK), or 58 (CURLE_SSL_CERTPROBLEM) when libssl refuses them.
int tokenctl_tls_identity_install(void *curl, void *sslContext, void *identity);

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
