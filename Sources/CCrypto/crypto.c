// The bodies of CCrypto.h: libcrypto's table, its one loader state, and tokenctl's calls through it.
#include "CCrypto.h"
#include <limits.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

TOKENCTL_LAZY_DEFINE(tokenctl_crypto, TOKENCTL_CRYPTO_FUNCTIONS, TOKENCTL_CRYPTO_SONAME, (void)0)
#define tokenctl_crypto (tokenctl_crypto_state.api)
TOKENCTL_LAZY_DEFINE(tokenctl_ssl, TOKENCTL_SSL_FUNCTIONS, TOKENCTL_SSL_SONAME, (void)0)
#define tokenctl_ssl (tokenctl_ssl_state.api)

unsigned long tokenctl_err_get_error(void) { return tokenctl_crypto.ERR_get_error(); }
void tokenctl_err_error_string_n(unsigned long code, char *buffer, size_t length) {
    tokenctl_crypto.ERR_error_string_n(code, buffer, length);
}
void tokenctl_err_clear_error(void) { tokenctl_crypto.ERR_clear_error(); }

void tokenctl_openssl_free(void *pointer) { tokenctl_crypto.CRYPTO_free(pointer, __FILE__, __LINE__); }

int tokenctl_evp_digest(const void *data, size_t count, unsigned char *digest, unsigned int *length,
                        const EVP_MD *type, ENGINE *engine) {
    return tokenctl_crypto.EVP_Digest(data, count, digest, length, type, engine);
}
const EVP_MD *tokenctl_evp_sha256(void) { return tokenctl_crypto.EVP_sha256(); }

BIGNUM *tokenctl_bn_bin2bn(const unsigned char *bytes, int length, BIGNUM *result) {
    return tokenctl_crypto.BN_bin2bn(bytes, length, result);
}
void tokenctl_bn_free(BIGNUM *number) { tokenctl_crypto.BN_free(number); }

OSSL_PARAM_BLD *tokenctl_ossl_param_bld_new(void) { return tokenctl_crypto.OSSL_PARAM_BLD_new(); }
void tokenctl_ossl_param_bld_free(OSSL_PARAM_BLD *builder) { tokenctl_crypto.OSSL_PARAM_BLD_free(builder); }
int tokenctl_ossl_param_bld_push_bn(OSSL_PARAM_BLD *builder, const char *key, const BIGNUM *number) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_BN(builder, key, number);
}
int tokenctl_ossl_param_bld_push_utf8_string(OSSL_PARAM_BLD *builder, const char *key, const char *value, size_t length) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_utf8_string(builder, key, value, length);
}
int tokenctl_ossl_param_bld_push_octet_string(OSSL_PARAM_BLD *builder, const char *key, const void *value, size_t length) {
    return tokenctl_crypto.OSSL_PARAM_BLD_push_octet_string(builder, key, value, length);
}
OSSL_PARAM *tokenctl_ossl_param_bld_to_param(OSSL_PARAM_BLD *builder) {
    return tokenctl_crypto.OSSL_PARAM_BLD_to_param(builder);
}
void tokenctl_ossl_param_free(OSSL_PARAM *parameters) { tokenctl_crypto.OSSL_PARAM_free(parameters); }

EVP_PKEY *tokenctl_evp_pkey_new_raw_public_key(int type, ENGINE *engine, const unsigned char *key, size_t length) {
    return tokenctl_crypto.EVP_PKEY_new_raw_public_key(type, engine, key, length);
}
EVP_PKEY_CTX *tokenctl_evp_pkey_ctx_new_from_name(OSSL_LIB_CTX *library, const char *name, const char *properties) {
    return tokenctl_crypto.EVP_PKEY_CTX_new_from_name(library, name, properties);
}
void tokenctl_evp_pkey_ctx_free(EVP_PKEY_CTX *context) { tokenctl_crypto.EVP_PKEY_CTX_free(context); }
int tokenctl_evp_pkey_fromdata_init(EVP_PKEY_CTX *context) { return tokenctl_crypto.EVP_PKEY_fromdata_init(context); }
int tokenctl_evp_pkey_fromdata(EVP_PKEY_CTX *context, EVP_PKEY **key, int selection, OSSL_PARAM *parameters) {
    return tokenctl_crypto.EVP_PKEY_fromdata(context, key, selection, parameters);
}
void tokenctl_evp_pkey_free(EVP_PKEY *key) { tokenctl_crypto.EVP_PKEY_free(key); }
int tokenctl_evp_pkey_get_bits(const EVP_PKEY *key) { return tokenctl_crypto.EVP_PKEY_get_bits(key); }

