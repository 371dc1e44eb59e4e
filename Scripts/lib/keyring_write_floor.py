#!/usr/bin/python3
"""The Secret Service's own cost of writing N items, for Scripts/bench.

Finds the items matching the attributes given (KEY=VALUE ...), reads their secrets once over a
"plain" session, then writes each item's own secret back with Item.SetSecret, one call at a
time from this one connection: no search, no item proxy, no HTTP, no journal, and the items
end as they were. gnome-keyring serves calls one at a time and rewrites its keyring file on
every write, so however many clients send them, these writes take about this long: the floor
of `tokenctl refresh --all`, which must write every profile's rotated set to the same items.

    /usr/bin/python3 keyring_write_floor.py application=tokenctl kind=session
    # prints: ITEMS MILLISECONDS

Needs python3-dbus (Debian's, for /usr/bin/python3). Talks to $DBUS_SESSION_BUS_ADDRESS.
Nothing it reads is printed or kept.
"""

import sys
import time

import dbus

attributes = dict(argument.split("=", 1) for argument in sys.argv[1:])
bus = dbus.SessionBus()
service = dbus.Interface(bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets"),
                         "org.freedesktop.Secret.Service")
_, session = service.OpenSession("plain", dbus.String("", variant_level=1))
paths, locked = service.SearchItems(attributes)
if not paths or locked:
    sys.exit("keyring_write_floor: %d unlocked and %d locked items match %r" % (len(paths), len(locked), attributes))
secrets = service.GetSecrets(paths, session)
writes = [(dbus.Interface(bus.get_object("org.freedesktop.secrets", path), "org.freedesktop.Secret.Item"),
           secrets[path]) for path in paths]
start = time.monotonic()
for item, secret in writes:
    item.SetSecret(secret)
print("%d %d" % (len(writes), round((time.monotonic() - start) * 1000)))
