"""Range calibration of a ReLU chain before a narrow fixed-point export.

A secure ``hegc`` run holds every value in the model's main format (L, F), whose range is
+-2^(L-1-F), and every accumulator in the HE plaintext modulus (docs/model-format.md, rule 4).
A network trained in float may produce larger activations (MNIST logits of 60 do not fit
(12, 6)'s +-32) and then wraps. ReLU, max-pool, average-pool and flatten are positively
homogeneous, so scaling a linear layer's output by s > 0 (its weights by s / s_in, where s_in is
the scale its input already carries, and its bias by s) and undoing s_in in the next linear layer
changes no decision: the final logits are s_last times the float ones and their argmax is the
same. This is the cross-layer rescaling of the quantisation literature (e.g. Nagel et al.,
"Data-Free Quantization Through Weight Equalization and Bias Correction"), here per layer rather
than per channel, chosen from the observed ranges of a calibration set.
"""
from __future__ import annotations

__all__ = ["rescale_ranges"]


def rescale_ranges(model, calibration, limit: float) -> list[float]:
    """Scales each linear layer of ``model`` (an ``nn.Sequential`` chain of Linear, Conv2d,
    ReLU, MaxPool2d, AvgPool2d, Flatten, Dropout, Identity) in place so that its largest
    output on ``calibration`` (a batch of inputs) is at most ``limit``; layers already inside
    are left at their input's scale. Returns each linear layer's cumulative scale s (the
    model's logits are s_last times the old ones). Other modules raise ValueError: a residual
    sum or a BatchNorm would need both of its inputs at one scale."""
    import torch
    import torch.nn as nn

    homogeneous = (nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Flatten, nn.Dropout, nn.Identity)
    layers = list(model)
    for i, m in enumerate(layers):
        if not isinstance(m, (nn.Linear, nn.Conv2d, *homogeneous)):
            raise ValueError(f"model[{i}]: {type(m).__name__} is not part of a ReLU chain")
    peaks = []
    h = calibration
    with torch.no_grad():
        for m in layers:
            h = m(h)
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                peaks.append(float(h.abs().max()))
        # output s * y needs weights * s / s_in (the input already carries s_in) and bias * s;
        # s never grows, so no weight (and no accumulator bound) does
        scales, s_in = [], 1.0
        linear = [m for m in layers if isinstance(m, (nn.Linear, nn.Conv2d))]
        for m, peak in zip(linear, peaks):
            s = min(s_in, limit / peak) if peak > 0 else s_in
            m.weight.mul_(s / s_in)
            if m.bias is not None:
                m.bias.mul_(s)
            scales.append(s)
            s_in = s
    return scales
