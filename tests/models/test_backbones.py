"""Properties every registered backbone must have (see tests/support/model_checks.py)."""

import functools

import pytest
import torch

from scalestudy.architectures import ARCHITECTURES
from scalestudy.ladder import SIZES
from scalestudy.models import build_backbone
from scalestudy.models.convolutions import DynamicConv, LightConv
from scalestudy.models.mixer import Mixer
from scalestudy.models.s4 import DLR, S4
from scalestudy.training.flops import count_params

from tests.support import ROOT, built_in
from tests.support.model_checks import (
    ALL_CHECKS,
    MAX_LEN,
    batch,
    build,
    check_causal,
    nonembed_params,
    vanilla_params,
)

REGISTRY = built_in(ARCHITECTURES)  # a plugin's: the study check's contract
ARCHS = sorted(REGISTRY)
# The backbone classes, by name (the registry loads each from its module).
CLASSES = {name: arch.load() for name, arch in REGISTRY.items()}


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("arch", ARCHS)
def test_backbone_property(arch, check):
    check(CLASSES[arch])


@pytest.mark.parametrize("arch", [a for a in ARCHS if REGISTRY[a].causal])
def test_causal_mode_does_not_see_the_future(arch):
    check_causal(CLASSES[arch])


@pytest.mark.parametrize("arch", [a for a in ARCHS if not REGISTRY[a].causal])
def test_no_causal_mode_is_refused(arch):
    with pytest.raises(ValueError, match="causal"):
        build_backbone(arch, "xxs", 17, 16, causal=True)


def test_vanilla_ladder_grows():
    counts = [nonembed_params(CLASSES["transformer"], size) for size in SIZES]
    assert counts == sorted(counts)
    assert 1e3 < counts[0] < 3e3  # xxxs: about 2e3
    assert 5e3 < counts[SIZES.index("xxs")] < 3e4  # xxs: about 1e4
    assert 5e5 < counts[SIZES.index("l")] < 2e6  # l: about 1e6


def test_unknown_arch_and_size_name_the_accepted_values():
    with pytest.raises(ValueError, match="arch: unknown 'nope', accepted values: .*transformer"):
        build_backbone("nope", "xs", 17, 16)
    with pytest.raises(ValueError, match="size: unknown 'huge', accepted values: xxxs, xxs"):
        build_backbone("transformer", "huge", 17, 16)


def test_count_params_excludes_embeddings():
    model = build_backbone("transformer", "xs", 17, 16)
    total, nonembed = count_params(model)
    assert total - nonembed == 17 * 32 + 16 * 32
    assert total == sum(p.numel() for p in model.parameters())
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_the_schema_accepts_the_registries_names():
    """config/schema.yaml names no architecture, size, prior or task itself: the
    loaded schema takes each kind's accepted names from its registry."""

    from scalestudy.priors import PRIORS
    from scalestudy.study.schema import SCHEMA_PATH, load_schema
    from scalestudy.tasks import TASKS

    text = (ROOT / "config/schema.yaml").read_text()
    assert "s4_random_a" not in text and "dlr" not in text and "scratch_matched]" not in text
    grid = load_schema(str(SCHEMA_PATH))["properties"]["grid"]["properties"]
    assert tuple(grid["archs"]["items"]["enum"]) == tuple(ARCHITECTURES)
    assert tuple(grid["priors"]["items"]["enum"]) == tuple(PRIORS)
    assert tuple(grid["tasks"]["items"]["enum"]) == tuple(TASKS)
    assert tuple(grid["sizes"]["items"]["enum"]) == SIZES
    assert tuple(grid["per_task"]["propertyNames"]["enum"]) == tuple(TASKS)


