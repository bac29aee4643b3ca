"""The initialisation priors: Fixup formulas, masking, transfer, MLM head, upstream corpus."""

import copy
import dataclasses
import math
import re

import pytest
import torch
from torch import nn

from scalestudy.architectures import ARCHITECTURES
from scalestudy.models import backbone_class, backbone_config
from scalestudy.models.lm_head import MaskedLMHead, token_embedding
from scalestudy.models.mos import MixtureOfSoftmaxes, MoSTransformer
from scalestudy.models.transformer import Transformer
from scalestudy.priors import fixup
from scalestudy.priors.transfer import transfer_backbone
from scalestudy.tasks import TASKS, upstream
from scalestudy.training.masking import IGNORE_INDEX, causal_lm_targets, mask_tokens

from tests.support import built_in

VOCAB, MAX_LEN = 17, 16
ARCHS = sorted(built_in(ARCHITECTURES))


def build(arch="transformer", size="xxs", norm="none", seed=0, **replace):
    cfg = backbone_config(arch, size, VOCAB, MAX_LEN, norm=norm)
    cfg = dataclasses.replace(cfg, **replace)
    torch.manual_seed(seed)
    return backbone_class(arch)(cfg)


def padded_batch(seed=0, batch=3):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, VOCAB, (batch, MAX_LEN), generator=g)
    lengths = torch.tensor([MAX_LEN, MAX_LEN - 5, MAX_LEN // 2, 3])[:batch]
    real = torch.arange(MAX_LEN)[None] < lengths[:, None]
    return tokens.masked_fill(~real, 0), real


def names_of(model, tensors):
    by_id = {id(p): name for name, p in model.named_parameters()}
    return {by_id[id(t)] for t in tensors}


def kurtosis(values: torch.Tensor) -> float:
    """E[(x - mean)^4] / var^2: 1.8 for a uniform distribution, 3 for a normal one."""
    x = values.double().flatten()
    x = x - x.mean()
    return (x.pow(4).mean() / x.pow(2).mean() ** 2).item()


def assert_xavier_uniform(weight: torch.Tensor, scale: float = 1.0, name: str = "") -> None:
    """`weight` looks like scale x U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (Glorot &
    Bengio 2010), checked from its values alone: inside the bound and filling it, the
    uniform's std a / sqrt(3), and its kurtosis 1.8 (a normal's is 3). With >= 4096
    values the standard errors are < 1% (std) and < 0.03 (kurtosis); the bands
    below are > 5 of them, and refuse Xavier-normal, a gain of sqrt(2) or torch's
    default Linear init (bound 1/sqrt(fan_in), std a third of it)."""
    fan_out, fan_in = weight.shape[:2]
    bound = scale * math.sqrt(6 / (fan_in + fan_out))
    w = weight.detach()
    assert w.abs().max().item() <= bound * (1 + 1e-6), name
    assert w.abs().max().item() > 0.95 * bound, name
    assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05), name
    assert 1.6 < kurtosis(w) < 2.0, name


def assert_normal(weight: torch.Tensor, std: float, name: str = "") -> None:
    """`weight` looks like N(0, std): its std within 10% (> 4 standard errors over
    >= 1088 values) and a normal's kurtosis 3 (+-0.6, > 4 standard errors), which
    a uniform init of the same std (kurtosis 1.8) fails."""
    w = weight.detach()
    assert w.std().item() == pytest.approx(std, rel=0.1), name
    assert abs(w.mean().item()) < 0.1 * std, name
    assert 2.4 < kurtosis(w) < 3.6, name


# --- Fixup: exact formulas -----------------------------------------------------------


def test_fixup_init_is_xavier_uniform_and_normal_input_embeddings():
    """Step 1 of both priors, checked against the distributions themselves (the
    exact-formula tests below take fixup_init's draws as their reference)."""
    model = build(size="s", depth=3, max_len=64)  # 64 x 64 and 256 x 64 weights
    fixup.fixup_init(model)
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    assert len(linears) == 6 * 3
    for name, linear in linears.items():
        assert_xavier_uniform(linear.weight, name=name)
        assert not linear.bias.any(), name
    tables = fixup.input_embeddings(model)
    assert [t.weight.shape for t in tables] == [(VOCAB, 64), (64, 64)]
    for table in tables:  # N(0, d^-1/2); the 64 x 64 position table has Xavier's std too
        assert_normal(table.weight, 64**-0.5, name=str(table))


def test_tfixup_scales_exactly_the_fixup_weights():
    model = build(size="s", depth=3, max_len=64)  # enough values for the statistics
    reference = copy.deepcopy(model)
    torch.manual_seed(123)
    fixup.fixup_init(reference)  # the Xavier and N(0, d^-1/2) values the prior starts from
    torch.manual_seed(123)
    report = fixup.apply_tfixup(model)

    assert report.n_blocks == 3 and report.prior == "tfixup" and math.isnan(report.mu)
    assert report.factor == pytest.approx(0.67 * 3**-0.25)
    scaled = names_of(model, fixup.fixup_tensors(model))
    assert report.n_tensors == len(scaled) == 4 * 3  # value, out, up, down per block
    ref = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        if name in scaled:
            torch.testing.assert_close(p, ref[name] * report.factor, atol=1e-6, rtol=0)
            assert_xavier_uniform(p, scale=report.factor, name=name)
        elif name.endswith("bias"):
            assert not p.any(), name
        elif name.startswith("embed."):  # N(0, d^-1/2), then x (9N)^(-1/4), once
            torch.testing.assert_close(p, ref[name] * (9 * 3) ** -0.25, atol=1e-6, rtol=0)
        else:  # queries and keys: Xavier, untouched
            assert re.search(r"\.(query|key)\.weight$", name), name
            torch.testing.assert_close(p, ref[name], atol=0, rtol=0)
            assert_xavier_uniform(p, name=name)


@pytest.mark.parametrize("kwargs", [{}, {"scale_embeddings": False}], ids=["default", "unscaled"])
def test_tfixup_input_embedding_std(kwargs):
    """The paper's recipe by default: input tables std d^-1/2 (9N)^(-1/4); without
    the embedding scaling, d^-1/2."""
    depth, width = 3, 64
    model = build(size="s", depth=depth, max_len=64)  # tables 17 x 64 and 64 x 64
    assert model.cfg.width == width
    torch.manual_seed(5)
    fixup.apply_tfixup(model, **kwargs)
    base, factor = width**-0.5, (9 * depth) ** -0.25  # 0.125, 0.439
    expected = base * factor if kwargs.get("scale_embeddings", True) else base
    # 10% is > 4 standard errors of a std over >= 17 x 64 draws, and far from both
    # mistakes: missing scaling gives 2.28x `expected`, scaling twice 0.44x.
    wrong = {base, base * factor**2} if expected != base else {base * factor}
    tables = fixup.input_embeddings(model)
    assert len(tables) == 2  # tokens and positions
    for table in tables:
        std = table.weight.std().item()
        assert std == pytest.approx(expected, rel=0.1), (table, std, expected)
        assert all(std != pytest.approx(w, rel=0.1) for w in wrong), (table, std)
        # Normal, not Xavier-uniform (whose std on the square 64 x 64 position
        # table is d^-1/2 too).
        assert_normal(table.weight, expected, name=str(table))


def test_dtfixup_scales_exactly_and_mu_is_the_max_stack_input_norm():
    model = build(depth=3)
    tokens, real = padded_batch()
    reference = copy.deepcopy(model)
    torch.manual_seed(7)
    fixup.fixup_init(reference)
    torch.manual_seed(7)
    report = fixup.dtfixup(model, [(tokens[:2], None), (tokens[2:], None)])

    # mu, computed independently: the embedding output at real positions.
    with torch.no_grad():
        norms = reference.eval().embed(tokens).norm(dim=-1)
    assert report.mu == pytest.approx(norms[real].max().item(), rel=1e-6)
    n, mu = 3, report.mu
    assert report.factor == pytest.approx((n * (4 * mu**2 + 2 * mu + 2)) ** -0.5)
    scaled = names_of(model, fixup.fixup_tensors(model))
    assert report.n_tensors == len(scaled) == 12
    ref = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        expected = ref[name] * report.factor if name in scaled else ref[name]
        torch.testing.assert_close(p, expected, atol=1e-6, rtol=0)
    assert model.training  # max_token_norm restores the mode


def test_max_token_norm_ignores_padding_and_dropout():
    model = build(depth=2, dropout=0.5)
    fixup.fixup_init(model)
    tokens, real = padded_batch()
    with torch.no_grad():
        model.embed.token.weight[0] = 100.0  # the pad id's vector: huge, never counted
        norms = model.eval().embed(tokens).norm(dim=-1)
    model.train()
    mu = fixup.max_token_norm(model, [tokens])
    assert mu == pytest.approx(norms[real].max().item(), rel=1e-6)
    assert mu < 10


@pytest.mark.parametrize("apply", [fixup.apply_tfixup, lambda m: fixup.apply_dtfixup(m, 1.0)])
def test_fixup_needs_norm_none(apply):
    with pytest.raises(ValueError, match="fixup needs norm none"):
        apply(build(norm="pre"))


def test_shared_and_nested_modules_are_scaled_once():
    model = build(depth=2)
    block = model.blocks[0]
    model.blocks[1] = block  # ALBERT-style sharing
    assert len(fixup.residual_branches(model)) == 2
    assert len(fixup.fixup_tensors(model)) == 4
    assert fixup.n_blocks(model) == 2  # applied twice, scaled once
    reference = copy.deepcopy(model)  # deepcopy keeps the sharing
    torch.manual_seed(3)
    fixup.fixup_init(reference)
    torch.manual_seed(3)
    report = fixup.apply_tfixup(model)
    assert report.n_blocks == 2 and report.n_tensors == 4
    ref = dict(reference.named_parameters())
    branch = model.blocks[0]
    for name, weight in (("blocks.0.attention.branch.value.weight", branch.attention.branch.value),
                         ("blocks.0.mlp.branch.down.weight", branch.mlp.branch.down)):
        # x factor once (a second pass would give factor^2 = 0.35 of the init)
        torch.testing.assert_close(weight.weight, ref[name] * report.factor, atol=1e-6, rtol=0)


# --- Fixup on every backbone -----------------------------------------------------------

BLOCK_NAME = re.compile(r"^(blocks\.\d+|block|groups\.\d+\.\d+|decoder\.\d+)$")


@pytest.mark.parametrize("token_outputs", [False, True], ids=["pooled", "tokens"])
@pytest.mark.parametrize("arch", ARCHS)
def test_dtfixup_on_every_backbone(arch, token_outputs):
    model = build(arch, token_outputs=token_outputs)
    tokens, real = padded_batch()
    reference = copy.deepcopy(model)
    torch.manual_seed(1)
    fixup.fixup_init(reference)
    torch.manual_seed(1)
    report = fixup.dtfixup(model, [tokens])
    assert report.n_blocks >= model.cfg.depth and 0 < report.factor < 1 and report.mu > 0

    ref = dict(reference.named_parameters())
    scaled = {name for name, p in model.named_parameters() if not torch.equal(p, ref[name])}
    assert names_of(model, fixup.fixup_tensors(model)) == scaled
    blocks = [name for name, _ in model.named_modules() if BLOCK_NAME.match(name)]
    assert blocks
    for block in blocks:
        assert any(name.startswith(block + ".") for name in scaled), f"{block}: nothing scaled"
    for branch in fixup.residual_branches(model):
        assert names_of(model, branch.fixup_weights()) & scaled

    with torch.no_grad():
        out = model.eval()(tokens, real)
    assert torch.isfinite(out.hidden).all()


# --- the fixed-update property (Xu et al. 2021) ---------------------------------------


def output_change_after_one_step(depth: int, prior: str) -> float:
    """|f(theta - lr grad) - f(theta)| for one SGD step (lr 1e-3) on a fixed batch.

    The biases of the residual-branch output projections (attention `out`, MLP
    `down`) are frozen (at zero): a trainable one adds O(lr) to the residual
    stream per block whatever the weights' scale, so the change would grow ~N.
    The property is one of the weights.
    """
    cfg = dataclasses.replace(backbone_config("transformer", "xs", VOCAB, MAX_LEN, norm="none"),
                              depth=depth)
    torch.manual_seed(0)
    model = Transformer(cfg)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, VOCAB, (4, MAX_LEN), generator=g)
    real = torch.ones_like(tokens, dtype=torch.bool)
    target = torch.randn(4, MAX_LEN, cfg.width, generator=g)
    if prior == "dtfixup":
        fixup.dtfixup(model, [tokens])
    else:
        fixup.fixup_init(model)  # plain Xavier, no LayerNorm
    for block in model.blocks:
        block.attention.branch.out.bias.requires_grad_(False)
        block.mlp.branch.down.bias.requires_grad_(False)
    with torch.no_grad():
        before = model(tokens, real).hidden
    loss = (model(tokens, real).hidden - target).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 1e-3 * p.grad
        return (model(tokens, real).hidden - before).norm().item()


