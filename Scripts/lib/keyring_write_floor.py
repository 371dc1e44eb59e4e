#!/usr/bin/python3
"""The Secret Service's own cost of writing tokenctl's items, for Scripts/bench.

Finds the items matching the attributes given (KEY=VALUE ...), takes its share of them (PART
of PARTS, by path), reads their secrets once over a "plain" session, waits for the wall-clock
instant START (seconds since the epoch), then writes each item's own secret back with
Item.SetSecret, one call after another: no search, no item proxy, no HTTP, no journal, and the
items end as they were. It prints the instant its last write was answered. Scripts/bench runs
several at once with one START, so the daemon always has a write waiting: gnome-keyring serves
calls one at a time and rewrites its keyring file on every write, so those writes take about
(last answer - START) however many clients send them. That is the floor of `tokenctl refresh
--all`, which must write every profile's rotated set to the same items.

    /usr/bin/python3 keyring_write_floor.py PART/PARTS START application=tokenctl kind=session
    # prints: ITEMS_WRITTEN LAST_ANSWER (seconds since the epoch)

Needs python3-dbus (Debian's, for /usr/bin/python3). Talks to $DBUS_SESSION_BUS_ADDRESS.
Nothing it reads is printed or kept.
"""

import sys
import time

import dbus

part, parts = (int(n) for n in sys.argv[1].split("/"))
start = float(sys.argv[2])
attributes = dict(argument.split("=", 1) for argument in sys.argv[3:])
bus = dbus.SessionBus()
service = dbus.Interface(bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets"),
                         "org.freedesktop.Secret.Service")
_, session = service.OpenSession("plain", dbus.String("", variant_level=1))
paths, locked = service.SearchItems(attributes)
if not paths or locked:
    sys.exit("keyring_write_floor: %d unlocked and %d locked items match %r" % (len(paths), len(locked), attributes))
mine = [path for index, path in enumerate(sorted(paths)) if index % parts == part]
secrets = service.GetSecrets(mine, session)
writes = [(dbus.Interface(bus.get_object("org.freedesktop.secrets", path), "org.freedesktop.Secret.Item"),
           secrets[path]) for path in mine]
if time.time() >= start:
    sys.exit("keyring_write_floor: ready only after the start instant; give more time")
time.sleep(start - time.time())
for item, secret in writes:
    item.SetSecret(secret)
print("%d %.6f" % (len(writes), time.time()))
