"""The models the loop trains: a backbone with a task head (`Classifier`) or a
masked-LM head (training/masked_lm.py), sharing the optimiser and schedule of
`StudyModule`.

Optimiser: AdamW, stepped once per optimiser step through the run's
learning-rate schedule (training/schedules.py: `train.schedule`, linear
warm-up then cosine decay to 10% of the peak rate by default, or
warmup-stable-decay; a plateau cuts it short with a cooldown:
loop.TrainingLoop.anneal). Parameter groups come from
the modules that own the parameters: a module may define
`optim_hints() -> {parameter name: AdamW options}` for its own parameters (S4's
A and dt: their own learning rate, capped at the run's, and no weight decay;
after the `_optim` attributes of state-spaces/s4's s4d.py, kept on the module
so that a copied model keeps them).

Weight decay: every other parameter decays, biases, norms and embeddings
included (torch's AdamW applied to one group). Most LM codebases (nanoGPT,
Hugging Face's Trainer) exempt biases and norm weights (the 1-D parameters)
and embeddings; here they decay so that new runs stay comparable with the
committed studies' records, which were trained that way. The difference has
not been measured here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

from ..study.specs import TrainConfig
from .schedules import Schedule


def schedule_of(cfg: TrainConfig) -> Schedule:
    """The run's learning-rate factor per step (train.schedule)."""
    return Schedule(cfg.schedule, cfg.warmup_steps, cfg.max_steps, cfg.decay_fraction)


class ScheduledLR(LambdaLR):
    """torch's LambdaLR over the run's `Schedule`: each step's rates are the
    peak rates (`base_lrs`) times the schedule's factor. Its state dict holds
    the schedule's fields, so a resumed run continues a cooldown begun."""

    def __init__(self, optimizer: torch.optim.Optimizer, schedule: Schedule):
        super().__init__(optimizer, schedule)

    @property
    def schedule(self) -> Schedule:
        return self.lr_lambdas[0]

    def start_at(self, step: int) -> None:
        """Continue this schedule from `step`, the optimiser's rates set to
        the step's, as if it had stepped there: a wsd branch starting at its
        trunk's fork with its own length (training/branches.py)."""
        self.last_epoch = step
        factor = self.schedule(step)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


def fused_adamw(groups: list[dict], scaled: bool = False) -> bool | None:
    """AdamW's kernel: torch's fused one (one kernel for the whole update: on
    a CPU clipping + update about 2x faster than torch's default there, a
    Python loop over the parameters, and the whole step 1.15-1.37x at xxs-m,
    docs/benchmarks.md; on a GPU one launch in place of foreach's few per
    parameter group). Torch's own choice (foreach on a GPU) under a gradient
    scaler (`scaled`: 16-mixed), whose unscaling before clipping Lightning
    refuses for an optimiser that unscales its gradients itself, as a fused
    one does; and on a device without a fused kernel (meta)."""
    devices = {p.device.type for group in groups for p in group["params"]}
    return True if not scaled and devices <= {"cpu", "cuda"} else None


def parameter_groups(module: torch.nn.Module, lr: float) -> list[dict]:
    """AdamW groups: every parameter without a hint in the first, then one
    group per distinct hint (`optim_hints` of the module owning them), in the
    order of `module.parameters()`; a hinted learning rate is capped at `lr`."""
    hints: dict[int, dict] = {}
    for owner in module.modules():
        for name, hint in getattr(owner, "optim_hints", dict)().items():
            hints[id(getattr(owner, name))] = hint
    plain, hinted = [], {}
    for p in module.parameters():
        hint = hints.get(id(p))
        if hint is None:
            plain.append(p)
        else:
            hinted.setdefault(tuple(sorted(hint.items())), []).append(p)
    groups = [{"params": plain}]
    for key, params in hinted.items():
        options = dict(key)
        if "lr" in options:
            options["lr"] = min(lr, options["lr"])
        groups.append({"params": params, **options})
    return groups


