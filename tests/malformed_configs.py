"""The malformed-config table: bad inputs that must each give a one-line ConfigError naming the field.

Used by tests/test_malformed_configs.py through the library (``experiment_from_dict``,
``load_config``, ``load_sweep``/``expand``) and the CLI (``anchorlab config ... --set ...``,
``anchorlab sweep SPEC --dry-run``: return code 2, one stderr line, no traceback).

* :data:`SHARED` rows (sections ``name``, ``model``, ``init``, ``optim``, ``train`` and the
  override syntax) run against EVERY task family's base config;
* :data:`FAMILIES` holds, per ``task.name``, the family's base config and its own ``task.*``
  rows. **A new task family adds one entry here** (tests/test_malformed_configs.py fails
  while a registered task has none);
* :data:`FILES` are whole YAML files; :data:`SWEEPS` are sweep specs.

A row is ``(overrides, field, hint)``: the error message starts with ``field`` and contains ``hint``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Row = tuple[tuple[str, ...], str, str]


def rows(*items: tuple[str | tuple[str, ...], str, str]) -> list[Row]:
    return [((s,) if isinstance(s, str) else tuple(s), f, h) for s, f, h in items]


@dataclass(frozen=True)
class Family:
    """A task family's base config (a preset name or a mapping) and its own malformed ``task.*`` rows.

    A mapping base should set ``model.vocab_size`` / ``model.max_len`` so that no data file is read.
    """

    base: str | dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    shared_model_rows: bool = True   # False for families whose model section is another class (hf_gpt2, concept_unet)


NONFINITE = ("must be a finite number")

SHARED: list[Row] = rows(
    # top level
    ("name=[1]", "name", "expected a string"),
    ("foo=1", "foo", "unknown key; allowed: name, task, model, init, optim, train"),
    ("model=[1, 2]", "model", "expected a mapping"),
    ("init=0.5", "init", "expected a mapping of InitConfig fields"),
    # model
    ("model.n_layers=0", "model.n_layers", "must be >= 1"),
    ("model.d_model=-4", "model.d_model", "must be >= 1"),
    ("model.n_heads=0", "model.n_heads", "must be >= 1"),
    ("model.d_head=1.5", "model.d_head", "expected an integer"),
    ("model.d_ff=abc", "model.d_ff", "expected an integer"),
    ("model.d_model=true", "model.d_model", "expected an integer"),
    ("model.d_model=.inf", "model.d_model", "expected an integer"),
    ("model.activation=tanh", "model.activation", "must be one of 'relu', 'gelu'"),
    ("model.arch=lstm", "model.arch", "must be one of"),
    ("model.attn_norm=kv", "model.attn_norm", "must be one of 'qkv', 'q'"),
    ("model.vocab_size=0", "model.vocab_size", "must be >= 1"),
    ("model.ln_eps=0", "model.ln_eps", "must be > 0"),
    ("model.ln_eps=.nan", "model.ln_eps", NONFINITE),
    ("model.dropout=0.1", "model.dropout", "unknown key"),
    # init
    ("init.gamma=.nan", "init.gamma", NONFINITE),
    ("init.gamma=nan", "init.gamma", NONFINITE),
    ("init.gamma=.inf", "init.gamma", NONFINITE),
    ("init.gamma=1e999", "init.gamma", NONFINITE),
    ("init.gamma=-0.5", "init.gamma", "must be >= 0.0"),
    ("init.gamma=5", "init.gamma", "must be <= 4.0"),
    ("init.gamma=abc", "init.gamma", "expected a number"),
    ("init.role_gammas={qk: -1}", "init.role_gammas.qk", "must be >= 0.0"),
    ("init.role_gammas={qk: .nan}", "init.role_gammas.qk", NONFINITE),
    ("init.role_gammas.mlp=9", "init.role_gammas.mlp", "must be <= 4.0"),
    ("init.ref_width=0", "init.ref_width", "must be >= 1"),
    ("init.ref_width=wide", "init.ref_width", "expected int"),
    ("init.ref_width=400.5", "init.ref_width", "expected int"),
    ("init.role_gammas={bogus: 0.5}", "init.role_gammas", "must be one of 'embed', 'pos', 'qk'"),
    ("init.role_gammas=[1]", "init.role_gammas", "expected a mapping"),
    ("init.scale=0", "init.scale", "must be > 0"),
    ("init.scale=.inf", "init.scale", NONFINITE),
    ("init.fan_in=maybe", "init.fan_in", "must be one of 'true', 'd_model'"),
    ("init.distribution=cauchy", "init.distribution", "must be one of 'normal', 'uniform'"),
    ("init.bias=one", "init.bias", "must be one of 'zero', 'gamma', 'pytorch'"),
    ("init.embed_fan_in=vocab", "init.embed_fan_in", "must be one of 'num_embeddings', 'd_model'"),
    ("init.residual_scale=2", "init.residual_scale", "expected true or false"),
    ("init.embed_std=0", "init.embed_std", "must be > 0"),
    ("init.embed_std=-0.02", "init.embed_std", "must be > 0"),
    ("init.embed_std=abc", "init.embed_std", "expected float or NoneType"),
    # optim
    ("optim.lr=.nan", "optim.lr", NONFINITE),
    ("optim.lr=inf", "optim.lr", NONFINITE),
    ("optim.lr=-1e-3", "optim.lr", "must be > 0"),
    ("optim.lr=0", "optim.lr", "must be > 0"),
    ("optim.betas=[0.9]", "optim.betas", "expected a list of 2 values"),
    ("optim.betas=[0.9, 1.0]", "optim.betas", "must be two numbers in [0, 1)"),
    ("optim.betas=[.nan, 0.9]", "optim.betas[0]", NONFINITE),
    ("optim.eps=0", "optim.eps", "must be > 0"),
    ("optim.weight_decay=-0.1", "optim.weight_decay", "must be >= 0"),
    ("optim.weight_decay=.nan", "optim.weight_decay", NONFINITE),
    ("optim.warmup_epochs=-1", "optim.warmup_epochs", "must be >= 0"),
    ("optim.warmup_multiplier=0", "optim.warmup_multiplier", "must be > 0"),
    ("optim.cosine_epochs=-5", "optim.cosine_epochs", "must be >= 0"),
    ("optim.min_lr=-1", "optim.min_lr", "must be >= 0"),
    ("optim.clip_norm=.inf", "optim.clip_norm", NONFINITE),
    ("optim.decay=norms", "optim.decay", "must be one of 'all', 'matrices'"),
    ("optim.decay_norm_and_bias=true", "optim.decay_norm_and_bias", "unknown key"),
    ("optim.peak_lr=1e-9", "optim.peak_lr", "must be >= "),
    ("optim.peak_lr=.nan", "optim.peak_lr", "expected float or NoneType"),
    ("optim.momentum=0.9", "optim.momentum", "unknown key"),
    # train
    ("train.epochs=0", "train.epochs", "must be > 0"),
    ("train.epochs=.nan", "train.epochs", NONFINITE),
    ("train.batch_size=0", "train.batch_size", "must be >= 1"),
    ("train.batch_size=1.5", "train.batch_size", "expected an integer"),
    ("train.max_steps=-1", "train.max_steps", "must be >= 0"),
    ("train.eval_every=-1", "train.eval_every", "must be >= 0"),
    ("train.checkpoint_every=-2", "train.checkpoint_every", "must be >= 0"),
    ("train.data_seed=-1", "train.data_seed", "must be >= 0"),
    ("train.init_seed=abc", "train.init_seed", "expected an integer"),
    ("train.device=tpu", "train.device", "must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
    ("train.device=cuda:x", "train.device", "must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
    ("train.dtype=float16", "train.dtype", "must be one of 'float32', 'float64'"),
    ("train.threads=-1", "train.threads", "must be >= 0"),
    ("train.amp=fp16", "train.amp", "must be one of 'none', 'bf16', 'auto'"),
    ("train.stop_when=[acc>>0.9]", "train.stop_when[0]", "must look like 'metric>=value'"),
    ("train.stop_when=[id_acc>=1e999]", "train.stop_when[0]", NONFINITE),
    ("train.stop_when=id_acc>=0.9", "train.stop_when", "expected a list"),
    ("train.tracking=wandb", "train.tracking", "must be one of 'none', 'mlflow', 'tensorboard'"),
    ("train.flush_denormal=maybe", "train.flush_denormal", "expected true or false"),
    ("train.compile=1", "train.compile", "expected true or false"),
    # override syntax
    ("init.gamma", "override 'init.gamma'", "expected KEY=VALUE"),
    ("=3", "override '=3'", "empty key"),
    ("model.d_model.x=3", "model.d_model.x", "'model.d_model' is a value, not a section"),
    ("task.name=nope", "task.name", "must be one of 'anchor'"),
    ("task=5", "task", "expected a mapping"),
)

SEQ2SEQ_MODEL = {"arch": "gpt2", "vocab_size": 40, "max_len": 64, "d_model": 32, "d_head": 16, "d_ff": 64}


def seq2seq_rows(extra: list[Row]) -> list[Row]:
    """Rows every seq2seq family shares (Seq2SeqTaskConfig fields), plus the family's own."""
    return rows(
        ("task.train_size=-1", "task.train_size", "must be >= 0"),
        ("task.train_size=.nan", "task.train_size", "expected an integer"),
        ("task.eval_max=-1", "task.eval_max", "must be >= 0"),
        ("task.max_new_tokens=-1", "task.max_new_tokens", "must be >= 0"),
        ("task.max_new_tokens=.inf", "task.max_new_tokens", "expected an integer"),
        ("task.eval_batch_size=0", "task.eval_batch_size", "must be >= 1"),
        ("task.data_dir=5", "task.data_dir", "expected str or NoneType"),
        ("task.foo=1", "task.foo", "unknown key"),
    ) + extra


