// The kernel key-management calls tokenctl's hot cache needs, as raw system calls.
//
// No library: glibc has no add_key/keyctl wrappers and syscall(2) is variadic, which Swift
// cannot call; kernel_keyring.c makes the calls. Linking libkeyutils instead would keep the
// static front from being stdlib + Glibc only. The KEY_* permission bits live in keyutils.h,
// not in <linux/keyctl.h>, so the ones used are spelled out here.
#ifndef TOKENCTL_CKERNELKEYRING_H
#define TOKENCTL_CKERNELKEYRING_H

#include <stddef.h>
#include <stdint.h>

#define TOKENCTL_KEY_POS_ALL 0x3f000000u
#define TOKENCTL_KEY_USR_ALL 0x003f0000u

// add_key(2): create the key, or atomically replace the payload of the key of the same type
// and description already in `keyring`.
int32_t tokenctl_add_key(const char *type, const char *description, const void *payload, size_t length, int32_t keyring);

// keyctl(KEYCTL_SEARCH): the id of a key reachable from `keyring`, or -1 (ENOKEY, EKEYEXPIRED...).
int32_t tokenctl_keyctl_search(int32_t keyring, const char *type, const char *description);

// keyctl(KEYCTL_READ): the payload size (which may exceed `length`: then nothing is truncated silently).
long tokenctl_keyctl_read(int32_t key, void *buffer, size_t length);

// keyctl(KEYCTL_DESCRIBE): "type;uid;gid;perm;description", NUL-terminated; the full size.
long tokenctl_keyctl_describe(int32_t key, char *buffer, size_t length);

long tokenctl_keyctl_setperm(int32_t key, uint32_t permissions);

// keyctl(KEYCTL_SET_TIMEOUT): expire the key `seconds` from now (0 removes the timeout).
long tokenctl_keyctl_set_timeout(int32_t key, uint32_t seconds);

long tokenctl_keyctl_invalidate(int32_t key);

// keyctl(KEYCTL_LINK): link `key` into `keyring`, displacing a key of the same type and description.
long tokenctl_keyctl_link(int32_t key, int32_t keyring);

long tokenctl_keyctl_unlink(int32_t key, int32_t keyring);

// keyctl(KEYCTL_GET_KEYRING_ID) without creating: probes whether the keyring can be used at all.
int32_t tokenctl_keyctl_get_keyring_id(int32_t keyring);

// KEY_SPEC_USER_KEYRING (<linux/keyctl.h>, not included here: Swift needs only this value).
int32_t tokenctl_key_spec_user_keyring(void);

#endif