class StudyModule(torch.nn.Module):
    """What every training stage's model shares: AdamW with its schedule, the
    token count and the RNG streams a checkpoint keeps. The model holds no
    train config: the loop passes the run's final one to `configure_optimizer`.
    The loop (training/loop.py) calls:

    - `training_loss(batch) -> (loss, aux_loss)`, defined by subclasses;
    - `evaluation_sums(batch) -> {name: sum over the batch, "count": examples}`
      (`EVALUATION_SUMS` names them; a count may be a host number);
    - `start_evaluation()` before each pass over a split;
    - `prepare(batch, training)` on the host batch before it moves to the device.
    """

    EVALUATION_SUMS: tuple[str, ...] = ("loss", "count")

    def __init__(self, backbone: torch.nn.Module, pad_id: int = 0):
        super().__init__()
        self.backbone, self.pad_id = backbone, pad_id

    def training_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def evaluation_sums(self, batch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def start_evaluation(self) -> None:
        """Called before each evaluation pass (pretraining redraws its masks)."""

    def count_tokens(self, batch) -> int:
        """The real (non-padding) tokens of a training batch (on the host)."""
        return int((batch[0] != self.pad_id).sum())

    def prepare(self, batch: tuple, training: bool) -> tuple:
        """The batch as `training_loss` (training) or `evaluation_sums` take it,
        made on the host before it moves to the device; pretraining draws its
        masks here, from the CPU generators it keeps."""
        return batch

    def hyperparameters(self) -> dict:
        """What a checkpoint needs to rebuild this model elsewhere (finetuning)."""
        return {}

    def reseed(self, seed: int) -> None:
        """Seed the module's own random streams (pretraining's masks); torch's
        global one (dropout's) is the caller's (training.run.rank_seed)."""

    def rng_state(self) -> dict[str, torch.Tensor]:
        """The random streams a resumed run restores, as uint8 tensors of one
        size on every rank of a run (the loop gathers every rank's): torch's
        global CPU stream (dropout's on a CPU), and the current CUDA device's
        (dropout's on a GPU; empty where CUDA is not in use)."""
        cuda = (torch.cuda.get_rng_state() if torch.cuda.is_initialized()
                else torch.empty(0, dtype=torch.uint8))
        return {"torch": torch.get_rng_state(), "cuda": cuda}

    def set_rng_state(self, state: dict[str, torch.Tensor]) -> None:
        torch.set_rng_state(state["torch"])
        if state["cuda"].numel():
            torch.cuda.set_rng_state(state["cuda"])

    def configure_optimizer(self, cfg: TrainConfig, scaled: bool = False
                            ) -> tuple[torch.optim.Optimizer, ScheduledLR]:
        """AdamW and its per-step schedule for the run's train config `cfg`
        (its final steps: a budget's, a compute match's); `scaled`: the run's
        gradients go through a gradient scaler (16-mixed)."""
        groups = parameter_groups(self, cfg.lr)
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                      fused=fused_adamw(groups, scaled))
        return optimizer, ScheduledLR(optimizer, schedule_of(cfg))


class Classifier(StudyModule):
    """Backbone + pooled classifier head, trained with cross-entropy. A batch
    is (tokens, labels), or (tokens, tokens2, labels) for a pair task: both
    documents go through the backbone in one call (stacked along the batch)
    and the head combines them."""

    EVALUATION_SUMS = ("loss", "acc", "count")

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Module, n_classes: int,
                 pad_id: int = 0):
        super().__init__(backbone, pad_id)
        self.head, self.n_classes = head, n_classes

    def forward(self, *docs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.cat(docs) if len(docs) > 1 else docs[0]
        out = self.backbone(tokens, tokens != self.pad_id)
        return self.head(out.hidden, out.mask), out.aux_loss

    def training_loss(self, batch):
        *docs, labels = batch
        logits, aux_loss = self(*docs)
        return F.cross_entropy(logits, labels), aux_loss

    def evaluation_sums(self, batch):
        *docs, labels = batch
        logits, _ = self(*docs)
        return {"loss": F.cross_entropy(logits.float(), labels, reduction="sum"),
                "acc": (logits.argmax(-1) == labels).sum(), "count": len(labels)}
