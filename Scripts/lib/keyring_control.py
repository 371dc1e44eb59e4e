#!/usr/bin/python3
"""Lock, unlock and query a gnome-keyring collection over D-Bus, with no prompt.

For tokenctl's locked-keyring tests.  Needs the Debian package python3-dbus,
which is installed for /usr/bin/python3 only (a pyenv or venv python3 on PATH
will not see it): run this file as `/usr/bin/python3 keyring_control.py ...`.
Talks to the bus in $DBUS_SESSION_BUS_ADDRESS.

    keyring_control.py [--collection PATH] lock
    keyring_control.py [--collection PATH] unlock --password-stdin
    keyring_control.py [--collection PATH] is-locked        # prints true/false

The collection defaults to the one behind the "default" alias (login).
Unlocking uses gnome-keyring's
org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface.UnlockWithMasterPassword
with the secret sent over a "plain" session.  The password is read from stdin
as is (no newline is stripped, matching gnome-keyring-daemon --unlock); pass
it with printf %s.

Exit status: 0 ok, 1 failure (message on stderr), 2 usage.
"""

import argparse
import sys

try:
    import dbus
except ImportError:
    sys.stderr.write("keyring_control: python3-dbus is missing (apt-get install python3-dbus; "
                     "run with /usr/bin/python3)\n")
    sys.exit(1)

BUS_NAME = "org.freedesktop.secrets"
SERVICE_PATH = "/org/freedesktop/secrets"
SERVICE_IFACE = "org.freedesktop.Secret.Service"
COLLECTION_IFACE = "org.freedesktop.Secret.Collection"
GUILT_IFACE = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"
FALLBACK_COLLECTION = "/org/freedesktop/secrets/collection/login"


def service(bus):
    # Only ever talk to a daemon that already owns the name: never let D-Bus
    # activation start a fresh daemon without a login collection.
    if not bus.name_has_owner(BUS_NAME):
        raise RuntimeError("no Secret Service on the bus (%s has no owner)" % BUS_NAME)
    obj = bus.get_object(BUS_NAME, SERVICE_PATH, introspect=False)
    return obj


def resolve_collection(bus, svc, path):
    if path:
        return dbus.ObjectPath(path)
    alias = svc.ReadAlias("default", dbus_interface=SERVICE_IFACE)
    if alias and alias != "/":
        return alias
    return dbus.ObjectPath(FALLBACK_COLLECTION)


def is_locked(bus, coll):
    obj = bus.get_object(BUS_NAME, coll, introspect=False)
    return bool(obj.Get(COLLECTION_IFACE, "Locked", dbus_interface="org.freedesktop.DBus.Properties"))


def main():
    ap = argparse.ArgumentParser(prog="keyring_control.py")
    ap.add_argument("--collection", help="collection object path (default: the 'default' alias)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lock")
    un = sub.add_parser("unlock")
    un.add_argument("--password-stdin", action="store_true", required=True)
    sub.add_parser("is-locked")
    args = ap.parse_args()

    try:
        bus = dbus.SessionBus()
        svc = service(bus)
        coll = resolve_collection(bus, svc, args.collection)
        if args.cmd == "is-locked":
            print("true" if is_locked(bus, coll) else "false")
        elif args.cmd == "lock":
            locked, prompt = svc.Lock(dbus.Array([coll], signature="o"), dbus_interface=SERVICE_IFACE)
            if prompt != "/" or not is_locked(bus, coll):
                raise RuntimeError("lock of %s needs a prompt or did not take effect" % coll)
        elif args.cmd == "unlock":
            password = sys.stdin.buffer.read()
            _, session = svc.OpenSession("plain", dbus.String("", variant_level=1),
                                         dbus_interface=SERVICE_IFACE)
            secret = dbus.Struct((session, dbus.ByteArray(b""), dbus.ByteArray(password),
                                  "text/plain"), signature="oayays")
            try:
                svc.UnlockWithMasterPassword(coll, secret, dbus_interface=GUILT_IFACE)
            finally:
                try:
                    bus.get_object(BUS_NAME, session, introspect=False).Close(
                        dbus_interface="org.freedesktop.Secret.Session")
                except dbus.DBusException:
                    pass
            if is_locked(bus, coll):
                raise RuntimeError("%s is still locked (wrong password?)" % coll)
    except (dbus.DBusException, RuntimeError) as e:
        sys.stderr.write("keyring_control %s: %s\n" % (args.cmd, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
