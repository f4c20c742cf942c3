"""JinaBERT's configuration (Jina Embeddings v2), apart from its modeling code.

Kept in its own module, as transformers keeps ``configuration_*.py`` apart from ``modeling_*.py``:
reading a model folder's configuration (what the encoder, the benchmark's cache key and the command
line need) then does not import transformers' modeling stack.  ``longembed.models.jina_bert`` holds
the model and re-exports this class.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PreTrainedConfig

from longembed.errors import UserError

#: Feed-forward variants (paper 4.1): GEGLU (small and base models) or ReGLU (large).
GLU_ACTIVATION_NAMES = ("geglu", "reglu")
#: BERT's own feed-forward (dense -> ``hidden_act`` -> dense), Jina's remote code's third variant: the
#: layout of a BERT retrofitted with ALiBi (``longembed retrofit``), whose feed-forward is the teacher's.
ORIGINAL_FEED_FORWARD = "original"
FEED_FORWARD_TYPES = (*GLU_ACTIVATION_NAMES, ORIGINAL_FEED_FORWARD)


class JinaBertConfig(PreTrainedConfig):
    """Configuration of a JinaBERT encoder (defaults: jina-embeddings-v2-base-en).

    ``feed_forward_type`` is "geglu" or "reglu" (Jina's models), or "original": BERT's feed-forward, as
    Jina's remote code also offers it (a BERT retrofitted with ALiBi).  ``max_position_embeddings`` is kept only
    because Jina's config records the supported length (8192) there; the model has no position
    table, so it limits nothing.  ``training_length`` is the sequence length the model was
    pre-trained at (512 for Jina's models; longembed's Lo for ``method="truncate"``).
    ``hidden_act`` is the activation of the MLM head's transform (Jina's config: "gelu") and of the
    "original" feed-forward, checked when those are built (transformers' activation table is slow to
    import, and reading a config must stay light).  ``alibi_slope_scale`` multiplies every head's ALiBi
    slope (1: Jina's slopes, as all of Jina's models; a retrofit may start gentler, ``--slope-scale``).
    """

    model_type = "jina_bert"

    vocab_size: int = 30528
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    feed_forward_type: str = "geglu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 8192
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    training_length: int = 512
    alibi_slope_scale: float = 1.0
    hidden_act: str = "gelu"
    tie_word_embeddings: bool = True  # the MLM decoder is the word-embedding matrix

    def __post_init__(self, **kwargs: Any) -> None:
        if self.feed_forward_type not in FEED_FORWARD_TYPES:
            raise UserError(
                f"feed_forward_type must be one of {sorted(FEED_FORWARD_TYPES)}, got {self.feed_forward_type!r}"
            )
        if not isinstance(self.training_length, int) or self.training_length < 1:
            raise UserError(f"training_length must be a positive integer, got {self.training_length!r}")
        if not (isinstance(self.alibi_slope_scale, int | float) and self.alibi_slope_scale > 0):
            raise UserError(f"alibi_slope_scale must be a positive number, got {self.alibi_slope_scale!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise UserError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                f"{self.num_attention_heads}"
            )
        super().__post_init__(**kwargs)

    @staticmethod
    def is_jina_config(config_dict: dict[str, Any]) -> bool:
        """Whether a config.json dict is a released JinaBERT one (remote-code format)."""
        return (
            config_dict.get("model_type") == "bert" and config_dict.get("position_embedding_type") == "alibi"
        )

    @classmethod
    def from_jina_config(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        """Build a config from a released checkpoint's config.json (Jina's remote-code format).

        Those files say ``"model_type": "bert"`` with ``"position_embedding_type": "alibi"``,
        ``"feed_forward_type": "geglu"`` and an ``auto_map`` to remote code.  Only this class's
        architecture fields (and the dtype) are kept: ``auto_map``/``architectures`` would point
        loaders back to the remote code, and Jina's ``"attn_implementation": "torch"`` (their
        name for SDPA) is not a transformers name.  ``kwargs`` are handled as by ``from_dict``.
        """
        position_type = config_dict.get("position_embedding_type", "alibi")
        if position_type != "alibi":
            raise UserError(f"not an ALiBi checkpoint: position_embedding_type={position_type!r}")
        own_fields = set(cls.__dataclass_fields__) - set(PreTrainedConfig.__dataclass_fields__)
        converted = {k: v for k, v in config_dict.items() if k in own_fields}
        dtype = config_dict.get("dtype", config_dict.get("torch_dtype"))
        if dtype is not None:
            converted["dtype"] = dtype
        return cls.from_dict(converted, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, **kwargs: Any) -> Any:
        """Load a saved ``jina_bert`` config, or a released Jina folder (``model_type: bert``)."""
        config_dict, unused = cls.get_config_dict(pretrained_model_name_or_path, **kwargs)
        if cls.is_jina_config(config_dict):
            return cls.from_jina_config(config_dict, **unused)
        return super().from_pretrained(pretrained_model_name_or_path, **kwargs)


AutoConfig.register("jina_bert", JinaBertConfig, exist_ok=True)
