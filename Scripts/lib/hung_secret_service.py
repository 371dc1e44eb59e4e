#!/usr/bin/python3
"""A fake Secret Service that hangs: it owns org.freedesktop.secrets and leaves calls unanswered.

For tokenctl's bounded-wait tests (a stand-in by necessity: gnome-keyring cannot be made to
answer the session set-up and then hang on a search).  Needs the Debian package python3-dbus
(and python3-gi for the main loop), installed for /usr/bin/python3 only: run this file as
`/usr/bin/python3 hung_secret_service.py ...`.  Talks to the bus in $DBUS_SESSION_BUS_ADDRESS.

    hung_secret_service.py --mode silent --pid-file FILE [--log FILE]
    hung_secret_service.py --mode open-session-only --pid-file FILE [--log FILE]
    hung_secret_service.py --mode garbles-first-secret --secret-file F --pid-file FILE [--log FILE]

Modes:
  silent             owns the name and answers nothing (a daemon stuck before its first reply).
  open-session-only  answers what a client does before its first search, as libsecret makes
                     those calls (checked with dbus-monitor against gnome-keyring 42 and
                     libsecret 0.20): Properties.Get/GetAll of the Service (Collections),
                     OpenSession with the "plain" algorithm (others are refused with
                     NotSupported, which makes libsecret fall back to plain), ReadAlias, and the
                     default collection's properties (unlocked, no items).  Every other call
                     (SearchItems, CreateItem, GetSecrets, SetSecret, Delete, Unlock, ...) is
                     never answered.
  garbles-first-secret  answers as open-session-only, and also SearchItems (one item for
                     attributes with kind=session, none otherwise) and GetSecrets: the first
                     time with bytes that are not a token set (what a daemon sends when the
                     session's keys are not the client's, as kwalletd5 now and then agrees),
                     then with the bytes of --secret-file. Other calls are never answered.

The PID file is written once the name is owned (the process keeps running until SIGTERM).
--log appends one line per method call received ("answered" or "held"), so a test can see
which calls were made.  Exit status: 0 on SIGTERM, 1 failure (message on stderr), 2 usage.
"""

import argparse
import os
import signal
import sys

try:
    import dbus
    import dbus.lowlevel
    import dbus.mainloop.glib
    from gi.repository import GLib
except ImportError as error:
    sys.stderr.write("hung_secret_service: %s (apt-get install python3-dbus python3-gi; "
                     "run with /usr/bin/python3)\n" % error)
    sys.exit(1)

BUS_NAME = "org.freedesktop.secrets"
SERVICE_PATH = "/org/freedesktop/secrets"
COLLECTION_PATH = "/org/freedesktop/secrets/collection/login"
SESSION_PATH = "/org/freedesktop/secrets/session/s1"
ITEM_PATH = COLLECTION_PATH + "/i1"
GARBLED = b"\x8f\x1c\xd2garbled\x07"
PROPERTIES = "org.freedesktop.DBus.Properties"
SERVICE = "org.freedesktop.Secret.Service"
COLLECTION = "org.freedesktop.Secret.Collection"


def service_properties():
    return {"Collections": dbus.Array([dbus.ObjectPath(COLLECTION_PATH)], signature="o")}


def collection_properties():
    return {
        "Items": dbus.Array([], signature="o"),
        "Label": dbus.String("Login"),
        "Locked": dbus.Boolean(False),
        "Created": dbus.UInt64(0),
        "Modified": dbus.UInt64(0),
    }


def secret_answer(message, secrets):
    """The reply to a search or a secret's read in garbles-first-secret mode, or None.
    `secrets` is the list of secrets still to give, the last one given again and again."""
    member, args = message.get_member(), message.get_args_list()
    if member == "SearchItems":
        found = [dbus.ObjectPath(ITEM_PATH)] if args and args[0].get("kind") == "session" else []
        return ("aoao", [dbus.Array(found, signature="o"), dbus.Array([], signature="o")])
    if member == "GetSecrets":
        value = secrets.pop(0) if len(secrets) > 1 else secrets[0]
        secret = dbus.Struct((dbus.ObjectPath(SESSION_PATH), dbus.ByteArray(b""), dbus.ByteArray(value),
                              dbus.String("text/plain")), signature="oayays")
        found = {dbus.ObjectPath(p): secret for p in args[0] if p == ITEM_PATH} if args else {}
        return ("a{o(oayays)}", [dbus.Dictionary(found, signature="o(oayays)")])
    return None


