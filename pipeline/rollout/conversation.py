"""A multi-turn conversation kept as token ids, and the rule that trims it to the context length.

In: a tokenizer with a chat template; the opening messages (system prompt, task statement); per
turn, the policy's sampled token ids and the evaluator's feedback text. Out: the prompt ids of the
next turn, and which earlier turns they contain.

The policy's tokens are never re-tokenized: a prompt is the opening's ids, then for each kept
earlier turn its sampled ids followed by "glue" ids (the end of the assistant message, the
feedback as a user message, the header of the next assistant message). The glue comes from the
chat template itself: `ChatFormat` renders a two-turn conversation with placeholder contents
and cuts the text between them, then checks that the template renders a conversation as its
messages appended one after another (true of ChatML, Llama and most instruction templates).
Without trimming, turn k's prompt is exactly turn k-1's prompt + response + glue, so the whole
episode is one token sequence whose policy tokens are known.

Trimming rule (`Context.prompt`): the opening always stays; earlier turns are kept newest first,
whole (response and its feedback together), while the prompt leaves room for `max_new_tokens`
within `max_model_len_tokens`, and at most `history_turns_kept` of them when that is set. Older
turns are dropped. If not even the newest earlier turn fits, the episode stops (reason
'context'): a prompt without the latest feedback would ask the policy to refine blind.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.core.errors import UserError

_RESPONSE = "\u2063RESPONSE\u2063"  # placeholders no real message contains
_FEEDBACK = "\u2063FEEDBACK\u2063"


class ChatTemplateError(UserError, ValueError):
    """The tokenizer's chat template cannot be used turn by turn."""


class ChatFormat:
    """Token ids of conversation pieces, derived once from a tokenizer's chat template."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        probe = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        opening = self._render(probe, True)
        full = self._render(probe + [{"role": "assistant", "content": _RESPONSE},
                                     {"role": "user", "content": _FEEDBACK}], True)
        if not full.startswith(opening + _RESPONSE) or full.count(_FEEDBACK) != 1:
            name = getattr(tokenizer, "name_or_path", "the tokenizer")
            raise ChatTemplateError(
                f"the chat template of {name} does not render a conversation as its messages appended one after "
                "another (it rewrites earlier turns); use a model whose template appends, or give its tokenizer "
                "a ChatML chat_template")
        between, self._after_feedback = full[len(opening + _RESPONSE):].split(_FEEDBACK)
        self._after_response = between

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (special tokens written in it are recognised, none added)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """`encode` of many texts in one batched call (the fast tokenizer spreads it over the cores)."""
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def encode_many_with_offsets(self, texts: list[str]) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        """`encode_many`, and per token the (start, end) characters of the text it covers."""
        if not texts:
            return [], []
        enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        return [list(ids) for ids in enc["input_ids"]], [[tuple(o) for o in offs] for offs in enc["offset_mapping"]]

    def opening_text(self, system: str, user: str) -> str:
        """The first prompt as template text: system and user messages, then the reply's header."""
        return self._render([{"role": "system", "content": system}, {"role": "user", "content": user}], True)

    def opening_ids(self, system: str, user: str) -> list[int]:
        """The first prompt: system and user messages, then the header of the assistant's reply."""
        return self.encode(self.opening_text(system, user))

    def glue_ids(self, feedback: str, response_ids: list[int]) -> list[int]:
        """What follows a response in the context: the end of the assistant message (unless the policy
        already sampled the end-of-turn token), the feedback as a user message, the next header."""
        ids = self.encode(self._after_response + feedback + self._after_feedback)
        if response_ids and response_ids[-1] == self.eos_id and ids and ids[0] == self.eos_id:
            ids = ids[1:]
        return ids


@dataclass
class Exchange:
    """One earlier turn as it sits in the context: the policy's ids, then the glue with its feedback."""
    response_ids: list[int]
    glue_ids: list[int]

    def __len__(self) -> int:
        return len(self.response_ids) + len(self.glue_ids)


@dataclass
class Context:
    """The opening and every earlier turn of one episode; `prompt` applies the trimming rule."""
    opening_ids: list[int]
    exchanges: list[Exchange] = field(default_factory=list)

    def add(self, response_ids: list[int], glue_ids: list[int]) -> None:
        self.exchanges.append(Exchange(list(response_ids), list(glue_ids)))

    def prompt(self, max_model_len_tokens: int, max_new_tokens: int,
               history_turns_kept: int | None) -> tuple[list[int], list[int]] | None:
        """`(prompt ids, kept turn indices)` for the next turn, or None when nothing usable fits."""
        budget = max_model_len_tokens - max_new_tokens - len(self.opening_ids)
        if budget < 0:
            return None
        kept: list[int] = []
        limit = len(self.exchanges) if history_turns_kept is None else min(history_turns_kept, len(self.exchanges))
        for index in range(len(self.exchanges) - 1, len(self.exchanges) - 1 - limit, -1):
            if len(self.exchanges[index]) > budget:
                break
            budget -= len(self.exchanges[index])
            kept.insert(0, index)
        if self.exchanges and not kept:
            return None
        ids = list(self.opening_ids)
        for index in kept:
            ids += self.exchanges[index].response_ids + self.exchanges[index].glue_ids
        return ids, kept