def test_dtfixup_update_is_flat_in_depth_and_xavier_is_not():
    dt = {n: output_change_after_one_step(n, "dtfixup") for n in (2, 32)}
    xavier = {n: output_change_after_one_step(n, "xavier") for n in (2, 32)}
    assert 1 / 3 < dt[32] / dt[2] < 3, dt  # measured: 0.95
    ratio = xavier[32] / xavier[2]
    assert not math.isfinite(ratio) or ratio > 100, xavier  # measured: non-finite


# --- masking ---------------------------------------------------------------------------


def test_mask_ratios_are_the_papers():
    assert {name: task.mask_ratio for name, task in TASKS.items()}.items() >= {
        "listops": 0.10, "text": 0.15, "retrieval": 0.15, "image": 0.50, "pathfinder": 0.50,
        "pathx": 0.50}.items()


@pytest.mark.parametrize("span", [None, 3.0])
@pytest.mark.parametrize("ratio", [0.1, 0.5])
def test_masking_rate_padding_and_targets(ratio, span):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 50, (64, 256), generator=g)
    real = torch.rand(64, 256, generator=g) < 0.8
    tokens = tokens.masked_fill(~real, 0)
    inputs, targets = mask_tokens(tokens, real, ratio, 1, 50, g, span)
    masked = targets != IGNORE_INDEX
    assert masked[real].float().mean().item() == pytest.approx(ratio, abs=0.02)
    assert not masked[~real].any()  # padding never masked
    assert torch.equal(targets[masked], tokens[masked])
    assert (inputs[masked] == 1).all() and torch.equal(inputs[~masked], tokens[~masked])