FAMILIES: dict[str, Family] = {
    "anchor": Family("demo/small", rows(
        ("task.preset=foo", "task.preset", "must be one of 'neurips', 'journal', 'complexity', 'custom'"),
        ("task.anchors={}", "task.anchors", "must map at least one anchor token"),
        ("task.anchors={a: 5}", "task.anchors", "keys must be integers"),
        ("task.anchors={1: 5.5}", "task.anchors.1", "expected an integer"),
        ("task.anchors={50: 5}", "task.anchors", "collides with values 20..99"),
        ("task.value_min=-1", "task.value_min", "must be >= 0"),
        ("task.value_max=10", "task.value_max", "must be >= value_min"),
        ("task.seq_len=2", "task.seq_len", "must be >= 3"),
        ("task.split_mod=0", "task.split_mod", "must be >= 1"),
        ("task.split_mod=.nan", "task.split_mod", "expected an integer"),
        ("task.pair_rules={'3,4': sometimes}", "task.pair_rules.3,4", "'shift:<int>'"),
        ("task.pair_rules={'1,9': inferential}", "task.pair_rules.1,9", "anchors must be in [1, 2, 3, 4]"),
        ("task.pair_rules={x: inferential}", "task.pair_rules", "pair key must look like 'a,b'"),
        ("task.complexity_k=2", "task.complexity_k", "only used with preset 'complexity'"),
        (("task.preset=complexity", "task.complexity_k=99"), "task.complexity_k", "must be <= 6"),
        (("task.preset=complexity", "task.complexity_k=1", "task.complexity_offsets=[4]"),
         "task.complexity_offsets", "equals the inferential target of pair (1, 1)"),
        (("task.preset=complexity", "task.complexity_k=2", "task.complexity_offsets=[1]"),
         "task.complexity_offsets", "needs one offset per noise group used (2)"),
        ("task.pair_rules={'2,3': 'shift:3'}", "task.pair_rules.2,3", "equals the inferential target"),
        ("task.n_train=0", "task.n_train", "must be >= 1"),
        ("task.n_train=.inf", "task.n_train", "expected an integer"),
        ("task.n_eval_per_group=0", "task.n_eval_per_group", "must be >= 1"),
        ("task.vocab_size=100", "task.vocab_size", "targets span 4..109"),
        ("model.max_len=5", "model.max_len", "must be >= task.seq_len (9)"),
        ("model.vocab_size=150", "model.vocab_size", "must be >= task.vocab_size (201)"),
    )),
    "scan": Family({"task": {"name": "scan"}, "model": SEQ2SEQ_MODEL}, seq2seq_rows(rows(
        ("task.split=jump", "task.split", "must be one of 'addprim_turn_left'"),
    ))),
    "cogs": Family({"task": {"name": "cogs"}, "model": SEQ2SEQ_MODEL}, seq2seq_rows(rows(
        ("task.fmt=lisp", "task.fmt", "must be one of 'varfree', 'original'"),
        ("task.keep_primitives=maybe", "task.keep_primitives", "expected true or false"),
    ))),
    "pairs": Family({"task": {"name": "pairs"}, "model": SEQ2SEQ_MODEL}, seq2seq_rows(rows(
        ("task.files={test: x.tsv}", "task.files", "needs a 'train' file"),
        ("task.files=[a.tsv]", "task.files", "expected a mapping"),
        (("task.files={train: /nonexistent/train.tsv}", "task.eval={ood: test}"), "task.eval.ood",
         "split 'test' has no file"),
        (("task.files={train: /nonexistent/train.tsv}", "model.vocab_size=auto", "model.max_len=auto"),
         "task.files", "no such file '/nonexistent/train.tsv'"),
    ))),
    "addition": Family("addition/cpu", seq2seq_rows(rows(
        ("task.square_min=-1", "task.square_min", "must be >= 0"),
        ("task.square_max=200", "task.square_max", "must be <= 99"),
        ("task.digit_order=middle", "task.digit_order", "must be one of 'normal', 'reversed'"),
        ("task.id_fraction=1.5", "task.id_fraction", "must be < 1.0"),
        ("task.split_seed=-1", "task.split_seed", "must be >= 0"),
    ))),
    "prontoqa": Family("prontoqa/cpu", seq2seq_rows(rows(
        ("task.n_train=0", "task.n_train", "must be >= 2"),
        ("task.min_hops=0", "task.min_hops", "must be >= 1"),
        ("task.max_hops=99", "task.max_hops", "must be <= 5"),
        ("task.test_every=0", "task.test_every", "must be >= 2"),
        ("task.proof=maybe", "task.proof", "expected true or false"),
        ("task.test_split=ood", "task.test_split", "must be one of 'iid', 'unseen_names'"),
        ("task.distractors=-1", "task.distractors", "must be >= 0"),
    ))),
    "lm": Family("lm/cpu", rows(
        ("task.corpus=web", "task.corpus", "must be one of 'local', 'slimpajama'"),
        ("task.mix={}", "task.mix", "needs at least one source"),
        ("task.mix_by=tokens", "task.mix_by", "must be one of 'bytes', 'natural'"),
        ("task.seq_len=0", "task.seq_len", "must be >= 2"),
        ("task.tokenizer=char", "task.tokenizer", "must be one of 'bpe', 'files'"),
        ("task.vocab_size=10", "task.vocab_size", "must be >= 257"),
        ("task.val_fraction=2", "task.val_fraction", "must be <= 0.5"),
        ("model.n_layers=0", "model.n_layers", "must be >= 1"),
        ("model.d_head=8", "model.d_head", "unknown key"),
    ), shared_model_rows=False),
    "concepts": Family("concepts/cpu", rows(
        ("task.resolution=7", "task.resolution", "must be >= 8"),
        ("task.train_nodes=[009]", "task.train_nodes[0]", "must be one of '000', '001'"),
        ("task.condition=text", "task.condition", "must be one of 'attributes', 'onehot'"),
        ("task.timesteps=0", "task.timesteps", "must be >= 2"),
        ("task.beta_end=2", "task.beta_end", "must be < 1.0"),
        ("task.sampler=euler", "task.sampler", "must be one of 'ddpm', 'ddim'"),
        ("task.per_node=0", "task.per_node", "must be >= 1"),
        ("task.size_code=blender", "task.size_code", "must be one of 'relative', 'authors'"),
        (("task.condition=onehot", "task.size_code=authors", "model.concept_dims=[2,2,2]"), "task.size_code",
         "only used with task.condition='attributes'"),
        ("model.cond=film", "model.cond", "must be one of 'additive', 'multiplicative'"),
        ("model.d_head=8", "model.d_head", "unknown key"),
    ), shared_model_rows=False),
}

