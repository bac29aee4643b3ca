"""The Universal Transformer's timestep signal on every sin/cos pair and every
step: signal[t, 2j] = sin(t / 10000^(2j/D)),
signal[t, 2j+1] = cos(t / 10000^(2j/D)), added (x SIGNAL_SCALE) before each
application of the shared block."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from scalestudy.models.transformer import TransformerBlock
from scalestudy.models.universal import SIGNAL_SCALE, UniversalTransformer, timestep_signal
from scalestudy.training.flops import count_params

from tests.support.model_checks import batch, build


def by_hand(step: int, width: int) -> list[float]:
    out = []
    for pair in range(width // 2):
        angle = step / 10000 ** (2 * pair / width)
        out += [math.sin(angle), math.cos(angle)]
    return out


@pytest.mark.parametrize("width", [8, 16, 32])
@pytest.mark.parametrize("step", [1, 2, 3, 5, 12])
def test_every_pair_of_the_signal(step, width):
    got = timestep_signal(step, width).tolist()
    assert got == pytest.approx(by_hand(step, width), abs=1e-6)


def test_each_application_of_the_block_adds_its_steps_signal():
    """Depth 4: the shared block's input at step s is its output at step s - 1 (the
    embedding at step 1) plus SIGNAL_SCALE x the hand-written signal of step s."""
    model = build(UniversalTransformer, "xs")
    model.cfg = dataclasses.replace(model.cfg, depth=4)
    inputs, outputs = [], []
    model.block.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
    model.block.register_forward_hook(lambda m, args, out: outputs.append(out))
    tokens, mask = batch()
    with torch.no_grad():
        model(tokens, mask)
        previous = [model.embed(tokens), *outputs[:-1]]
    assert len(inputs) == 4
    width = model.cfg.width
    for step, (x_in, before) in enumerate(zip(inputs, previous, strict=True), start=1):
        signal = SIGNAL_SCALE * torch.tensor(by_hand(step, width))
        torch.testing.assert_close(x_in - before, signal.expand_as(x_in), rtol=0, atol=1e-6)


def test_universal_holds_one_block_whatever_the_depth():
    model = build(UniversalTransformer, "s")
    blocks = [m for m in model.modules() if isinstance(m, TransformerBlock)]
    assert len(blocks) == 1
    block_params = sum(p.numel() for p in blocks[0].parameters())
    counts = set()
    for depth in (1, 2, 6):
        cfg = dataclasses.replace(model.cfg, depth=depth)
        with torch.device("meta"):
            counts.add(count_params(UniversalTransformer(cfg))[1])
    assert counts == {block_params + 2 * model.cfg.width}


def test_universal_applies_the_block_depth_times_with_timestep_embedding():
    model = build(UniversalTransformer, "xs")
    tokens, mask = batch()
    x = model.embed(tokens)
    for step in range(1, model.cfg.depth + 1):
        x = model.block(x + SIGNAL_SCALE * timestep_signal(step, x.shape[-1]), mask)
    torch.testing.assert_close(model(tokens, mask).hidden, model.final_norm(x))
    signal = timestep_signal(3, 8)  # step 3, first frequency pair: sin(3), cos(3)
    assert torch.allclose(signal[0], torch.tensor(3.0).sin())
    assert torch.allclose(signal[1], torch.tensor(3.0).cos())
