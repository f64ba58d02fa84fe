#!/usr/bin/env python3
"""Load and abuse test of `secinfer serve` on loopback (127.0.0.1 only), bounded in count and time.

One server; N honest clients (real `secinfer infer` processes, all started at once, each retrying
a "busy" refusal after a pause) and M hostile connections at a bounded concurrency:
slowloris (one byte a second), oversized handshakes (a 64 KiB record announced, or a 4 GiB
plaintext frame), replays (a recorded honest session's client bytes sent again), vanishing
peers (close at once, or half-way through the key exchange) and garbage. Reports throughput,
p50/p99 latency, the server's peak RSS (VmHWM), failures, panics and how each hostile kind
ended, as a table and as JSON (--json).

    python3 scripts/load/load.py --honest 64 --hostile 1000
"""
import argparse, json, os, random, re, socket, statistics, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = "127.0.0.1"
GREETING = 9


def start_server(a):
    cmd = [a.secinfer, "serve", "--host", HOST, "--port", "0", "--model", a.model,
           "--handshake-timeout", str(a.handshake_timeout)]
    if a.max_sessions:
        cmd += ["--max-sessions", str(a.max_sessions)]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    addr = srv.stdout.readline().split()[2]
    log = []
    threading.Thread(target=lambda: log.extend(srv.stderr), daemon=True).start()
    return srv, addr, log


def peak_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def honest(a, addr, i, out):
    text = ["a fine and moving film", "dull, silly and far too long", "i loved it"][i % 3]
    t0 = time.time()
    tries = 0
    while True:
        tries += 1
        p = subprocess.run([a.secinfer, "infer", "--server", addr, "--model-info", a.model,
                            "--text", text], capture_output=True, text=True,
                           timeout=a.time_limit)
        busy = "busy, retry later" in p.stderr
        if p.returncode == 0 or not busy or time.time() - t0 > a.time_limit or tries > 50:
            break
        time.sleep(0.5 + random.random())
    out.append({"ok": p.returncode == 0, "latency_s": time.time() - t0, "tries": tries,
                "err": p.stderr.strip().splitlines()[-1:] if p.returncode else []})


def connect(addr):
    h, p = addr.rsplit(":", 1)
    s = socket.create_connection((h, int(p)), timeout=30)
    s.settimeout(30)
    return s


def read_greeting(s):
    g = b""
    while len(g) < GREETING:
        c = s.recv(GREETING - len(g))
        if not c:
            break
        g += c
    return g


def until_closed(s, limit):
    """Reads until the server closes; returns ('closed', seconds) or ('open', limit)."""
    t0 = time.time()
    s.settimeout(1)
    while time.time() - t0 < limit:
        try:
            if not s.recv(4096):
                return "closed"
        except socket.timeout:
            continue
        except OSError:
            return "reset"
    return "still open"


def hostile(kind, addr, replay, limit):
    try:
        s = connect(addr)
    except OSError as e:
        return f"connect failed ({e.__class__.__name__})"
    try:
        g = read_greeting(s)
        if len(g) == GREETING and g[5] == 1:
            return "refused busy"
        if kind == "slowloris":
            s.settimeout(2)
            t0 = time.time()
            try:
                s.sendall(b"\x30\x00")
                while time.time() - t0 < limit:
                    s.sendall(b"\x00")
                    time.sleep(1)
                    s.setblocking(False)
                    try:
                        if s.recv(1) == b"":
                            return "cut by server"
                    except BlockingIOError:
                        pass
                    s.setblocking(True)
            except OSError:
                return "cut by server"
            return "still open"
        if kind == "oversized-noise":
            s.sendall(b"\xff\xff" + os.urandom(65535))
        elif kind == "oversized-plain":
            s.sendall(b"\xff\xff\xff\xff" + os.urandom(4096))
        elif kind == "replay":
            s.sendall(replay)
        elif kind == "vanish":
            return "vanished"
        elif kind == "vanish-midway":
            s.sendall(b"\x30\x00" + os.urandom(20))
            return "vanished"
        elif kind == "garbage":
            s.sendall(os.urandom(random.randint(1, 3000)))
        return "cut by server" if until_closed(s, limit) != "still open" else "still open"
    except OSError:
        return "cut by server"
    finally:
        s.close()


