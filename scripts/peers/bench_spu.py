"""SPU (SecretFlow) with its CHEETAH protocol on secinfer's workloads; JSON lines in secinfer's
bench schema on stdout.

CHEETAH is two-party, semi-honest and dealer-free (OT and lattice HE), the same model as
secinfer. Both parties run as threads of one process over SPU's in-memory link (its
`utils.simulation.Simulator`), on the 64-bit ring. Each case runs in a fresh child process so
that SPU's profile of that case alone can be read: time is the "execution took" of the
compiled program (compilation excluded), bytes are party 0's "total send bytes" plus "recv
bytes" from the link details (what crossed the link both ways), and `messages` the send plus
receive actions; SPU reports no round count.

    python bench_spu.py            # every case
    python bench_spu.py --case sigmoid
"""
import json
import re
import subprocess
import sys

N = 1 << 14
CASES = ["sigmoid", "tanh", "exp", "relu", "gru", "mlp"]


def run_case(name):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import spu
    from spu.utils import simulation

    cfg = spu.RuntimeConfig(protocol=spu.ProtocolKind.CHEETAH, field=spu.FieldType.FM64)
    cfg.enable_pphlo_profile = True
    sim = simulation.Simulator(2, cfg)
    rng = np.random.default_rng(1)
    if name in ("sigmoid", "tanh", "exp", "relu"):
        fn = {"sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh, "exp": jnp.exp,
              "relu": jax.nn.relu}[name]
        args = (np.linspace(-8, 8, N).astype(np.float32),)
    elif name == "gru":
        e, h, steps = 100, 64, 30

        def fn(xs, w_ih, w_hh, b_ih, b_hh, fc):
            hs = jnp.zeros((h,), jnp.float32)
            for t in range(steps):
                gi = w_ih @ xs[t] + b_ih
                gh = w_hh @ hs + b_hh
                r = jax.nn.sigmoid(gi[:h] + gh[:h])
                z = jax.nn.sigmoid(gi[h:2 * h] + gh[h:2 * h])
                n = jnp.tanh(gi[2 * h:] + r * gh[2 * h:])
                hs = (1 - z) * n + z * hs
            return fc @ hs

        args = (rng.normal(size=(steps, e)), rng.normal(size=(3 * h, e)) * 0.1,
                rng.normal(size=(3 * h, h)) * 0.1, rng.normal(size=3 * h) * 0.1,
                rng.normal(size=3 * h) * 0.1, rng.normal(size=(2, h)) * 0.1)
        args = tuple(a.astype(np.float32) for a in args)
    elif name == "mlp":
        def fn(x, w1, w2, w3):
            return w3 @ jax.nn.relu(w2 @ jax.nn.relu(w1 @ x))

        args = (rng.random(784), rng.normal(size=(128, 784)) * 0.05,
                rng.normal(size=(128, 128)) * 0.05, rng.normal(size=(10, 128)) * 0.05)
        args = tuple(a.astype(np.float32) for a in args)
    else:
        raise SystemExit(f"unknown case {name}")
    simulation.sim_jax(sim, fn)(*args)


def params_of(name):
    if name == "gru":
        return "gru", {"input": 100, "hidden": 64, "steps": 30}
    if name == "mlp":
        return "mlp", {"layers": "784-128-128-10"}
    return "math", {"fn": name, "n": N}


def measure(name):
    out = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True,
                         text=True, timeout=3600)
    log = out.stdout + out.stderr
    if out.returncode != 0:
        raise RuntimeError(f"spu {name} failed:\n{log[-2000:]}")
    t = re.findall(r"execution took ([0-9.e+-]+)s", log)
    link = re.findall(r"Link details: total send bytes (\d+), recv bytes (\d+), send actions "
                      r"(\d+), recv actions (\d+)", log)
    if not t or not link:
        raise RuntimeError(f"spu {name}: no profile in its log:\n{log[-2000:]}")
    send, recv, sa, ra = map(int, link[-1])
    bench, params = params_of(name)
    import spu

    params.update(system="spu", impl="cheetah", profile="none", field="FM64",
                  version=spu.version() if callable(getattr(spu, "version", None))
                  else str(getattr(spu, "__version__", "0.9.5")))
    return {"bench": bench, "params": params, "time_s": float(t[-1]),
            "bytes_total": send + recv, "rounds": None, "messages": sa + ra,
            "phases": {"online": {"time_s": float(t[-1]), "bytes": send + recv}}}


def main(argv):
    if len(argv) == 2 and argv[0] == "--case":
        run_case(argv[1])
        return 0
    for name in CASES:
        print(json.dumps(measure(name)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
