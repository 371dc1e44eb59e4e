#!/usr/bin/python3
"""Configure, open, close and query a KWallet (kwalletd5) wallet with no dialog.

For tokenctl's tests that use KWallet as the Secret Service provider (see
kwallet.sh, which runs this).  Needs the Debian package python3-dbus, which is
installed for /usr/bin/python3 only: run this file as
`/usr/bin/python3 kwallet_control.py ...`.  Talks to the bus in
$DBUS_SESSION_BUS_ADDRESS and never starts anything by D-Bus activation (every
call first checks that the name has an owner).

    kwallet_control.py [--wallet NAME] write-config --prompts deny|dialog
    kwallet_control.py [--wallet NAME] pam-open --password-stdin [--timeout S]
    kwallet_control.py [--wallet NAME] unlock --password-stdin [--timeout S]
    kwallet_control.py [--wallet NAME] lock [--timeout S]
    kwallet_control.py [--wallet NAME] close         # close the wallet, no check
    kwallet_control.py [--wallet NAME] is-open       # prints true/false (kwalletd's view)
    kwallet_control.py is-locked                     # prints true/false (the default
                                                     # collection's Locked property)
    kwallet_control.py [--wallet NAME] collection    # prints the collection object path

--wallet defaults to kdewallet.

write-config writes $XDG_CONFIG_HOME/kwalletrc: the Secret Service API on,
NAME as the default wallet, no first-use wizard, no idle close, no manager
launch.  With --prompts deny it also lists the Secret Service's application
id ("KDE System": kwalletd uses it for an empty appid) under [Auto Deny], so a
Secret Service Unlock prompt on a closed wallet is refused at once (the client
sees the prompt dismissed) instead of opening a password dialog that nobody
can answer and that blocks every later open in kwalletd until it is gone.
If kwalletd5 is running it is told to re-read the file (org.kde.KWallet.reconfigure).

pam-open does what kwallet-pam does at login: reads (or creates, with 56
random bytes) $XDG_DATA_HOME/kwalletd/NAME.salt, derives
PBKDF2-HMAC-SHA512(password, salt, 50000 iterations, 56 bytes) and passes it
to org.kde.KWallet.pamOpen, which opens the wallet (creating it if missing)
without a dialog.  pamOpen returns nothing, but kwalletd answers the call only
after it has tried (measured: 1-2 ms), so org.kde.KWallet.isOpen is asked
right after it, and for a grace second more, before giving up.

unlock = pam-open, then org.freedesktop.Secret.Service.Unlock on NAME's
collection and Prompt on the prompt it returns: with the wallet already open
the prompt completes at once, without a dialog.  Waits until the collection's
Locked property is false.  An [Auto Deny] entry is lifted for the duration
(the prompt goes through the same check) and put back afterwards.

lock closes the wallet (org.kde.KWallet.close NAME force=true, which also
writes it to disk) and waits until the collection reports Locked.

The password is read from stdin as is (no newline stripped): pass it with
printf %s.

Exit status: 0 ok, 1 failure (message on stderr), 2 usage, 3 the wallet did
not open (wrong password, or kwalletd is busy with a password dialog).
"""

import argparse
import hashlib
import os
import sys
import time

try:
    import dbus
except ImportError:
    sys.stderr.write("kwallet_control: python3-dbus is missing (apt-get install python3-dbus; "
                     "run with /usr/bin/python3)\n")
    sys.exit(1)

SECRETS_NAME = "org.freedesktop.secrets"
SECRETS_PATH = "/org/freedesktop/secrets"
SERVICE_IFACE = "org.freedesktop.Secret.Service"
COLLECTION_IFACE = "org.freedesktop.Secret.Collection"
PROMPT_IFACE = "org.freedesktop.Secret.Prompt"
PROPS_IFACE = "org.freedesktop.DBus.Properties"
KWALLET_NAME = "org.kde.kwalletd5"
KWALLET_PATH = "/modules/kwalletd5"
KWALLET_IFACE = "org.kde.KWallet"

# kwalletd's Secret Service layer opens wallets with an empty appid, which
# internalOpen checks against [Auto Deny] as "KDE System".
FDO_APPID = "KDE System"
DENY_GROUP = "[Auto Deny]"