def record_replay(a, addr):
    """Runs one honest client through a recording proxy; returns its client-to-server bytes."""
    ls = socket.socket()
    ls.bind((HOST, 0))
    ls.listen(1)
    rec = bytearray()

    def pump(src, dst, keep):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if keep:
                    rec.extend(b)
                dst.sendall(b)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def proxy():
        c, _ = ls.accept()
        s = connect(addr)
        t = threading.Thread(target=pump, args=(s, c, False))
        t.start()
        pump(c, s, True)
        t.join()

    t = threading.Thread(target=proxy)
    t.start()
    subprocess.run([a.secinfer, "infer", "--server", f"{HOST}:{ls.getsockname()[1]}",
                    "--model-info", a.model, "--text", "a fine film"], capture_output=True)
    t.join()
    return bytes(rec)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secinfer", default=os.path.join(ROOT, "target/release/secinfer"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/imdb-relu-gru"))
    ap.add_argument("--honest", type=int, default=64)
    ap.add_argument("--hostile", type=int, default=1000)
    ap.add_argument("--hostile-concurrency", type=int, default=64)
    ap.add_argument("--max-sessions", type=int, default=0, help="0: the server's default")
    ap.add_argument("--handshake-timeout", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=600, help="seconds per client")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.secinfer):
        sys.exit(f"{a.secinfer} not found: cargo build --release -p secinfer-cli")
    srv, addr, log = start_server(a)
    replay = record_replay(a, addr)
    kinds = ["slowloris", "oversized-noise", "oversized-plain", "replay", "vanish",
             "vanish-midway", "garbage"]
    results, outcomes = [], {}
    lock = threading.Lock()
    sem = threading.Semaphore(a.hostile_concurrency)

    def one_hostile(i):
        kind = kinds[i % len(kinds)]
        with sem:
            r = hostile(kind, addr, replay, min(a.time_limit, 60))
        with lock:
            outcomes.setdefault(kind, {}).setdefault(r, 0)
            outcomes[kind][r] += 1

    t0 = time.time()
    threads = [threading.Thread(target=one_hostile, args=(i,)) for i in range(a.hostile)]
    threads += [threading.Thread(target=honest, args=(a, addr, i, results))
                for i in range(a.honest)]
    random.shuffle(threads)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    rss = peak_rss_mb(srv.pid)
    alive = srv.poll() is None
    srv.terminate()
    srv.wait()
    time.sleep(0.2)
    text = "".join(log)
    lat = [r["latency_s"] for r in results if r["ok"]]
    rep = {
        "honest": a.honest, "hostile": a.hostile, "wall_s": round(wall, 2),
        "served": len(lat), "failures": sum(not r["ok"] for r in results),
        "busy_retries": sum(r["tries"] - 1 for r in results),
        "throughput_per_s": round(len(lat) / wall, 3) if wall else None,
        "latency_p50_s": round(pct(lat, 0.5), 3), "latency_p99_s": round(pct(lat, 0.99), 3),
        "server_peak_rss_mb": round(rss, 1), "server_alive": alive,
        "server_panics": len(re.findall(r"panicked", text)),
        "server_sessions_done": len(re.findall(r": done:", text)),
        "server_sessions_failed": len(re.findall(r": failed:", text)),
        "server_refused_busy": len(re.findall(r"refused busy", text)),
        "replay_bytes": len(replay), "hostile_outcomes": outcomes,
        "failure_samples": [r["err"] for r in results if not r["ok"]][:5],
    }
    if a.json:
        print(json.dumps(rep))
    else:
        for k, v in rep.items():
            print(f"{k:<24} {v}")
    ok = rep["failures"] == 0 and rep["server_panics"] == 0 and alive
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