# whole YAML files: (text, field, hint); the field may be the file path, written as {path}
FILES: list[tuple[str, str, str]] = [
    ("task: [1, 2\n", "{path}", "invalid YAML"),
    ("- 1\n- 2\n", "{path}", "top level must be a mapping"),
    ("init:\n  gamma: .nan\n", "init.gamma", NONFINITE),
    ("optim:\n  lr: -.inf\n", "optim.lr", NONFINITE),
    ("train:\n  epochs: 1\n  batch_size: 0\n", "train.batch_size", "must be >= 1"),
    ("task:\n  name: anchor\n  anchors: {1: 5, 2: .nan}\n", "task.anchors.2", "expected an integer"),
    ("model: 3\n", "model", "expected a mapping"),
]

# sweep specs (mappings; written as YAML for the CLI): (spec, field, hint)
BASE = "demo/small"
SWEEPS: list[tuple[dict[str, Any], str, str]] = [
    ({"base": BASE, "axes": {"init.gamma": [0.5]}}, "name", "the sweep spec needs a name"),
    ({"name": "s", "base": BASE, "axis": {}}, "axis", "unknown sweep key"),
    ({"name": "s", "base": BASE, "set": 3}, "set", "expected a mapping"),
    ({"name": "s", "base": BASE, "set": ["init.gamma"]}, "set[0]", "expected KEY=VALUE"),
    ({"name": "s", "base": BASE, "set": {"optim.lr": float("nan")}}, "optim.lr", NONFINITE),
    ({"name": "s", "base": BASE, "axes": [1]}, "axes", "expected a mapping"),
    ({"name": "s", "base": BASE, "axes": {"init.gamma": []}}, "axes.init.gamma", "non-empty list"),
    ({"name": "s", "base": BASE, "axes": {"init.gamma": [0.5, -1.0]}}, "init.gamma", "must be >= 0.0"),
    ({"name": "s", "base": BASE, "axes": {"model.d_modle": [64]}}, "model.d_modle", "unknown key"),
    ({"name": "s", "base": BASE, "zip": [{"train.init_seed": [0, 1], "train.data_seed": [0]}]}, "zip",
     "lists must have equal lengths"),
    ({"name": "s", "base": BASE, "aggregate": {"source": "worst"}}, "aggregate.source", "'best' or 'final'"),
    ({"name": "s", "base": BASE, "aggregate": {"seeds": ["optim.lr"]}}, "aggregate.seeds", "also in"),
    ({"name": "s", "base": "nope/missing"}, "config 'nope/missing'", "no such file or preset"),
    ({"name": "", "base": BASE}, "name", "non-empty name"),
]