def answer(message, secrets=None):
    """The reply to `message` in open-session-only mode (and, with `secrets`, in
    garbles-first-secret mode): (signature, values), an error name, or None to hold it forever."""
    interface, member, path = message.get_interface(), message.get_member(), message.get_path()
    args = message.get_args_list()
    if secrets is not None and interface == SERVICE and path == SERVICE_PATH:
        reply = secret_answer(message, secrets)
        if reply is not None:
            return reply
    if interface == PROPERTIES and path in (SERVICE_PATH, COLLECTION_PATH):
        table = service_properties() if path == SERVICE_PATH else collection_properties()
        wanted = SERVICE if path == SERVICE_PATH else COLLECTION
        if member == "GetAll" and args and args[0] in (wanted, ""):
            return ("a{sv}", [dbus.Dictionary(table, signature="sv")])
        if member == "Get" and len(args) == 2 and args[0] == wanted and args[1] in table:
            return ("v", [table[args[1]]])
        return None
    if interface == SERVICE and path == SERVICE_PATH:
        if member == "OpenSession":
            if args and args[0] == "plain":
                return ("vo", [dbus.String("", variant_level=1), dbus.ObjectPath(SESSION_PATH)])
            return "org.freedesktop.DBus.Error.NotSupported"
        if member == "ReadAlias":
            return ("o", [dbus.ObjectPath(COLLECTION_PATH if args and args[0] == "default" else "/")])
    return None


def main():
    parser = argparse.ArgumentParser(description="A Secret Service that never answers (some) calls.")
    parser.add_argument("--mode", choices=["silent", "open-session-only", "garbles-first-secret"], required=True)
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("--log")
    parser.add_argument("--secret-file")
    options = parser.parse_args()
    secrets = None
    if options.mode == "garbles-first-secret":
        if not options.secret_file:
            parser.error("garbles-first-secret needs --secret-file")
        with open(options.secret_file, "rb") as secret_file:
            secrets = [GARBLED, secret_file.read()]

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    try:
        bus = dbus.SessionBus()
    except dbus.DBusException as error:
        sys.stderr.write("hung_secret_service: cannot connect to the session bus: %s\n" % error)
        return 1
    log = open(options.log, "a", buffering=1) if options.log else None
    held = []  # unanswered calls stay referenced: the caller waits for its own timeout

    def on_message(connection, message):
        if not isinstance(message, dbus.lowlevel.MethodCallMessage) or message.get_destination() is None:
            return dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED
        if message.get_destination() != BUS_NAME and message.get_destination() != connection.get_unique_name():
            return dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED
        reply = answer(message, secrets) if options.mode != "silent" else None
        if log:
            log.write("%s %s.%s %s\n" % ("held" if reply is None else "answered",
                                         message.get_interface(), message.get_member(), message.get_path()))
        if reply is None:
            held.append(message)
        elif isinstance(reply, str):
            connection.send_message(dbus.lowlevel.ErrorMessage(message, reply, "not supported"))
        else:
            signature, values = reply
            response = dbus.lowlevel.MethodReturnMessage(message)
            response.append(*values, signature=signature)
            connection.send_message(response)
        return dbus.lowlevel.HANDLER_RESULT_HANDLED

    bus.add_message_filter(on_message)
    flags = dbus.bus.NAME_FLAG_DO_NOT_QUEUE
    if bus.request_name(BUS_NAME, flags) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
        sys.stderr.write("hung_secret_service: %s already has an owner\n" % BUS_NAME)
        return 1
    with open(options.pid_file + ".tmp", "w") as pid_file:
        pid_file.write("%d\n" % os.getpid())
    os.rename(options.pid_file + ".tmp", options.pid_file)

    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
