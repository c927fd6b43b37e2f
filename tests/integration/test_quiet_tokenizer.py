"""Adding a long document says nothing alarming in the terminal (issue 28): the chunker counts the word pieces of
texts longer than the model reads on purpose (to cut them), so transformers' "Token indices sequence length is longer
than the specified maximum sequence length … will result in indexing errors" was a false alarm."""
from __future__ import annotations

import logging

SENTENCE = "The harbour master logged every ship that entered the bay before the autumn storms arrived. "


class Collect(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_adding_a_long_document_logs_no_token_length_warning(library, embedder):
    text = "\n\n".join(SENTENCE * 40 for _ in range(3))  # paragraphs of ~700 word pieces, the model reads 256
    assert max(embedder.count_tokens(text.split("\n\n"))) > embedder.max_seq_length
    transformers_logger = logging.getLogger()  # transformers, when the torch extra runs a model, logs to its own
    collect = Collect()
    transformers_logger.addHandler(collect)
    try:
        result = library.ingest_bytes(text.encode(), "harbour.txt")
    finally:
        transformers_logger.removeHandler(collect)
    assert result.status == "added" and result.chunks > 1
    warnings = [r.getMessage() for r in collect.records if r.levelno >= logging.WARNING]
    assert not warnings, warnings
