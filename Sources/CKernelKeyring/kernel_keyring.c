// The bodies of CKernelKeyring.h: add_key(2) and keyctl(2) through syscall(2).
#include "CKernelKeyring.h"
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int32_t tokenctl_add_key(const char *type, const char *description, const void *payload, size_t length, int32_t keyring) {
    return (int32_t)syscall(__NR_add_key, type, description, payload, length, keyring);
}

int32_t tokenctl_keyctl_search(int32_t keyring, const char *type, const char *description) {
    return (int32_t)syscall(__NR_keyctl, KEYCTL_SEARCH, keyring, type, description, 0);
}

long tokenctl_keyctl_read(int32_t key, void *buffer, size_t length) {
    return syscall(__NR_keyctl, KEYCTL_READ, key, buffer, length);
}

long tokenctl_keyctl_describe(int32_t key, char *buffer, size_t length) {
    return syscall(__NR_keyctl, KEYCTL_DESCRIBE, key, buffer, length);
}

long tokenctl_keyctl_setperm(int32_t key, uint32_t permissions) {
    return syscall(__NR_keyctl, KEYCTL_SETPERM, key, permissions);
}

long tokenctl_keyctl_set_timeout(int32_t key, uint32_t seconds) {
    return syscall(__NR_keyctl, KEYCTL_SET_TIMEOUT, key, seconds);
}

long tokenctl_keyctl_invalidate(int32_t key) {
    return syscall(__NR_keyctl, KEYCTL_INVALIDATE, key);
}

long tokenctl_keyctl_link(int32_t key, int32_t keyring) {
    return syscall(__NR_keyctl, KEYCTL_LINK, key, keyring);
}

long tokenctl_keyctl_unlink(int32_t key, int32_t keyring) {
    return syscall(__NR_keyctl, KEYCTL_UNLINK, key, keyring);
}

int32_t tokenctl_keyctl_get_keyring_id(int32_t keyring) {
    return (int32_t)syscall(__NR_keyctl, KEYCTL_GET_KEYRING_ID, keyring, 0);
}

int32_t tokenctl_key_spec_user_keyring(void) { return KEY_SPEC_USER_KEYRING; }