@pytest.mark.parametrize("arch", ARCHS)
def test_nonembedding_params_track_the_vanilla_ladder(arch):
    """Within 25% of vanilla at every size. Two documented exceptions match
    compute instead: the weight-sharing models (universal, albert) hold one
    block's parameters, and switch (FLOP-matched, Fedus et al. 2021) holds
    `experts` full-size FFNs per block (its FFN parameters grow experts-fold)."""
    cls = CLASSES[arch]
    for size in SIZES:
        vanilla = nonembed_params(CLASSES["transformer"], size)
        ratio = nonembed_params(cls, size) / vanilla
        if arch in ("universal", "albert"):
            depth = cls.config_for(size, vocab_size=17, max_len=16).depth
            assert 0.9 / depth < ratio < 1.15 / depth, (size, ratio)
        elif arch == "switch":
            experts = cls.config_for(size, vocab_size=17, max_len=16).extra["experts"]
            ffn = ffn_params(size)
            # switch = vanilla + (experts - 1) FFNs + the router, per block.
            growth = 1 + (nonembed_params(cls, size) - vanilla) / ffn  # FFN(switch) / FFN(vanilla)
            assert experts / 2 <= growth <= 1.1 * experts, (size, growth)
        else:
            assert 0.75 < ratio < 1.25, (size, ratio)


def ffn_params(size: str) -> int:
    """The vanilla transformer's FFN parameters (every block's MLP branch, biases included)."""
    with torch.device("meta"):
        model = build_backbone("transformer", size, 17, 16)
    return sum(p.numel() for block in model.blocks for p in block.mlp.branch.parameters())


def backbone_step_flops(arch: str, size: str) -> int:
    from scalestudy.training.flops import count_flops


    model = build(CLASSES[arch], size).train()
    tokens, mask = batch()
    return count_flops(lambda: model(tokens, mask).hidden.sum().backward())


@functools.cache
def vanilla_step_flops(size: str) -> int:
    return backbone_step_flops("transformer", size)


@pytest.mark.parametrize("size", ["xxs", "xs", "s"])
def test_vanilla_backbone_step_flops_are_the_analytic_count(size):
    from tests.support.model_checks import BATCH, analytic_transformer_step

    expected = analytic_transformer_step(size, BATCH, MAX_LEN, None)
    assert vanilla_step_flops(size) == expected


@pytest.mark.parametrize("arch", ARCHS)
def test_counted_flops_grow_with_size_and_match_vanilla(arch):
    """Every backbone is parameter- or compute-matched to vanilla, so its step
    costs about vanilla's (which is the analytic count, above). Measured at xxs,
    xs and s: 0.66x (funnel, pooled) to 1.28x (performer, random features);
    the band refuses a forward counted twice (2x) or a block left out (<= 0.5x)."""
    flops = [backbone_step_flops(arch, size) for size in ("xxs", "xs", "s")]
    assert 0 < flops[0] < flops[1] < flops[2], flops
    for size, counted in zip(("xxs", "xs", "s"), flops, strict=True):
        assert 0.6 < counted / vanilla_step_flops(size) < 1.4, (size, counted)


@pytest.mark.parametrize("arch", ARCHS)
def test_scaling_protocols_choose_the_dimension_that_grows(arch):
    from scalestudy.models import backbone_config

    def shape(size, protocol):
        cfg = backbone_config(arch, size, 17, 16, protocol=protocol)
        return cfg.depth, cfg.width

    cpu = ("xxs", "xs", "s", "m", "l")
    depth = [shape(s, "depth") for s in cpu]
    width = [shape(s, "width") for s in cpu]
    assert len({w for _, w in depth}) == 1 and [d for d, _ in depth] == sorted(d for d, _ in depth)
    assert depth[0][0] < depth[-1][0]
    assert len({d for d, _ in width}) == 1 and [w for _, w in width] == sorted(w for _, w in width)
    assert width[0][1] < width[-1][1]
    if arch == "transformer":  # the budgets match the default ladder within ~2x
        for size in ("s", "l"):
            default = nonembed_params(CLASSES[arch], size)
            for protocol in ("depth", "width"):
                with torch.device("meta"):
                    model = build_backbone(arch, size, 17, 16, protocol=protocol)
                assert 0.5 < count_params(model)[1] / default < 2.0


def test_unknown_protocol_names_the_accepted_values():
    with pytest.raises(ValueError, match="protocol: unknown 'deep', accepted values: default"):
        build_backbone("transformer", "xs", 17, 16, protocol="deep")