EVP_MD_CTX *tokenctl_evp_md_ctx_new(void) { return tokenctl_crypto.EVP_MD_CTX_new(); }
void tokenctl_evp_md_ctx_free(EVP_MD_CTX *context) { tokenctl_crypto.EVP_MD_CTX_free(context); }
int tokenctl_evp_digest_verify_init(EVP_MD_CTX *context, EVP_PKEY_CTX **keyContext, const EVP_MD *type,
                                    ENGINE *engine, EVP_PKEY *key) {
    return tokenctl_crypto.EVP_DigestVerifyInit(context, keyContext, type, engine, key);
}
int tokenctl_evp_digest_verify(EVP_MD_CTX *context, const unsigned char *signature, size_t signatureLength,
                               const unsigned char *message, size_t messageLength) {
    return tokenctl_crypto.EVP_DigestVerify(context, signature, signatureLength, message, messageLength);
}
int tokenctl_evp_pkey_ctx_set_rsa_padding(EVP_PKEY_CTX *context, int padding) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_padding(context, padding);
}
int tokenctl_evp_pkey_ctx_set_rsa_mgf1_md(EVP_PKEY_CTX *context, const EVP_MD *type) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_mgf1_md(context, type);
}
int tokenctl_evp_pkey_ctx_set_rsa_pss_saltlen(EVP_PKEY_CTX *context, int length) {
    return tokenctl_crypto.EVP_PKEY_CTX_set_rsa_pss_saltlen(context, length);
}

ECDSA_SIG *tokenctl_ecdsa_sig_new(void) { return tokenctl_crypto.ECDSA_SIG_new(); }
void tokenctl_ecdsa_sig_free(ECDSA_SIG *signature) { tokenctl_crypto.ECDSA_SIG_free(signature); }
int tokenctl_ecdsa_sig_set0(ECDSA_SIG *signature, BIGNUM *r, BIGNUM *s) {
    return tokenctl_crypto.ECDSA_SIG_set0(signature, r, s);
}
int tokenctl_i2d_ecdsa_sig(const ECDSA_SIG *signature, unsigned char **output) {
    return tokenctl_crypto.i2d_ECDSA_SIG(signature, output);
}

unsigned char *tokenctl_hmac(const EVP_MD *type, const void *key, int keyLength, const unsigned char *data,
                             size_t count, unsigned char *digest, unsigned int *length) {
    return tokenctl_crypto.HMAC(type, key, keyLength, data, count, digest, length);
}

ssize_t tokenctl_getrandom(void *buffer, size_t length) { return getrandom(buffer, length, 0); }

int tokenctl_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }

