"""The retrofitted model's folder: JinaBERT weights and config, the teacher's tokenizer and sentence-transformers files.

``load_encoder(folder, method="native")``, ``SentenceTransformer(folder)`` and ``JinaBertModel.from_pretrained``
open it.  The sentence-transformers modules are the teacher's (its pooling config, normalization and
prompts, copied), with the transformer at the folder's root and ``max_seq_length`` the student's
declared reach (8192): the same pipeline as the teacher's, on a model that reads long inputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from longembed.loading import ModelSource, quiet_transformers
from longembed.models.jina_bert import JinaBertModel
from longembed.permissions import weights_follow_umask
from longembed.training.jina.folders import write_sentence_transformers_files

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
ST_MODEL_CONFIG_FILE = "config_sentence_transformers.json"


def write_student_folder(
    student: JinaBertModel, tokenizer: PreTrainedTokenizerBase, source: ModelSource, output: Path, device: str
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
    if (teacher_folder / MODULES_FILE).is_file():
        _copy_sentence_transformers_files(teacher_folder, Path(source.transformer_path), output, readable)
    else:
        write_sentence_transformers_files(output, device)


def _copy_sentence_transformers_files(teacher_folder: Path, transformer_path: Path, output: Path, readable: int) -> None:
    """The teacher's modules (the Transformer's path made the root), their folders, prompts and settings."""
    modules = json.loads((teacher_folder / MODULES_FILE).read_text())
    for module in modules:
        if module.get("type", "").endswith("Transformer"):
            module["path"] = ""
        elif module.get("path") and (teacher_folder / module["path"]).is_dir():
            shutil.copytree(teacher_folder / module["path"], output / module["path"], dirs_exist_ok=True)
    (output / MODULES_FILE).write_text(json.dumps(modules, indent=2) + "\n")
    st_config_file = transformer_path / ST_CONFIG_FILE
    st_config = json.loads(st_config_file.read_text()) if st_config_file.is_file() else {}
    st_config["max_seq_length"] = readable
    (output / ST_CONFIG_FILE).write_text(json.dumps(st_config, indent=2) + "\n")
    if (teacher_folder / ST_MODEL_CONFIG_FILE).is_file():
        shutil.copy2(teacher_folder / ST_MODEL_CONFIG_FILE, output / ST_MODEL_CONFIG_FILE)
