"""CrypTen on secinfer's workloads; JSON lines in secinfer's bench schema on stdout.

Two parties as two processes on this machine (CrypTen's own launcher, gloo over loopback).
CrypTen's default provider is used, as a user gets it: "TFP", a *trusted first party* that
generates every Beaver triple and comparison mask and deals the shares, i.e. a trusted dealer,
which secinfer's two-party model does not assume. Time: the slower party's wall-clock from
shared input to shared output (no reveal). Bytes and rounds: CrypTen's communicator statistics
(bytes each party sent, summed over both; rounds as the larger party's count).
"""
import json
import sys
import time

import crypten
import crypten.communicator as comm
import torch
from crypten.config import cfg

N = 1 << 14
SEED = 1


def gru(x_seq, w_ih, w_hh, b_ih, b_hh, hidden):
    """A GRU layer (PyTorch's gate order r, z, n) over encrypted inputs; the weights are
    encrypted too (the server's)."""
    h = crypten.cryptensor(torch.zeros(1, hidden))
    for x in x_seq:
        gi = x.matmul(w_ih.t()) + b_ih
        gh = h.matmul(w_hh.t()) + b_hh
        r = (gi[:, :hidden] + gh[:, :hidden]).sigmoid()
        z = (gi[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden]).sigmoid()
        n = (gi[:, 2 * hidden:] + r * gh[:, 2 * hidden:]).tanh()
        h = (1 - z) * n + z * h
    return h


def measure(fn):
    comm.get().reset_communication_stats()
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    st = comm.get().get_communication_stats()
    return dt, int(st["bytes"]), int(st["rounds"])


@crypten.mpc.run_multiprocess(world_size=2)
def party():
    cfg.communicator.verbose = True
    torch.manual_seed(SEED)
    out = []
    x = crypten.cryptensor(torch.linspace(-8, 8, N), src=0)
    for name, f in [("sigmoid", lambda: x.sigmoid()), ("tanh", lambda: x.tanh()),
                    ("exp", lambda: x.exp()), ("relu", lambda: x.relu())]:
        out.append(("math", {"fn": name, "n": N}, measure(f)))
    # GRU(100,64,30), two classes, the input the client's
    e, hdim, steps = 100, 64, 30
    xs = [crypten.cryptensor(torch.randn(1, e), src=0) for _ in range(steps)]
    w = [crypten.cryptensor(t, src=1) for t in (torch.randn(3 * hdim, e) * 0.1,
                                                torch.randn(3 * hdim, hdim) * 0.1,
                                                torch.randn(3 * hdim) * 0.1,
                                                torch.randn(3 * hdim) * 0.1)]
    fc = crypten.cryptensor(torch.randn(2, hdim) * 0.1, src=1)
    out.append(("gru", {"input": e, "hidden": hdim, "steps": steps},
                measure(lambda: gru(xs, *w, hdim).matmul(fc.t()))))
    # MLP 784-128-128-10 with ReLU
    img = crypten.cryptensor(torch.rand(1, 784), src=0)
    ws = [crypten.cryptensor(torch.randn(o, i) * 0.05, src=1)
          for i, o in ((784, 128), (128, 128), (128, 10))]

    def mlp():
        h = img
        for k, wk in enumerate(ws):
            h = h.matmul(wk.t())
            if k < 2:
                h = h.relu()
        return h

    out.append(("mlp", {"layers": "784-128-128-10"}, measure(mlp)))
    return out


def main():
    crypten.init()
    per_party = party()
    if per_party is None:
        print("bench_crypten: the launcher returned no results", file=sys.stderr)
        return 1
    for cases in zip(*per_party):
        bench, params, _ = cases[0]
        time_s = max(c[2][0] for c in cases)
        bytes_total = sum(c[2][1] for c in cases)
        rounds = max(c[2][2] for c in cases)
        params = dict(params, system="crypten", impl="tfp-dealer", profile="none",
                      provider=cfg.mpc.provider, version="0.4.1")
        print(json.dumps({"bench": bench, "params": params, "time_s": time_s,
                          "bytes_total": bytes_total, "rounds": rounds,
                          "phases": {"online": {"time_s": time_s, "bytes": bytes_total}}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