const char *tokenctl_param_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
const char *tokenctl_param_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
const char *tokenctl_param_group_name(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
const char *tokenctl_param_public_key(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
const char *tokenctl_curve_p256(void) { return SN_X9_62_prime256v1; }

int tokenctl_evp_pkey_ed25519(void) { return EVP_PKEY_ED25519; }
int tokenctl_rsa_pkcs1_pss_padding(void) { return RSA_PKCS1_PSS_PADDING; }

// MARK: Keys, certificates and PKCS#12

#define tokenctl_crypto_malloc(size) tokenctl_crypto.CRYPTO_malloc((size), __FILE__, __LINE__)

void tokenctl_buffer_free(unsigned char *buffer, size_t length) {
    if (buffer != NULL) tokenctl_crypto.CRYPTO_clear_free(buffer, length, __FILE__, __LINE__);
}

// A copy of `bytes` the caller frees with tokenctl_buffer_free.
static int tokenctl_copy_out(const void *bytes, size_t count, unsigned char **output, size_t *length) {
    unsigned char *copy = tokenctl_crypto_malloc(count == 0 ? 1 : count);
    if (copy == NULL) return 0;
    if (count > 0) memcpy(copy, bytes, count);
    *output = copy;
    *length = count;
    return 1;
}

// What a memory BIO holds, copied out; the BIO is freed.
static int tokenctl_bio_drain(BIO *bio, unsigned char **output, size_t *length) {
    char *data = NULL;
    long count = tokenctl_crypto.BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
    int ok = count >= 0 && data != NULL && tokenctl_copy_out(data, (size_t)count, output, length);
    tokenctl_crypto.BIO_free(bio);
    return ok;
}

// Drains a BIO that a writer filled (`written`: it succeeded), or frees it when the writer failed.
static int tokenctl_bio_finish(BIO *bio, int written, unsigned char **output, size_t *length) {
    if (!written) {
        tokenctl_crypto.BIO_free(bio);
        return 0;
    }
    return tokenctl_bio_drain(bio, output, length);
}

// Copies out the `count` bytes an i2d_* function allocated at `der` and frees them.
static int tokenctl_der_finish(unsigned char *der, int count, unsigned char **output, size_t *length) {
    if (count <= 0 || der == NULL) return 0;
    int ok = tokenctl_copy_out(der, (size_t)count, output, length);
    tokenctl_crypto.CRYPTO_free(der, __FILE__, __LINE__);
    return ok;
}

// The DER (`pem` 0) or PEM encoding of a public key (`key`) or of a certificate (`key` NULL),
// copied out: i2d_PUBKEY/i2d_X509 or PEM_write_bio_PUBKEY/PEM_write_bio_X509.
static int tokenctl_public_encoding(EVP_PKEY *key, X509 *certificate, int pem, unsigned char **output,
                                    size_t *length) {
    if (!pem) {
        unsigned char *der = NULL;
        int count = key != NULL ? tokenctl_crypto.i2d_PUBKEY(key, &der) : tokenctl_crypto.i2d_X509(certificate, &der);
        return tokenctl_der_finish(der, count, output, length);
    }
    BIO *bio = tokenctl_crypto.BIO_new(tokenctl_crypto.BIO_s_mem());
    if (bio == NULL) return 0;
    int written = key != NULL ? tokenctl_crypto.PEM_write_bio_PUBKEY(bio, key)
                              : tokenctl_crypto.PEM_write_bio_X509(bio, certificate);
    return tokenctl_bio_finish(bio, written == 1, output, length);
}

static OSSL_LIB_CTX *tokenctl_tpm2_context;
static pthread_once_t tokenctl_tpm2_once = PTHREAD_ONCE_INIT;
static void tokenctl_tpm2_load(void) {
    OSSL_LIB_CTX *library = tokenctl_crypto.OSSL_LIB_CTX_new();
    if (library == NULL) return;
    // Loading a provider into a context stops the default provider's automatic loading there.
    if (tokenctl_crypto.OSSL_PROVIDER_load(library, "tpm2") == NULL) return;
    if (tokenctl_crypto.OSSL_PROVIDER_load(library, "default") == NULL) return;
    tokenctl_tpm2_context = library;
}
OSSL_LIB_CTX *tokenctl_tpm2_library(void) {
    pthread_once(&tokenctl_tpm2_once, tokenctl_tpm2_load);
    return tokenctl_tpm2_context;
}

EVP_PKEY *tokenctl_key_generate(OSSL_LIB_CTX *library, const char *type, int bits, const char *properties) {
    EVP_PKEY_CTX *context = tokenctl_crypto.EVP_PKEY_CTX_new_from_name(library, type, properties);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    int ok = tokenctl_crypto.EVP_PKEY_keygen_init(context) == 1;
    if (ok && strcmp(type, "EC") == 0) {
        ok = tokenctl_crypto.EVP_PKEY_CTX_set_group_name(context, SN_X9_62_prime256v1) == 1;
    } else if (ok) {
        ok = tokenctl_crypto.EVP_PKEY_CTX_set_rsa_keygen_bits(context, bits) == 1;
    }
    if (ok && tokenctl_crypto.EVP_PKEY_generate(context, &key) != 1) key = NULL;
    tokenctl_crypto.EVP_PKEY_CTX_free(context);
    return key;
}

// A PEM password callback that gives none: an encrypted key fails instead of prompting on the terminal.
static int tokenctl_no_password(char *buffer, int size, int writing, void *data) {
    (void)buffer;
    (void)size;
    (void)writing;
    (void)data;
    return -1;
}

EVP_PKEY *tokenctl_key_read_pem(OSSL_LIB_CTX *library, const char *properties, const void *pem, size_t length) {
    if (length > INT_MAX) return NULL;
    BIO *bio = tokenctl_crypto.BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = tokenctl_crypto.PEM_read_bio_PrivateKey_ex(bio, NULL, tokenctl_no_password, NULL, library, properties);
    tokenctl_crypto.BIO_free(bio);
    return key;
}

int tokenctl_key_private_pem(EVP_PKEY *key, unsigned char **output, size_t *length) {
    BIO *bio = tokenctl_crypto.BIO_new(tokenctl_crypto.BIO_s_secmem());
    if (bio == NULL) return 0;
    int written = tokenctl_crypto.PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1;
    return tokenctl_bio_finish(bio, written, output, length);
}

int tokenctl_key_public_der(EVP_PKEY *key, unsigned char **output, size_t *length) {
    return tokenctl_public_encoding(key, NULL, 0, output, length);
}

int tokenctl_key_public_pem(EVP_PKEY *key, unsigned char **output, size_t *length) {
    return tokenctl_public_encoding(key, NULL, 1, output, length);
}

EVP_PKEY *tokenctl_key_from_public_der(const unsigned char *der, size_t length) {
    const unsigned char *cursor = der;
    return tokenctl_crypto.d2i_PUBKEY(NULL, &cursor, (long)length);
}

int tokenctl_key_is_a(const EVP_PKEY *key, const char *type) { return tokenctl_crypto.EVP_PKEY_is_a(key, type); }

int tokenctl_key_group_name(const EVP_PKEY *key, char *name, size_t size) {
    size_t length = 0;
    return tokenctl_crypto.EVP_PKEY_get_group_name(key, name, size, &length);
}

int tokenctl_key_bn_param(const EVP_PKEY *key, const char *name, int width, unsigned char **output, size_t *length) {
    BIGNUM *number = NULL;
    if (tokenctl_crypto.EVP_PKEY_get_bn_param(key, name, &number) != 1 || number == NULL) return 0;
    int own = (tokenctl_crypto.BN_num_bits(number) + 7) / 8;
    int count = width > 0 ? width : (own > 0 ? own : 1);
    int ok = 0;
    unsigned char *bytes = tokenctl_crypto_malloc((size_t)count);
    if (bytes != NULL && tokenctl_crypto.BN_bn2binpad(number, bytes, count) == count) {
        *output = bytes;
        *length = (size_t)count;
        ok = 1;
    } else if (bytes != NULL) {
        tokenctl_crypto.CRYPTO_free(bytes, __FILE__, __LINE__);
    }
    tokenctl_crypto.BN_free(number);
    return ok;
}

int tokenctl_key_sign(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties, int pss,
                      const unsigned char *message, size_t messageLength, unsigned char **output, size_t *length) {
    EVP_MD_CTX *context = tokenctl_crypto.EVP_MD_CTX_new();
    if (context == NULL) return 0;
    EVP_PKEY_CTX *keyContext = NULL;
    int ok = tokenctl_crypto.EVP_DigestSignInit_ex(context, &keyContext, "SHA256", library, properties, key, NULL) == 1;
    if (ok && pss) {
        ok = tokenctl_crypto.EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
            && tokenctl_crypto.EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, tokenctl_crypto.EVP_sha256()) == 1
            && tokenctl_crypto.EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, 32) == 1;
    }
    size_t size = 0;
    if (ok) ok = tokenctl_crypto.EVP_DigestSign(context, NULL, &size, message, messageLength) == 1 && size > 0;
    unsigned char *signature = ok ? tokenctl_crypto_malloc(size) : NULL;
    if (signature != NULL && tokenctl_crypto.EVP_DigestSign(context, signature, &size, message, messageLength) == 1) {
        *output = signature;
        *length = size;
    } else {
        if (signature != NULL) tokenctl_crypto.CRYPTO_free(signature, __FILE__, __LINE__);
        ok = 0;
    }
    tokenctl_crypto.EVP_MD_CTX_free(context);
    return ok;
}

