#!/usr/bin/env python3
"""Chaos schedules against tokenctl: run by Scripts/chaos (which starts the services).

One schedule is one wave of 1 to 12 concurrent `tokenctl token` / `tokenctl refresh` processes
in mixed environments (full, without XDG_RUNTIME_DIR, an `env -i`-like minimal one), each the
leader of a process group of its own (as a shell's job or a CI step is), with, at random:
server faults (5xx, 429, slow answers, closed connections, hangs, through the test server's
fault queue), a keyring freeze (SIGSTOP/SIGCONT of gnome-keyring for a moment), and in about one
wave in four a SIGKILL at a random moment of one of its processes, or of its whole process group
(as `timeout -s KILL` or a CI runner does); then one `tokenctl refresh` that must find the
session. Two CPU-bound processes run beside it all. The server rotates refresh tokens, allows no
grace period and revokes the family on reuse.

Invariants checked after every wave (from the server's log, which records every redemption and
the refresh token each answer carried):
  * the server never saw a refresh token reused;
  * no session is lost (no exit 77, and the probe refresh finds the session).
tokenctl runs each refresh exchange in a detached process of its own session, which a kill of
the caller or its process group does not reach: even the refresh in flight at a kill is stored.
Anything else is a violation: reported with the seed and schedule, and the run exits 1.

    chaos.py --tokenctl BIN --authserver-url URL --keyring-pid-file F --bus ADDRESS \
             --dir DIR [--schedules N] [--seed S] [--kill-rate 0.25] [--verbose]
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

CLIENT_ID = "chaos"


def api(url, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"null")


def holds_flock(pids, inode):
    """Whether one of `pids` holds an flock(2) on the file with this inode (/proc/locks)."""
    wanted = {str(pid) for pid in pids}
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF" (a blocked waiter: "1: -> FLOCK ...")
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4] in wanted and fields[5].rsplit(":", 1)[-1] == str(inode):
                    return True
    except OSError:
        pass
    return False


def with_children(pid):
    """`pid` and its children: a caller and the detached refresh it started (setsid keeps the
    parent). Each thread lists the children it started: every thread's list is read."""
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(child) for child in f.read().split()]
    except OSError:
        pass
    return pids


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.url = args.authserver_url
        self.server_port = int(self.url.rsplit(":", 1)[1])
        self.profile = f"chaos{os.getpid()}"
        home = os.path.join(args.dir, "home")
        runtime = os.path.join(args.dir, "runtime")
        for d in (home, runtime):
            os.makedirs(d, mode=0o700, exist_ok=True)
        base = {"HOME": home, "DBUS_SESSION_BUS_ADDRESS": args.bus}
        full = dict(base, PATH="/usr/local/bin:/usr/bin:/bin", LANG="C.UTF-8", XDG_RUNTIME_DIR=runtime)
        self.environments = {
            "full": full,
            "no-xdg-runtime": {k: v for k, v in full.items() if k != "XDG_RUNTIME_DIR"},
            "minimal": base,  # as `env -i HOME=… DBUS_SESSION_BUS_ADDRESS=…` leaves it
        }
        self.log_seen = 0
        self.log = []  # every /token entry so far
        self.figures = dict(schedules=0, waves=0, processes=0, kills=0, kills_of_process_group=0,
                            killed_mid_refresh=0, freezes=0, faults=0, refreshes_issued=0, reuse_seen=0,
                            sessions_lost=0, exit_codes={}, keyring_restarts=0)
        self.violations = []
        self.lost_now = False

    def say(self, text):
        print(text, flush=True)

    def run(self, command, env="full", stdin=None, timeout=120):
        return subprocess.run([self.args.tokenctl, "--profile", self.profile] + command, env=self.environments[env],
                              input=stdin, capture_output=True, text=True, timeout=timeout, cwd=self.args.dir)

    def login(self):
        # One-use refresh tokens, no grace period: a reuse revokes the whole family.
        api(self.url, "POST", "/_test/config", {"faults": [], "delay_seconds": 0, "rotate": True, "grace_seconds": 0})
        rt = api(self.url, "POST", "/_test/issue", {"client_id": CLIENT_ID, "sub": "chaos"})["refresh_token"]
        self.run(["logout", "--no-revoke"])
        result = self.run(["login", "--issuer", self.url, "--client-id", CLIENT_ID, "--refresh-token-stdin"], stdin=rt)
        if result.returncode != 0:
            raise SystemExit(f"chaos: login failed: {result.stderr}")
        self.sync_log()

    def sync_log(self):
        entries = api(self.url, "GET", "/_test/log")
        new = [e for e in entries[self.log_seen:] if e.get("path") == "/token"]
        self.log_seen = len(entries)
        self.log.extend(new)
        return new

    def keyring_pid(self):
        with open(self.args.keyring_pid_file) as f:
            return int(f.read().strip())

    def keyring_alive(self):
        try:
            with open(f"/proc/{self.keyring_pid()}/stat") as f:
                return f.read().split(") ")[1].split()[0] != "Z"
        except OSError:
            return False

    # -- one wave ----------------------------------------------------------

    def wave(self, number):
        rng = self.rng
        f = self.figures
        count = rng.randint(1, 12)
        plan = [(rng.choice(["token", "token", "refresh"]), rng.choice(list(self.environments))) for _ in range(count)]
        faults = []
        if rng.random() < 0.35:
            for _ in range(rng.randint(1, 3)):
                kind = rng.choice(["503", "500", "429", "delay", "delay", "close", "hang"])
                if kind == "429":
                    faults.append({"status": 429, "body": {"error": "slow_down"}, "headers": {"Retry-After": "1"}})
                elif kind in ("500", "503"):
                    faults.append({"status": int(kind), "body": "<html>busy</html>", "content_type": "text/html"})
                elif kind == "delay":
                    faults.append({"delay": round(rng.uniform(0.2, 1.5), 2)})
                elif kind == "close":
                    faults.append({"close": True})
                else:
                    faults.append({"hang": round(rng.uniform(0.5, 2.0), 2)})
            f["faults"] += len(faults)
        slow = round(rng.choice([0, 0, 0.05, 0.2, 0.5]), 2)
        # Short access tokens: `token` refreshes about every other wave.
        api(self.url, "POST", "/_test/config", {"faults": faults, "delay_seconds": slow, "access_ttl": rng.choice([1, 2, 30])})
        freeze = (rng.uniform(0, 0.6), rng.uniform(0.2, 2.5)) if rng.random() < 0.2 else None
        victim = rng.randrange(count) if rng.random() < self.args.kill_rate else None
        kill_after = rng.uniform(0.0, 1.5)
        kill_group = rng.random() < 0.5
        # Half the kills at a random moment, half once the victim's refresh is under way (its
        # exchange holds the profile lock), a random moment into it: the refresh in flight.
        kill_mid_refresh = rng.random() < 0.5
        kill_into_refresh = rng.uniform(0.0, 0.4)
        if victim is not None and kill_mid_refresh:
            plan[victim] = ("refresh", plan[victim][1])  # one that refreshes whatever the token
        if freeze:
            f["freezes"] += 1

        processes = []
        for command, env in plan:
            processes.append(subprocess.Popen([self.args.tokenctl, "--profile", self.profile] + [command],
                                              env=self.environments[env], stdin=subprocess.DEVNULL,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.args.dir,
                                              process_group=0))
        started = time.time()
        threads = []
        if freeze:
            def freezer(delay=freeze[0], length=freeze[1]):
                time.sleep(delay)
                pid = self.keyring_pid()
                try:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(length)
                finally:
                    os.kill(pid, signal.SIGCONT)
            threads.append(threading.Thread(target=freezer))
        killed = {}
        if victim is not None:
            def killer(process=processes[victim]):
                if kill_mid_refresh:
                    deadline = started + 5
                    while time.time() < deadline and process.poll() is None:
                        if holds_flock(with_children(process.pid), self.lock_inode()):
                            break
                        time.sleep(0.001)
                    deadline = time.time() + kill_into_refresh
                else:
                    deadline = started + kill_after
                while time.time() < deadline and process.poll() is None:
                    time.sleep(0.001)
                if process.poll() is None:
                    # Mid-refresh: the caller's detached exchange (or the caller) holds the lock.
                    killed["mid_refresh"] = holds_flock(with_children(process.pid), self.lock_inode())
                    if kill_group:
                        os.killpg(process.pid, signal.SIGKILL)
                    else:
                        process.send_signal(signal.SIGKILL)
                    killed["at"] = time.time()
            threads.append(threading.Thread(target=killer))
        for t in threads:
            t.start()
        results = []
        for process in processes:
            try:
                out, err = process.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
                self.violation(number, f"a process did not end within 180 s: {err[-300:]}")
            results.append((process.returncode, err))
        for t in threads:
            t.join()
        if not self.keyring_alive():
            # gnome-keyring 42 can abort when a client dies mid-call (its data is on disk).
            f["keyring_restarts"] += 1
            subprocess.run(["bash", "-c", self.args.restart_keyring], check=True)
        if killed:
            f["kills"] += 1
            f["kills_of_process_group"] += 1 if kill_group else 0
            f["killed_mid_refresh"] += 1 if killed["mid_refresh"] else 0
        # A hung fault outlives the wave at the server: let it end before the probe.
        api(self.url, "POST", "/_test/config", {"faults": [], "delay_seconds": 0})
        codes = [code for code, _ in results]
        f["processes"] += len(codes)
        for code in codes:
            f["exit_codes"][str(code)] = f["exit_codes"].get(str(code), 0) + 1
        probe = self.run(["refresh"])
        new = self.sync_log()
        f["refreshes_issued"] += sum(1 for e in new if e["outcome"] in ("issued", "grace_replay"))
        lost = probe.returncode == 77 or 77 in codes
        if self.args.verbose or lost or any(e["outcome"] == "reuse_detected" for e in new):
            self.say(f"wave {number}: {count} x {[c + '/' + e for c, e in plan]} faults={faults} slow={slow} "
                     f"freeze={freeze and tuple(round(x, 2) for x in freeze)} "
                     f"kill={'none' if victim is None else (f'#{victim} {kill_into_refresh:.2f}s into its refresh' if kill_mid_refresh else f'#{victim} at {kill_after:.2f}s') + (' (group)' if kill_group else '')}"
                     f"{' (exited before)' if victim is not None and not killed else ''} "
                     f"codes={codes} probe={probe.returncode}")
        self.check(number, new, lost, probe, results)
        if probe.returncode not in (0, 77):
            # Transient (75) or a store hiccup: the session must still be there for the next wave.
            retry = self.run(["refresh"])
            new = self.sync_log()
            if retry.returncode == 77:
                self.check(number, new, True, retry, results)
            elif retry.returncode != 0:
                self.violation(number, f"the probe refresh failed twice: {probe.returncode} {probe.stderr.strip()[-300:]} / "
                                       f"{retry.returncode} {retry.stderr.strip()[-300:]}")
        if self.lost_now:
            self.login()
            self.lost_now = False

    def check(self, number, new, lost, probe, results):
        f = self.figures
        for reuse in (e for e in new if e["outcome"] == "reuse_detected"):
            f["reuse_seen"] += 1
            pair = sorted((e for e in self.log if e.get("refresh_token") == reuse["refresh_token"]), key=lambda e: e["received"])
            self.violation(number, f"refresh token reused: redemptions {[self.brief(e) for e in pair]}")
        if lost:
            self.lost_now = True
            f["sessions_lost"] += 1
            errors = sorted({err.strip().splitlines()[-1][:200] for code, err in results if code == 77 and err.strip()})
            self.violation(number, f"session lost: probe {probe.returncode} {probe.stderr.strip()[-300:]}; "
                                   f"wave errors {errors}; log {[self.brief(e) for e in new]}")

    def lock_inode(self):
        for directory in ("/run/user/%d/tokenctl" % os.getuid(), "/tmp/tokenctl-%d" % os.getuid()):
            try:
                return os.stat(f"{directory}/{self.profile}.lock").st_ino
            except OSError:
                continue
        return -1

    @staticmethod
    def brief(e):
        return {"rt": (e.get("refresh_token") or "")[:10], "outcome": e["outcome"],
                "received": round(e.get("received", 0), 3), "issued": (e.get("issued_refresh_token") or "")[:10]}

    def violation(self, number, text):
        self.violations.append((number, text))
        self.say(f"VIOLATION in schedule {number} (seed {self.args.seed}): {text}")

    def main(self):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        # CPU-bound, and gone with this process however it ends.
        # --load-nice: in the test suite they yield to the suites that run beside it.
        spin = f"import os\nos.nice({self.args.load_nice})\nparent = os.getppid()\nwhile os.getppid() == parent:\n    for _ in range(100000): pass\n"
        busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
        started = time.time()
        try:
            self.login()
            for number in range(1, self.args.schedules + 1):
                self.figures["schedules"] = number
                self.figures["waves"] = number
                if self.lost_now:
                    self.login()
                self.wave(number)
                if self.args.stop_on_violation and self.violations:
                    break
        finally:
            for b in busy:
                b.kill()
                b.wait()
            api(self.url, "POST", "/_test/config", {"faults": [], "delay_seconds": 0})
            self.run(["logout", "--no-revoke"])
        f = self.figures
        f["wall_seconds"] = round(time.time() - started, 1)
        f["seed"] = self.args.seed
        f["violations"] = len(self.violations)
        self.say("chaos figures: " + json.dumps(f, sort_keys=True))
        return 1 if self.violations else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenctl", required=True)
    parser.add_argument("--authserver-url", required=True)
    parser.add_argument("--keyring-pid-file", required=True)
    parser.add_argument("--restart-keyring", required=True, help="a bash command that starts the keyring daemon again")
    parser.add_argument("--bus", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--schedules", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--kill-rate", type=float, default=0.25)
    parser.add_argument("--stop-on-violation", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--load-nice", type=int, default=0, choices=range(0, 20), help="the nice value of the two CPU-bound processes")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    rate = "" if args.kill_rate == 0.25 else f" --kill-rate {args.kill_rate}"
    print(f"chaos: {args.schedules} schedules, seed {args.seed} (replay: Scripts/chaos --schedules {args.schedules} --seed {args.seed}{rate})",
          flush=True)
    sys.exit(Chaos(args).main())


if __name__ == "__main__":
    main()
