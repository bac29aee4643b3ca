"""What the study check asks of a plugin's backbone before any run, on a
probe batch (scalestudy.extend says what a backbone provides): at each size
of the grid it builds, takes token ids and a padding mask to hidden states
[B, T', width] that are finite, has trainable parameters, grows in
non-embedding parameters along the ladder, and its outputs at real tokens do
not depend on the ids at padded ones. A refusal is one ValueError naming the
architecture and what it broke. Imports torch (the check runs it only for
architectures of plugins)."""

from __future__ import annotations

import torch

from ..ladder import SIZES

PROBE_BATCH = 3


def check_backbone(arch: str, sizes, vocab_size: int, max_len: int, protocol: str,
                   causal: bool = False) -> None:
    from . import build_backbone

    def refuse(size: str, what: str):
        raise ValueError(f"arch {arch}: at size {size} its backbone {what}; a backbone maps "
                         f"token ids [B, T] and a mask [B, T] to a BackboneOutput of hidden "
                         f"[B, T', width] (scalestudy.extend)")

    counts = []
    for size in sorted(sizes, key=list(SIZES).index):
        try:
            torch.manual_seed(0)
            model = build_backbone(arch, size, vocab_size, max_len, protocol=protocol,
                                   causal=causal, token_outputs=True).eval()
        except Exception as err:
            refuse(size, f"cannot be built ({type(err).__name__}: {err})")
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        if not trainable:
            refuse(size, "has no trainable parameter")
        tokens, real = probe_batch(vocab_size, max_len)
        other = tokens.masked_fill(~real, vocab_size - 1)  # only the padded ids change
        try:
            with torch.no_grad():
                out, again = model(tokens, real), model(other, real)
        except Exception as err:
            refuse(size, f"fails on a probe batch ({type(err).__name__}: {err})")
        hidden = getattr(out, "hidden", None)
        if hidden is None or hidden.ndim != 3 or hidden.shape[0] != PROBE_BATCH:
            refuse(size, f"returns {type(out).__name__} of hidden "
                         f"{None if hidden is None else tuple(hidden.shape)}")
        if hidden.shape[2] != model.cfg.width:
            refuse(size, f"returns width {hidden.shape[2]}, not its config's {model.cfg.width}")
        if not torch.isfinite(hidden).all():
            refuse(size, "returns non-finite states")
        if hidden.shape[1] == max_len and not torch.allclose(
                hidden[real], again.hidden[real], atol=1e-4, rtol=1e-3):
            refuse(size, "changes its outputs at real tokens when only the padding changes")
        counts.append((size, trainable))
    for (small, a), (large, b) in zip(counts, counts[1:], strict=False):
        if b <= a:
            raise ValueError(f"arch {arch}: {b} trainable parameters at size {large}, not more "
                             f"than the {a} at {small}: it does not grow along the ladder "
                             f"(config_for maps each size to its own shape; "
                             f"scalestudy.ladder.shape_for gives the vanilla one)")


def probe_batch(vocab_size: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [3, length] (0 past each row's length) and their mask: one
    full row, one a few short, one half."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, vocab_size, (PROBE_BATCH, length), generator=g)
    lengths = torch.tensor([length, max(1, length - 5), max(1, length // 2)])
    real = torch.arange(length)[None, :] < lengths[:, None]
    return tokens.masked_fill(~real, 0), real