int tokenctl_ecdsa_der_to_raw(const unsigned char *der, size_t length, int width, unsigned char *raw) {
    const unsigned char *cursor = der;
    ECDSA_SIG *signature = tokenctl_crypto.d2i_ECDSA_SIG(NULL, &cursor, (long)length);
    if (signature == NULL) return 0;
    const BIGNUM *r = NULL;
    const BIGNUM *s = NULL;
    tokenctl_crypto.ECDSA_SIG_get0(signature, &r, &s);
    int ok = r != NULL && s != NULL && tokenctl_crypto.BN_bn2binpad(r, raw, width) == width
        && tokenctl_crypto.BN_bn2binpad(s, raw + width, width) == width;
    tokenctl_crypto.ECDSA_SIG_free(signature);
    return ok;
}

int tokenctl_certificate_self_signed(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties,
                                     const char *commonName, long seconds, const unsigned char *serial,
                                     size_t serialLength, unsigned char **output, size_t *length) {
    X509 *certificate = tokenctl_crypto.X509_new();
    if (certificate == NULL) return 0;
    EVP_MD_CTX *context = NULL;
    BIGNUM *number = tokenctl_crypto.BN_bin2bn(serial, (int)serialLength, NULL);
    X509_NAME *name = tokenctl_crypto.X509_get_subject_name(certificate);
    int ok = number != NULL && tokenctl_crypto.X509_set_version(certificate, X509_VERSION_3) == 1
        && tokenctl_crypto.BN_to_ASN1_INTEGER(number, tokenctl_crypto.X509_get_serialNumber(certificate)) != NULL
        && tokenctl_crypto.X509_gmtime_adj(tokenctl_crypto.X509_getm_notBefore(certificate), 0) != NULL
        && tokenctl_crypto.X509_gmtime_adj(tokenctl_crypto.X509_getm_notAfter(certificate), seconds) != NULL
        && tokenctl_crypto.X509_set_pubkey(certificate, key) == 1
        && tokenctl_crypto.X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)commonName,
                                                      -1, -1, 0) == 1
        && tokenctl_crypto.X509_set_issuer_name(certificate, name) == 1;
    if (ok) {
        context = tokenctl_crypto.EVP_MD_CTX_new();
        ok = context != NULL
            && tokenctl_crypto.EVP_DigestSignInit_ex(context, NULL, "SHA256", library, properties, key, NULL) == 1
            && tokenctl_crypto.X509_sign_ctx(certificate, context) > 0;
    }
    unsigned char *der = NULL;
    int count = ok ? tokenctl_crypto.i2d_X509(certificate, &der) : 0;
    ok = count > 0 && der != NULL && tokenctl_copy_out(der, (size_t)count, output, length);
    if (der != NULL) tokenctl_crypto.CRYPTO_free(der, __FILE__, __LINE__);
    if (context != NULL) tokenctl_crypto.EVP_MD_CTX_free(context);
    if (number != NULL) tokenctl_crypto.BN_free(number);
    tokenctl_crypto.X509_free(certificate);
    return ok;
}

