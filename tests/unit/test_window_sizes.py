"""Reading a model server's refusal for size, and fitting DocChat's budget to a learnt window (issue 47)."""
from __future__ import annotations

from rag_core.core.config import Settings
from rag_core.core.errors import ContextTooSmall, LLMError
from rag_core.llm.context_window import fit, size_refusal

LLAMA_CPP = {"code": 400, "message": "request (5499 tokens) exceeds the available context size (4096 tokens), try "
             "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5499, "n_ctx": 4096}


def test_llama_cpps_refusal_is_read_with_its_window():
    assert size_refusal(LLAMA_CPP, LLAMA_CPP["message"]) == (True, 4096)
    assert size_refusal(None, LLAMA_CPP["message"]) == (True, 4096)  # the message alone names it too


def test_openai_and_vllm_refusals_name_their_window_in_the_message():
    body = {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}
    assert size_refusal(body, body["message"]) == (True, 8192)
    assert size_refusal({"code": "context_length_exceeded"}, "too long") == (True, None)


def test_other_errors_are_not_refusals_for_size():
    assert size_refusal({"type": "invalid_request_error"}, "model not found") == (False, None)
    assert size_refusal(None, "out of memory") == (False, None)


def test_fit_lowers_the_budget_to_the_window_and_keeps_the_reply_inside_it():
    s = Settings(max_context_tokens=8192, answer_tokens=1024, history_tokens=1000)
    assert fit(s, None) is s and fit(s, 16_384) is s
    small = fit(s, 2048)
    assert (small.answer.max_context_tokens, small.answer.answer_tokens, small.answer.history_tokens) == (2048, 1024, 512)
    tiny = fit(s, 1024)
    assert tiny.answer.answer_tokens == 512 < tiny.answer.max_context_tokens


def test_the_sentence_names_the_window_and_how_to_raise_it():
    err = ContextTooSmall(4096, "openai", "request exceeds")
    assert isinstance(err, LLMError)
    assert str(err) == ("The model server's context window is 4,096 tokens per request, too small for this question "
                        "with its sources; start llama-server with a larger -c (or fewer parallel slots -np), or load "
                        "the model with a longer context in LM Studio or vLLM, or ask about a smaller part.")
    assert "is too small" in str(ContextTooSmall(None)) and "num_ctx" in str(ContextTooSmall(None, "ollama"))
    assert err.details.startswith("The model server said:")
