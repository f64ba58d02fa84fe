"""Concrete ML (Zama, TFHE) on the digits MLP; JSON lines in secinfer's bench schema on stdout.

Non-interactive, as SHE: the client encrypts, the server evaluates the whole quantised network
under TFHE, the client decrypts; one round. The MLP (64 inputs: scikit-learn's bundled 8x8
digits, `--hidden` ReLU layers, 10 classes) is trained in the clear, quantised to `--bits`
bits and compiled by Concrete ML. Measured with its client/server API on this machine:
setup = key generation (time) and the serialised evaluation keys (bytes, sent once);
online = encryption + server run + decryption (time) and the serialised input and output
ciphertexts (bytes). Accuracy of the FHE model on the held-out digits is reported as well.

    python bench_concrete.py [--hidden 64,64] [--bits 3] [--samples 3]
"""
import argparse
import json
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", default="64,64", help="hidden layer widths")
    ap.add_argument("--bits", type=int, default=3, help="weight and activation bits")
    ap.add_argument("--samples", type=int, default=3, help="encrypted inferences timed")
    a = ap.parse_args()

    import numpy as np
    import torch
    from concrete.ml.deployment import FHEModelClient, FHEModelDev, FHEModelServer
    from concrete.ml.torch.compile import compile_torch_model
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.manual_seed(0)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=0)
    widths = [64] + [int(w) for w in a.hidden.split(",")] + [10]
    layers = []
    for i, (m, n) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(m, n))
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    xt, yt = torch.tensor(xtr), torch.tensor(ytr)
    for _ in range(300):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()

    t = time.perf_counter()
    qm = compile_torch_model(net, xtr, n_bits=a.bits, rounding_threshold_bits=a.bits + 3)
    compile_s = time.perf_counter() - t
    acc = float((qm.forward(xte, fhe="simulate").argmax(1) == yte).mean())

    with tempfile.TemporaryDirectory() as d:
        FHEModelDev(d, qm).save()
        client, server = FHEModelClient(d), FHEModelServer(d)
        server.load()
        t = time.perf_counter()
        client.generate_private_and_evaluation_keys()
        keys = client.get_serialized_evaluation_keys()
        keygen_s = time.perf_counter() - t
        times, up, down, right = [], 0, 0, 0
        for i in range(a.samples):
            t = time.perf_counter()
            enc = client.quantize_encrypt_serialize(xte[i:i + 1])
            res = server.run(enc, keys)
            logits = client.deserialize_decrypt_dequantize(res)
            times.append(time.perf_counter() - t)
            up, down = len(enc), len(res)
            right += int(np.argmax(logits) == yte[i])
    online_s = sorted(times)[len(times) // 2]
    import concrete.ml

    print(json.dumps({
        "bench": "mlp",
        "params": {"system": "concrete-ml", "impl": "tfhe", "layers": "-".join(map(str, widths)),
                   "bits": a.bits, "dataset": "digits", "profile": "none",
                   "version": getattr(concrete.ml, "__version__", "1.9.0")},
        "time_s": online_s, "bytes_total": up + down, "rounds": 1,
        "phases": {"setup": {"time_s": keygen_s, "bytes": len(keys)},
                   "online": {"time_s": online_s, "bytes": up + down}},
        "eval_key_bytes": len(keys), "compile_s": compile_s,
        "fhe_simulated_accuracy": acc, "encrypted_samples_right": f"{right}/{a.samples}",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
