import Foundation
import Testing
import TokenctlTestSupport

/// `forward enable` under a real systemd user manager (Debian's systemd 252, started for the
/// user tokenctl-remote by Scripts/lib/usermanager.sh: PID 1 here is not systemd): the units it
/// writes are loaded, the socket is enabled at %t/tokenctl/forward.sock, the first connection
/// starts one `tokenctl forward serve` (Accept=no: it is handed the listening socket) that serves
/// every connection against the user's own keyring and session, a burst of 300 connections is
/// answered without failing the socket, the peer check refuses another user, and `forward
/// disable` takes it all away.
@Suite("End to end: the forward socket unit under a systemd user manager")
struct ForwardSocketUnitTests {
    static let script = #"""
        set -euo pipefail
        lib=$1 work=$2 bin=$3
        source "$lib/services.sh"; source "$lib/sshd.sh"; source "$lib/usermanager.sh"
        user=$TK_SSHD_USER_NAME
        tk_services_init "$work/svc"
        cleanup() {
          [[ -n ${home:-} ]] && as_user bash -c "source $work/lib/services.sh; trap : EXIT; TK_SERVICES_DIR=$home/svc; tk_services_stop_all" || true
          tk_stop_user_manager "$user" || true
          tk_services_stop_all || true
        }
        trap cleanup EXIT
        _tk_sshd_user >/dev/null
        tk_start_user_manager "$user" "$work/um"
        rt=$TK_USER_MANAGER_RUNTIME home=$TK_USER_MANAGER_HOME
        mkdir -p "$work/um/bin" "$work/um/client" "$work/lib"
        cp "$bin/tokenctl" "$bin/tokenctl-engine" "$work/um/bin/"
        cp -R "$lib/." "$work/lib/"
        chown -R "$user:" "$work/um/bin" "$work/um/client"
        chmod -R a+rX "$work/lib"; chmod a+x "$work"
        as_user() {
          runuser -u "$user" -- env -i PATH="$work/um/bin:/usr/bin:/bin" HOME="$home" XDG_RUNTIME_DIR="$rt" \
            TOKENCTL_RUNTIME_DIR="$rt" DBUS_SESSION_BUS_ADDRESS="unix:path=$rt/bus" LANG=C.UTF-8 "$@"
        }
        # The user's own unlocked keyring on the manager's user bus (dbus-user-session), in place
        # of the stock gnome-keyring units, which would replace it with one without a login collection.
        tk_user_systemctl "$user" mask --now gnome-keyring-daemon.socket gnome-keyring-daemon.service >&2 2>&1 || true
        as_user bash -c "source $work/lib/services.sh; trap : EXIT; tk_services_init $home/svc; export DBUS_SESSION_BUS_ADDRESS=unix:path=$rt/bus; tk_start_keyring test" >&2
        printf %s "$REFRESH_TOKEN" | as_user tokenctl login --issuer "$ISSUER" --client-id cli --refresh-token-stdin >&2
        as_user tokenctl forward enable 2>&1 | sed 's/^/ENABLE:/'
        echo "UNIT:$(tk_user_systemctl "$user" is-active tokenctl-forward.socket || true)"
        echo "SOCKET:$(stat -c '%F %a %U' "$rt/tokenctl/forward.sock")"
        echo "LOCAL:$(as_user tokenctl token)"
        echo "FORWARDED:$(as_user env HOME="$work/um/client" TOKENCTL_FORWARD_SOCKET="$rt/tokenctl/forward.sock" tokenctl token 2>&1)"
        echo "ROOT:$(env -i TOKENCTL_FORWARD_SOCKET="$rt/tokenctl/forward.sock" HOME=/nonexistent "$bin/tokenctl" token 2>&1; echo " rc=$?")"
        # The client refuses a socket another user serves; the serving side refuses the peer too.
        raw=$(python3 - "$rt/tokenctl/forward.sock" <<'PY' 2>&1 || true
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        try:
            s.sendall(b"tokenctl-forward-v1 request\nprofile=default\ncommand=token\n\n")
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                # The serving side refuses by SO_PEERCRED before reading the request: its close
                # with the request unread resets the connection after its answer (unix(7)).
                break
            if not chunk:
                break
            data += chunk
        print(data.decode(errors="replace").replace("\n", "|"))
        PY
        )
        echo "ROOT_RAW:$raw"
        echo "SERVICE:$(tk_user_systemctl "$user" show -p ActiveState --value tokenctl-forward.service)"
        # 300 connections at once on the socket alone (an Accept=yes socket failed with
        # trigger-limit-hit here): they start one serving process and wait for it.
        tk_user_systemctl "$user" stop tokenctl-forward.service
        echo "COLD:$(tk_user_systemctl "$user" is-active tokenctl-forward.service || true)"
        printf '%s' "$BURST" >"$work/burst.py"; chmod a+r "$work/burst.py"
        as_user python3 "$work/burst.py" "$rt/tokenctl/forward.sock" 300 | sed 's/^/BURST:/'
        echo "UNIT_AFTER_BURST:$(tk_user_systemctl "$user" is-active tokenctl-forward.socket || true)"
        echo "SOCKET_AFTER_BURST:$(stat -c '%F' "$rt/tokenctl/forward.sock" 2>&1)"
        pid=$(tk_user_systemctl "$user" show -p MainPID --value tokenctl-forward.service)
        # And 300 more on the running process: the same one serves them.
        as_user python3 "$work/burst.py" "$rt/tokenctl/forward.sock" 300 | sed 's/^/BURST:/'
        echo "SAME_PROCESS:$([[ $pid != 0 && $(tk_user_systemctl "$user" show -p MainPID --value tokenctl-forward.service) == "$pid" ]] && echo yes || echo no)"
        echo "FORWARDED_AFTER_BURST:$(as_user env HOME="$work/um/client" TOKENCTL_FORWARD_SOCKET="$rt/tokenctl/forward.sock" TOKENCTL_TEST_DISABLE_KERNEL_KEYRING=1 tokenctl token 2>&1)"
        # Idle exit: the serving process ends by itself; the socket starts the next one.
        tk_user_systemctl "$user" set-environment TOKENCTL_FORWARD_IDLE_EXIT=1
        tk_user_systemctl "$user" stop tokenctl-forward.service
        first=$(as_user env HOME="$work/um/client" TOKENCTL_FORWARD_SOCKET="$rt/tokenctl/forward.sock" TOKENCTL_TEST_DISABLE_KERNEL_KEYRING=1 tokenctl token 2>&1)
        for _ in $(seq 100); do [[ $(tk_user_systemctl "$user" is-active tokenctl-forward.service || true) == inactive ]] && break; sleep 0.1; done
        echo "IDLE:$(tk_user_systemctl "$user" is-active tokenctl-forward.service || true) $(tk_user_systemctl "$user" show -p Result --value tokenctl-forward.service)"
        echo "FORWARDED_AFTER_IDLE:$(as_user env HOME="$work/um/client" TOKENCTL_FORWARD_SOCKET="$rt/tokenctl/forward.sock" TOKENCTL_TEST_DISABLE_KERNEL_KEYRING=1 tokenctl token 2>&1) $([[ $first == "$(as_user tokenctl token)" ]] && echo same || echo "first: $first")"
        tk_user_systemctl "$user" unset-environment TOKENCTL_FORWARD_IDLE_EXIT
        as_user tokenctl forward status | sed 's/^/STATUS:/'
        as_user tokenctl forward disable 2>&1 | sed 's/^/DISABLE:/'
        echo "AFTER:$(tk_user_systemctl "$user" is-active tokenctl-forward.socket || true)"
        ls "$home/.config/systemd/user" | sed 's/^/LEFT:/'
        """#

    @Test(
        "forward enable writes and enables the user socket unit (Accept=no); one forward serve serves every connection with the user's session; 300 connections at once are answered and the socket stays active; another user is refused; disable removes the units"
    )
    func socketUnit() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/lib/systemd/systemd") else { return }
        let environment = try TestEnvironment.require()
        let server = try AuthServer()
        let lib = URL(
            fileURLWithPath: ProcessInfo.processInfo.environment["TOKENCTL_SSHD_SH"]
                ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                    "../../Scripts/lib/sshd.sh"
                ).standardized.path
        )
        .deletingLastPathComponent().path
        let work = "/tmp/tokenctl-unit-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let bin = URL(fileURLWithPath: environment.binary).deletingLastPathComponent().path
        let result = try runProgram(
            "/bin/bash", ["-c", Self.script, "unit-test", lib, work, bin],
            environment: [
                "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": work, "REFRESH_TOKEN": try server.issue(),
                "ISSUER": server.url,
                "TK_PYTHON": "/usr/bin/python3", "BURST": ForwardTests.burst,
            ])
        func values(_ key: String) -> [String] {
            result.stdout.split(separator: "\n").filter { $0.hasPrefix(key + ":") }.map {
                String($0.dropFirst(key.count + 1))
            }
        }
        #expect(result.status == 0, "\(result)")
        #expect(
            values("ENABLE").contains { $0.contains("Enabled systemd user socket tokenctl-forward.socket") },
            "\(result)")
        #expect(values("UNIT") == ["active"], "\(result)")
        #expect(values("SOCKET") == ["socket 600 tokenctl-remote"], "\(result)")
        let local = try #require(values("LOCAL").first)
        #expect(!local.isEmpty && values("FORWARDED") == [local], "served through the unit: \(result)")
        #expect(
            result.stdout.contains("ROOT:Error: ") && result.stdout.contains("not by this user (uid 0)")
                && result.stdout.contains(" rc=69\n"), "the client refuses another user's socket: \(result)")
        let raw = values("ROOT_RAW").joined()
        #expect(
            raw.contains("runs as uid 0;") && raw.contains("status=77"),
            "the serving side refuses another user by SO_PEERCRED: \(result)")
        #expect(values("SERVICE") == ["active"], "one serving process, started by the socket: \(result)")
        #expect(values("COLD") == ["inactive"], "\(result)")
        #expect(values("BURST") == ["300 tokenctl-forward-v1 token", "300 tokenctl-forward-v1 token"], "\(result)")
        #expect(values("UNIT_AFTER_BURST") == ["active"] && values("SOCKET_AFTER_BURST") == ["socket"], "\(result)")
        #expect(values("SAME_PROCESS") == ["yes"], "the burst was served by the same process: \(result)")
        #expect(values("FORWARDED_AFTER_BURST") == [local], "still serving after the burst: \(result)")
        #expect(values("IDLE") == ["inactive success"], "the serving process exits when idle: \(result)")
        #expect(values("FORWARDED_AFTER_IDLE") == [local + " same"], "and the socket starts it again: \(result)")
        #expect(values("STATUS").contains { $0.hasPrefix("Socket unit: tokenctl-forward.socket active") }, "\(result)")
        #expect(values("STATUS").contains { $0.contains("handed out default") }, "\(result)")
        #expect(values("AFTER") != ["active"] && !values("LEFT").contains { $0.hasPrefix("tokenctl") }, "\(result)")
    }
}