# kwallet-pam's parameters (KWALLET_PAM_SALTSIZE, KWALLET_PAM_ITERATIONS, KWALLET_PAM_KEYSIZE).
SALT_SIZE = 56
ITERATIONS = 50000
KEY_SIZE = 56
PAM_OPEN_GRACE = 1.0


class NotOpened(RuntimeError):
    pass


def need_owner(bus, name):
    # Never let D-Bus activation start a daemon nobody recorded.
    if not bus.name_has_owner(name):
        raise RuntimeError("%s has no owner on the bus (kwalletd5 not running?)" % name)


def kwalletd(bus):
    need_owner(bus, KWALLET_NAME)
    return bus.get_object(KWALLET_NAME, KWALLET_PATH, introspect=False)


def secrets(bus):
    need_owner(bus, SECRETS_NAME)
    return bus.get_object(SECRETS_NAME, SECRETS_PATH, introspect=False)


def xdg_dir(var, default):
    return os.environ.get(var) or os.path.join(os.path.expanduser("~"), default)


def kwalletrc_path():
    return os.path.join(xdg_dir("XDG_CONFIG_HOME", ".config"), "kwalletrc")


def write_atomic(path, text):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def without_group(lines, header):
    out, skip = [], False
    for line in lines:
        if line.startswith("["):
            skip = line.strip() == header
        if not skip:
            out.append(line)
    return out


def deny_lines(wallet):
    return [DENY_GROUP, "%s=%s" % (wallet, FDO_APPID)]


def prompts_denied(wallet):
    in_group = False
    for line in read_lines(kwalletrc_path()):
        if line.startswith("["):
            in_group = line.strip() == DENY_GROUP
        elif in_group and line.strip() == deny_lines(wallet)[1]:
            return True
    return False


def set_deny(bus, wallet, deny):
    """Add or drop the [Auto Deny] group (kwalletd may have written other groups:
    keep them) and have a running kwalletd re-read the file."""
    path = kwalletrc_path()
    lines = without_group(read_lines(path), DENY_GROUP)
    while lines and not lines[-1].strip():
        lines.pop()
    if deny:
        lines += [""] + deny_lines(wallet)
    write_atomic(path, "\n".join(lines) + "\n")
    if bus is not None and bus.name_has_owner(KWALLET_NAME):
        kwalletd(bus).reconfigure(dbus_interface=KWALLET_IFACE)


def write_config(bus, wallet, prompts):
    lines = [
        "[Wallet]",
        "Default Wallet=%s" % wallet,
        "Enabled=true",
        "First Use=false",
        "Close When Idle=false",
        "Launch Manager=false",
        "Prompt on Open=false",
        "Use One Wallet=true",
        "",
        "[org.freedesktop.secrets]",
        "apiEnabled=true",
    ]
    write_atomic(kwalletrc_path(), "\n".join(lines) + "\n")
    set_deny(bus, wallet, prompts == "deny")