X509 *tokenctl_certificate_read_pem(const void *pem, size_t length) {
    if (length > INT_MAX) return NULL;
    BIO *bio = tokenctl_crypto.BIO_new_mem_buf(pem, (int)length);
    if (bio == NULL) return NULL;
    X509 *certificate = tokenctl_crypto.PEM_read_bio_X509(bio, NULL, tokenctl_no_password, NULL);
    tokenctl_crypto.BIO_free(bio);
    return certificate;
}

X509 *tokenctl_certificate_read_der(const unsigned char *der, size_t length) {
    const unsigned char *cursor = der;
    X509 *certificate = tokenctl_crypto.d2i_X509(NULL, &cursor, (long)length);
    // Trailing bytes after the certificate: not one DER certificate.
    if (certificate != NULL && cursor != der + length) {
        tokenctl_crypto.X509_free(certificate);
        return NULL;
    }
    return certificate;
}

int tokenctl_certificate_der(X509 *certificate, unsigned char **output, size_t *length) {
    return tokenctl_public_encoding(NULL, certificate, 0, output, length);
}

int tokenctl_certificate_pem(X509 *certificate, unsigned char **output, size_t *length) {
    return tokenctl_public_encoding(NULL, certificate, 1, output, length);
}

void tokenctl_certificate_free(X509 *certificate) { tokenctl_crypto.X509_free(certificate); }

