"""The Encoder protocol's descriptive members for test fakes that only compute vectors."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from longembed.encoder_protocol import EncoderMetadata, retrieval_prompts


class FakeEncoderMembers:
    """What a fake encoder (a bag-of-words hashing 'model', a stub) declares besides ``config`` and
    ``encode`` to meet :class:`longembed.encoder_protocol.Encoder`: no tokenizer (token counts fall
    back to words), no model source, Lt = Lo = 512 without extension, mean pooling."""

    tokenizer: Any = None
    source = None
    device = "cpu"
    prompts: dict[str, str] = {}
    method, position_scheme, pooling, normalize = "truncate", "absolute", "mean", True
    max_length = original_length = 512

    @property
    def metadata(self) -> EncoderMetadata:
        """The description the protocol reads, from the members above (and the fake's ``config``)."""
        return EncoderMetadata(**{f.name: getattr(self, f.name) for f in fields(EncoderMetadata)})

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        return self.prompts[prompt_name] if prompt_name is not None else prompt or ""

    def retrieval_prompts(self) -> dict[str, str]:
        return retrieval_prompts(self.prompts)

    def encode_chunks(self, texts: Any, chunking: Any = "tokens:256", late: bool = True, **options: Any) -> Any:
        raise TypeError(f"{type(self).__name__} embeds whole texts only: it has no chunk vectors")
