"""Export an extended model as a plain folder that sentence-transformers, TEI or transformers load."""

from longembed.export.folders import check_destination, refuse_overlap, staged_folder
from longembed.export.plain_model import (
    EXPORTABLE,
    export_model,
    write_extended_table_model,
    write_table_record,
)

__all__ = [
    "EXPORTABLE",
    "check_destination",
    "export_model",
    "refuse_overlap",
    "staged_folder",
    "write_extended_table_model",
    "write_table_record",
]
