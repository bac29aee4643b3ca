"""ALBERT (models/albert.py): one block of weights, the factorised embedding, and
its compute match with vanilla."""

import torch

from scalestudy.ladder import SIZES, shape_for
from scalestudy.models.albert import Albert
from scalestudy.models.transformer import Transformer, TransformerBlock
from scalestudy.training.flops import count_flops, count_params

from tests.support.model_checks import batch, build, nonembed_params, vanilla_params


def test_albert_is_compute_matched_with_one_block_of_params():
    for size in SIZES:
        shape, cfg = shape_for(size), Albert.config_for(size, vocab_size=17, max_len=16)
        assert (cfg.depth, cfg.width, cfg.d_ff) == (shape.depth, shape.width, shape.d_ff)
        ratio = nonembed_params(Albert, size) / vanilla_params(size)
        assert 1 / shape.depth <= ratio <= 1.1 / shape.depth, (size, ratio)


def step_flops(cls, size):
    model = build(cls, size).train()
    tokens, mask = batch()

    def step():
        out = model(tokens, mask)
        (out.hidden.sum() + out.aux_loss).backward()

    return count_flops(step)


def test_albert_holds_one_block_of_weights():
    model = build(Albert)
    one_block = sum(p.numel() for p in TransformerBlock(model.cfg).parameters())
    block_params = [n for n, _ in model.named_parameters() if n.startswith("block.")]
    assert len(block_params) == len(list(TransformerBlock(model.cfg).parameters()))
    extra = count_params(model)[1] - one_block
    embed_dim, width = model.cfg.extra["embed_dim"], model.cfg.width
    # The rest: E -> D projection (non-embedding), embedding LN and final LN.
    assert extra == embed_dim * width + width + 2 * embed_dim + 2 * width


def test_albert_factorised_embedding():
    for size in SIZES:
        cfg = Albert.config_for(size, vocab_size=17, max_len=16)
        assert cfg.extra["embed_dim"] < cfg.width
    model = build(Albert)
    assert model.embed.lookup.token.weight.shape == (17, model.cfg.extra["embed_dim"])
    assert isinstance(model.embed.project, torch.nn.Linear)


def test_albert_flops_match_vanilla():
    ratio = step_flops(Albert, "xs") / step_flops(Transformer, "xs")
    assert 1.0 <= ratio < 1.1, ratio