@pytest.mark.parametrize("ratio", [0.1, 0.5])
def test_span_masking_gives_runs_of_mean_length_span(ratio):
    """Runs of masked positions over rows with no padding: their mean length is
    `span` (3). Over >= 500 runs of sd 2.4 (geometric, mean 3) its standard error
    is <= 0.1; the band (+-0.4) refuses mean 2 or 4, and independent masking
    (mean 1 / (1 - ratio))."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 50, (64, 256), generator=g)
    real = torch.ones_like(tokens, dtype=torch.bool)
    _, targets = mask_tokens(tokens, real, ratio, 1, 50, g, span=3.0)
    masked = targets != IGNORE_INDEX
    assert masked.float().mean().item() == pytest.approx(ratio, abs=0.02)
    runs = (masked[:, 1:] & ~masked[:, :-1]).sum() + masked[:, 0].sum()
    assert runs > 500
    assert masked.sum().item() / runs.item() == pytest.approx(3.0, abs=0.4)


def test_masking_is_deterministic_and_bert_replacement_splits():
    tokens = torch.randint(3, 50, (32, 128), generator=torch.Generator().manual_seed(0))
    real = torch.ones_like(tokens, dtype=torch.bool)

    def run(seed, **kw):
        return mask_tokens(tokens, real, 0.15, 1, 50, torch.Generator().manual_seed(seed), **kw)

    a, b, c = run(3), run(3), run(4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    # BERT's 80/10/10 over ~2,500 masked positions (standard errors <= 0.008; the
    # bands are 3-4 of them and refuse a 80/0/20 or 80/20/0 split).
    tokens = torch.randint(3, 50, (64, 256), generator=torch.Generator().manual_seed(0))
    inputs, targets = mask_tokens(tokens, torch.ones_like(tokens, dtype=torch.bool), 0.15, 1,
                                  50, torch.Generator().manual_seed(3), replace="bert")
    masked = targets != IGNORE_INDEX
    given, original = inputs[masked], targets[masked]
    assert masked.sum() > 2000
    assert (given == 1).float().mean().item() == pytest.approx(0.8, abs=0.03)
    # A random id in [3, 50): 47 ids, one of them the original token.
    random_share = ((given != 1) & (given != original)).float().mean().item()
    assert random_share == pytest.approx(0.1 * 46 / 47, abs=0.025)
    assert (given == original).float().mean().item() == pytest.approx(0.1 + 0.1 / 47, abs=0.025)
    assert (given[given != 1] >= 3).all() and (given < 50).all()  # never a special id but MASK
    assert torch.equal(inputs[~masked], tokens[~masked])


def test_causal_lm_targets_shift_by_one():
    tokens = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])
    real = tokens != 0
    inputs, targets = causal_lm_targets(tokens, real)
    assert torch.equal(inputs, tokens)
    assert targets.tolist() == [[6, 7, 8, -100], [6, -100, -100, -100]]


# --- transfer --------------------------------------------------------------------------


class Pretrained(nn.Module):
    """What a training module stores: `backbone.*` and `head.*`."""

    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head


def test_transfer_loads_every_backbone_weight_and_no_head():
    source = Pretrained(build(seed=1, norm="pre"), nn.Linear(16, 3))
    target = Pretrained(build(seed=2, norm="pre"), nn.Linear(16, 5))
    head_before = copy.deepcopy(target.head.state_dict())
    transfer_backbone(source.state_dict(), target.backbone)
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(target.backbone.state_dict()[key], value), key
    for key, value in head_before.items():
        assert torch.equal(target.head.state_dict()[key], value)
    # A whole checkpoint dict works too.
    other = build(seed=3, norm="pre")
    transfer_backbone({"state_dict": source.state_dict(), "epoch": 3}, other)
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(other.state_dict()[key], value), key


def test_transfer_is_strict_and_names_the_keys():
    state = Pretrained(build(norm="pre"), nn.Linear(16, 3)).state_dict()
    missing = {k: v for k, v in state.items() if k != "backbone.blocks.1.mlp.branch.up.weight"}
    target = build(seed=5, norm="pre")
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(ValueError, match=r"missing .*blocks\.1\.mlp\.branch\.up\.weight"):
        transfer_backbone(missing, target)
    extra = {**state, "backbone.blocks.9.extra": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"unexpected .*blocks\.9\.extra"):
        transfer_backbone(extra, target)
    with pytest.raises(ValueError, match="shape mismatch"):
        transfer_backbone(Pretrained(build(size="xs", norm="pre"), nn.Linear(1, 1)).state_dict(),
                          target)
    for key, value in before.items():  # nothing was loaded
        assert torch.equal(target.state_dict()[key], value)


def test_transfer_drops_the_funnel_decoder_into_a_classifier():
    pretrained = Pretrained(build("funnel", norm="pre", token_outputs=True), nn.Identity())
    assert any(k.startswith("backbone.decoder.") for k in pretrained.state_dict())
    classifier = build("funnel", seed=4, norm="pre")
    transfer_backbone(pretrained.state_dict(), classifier)
    for key, value in classifier.state_dict().items():
        assert torch.equal(value, pretrained.backbone.state_dict()[key]), key


# --- masked-LM head --------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_lm_head_shape_and_tying(arch):
    backbone = build(arch, norm="pre", token_outputs=True)
    head = MaskedLMHead(backbone, VOCAB)
    assert head.tied_layer.weight is token_embedding(backbone).weight
    tokens, real = padded_batch()
    out = backbone(tokens, real)
    logits = head(out.hidden)
    assert logits.shape == (*tokens.shape, VOCAB) and torch.isfinite(logits).all()
    # Tied, the table's gradient is the output layer's: d sum(logits) / dW = the sum of
    # the transformed states over positions, the same row for every token (the hidden
    # states are detached, so the tie is the gradient's only path). An untied copy
    # would leave the table's gradient None.
    head(out.hidden.detach()).sum().backward()
    grad = token_embedding(backbone).weight.grad
    assert grad is not None
    if not isinstance(head.out, MixtureOfSoftmaxes):
        with torch.no_grad():
            transformed = head.norm(torch.nn.functional.gelu(head.dense(out.hidden)))
        expected = transformed.flatten(0, 1).sum(0).expand(VOCAB, -1)
        torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-4)
    else:
        assert grad.abs().sum() > 0


def test_lm_head_mixture_of_softmaxes_is_tied_and_normalised():
    cfg = MoSTransformer.config_for("xxs", vocab_size=VOCAB, max_len=MAX_LEN)
    backbone = MoSTransformer(cfg)
    head = MaskedLMHead(backbone, VOCAB)
    assert isinstance(head.out, MixtureOfSoftmaxes)
    assert head.out.decoder.weight is backbone.embed.token.weight
    tokens, real = padded_batch()
    log_probs = head(backbone(tokens, real).hidden)
    assert log_probs.shape == (*tokens.shape, VOCAB)
    torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(tokens.shape))
    with pytest.raises(ValueError, match="vocab_size"):
        MaskedLMHead(backbone, VOCAB + 1)


# --- upstream corpus -------------------------------------------------------------------

TINY = upstream.UpstreamConfig(seq_len=32, max_train_sequences=24, max_val_sequences=4)


def test_upstream_stdlib_corpus(tmp_path):
    counts = upstream.prepare(TINY, tmp_path / "a")
    assert counts == {"train": 24, "val": 4, "test": 4}
    data = upstream.load(TINY, tmp_path / "a")
    for split, tokens in data.splits.items():
        assert tokens.dtype == torch.long and tokens.shape == (counts[split], 32)
        real = tokens[tokens != upstream.PAD_ID]
        assert real.min() >= upstream.N_SPECIAL and real.max() < upstream.VOCAB_SIZE == 259
    sample = "héllo, wörld".encode()
    assert upstream.decode(upstream.chunks(sample, 5).flatten()) == sample  # byte round trip
    # Deterministic: the same config gives the same tensors.
    upstream.prepare(TINY, tmp_path / "b")
    again = upstream.load(TINY, tmp_path / "b")
    for split in upstream.SPLITS:
        assert torch.equal(data.splits[split], again.splits[split])
    # A file is in one split only, and it is the split its path hashes to.
    used = upstream.read_manifest(tmp_path / "a")["documents"]
    assert not set(used["train"]) & set(used["val"])
    assert not set(used["train"]) & set(used["test"]) and not set(used["val"]) & set(used["test"])
    for split, keys in used.items():
        assert all(upstream.split_of(k) == split for k in keys)
        assert not any(re.search(r"(^|/)(test|idlelib)/", k) for k in keys)
    keys = [k for k, _ in upstream.stdlib_documents()]
    assert keys == sorted(keys) and len(keys) > 100
    # Another config is refused.
    with pytest.raises(ValueError, match="prepared with"):
        upstream.load(dataclasses.replace(TINY, seq_len=64), tmp_path / "a")


def test_upstream_files_and_parquet_sources(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for i in range(40):
        (docs / "sub" / f"d{i}.txt").write_text(f"document {i} " * (i + 1))
    cfg = upstream.UpstreamConfig(source="files", path=str(docs / "**" / "*.txt"), seq_len=16,
                                  max_train_sequences=0, max_val_sequences=0)
    tokens, used = upstream.build(cfg)
    assert sum(map(len, used.values())) == 40 and all("/" in k for k in used["train"])
    assert upstream.decode(tokens["train"].flatten()).startswith(b"document")

    table = pa.table({"text": ["alpha beta", None, "gamma", "alpha beta"]})
    pq.write_table(table, tmp_path / "c.parquet")
    cfg = upstream.UpstreamConfig(source="parquet", path=str(tmp_path / "c.parquet"),
                                  seq_len=8, max_train_sequences=0, max_val_sequences=0)
    tokens, used = upstream.build(cfg)
    assert sum(map(len, used.values())) == 2  # null dropped, duplicate once
    with pytest.raises(ValueError, match="source"):
        upstream.UpstreamConfig(source="c4")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        upstream.build(upstream.UpstreamConfig(source="files", path=str(tmp_path / "*.nope")))
