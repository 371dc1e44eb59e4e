#!/usr/bin/python3
"""Drive a headless KeePassXC Secret Service over D-Bus, for tokenctl's tests.

Companion of Scripts/lib/keepassxc.sh.  Needs the Debian packages python3-dbus
and python3-gi, installed for /usr/bin/python3 only (a pyenv or venv python3
on PATH will not see them): run this file as `/usr/bin/python3
keepassxc_control.py ...`.  Talks to the bus in $DBUS_SESSION_BUS_ADDRESS and
never lets D-Bus activation start anything (it only talks to a name that
already has an owner).

    keepassxc_control.py wait-ready [--timeout S] [--pid PID]
        wait until org.freedesktop.secrets is owned (by PID, if given), the
        "default" alias resolves (setting it to the only collection if it does
        not) and that collection is unlocked; prints the collection's path
    keepassxc_control.py is-locked                  # prints true/false
    keepassxc_control.py lock                       # MainWindow.lockAllDatabases
    keepassxc_control.py unlock --database PATH --password-stdin
                                                    # MainWindow.openDatabase PATH PASSWORD
    keepassxc_control.py set-secret [--content-type T] ATTR VALUE [ATTR VALUE...]
        replace the secret (read from stdin as is) of every item of the default
        collection that matches the attributes, with Item.SetSecret over a
        "plain" session; fails if none matches.  KeePassXC before 2.7.6 opens
        an access dialog for CreateItem(replace=true) on an item another client
        made (libsecret's store of an existing item), which never completes
        headless; SetSecret does not ask.
    keepassxc_control.py delete ATTR VALUE [ATTR VALUE...]
        Item.Delete every matching item (completing a prompt if one is
        returned); fails if none matches.
    keepassxc_control.py count ATTR VALUE [ATTR VALUE...]
        print how many unlocked items of the default collection match

The password is read from stdin as is, without the trailing newline that
`printf '%s\\n'` adds (KeePassXC's own --pw-stdin reads one line).

Exit status: 0 ok, 1 failure (message on stderr), 2 usage.
"""

import argparse
import sys
import time

try:
    import dbus
except ImportError:
    sys.stderr.write("keepassxc_control: python3-dbus is missing (apt-get install python3-dbus; "
                     "run with /usr/bin/python3)\n")
    sys.exit(1)

BUS_NAME = "org.freedesktop.secrets"
SERVICE_PATH = "/org/freedesktop/secrets"
SERVICE_IFACE = "org.freedesktop.Secret.Service"
COLLECTION_IFACE = "org.freedesktop.Secret.Collection"
ITEM_IFACE = "org.freedesktop.Secret.Item"
PROMPT_IFACE = "org.freedesktop.Secret.Prompt"
PROPS_IFACE = "org.freedesktop.DBus.Properties"
KPXC_NAME = "org.keepassxc.KeePassXC.MainWindow"
KPXC_PATH = "/keepassxc"
KPXC_IFACE = "org.keepassxc.KeePassXC.MainWindow"


def owned(bus, name):
    try:
        return bool(bus.name_has_owner(name))
    except dbus.DBusException:
        return False


def service(bus):
    if not owned(bus, BUS_NAME):
        raise RuntimeError("no Secret Service on the bus (%s has no owner)" % BUS_NAME)
    return bus.get_object(BUS_NAME, SERVICE_PATH, introspect=False)


def main_window(bus):
    if not owned(bus, KPXC_NAME):
        raise RuntimeError("KeePassXC is not on the bus (%s has no owner)" % KPXC_NAME)
    return bus.get_object(KPXC_NAME, KPXC_PATH, introspect=False)


def default_collection(bus, svc):
    alias = svc.ReadAlias("default", dbus_interface=SERVICE_IFACE)
    if not alias or alias == "/":
        raise RuntimeError("the 'default' alias does not resolve (no exposed database open?)")
    return alias


def prop(bus, path, iface, name):
    obj = bus.get_object(BUS_NAME, path, introspect=False)
    return obj.Get(iface, name, dbus_interface=PROPS_IFACE)


# KeePassXC re-registers a collection's object (unregister + register, from its
# main thread) whenever the database is locked, unlocked or reloaded; QtDBus
# looks object paths up on its own thread, so a call that lands in between
# gets UnknownObject.  Seen under load; treat it as "ask again".
TRANSIENT = ("org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.Secret.Error.NoSuchObject")


def is_transient(e):
    return e.get_dbus_name() in TRANSIENT