@pytest.mark.parametrize("norm", ["post", "none"])
@pytest.mark.parametrize("arch", ARCHS)
def test_other_norm_placements_and_dropout_run_and_keep_padding_invariance(arch, norm):
    """Post-LN: every residual block's output is LayerNorm'd (per-token mean 0,
    variance 1 at init), which a block left at pre-LN is not; none: no LayerNorm
    anywhere. Dropout is active in training mode (build() returns eval mode) and
    padding invariance holds under it, given the same dropout masks."""
    from scalestudy.models.layers import Residual


    cls = CLASSES[arch]
    model = build(cls, norm=norm, dropout=0.1, token_outputs=True).train()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert bool(norms) == (norm == "post")
    residuals = [m for m in model.modules() if isinstance(m, Residual)]
    assert residuals and all(r.placement == norm for r in residuals)
    outputs = []
    for r in residuals:
        r.register_forward_hook(lambda module, args, out: outputs.append(out))
    tokens, mask = batch()
    other = tokens.masked_fill(~mask, 5)
    torch.manual_seed(1)
    a = model(tokens, mask).hidden
    if norm == "post":
        assert len(outputs) >= len(residuals)
        for out in outputs:
            torch.testing.assert_close(out.mean(-1), torch.zeros(out.shape[:-1]), atol=1e-4,
                                       rtol=0)
            # Variance 1 less LayerNorm's eps (1e-5) against the input's variance, which
            # is tiny where the input is (Funnel's pooled padding): the median position.
            assert out.var(-1, unbiased=False).median().item() == pytest.approx(1, abs=0.05)
    torch.manual_seed(1)
    b = model(other, mask).hidden
    torch.manual_seed(2)
    c = model(tokens, mask).hidden
    assert torch.isfinite(a).all()
    torch.testing.assert_close(a[mask], b[mask], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(a[mask], c[mask], atol=1e-3)  # other dropout masks
    model.eval()
    torch.testing.assert_close(model(tokens, mask).hidden, model(tokens, mask).hidden)


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
def test_residual_drops_its_branch_in_training_only(norm):
    """Residual dropout (Vaswani et al. 2017, 5.4) zeroes a share p of the branch's
    outputs and scales the rest by 1/(1-p), in training mode only, whatever the
    LayerNorm placement; the skip path is never dropped."""
    from scalestudy.models.layers import Residual

    torch.manual_seed(0)
    x = torch.randn(4, 64, 32)
    block = Residual(torch.nn.Identity(), 32, "none", dropout=0.5)
    block.placement = norm
    block.norm = torch.nn.Identity()  # isolate the dropout from the normalisation
    block.train()
    branch = block(x) - x  # the dropped branch: x or 0, scaled by 2
    dropped = branch == 0
    assert 0.45 < dropped.float().mean().item() < 0.55
    torch.testing.assert_close(branch[~dropped], 2 * x[~dropped])
    block.eval()
    torch.testing.assert_close(block(x), 2 * x)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_residual_branch_names_its_fixup_weights(arch):
    """The Fixup priors rescale `fixup_weights()` of every residual branch."""
    from scalestudy.models.layers import Residual


    model = build(CLASSES[arch])
    params = {id(p) for p in model.parameters()}
    branches = [m.branch for m in model.modules() if isinstance(m, Residual)]
    assert branches
    for branch in branches:
        weights = branch.fixup_weights()
        assert weights and all(id(w) in params for w in weights)


def test_a_backbone_without_a_causal_mode_says_so_in_the_registry_alone():
    assert [a for a in ARCHS if not REGISTRY[a].causal] == ["funnel"]
    assert not any(hasattr(cls, "causal_ok") for cls in ARCHITECTURES.values())


@pytest.mark.parametrize(
    "cls, causal", [(Mixer, False), (LightConv, False), (DynamicConv, False), (S4, False),
                    (S4, True), (DLR, False), (DLR, True)],  # the SSMs change in causal mode
    ids=["Mixer", "LightConv", "DynamicConv", "S4", "S4-causal", "DLR", "DLR-causal"],
)
def test_nonembed_params_track_the_vanilla_ladder(cls, causal):
    for size in SIZES:
        ours, vanilla = nonembed_params(cls, size, causal=causal), vanilla_params(size)
        assert abs(ours / vanilla - 1) < 0.25, (size, ours, vanilla)