int tokenctl_certificate_name(X509 *certificate, int issuer, unsigned char **output, size_t *length) {
    BIO *bio = tokenctl_crypto.BIO_new(tokenctl_crypto.BIO_s_mem());
    if (bio == NULL) return 0;
    X509_NAME *name = issuer ? tokenctl_crypto.X509_get_issuer_name(certificate)
                             : tokenctl_crypto.X509_get_subject_name(certificate);
    // XN_FLAG_RFC2253: RFC 2253 (now RFC 4514) string form, most specific RDN first.
    int written = tokenctl_crypto.X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0;
    return tokenctl_bio_finish(bio, written, output, length);
}

static int tokenctl_asn1_time_seconds(const ASN1_TIME *time, long long *seconds) {
    struct tm broken = { 0 };
    if (time == NULL || tokenctl_crypto.ASN1_TIME_to_tm(time, &broken) != 1) return 0;
    *seconds = (long long)timegm(&broken);
    return 1;
}

int tokenctl_certificate_validity(X509 *certificate, long long *notBefore, long long *notAfter) {
    return tokenctl_asn1_time_seconds(tokenctl_crypto.X509_get0_notBefore(certificate), notBefore)
        && tokenctl_asn1_time_seconds(tokenctl_crypto.X509_get0_notAfter(certificate), notAfter);
}

int tokenctl_certificate_public_der(X509 *certificate, unsigned char **output, size_t *length) {
    EVP_PKEY *key = tokenctl_crypto.X509_get0_pubkey(certificate);
    return key != NULL && tokenctl_key_public_der(key, output, length);
}

static void tokenctl_x509_free_item(void *item) { tokenctl_crypto.X509_free(item); }

int tokenctl_pkcs12_parse(const unsigned char *data, size_t length, const char *password, EVP_PKEY **key,
                          X509 **certificate) {
    if (length > INT_MAX) return 0;
    BIO *bio = tokenctl_crypto.BIO_new_mem_buf(data, (int)length);
    if (bio == NULL) return 0;
    PKCS12 *bundle = tokenctl_crypto.d2i_PKCS12_bio(bio, NULL);
    tokenctl_crypto.BIO_free(bio);
    if (bundle == NULL) return 0;
    STACK_OF(X509) *chain = NULL;
    int ok = tokenctl_crypto.PKCS12_parse(bundle, password, key, certificate, &chain) == 1;
    if (chain != NULL) tokenctl_crypto.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, tokenctl_x509_free_item);
    tokenctl_crypto.PKCS12_free(bundle);
    return ok;
}