def is_locked(bus, coll, timeout=2.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return bool(prop(bus, coll, COLLECTION_IFACE, "Locked"))
        except dbus.DBusException as e:
            if not is_transient(e) or time.monotonic() >= deadline:
                raise
        time.sleep(0.02)


def wait_until(pred, timeout, step=0.05, stable=1):
    """True once pred() held `stable` times in a row (transient D-Bus errors count as no)."""
    deadline = time.monotonic() + timeout
    run = 0
    while True:
        try:
            ok = pred()
        except dbus.DBusException as e:
            if not is_transient(e):
                raise
            ok = False
        run = run + 1 if ok else 0
        if run >= stable:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def retry(fn, timeout=2.0):
    """fn(), asked again on a transient error for up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except dbus.DBusException as e:
            if not is_transient(e) or time.monotonic() >= deadline:
                raise
        time.sleep(0.02)


def locked_now(bus, coll):
    """One read of Locked, no retry (for wait_until)."""
    return bool(prop(bus, coll, COLLECTION_IFACE, "Locked"))


def attrs_from(pairs):
    if len(pairs) % 2:
        raise SystemExit("keepassxc_control: attributes must come in ATTR VALUE pairs")
    return dbus.Dictionary({pairs[i]: pairs[i + 1] for i in range(0, len(pairs), 2)}, signature="ss")


def matching_items(bus, svc, coll, attrs):
    # Collection.SearchItems: only the default collection, unlocked items only.
    if is_locked(bus, coll):
        raise RuntimeError("%s is locked" % coll)
    obj = bus.get_object(BUS_NAME, coll, introspect=False)
    return list(retry(lambda: obj.SearchItems(attrs, dbus_interface=COLLECTION_IFACE)))


def open_plain_session(svc):
    _, session = svc.OpenSession("plain", dbus.String("", variant_level=1), dbus_interface=SERVICE_IFACE)
    return session


def close_session(bus, session):
    try:
        bus.get_object(BUS_NAME, session, introspect=False).Close(
            dbus_interface="org.freedesktop.Secret.Session")
    except dbus.DBusException:
        pass


def run_prompt(bus, prompt_path, timeout):
    """Prompt.Prompt("") and wait for Completed; True if not dismissed."""
    from gi.repository import GLib  # python3-gi; only needed when a prompt comes back

    loop = GLib.MainLoop()
    result = {}

    def completed(dismissed, _value):
        result["dismissed"] = bool(dismissed)
        loop.quit()

    def expired():
        loop.quit()
        return False

    match = bus.add_signal_receiver(completed, signal_name="Completed", dbus_interface=PROMPT_IFACE,
                                    bus_name=BUS_NAME, path=prompt_path)
    try:
        bus.get_object(BUS_NAME, prompt_path, introspect=False).Prompt("", dbus_interface=PROMPT_IFACE)
        GLib.timeout_add(int(timeout * 1000), expired)
        loop.run()
    finally:
        match.remove()
    if "dismissed" not in result:
        raise RuntimeError("prompt %s did not complete within %g s (a dialog is waiting for a click)"
                           % (prompt_path, timeout))
    return not result["dismissed"]


def cmd_wait_ready(bus, args):
    deadline = time.monotonic() + args.timeout
    state = "org.freedesktop.secrets has no owner"

    def left():
        return max(0.0, deadline - time.monotonic())

    if not wait_until(lambda: owned(bus, BUS_NAME), left()):
        raise RuntimeError("not ready after %g s: %s" % (args.timeout, state))
    if args.pid:
        owner_pid = int(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus", introspect=False)
                        .GetConnectionUnixProcessID(BUS_NAME, dbus_interface="org.freedesktop.DBus"))
        if owner_pid != args.pid:
            raise RuntimeError("org.freedesktop.secrets is owned by pid %d, not KeePassXC (pid %d)"
                               % (owner_pid, args.pid))
    svc = service(bus)
    coll = {"path": None}

    def alias_ok():
        path = svc.ReadAlias("default", dbus_interface=SERVICE_IFACE)
        if path and path != "/":
            coll["path"] = path
            return True
        return False

    # KeePassXC points "default" at the first exposed database it opens; give
    # it a moment, then set the alias ourselves if there is exactly one.
    if not wait_until(alias_ok, min(left(), 5.0)):
        colls = list(prop(bus, SERVICE_PATH, SERVICE_IFACE, "Collections"))
        if len(colls) == 1:
            svc.SetAlias("default", colls[0], dbus_interface=SERVICE_IFACE)
        if not wait_until(alias_ok, left()):
            raise RuntimeError("the 'default' alias does not resolve after %g s (collections: %s)"
                               % (args.timeout, ", ".join(str(c) for c in colls) or "none"))
    # stable=3: the state must hold for three reads 50 ms apart, past the
    # re-registrations that follow an unlock
    if not wait_until(lambda: alias_ok() and not locked_now(bus, coll["path"]), left(), stable=3):
        raise RuntimeError("%s still locked after %g s (wrong password?)" % (coll["path"], args.timeout))
    print(coll["path"])


def cmd_lock(bus, args):
    svc = service(bus)
    coll = default_collection(bus, svc)
    main_window(bus).lockAllDatabases(dbus_interface=KPXC_IFACE)
    if not wait_until(lambda: locked_now(bus, coll), args.timeout, stable=3):
        raise RuntimeError("%s is not locked %g s after lockAllDatabases (a modal dialog open?)"
                           % (coll, args.timeout))


def cmd_unlock(bus, args):
    svc = service(bus)
    coll = default_collection(bus, svc)
    password = sys.stdin.buffer.read().decode("utf-8")
    if password.endswith("\n"):
        password = password[:-1]
    # openDatabase on an open, locked database unlocks it in place; on a wrong
    # password it returns without an error and the database stays locked.
    main_window(bus).openDatabase(args.database, password, dbus_interface=KPXC_IFACE)
    if not wait_until(lambda: not locked_now(bus, coll), args.timeout, stable=3):
        raise RuntimeError("%s is still locked (wrong password?)" % coll)


def cmd_is_locked(bus, _args):
    svc = service(bus)
    print("true" if is_locked(bus, default_collection(bus, svc)) else "false")


def cmd_set_secret(bus, args):
    svc = service(bus)
    coll = default_collection(bus, svc)
    items = matching_items(bus, svc, coll, attrs_from(args.attrs))
    if not items:
        raise RuntimeError("no unlocked item in %s matches %s" % (coll, " ".join(args.attrs)))
    value = sys.stdin.buffer.read()
    session = open_plain_session(svc)
    try:
        secret = dbus.Struct((session, dbus.ByteArray(b""), dbus.ByteArray(value), args.content_type),
                             signature="oayays")
        for item in items:
            obj = bus.get_object(BUS_NAME, item, introspect=False)
            retry(lambda: obj.SetSecret(secret, dbus_interface=ITEM_IFACE))
    finally:
        close_session(bus, session)


def cmd_delete(bus, args):
    svc = service(bus)
    coll = default_collection(bus, svc)
    items = matching_items(bus, svc, coll, attrs_from(args.attrs))
    if not items:
        raise RuntimeError("no unlocked item in %s matches %s" % (coll, " ".join(args.attrs)))
    for item in items:
        obj = bus.get_object(BUS_NAME, item, introspect=False)
        prompt = retry(lambda: obj.Delete(dbus_interface=ITEM_IFACE))
        if prompt != "/" and not run_prompt(bus, prompt, args.timeout):
            raise RuntimeError("deleting %s was dismissed" % item)


def cmd_count(bus, args):
    svc = service(bus)
    coll = default_collection(bus, svc)
    print(len(matching_items(bus, svc, coll, attrs_from(args.attrs))))


def main():
    ap = argparse.ArgumentParser(prog="keepassxc_control.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("wait-ready")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--pid", type=int, help="the KeePassXC process that must own the name")
    p = sub.add_parser("lock")
    p.add_argument("--timeout", type=float, default=5.0)
    p = sub.add_parser("unlock")
    p.add_argument("--database", required=True)
    p.add_argument("--password-stdin", action="store_true", required=True)
    # openDatabase returns once the unlock is done; the wait only covers a slow
    # bus, and is all a wrong password costs.
    p.add_argument("--timeout", type=float, default=2.0)
    sub.add_parser("is-locked")
    p = sub.add_parser("set-secret")
    p.add_argument("--content-type", default="text/plain")
    p.add_argument("attrs", nargs="+", metavar="ATTR VALUE")
    p = sub.add_parser("delete")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("attrs", nargs="+", metavar="ATTR VALUE")
    p = sub.add_parser("count")
    p.add_argument("attrs", nargs="+", metavar="ATTR VALUE")
    args = ap.parse_args()

    handlers = {
        "wait-ready": cmd_wait_ready,
        "lock": cmd_lock,
        "unlock": cmd_unlock,
        "is-locked": cmd_is_locked,
        "set-secret": cmd_set_secret,
        "delete": cmd_delete,
        "count": cmd_count,
    }
    try:
        if args.cmd in ("delete",):
            # signals (Prompt.Completed) need a main loop attached before the bus is opened
            from dbus.mainloop.glib import DBusGMainLoop
            DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        handlers[args.cmd](bus, args)
    except (dbus.DBusException, RuntimeError, UnicodeDecodeError) as e:
        sys.stderr.write("keepassxc_control %s: %s\n" % (args.cmd, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