def salt_for(wallet):
    """The wallet's salt file (where kwallet-pam keeps it), created if missing."""
    d = os.path.join(xdg_dir("XDG_DATA_HOME", ".local/share"), "kwalletd")
    path = os.path.join(d, wallet + ".salt")
    try:
        with open(path, "rb") as f:
            salt = f.read()
    except FileNotFoundError:
        os.makedirs(d, mode=0o700, exist_ok=True)
        salt = os.urandom(SALT_SIZE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(salt)
    if len(salt) != SALT_SIZE:
        raise RuntimeError("%s has %d bytes, want %d" % (path, len(salt), SALT_SIZE))
    return salt


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def is_open(kw, wallet):
    return bool(kw.isOpen(dbus.String(wallet), dbus_interface=KWALLET_IFACE))


def pam_open(bus, wallet, password, timeout):
    kw = kwalletd(bus)
    if is_open(kw, wallet):
        return
    key = hashlib.pbkdf2_hmac("sha512", password, salt_for(wallet), ITERATIONS, KEY_SIZE)
    kw.pamOpen(dbus.String(wallet), dbus.ByteArray(key), dbus.Int32(0), dbus_interface=KWALLET_IFACE)
    if not wait_for(lambda: is_open(kw, wallet), min(timeout, PAM_OPEN_GRACE)):
        raise NotOpened("wallet %s did not open (wrong password? or kwalletd is busy with a "
                        "password dialog: it ignores pamOpen while one is up)" % wallet)


def collection_path(bus, wallet=None):
    svc = secrets(bus)
    if wallet is None:
        alias = svc.ReadAlias("default", dbus_interface=SERVICE_IFACE)
        if alias and alias != "/":
            return alias
        raise RuntimeError("the default alias resolves to no collection")
    for c in svc.Get(SERVICE_IFACE, "Collections", dbus_interface=PROPS_IFACE):
        obj = bus.get_object(SECRETS_NAME, c, introspect=False)
        if str(obj.Get(COLLECTION_IFACE, "Label", dbus_interface=PROPS_IFACE)) == wallet:
            return c
    raise RuntimeError("no Secret Service collection for wallet %s (kwalletd5 builds collections "
                       "only for the wallets present when it starts)" % wallet)


def is_locked(bus, coll):
    obj = bus.get_object(SECRETS_NAME, coll, introspect=False)
    return bool(obj.Get(COLLECTION_IFACE, "Locked", dbus_interface=PROPS_IFACE))


def ss_unlock(bus, coll, timeout):
    svc = secrets(bus)
    _, prompt = svc.Unlock(dbus.Array([coll], signature="o"), dbus_interface=SERVICE_IFACE)
    if prompt != "/":
        bus.get_object(SECRETS_NAME, prompt, introspect=False).Prompt("", dbus_interface=PROMPT_IFACE)
    if not wait_for(lambda: not is_locked(bus, coll), timeout):
        raise RuntimeError("%s still Locked %gs after Unlock + Prompt" % (coll, timeout))


def unlock(bus, wallet, password, timeout):
    coll = collection_path(bus, wallet)
    pam_open(bus, wallet, password, timeout)
    if not is_locked(bus, coll):
        return
    denied = prompts_denied(wallet)
    if denied:
        set_deny(bus, wallet, False)
    try:
        ss_unlock(bus, coll, timeout)
    finally:
        if denied:
            set_deny(bus, wallet, True)


def close(bus, wallet):
    kwalletd(bus).close(dbus.String(wallet), dbus.Boolean(True), dbus_interface=KWALLET_IFACE,
                        signature="sb")


def main():
    ap = argparse.ArgumentParser(prog="kwallet_control.py")
    ap.add_argument("--wallet", default="kdewallet", help="wallet name (default: kdewallet)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("write-config")
    p.add_argument("--prompts", choices=("deny", "dialog"), required=True)
    for name in ("pam-open", "unlock"):
        p = sub.add_parser(name)
        p.add_argument("--password-stdin", action="store_true", required=True)
        p.add_argument("--timeout", type=float, default=5.0)
    p = sub.add_parser("lock")
    p.add_argument("--timeout", type=float, default=5.0)
    for name in ("close", "is-open", "is-locked", "collection"):
        sub.add_parser(name)
    args = ap.parse_args()

    try:
        if args.cmd == "write-config":
            bus = dbus.SessionBus() if os.environ.get("DBUS_SESSION_BUS_ADDRESS") else None
            write_config(bus, args.wallet, args.prompts)
            return 0
        bus = dbus.SessionBus()
        if args.cmd == "pam-open":
            pam_open(bus, args.wallet, sys.stdin.buffer.read(), args.timeout)
        elif args.cmd == "unlock":
            unlock(bus, args.wallet, sys.stdin.buffer.read(), args.timeout)
        elif args.cmd == "lock":
            coll = collection_path(bus, args.wallet)
            close(bus, args.wallet)
            if not wait_for(lambda: is_locked(bus, coll), args.timeout):
                raise RuntimeError("%s not Locked %gs after closing the wallet" % (coll, args.timeout))
        elif args.cmd == "close":
            close(bus, args.wallet)
        elif args.cmd == "is-open":
            print("true" if is_open(kwalletd(bus), args.wallet) else "false")
        elif args.cmd == "is-locked":
            print("true" if is_locked(bus, collection_path(bus)) else "false")
        elif args.cmd == "collection":
            print(collection_path(bus, args.wallet))
    except NotOpened as e:
        sys.stderr.write("kwallet_control %s: %s\n" % (args.cmd, e))
        return 3
    except (dbus.DBusException, RuntimeError, OSError) as e:
        sys.stderr.write("kwallet_control %s: %s\n" % (args.cmd, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