// MARK: TLS client identities with a key that signs elsewhere

// What an identity's EC key signs with: the real key, in its own library context.
struct tokenctl_remote_signer {
    EVP_PKEY *key;
    OSSL_LIB_CTX *library;
    char properties[64];
};

struct tokenctl_tls_identity {
    X509 *certificate;
    EVP_PKEY *key;
};

static EC_KEY_METHOD *tokenctl_remote_method;
static int tokenctl_remote_index = -1;

static void tokenctl_remote_signer_free(void *parent, void *pointer, CRYPTO_EX_DATA *data, int index, long argument,
                                        void *argumentPointer) {
    (void)parent, (void)data, (void)index, (void)argument, (void)argumentPointer;
    struct tokenctl_remote_signer *signer = pointer;
    if (signer == NULL) return;
    tokenctl_crypto.EVP_PKEY_free(signer->key);
    tokenctl_crypto.CRYPTO_free(signer, __FILE__, __LINE__);
}

// ECDSA of a digest by the real key: DER ECDSA-Sig-Value into `signature`, whose room is
// ECDSA_size(ec) (as ECDSA_sign gives it).
static int tokenctl_remote_sign(int type, const unsigned char *digest, int digestLength, unsigned char *signature,
                                unsigned int *signatureLength, const BIGNUM *inverse, const BIGNUM *r, EC_KEY *ec) {
    (void)type, (void)inverse, (void)r;
    struct tokenctl_remote_signer *signer = tokenctl_crypto.EC_KEY_get_ex_data(ec, tokenctl_remote_index);
    int room = tokenctl_crypto.ECDSA_size(ec);
    if (signer == NULL || digestLength <= 0 || room <= 0) return 0;
    EVP_PKEY_CTX *context = tokenctl_crypto.EVP_PKEY_CTX_new_from_pkey(signer->library, signer->key, signer->properties);
    size_t length = (size_t)room;
    int ok = context != NULL && tokenctl_crypto.EVP_PKEY_sign_init(context) == 1
        && tokenctl_crypto.EVP_PKEY_sign(context, signature, &length, digest, (size_t)digestLength) == 1;
    tokenctl_crypto.EVP_PKEY_CTX_free(context);
    if (ok) *signatureLength = (unsigned int)length;
    return ok;
}

static ECDSA_SIG *tokenctl_remote_sign_sig(const unsigned char *digest, int digestLength, const BIGNUM *inverse,
                                           const BIGNUM *r, EC_KEY *ec) {
    unsigned char der[160];
    unsigned int length = 0;
    if (tokenctl_crypto.ECDSA_size(ec) > (int)sizeof der) return NULL;
    if (!tokenctl_remote_sign(0, digest, digestLength, der, &length, inverse, r, ec)) return NULL;
    const unsigned char *cursor = der;
    return tokenctl_crypto.d2i_ECDSA_SIG(NULL, &cursor, (long)length);
}

static pthread_once_t tokenctl_remote_once = PTHREAD_ONCE_INIT;
static void tokenctl_remote_setup(void) {
    int index = tokenctl_crypto.CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_EC_KEY, 0, NULL, NULL, NULL,
                                                       tokenctl_remote_signer_free);
    EC_KEY_METHOD *method = tokenctl_crypto.EC_KEY_METHOD_new(tokenctl_crypto.EC_KEY_OpenSSL());
    if (index < 0 || method == NULL) return;
    tokenctl_crypto.EC_KEY_METHOD_set_sign(method, tokenctl_remote_sign, NULL, tokenctl_remote_sign_sig);
    tokenctl_remote_index = index;
    tokenctl_remote_method = method;
}

