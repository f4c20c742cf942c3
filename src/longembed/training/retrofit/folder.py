"""The retrofitted model's folder: JinaBERT weights and config, the teacher's tokenizer and sentence-transformers files.

``load_encoder(folder, method="native")``, ``SentenceTransformer(folder)`` and ``JinaBertModel.from_pretrained``
open it.  The sentence-transformers modules are the teacher's (its pooling config, normalization and
prompts, copied), with the transformer at the folder's root and ``max_seq_length`` the student's
declared reach (8192): the same pipeline as the teacher's, on a model that reads long inputs.
"""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedTokenizerBase

from longembed.loading import ModelSource, quiet_transformers
from longembed.models.jina_bert import JinaBertModel
from longembed.permissions import weights_follow_umask
from longembed.sentence_transformers_folder import copy_modules, is_sentence_transformers_folder
from longembed.training.jina.folders import write_sentence_transformers_files


def write_student_folder(
    student: JinaBertModel, tokenizer: PreTrainedTokenizerBase, source: ModelSource, output: Path
) -> None:
    """Save the student, the teacher's tokenizer and the teacher's sentence-transformers files into ``output``.

    A teacher that is a plain Hugging Face folder (no modules.json) gets mean pooling, as longembed
    reads such a folder.
    """
    readable = int(student.config.max_position_embeddings)
    with quiet_transformers():
        student.save_pretrained(output)
    weights_follow_umask(output)
    tokenizer.model_max_length = readable
    tokenizer.save_pretrained(output)
    teacher_folder = Path(source.folder or source.transformer_path)
    if is_sentence_transformers_folder(teacher_folder):
        copy_modules(teacher_folder, output, readable)
    else:
        write_sentence_transformers_files(output)