tokenctl_tls_identity *tokenctl_tls_identity_new(EVP_PKEY *key, OSSL_LIB_CTX *library, const char *properties,
                                                 const void *certificatePEM, size_t length) {
    pthread_once(&tokenctl_remote_once, tokenctl_remote_setup);
    if (tokenctl_remote_method == NULL || strlen(properties) >= sizeof ((struct tokenctl_remote_signer *)0)->properties)
        return NULL;
    X509 *certificate = tokenctl_certificate_read_pem(certificatePEM, length);
    if (certificate == NULL) return NULL;
    // The public half, from the certificate, as a legacy EC_KEY: a key with a method of its own
    // is "foreign" to OpenSSL 3, which then signs through the method instead of a provider.
    EVP_PKEY *public = tokenctl_crypto.X509_get0_pubkey(certificate);
    EC_KEY *ec = public != NULL && tokenctl_crypto.EVP_PKEY_is_a(key, "EC") == 1
        ? tokenctl_crypto.EVP_PKEY_get1_EC_KEY(public) : NULL;
    struct tokenctl_remote_signer *signer = ec != NULL ? tokenctl_crypto_malloc(sizeof *signer) : NULL;
    EVP_PKEY *proxy = signer != NULL ? tokenctl_crypto.EVP_PKEY_new() : NULL;
    struct tokenctl_tls_identity *identity = proxy != NULL ? tokenctl_crypto_malloc(sizeof *identity) : NULL;
    if (identity == NULL || tokenctl_crypto.EVP_PKEY_up_ref(key) != 1) goto fail;
    signer->key = key;
    signer->library = library;
    strcpy(signer->properties, properties);
    if (tokenctl_crypto.EC_KEY_set_ex_data(ec, tokenctl_remote_index, signer) != 1) {
        tokenctl_crypto.EVP_PKEY_free(key);
        goto fail;
    }
    signer = NULL;  // the EC key's now: freed with it
    if (tokenctl_crypto.EC_KEY_set_method(ec, tokenctl_remote_method) != 1
        || tokenctl_crypto.EVP_PKEY_assign(proxy, EVP_PKEY_EC, ec) != 1)
        goto fail;
    identity->certificate = certificate;
    identity->key = proxy;
    return identity;
fail:
    if (identity != NULL) tokenctl_crypto.CRYPTO_free(identity, __FILE__, __LINE__);
    if (proxy != NULL) tokenctl_crypto.EVP_PKEY_free(proxy);
    if (signer != NULL) tokenctl_crypto.CRYPTO_free(signer, __FILE__, __LINE__);
    if (ec != NULL) tokenctl_crypto.EC_KEY_free(ec);
    tokenctl_crypto.X509_free(certificate);
    return NULL;
}

void tokenctl_tls_identity_free(tokenctl_tls_identity *identity) {
    if (identity == NULL) return;
    tokenctl_crypto.X509_free(identity->certificate);
    tokenctl_crypto.EVP_PKEY_free(identity->key);
    tokenctl_crypto.CRYPTO_free(identity, __FILE__, __LINE__);
}

int tokenctl_tls_identity_install(void *curl, void *sslContext, void *data) {
    (void)curl;
    const int certificateProblem = 58;  // CURLE_SSL_CERTPROBLEM
    struct tokenctl_tls_identity *identity = data;
    if (identity == NULL || tokenctl_ssl_load() != NULL) return certificateProblem;
    SSL_CTX *context = sslContext;
    int ok = tokenctl_ssl.SSL_CTX_use_certificate(context, identity->certificate) == 1
        && tokenctl_ssl.SSL_CTX_use_PrivateKey(context, identity->key) == 1
        && tokenctl_ssl.SSL_CTX_ctrl(context, SSL_CTRL_SET_CLIENT_SIGALGS_LIST, 0, (void *)"ECDSA+SHA256") == 1;
    return ok ? 0 : certificateProblem;
}
