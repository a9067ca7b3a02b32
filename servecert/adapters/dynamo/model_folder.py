"""A local model folder Dynamo accepts without weights: config.json, tokenizer.json and friends.

Dynamo's frontend and workers read a model card from a folder: ``config.json`` (context length
and KV shape), ``tokenizer.json`` (the frontend tokenizes and detokenizes with it),
``tokenizer_config.json`` (chat template) and ``generation_config.json``. No weights are needed
because the workers are the suite's fake engines. Nothing is downloaded: the tokenizer is a
byte-level BPE trained here, with the ``tokenizers`` package, on words shaped like the suite's
prompts, then padded to the fake engine's vocabulary (``servecert.protocol.tokenizer.VOCAB_SIZE`` ids) with
the suite's own decode words, so every id a fake engine samples is a real token. Token ids are
Dynamo's, not ``servecert-words-v1``'s: the frontend tokenizes with this file, so a fake engine's
prompt fingerprint is of these ids (``<unk>``, ``<s>``, ``</s>`` are ids 0, 1, 2, as the suite's
EOS is 2).

The folder's bytes are deterministic (Dynamo hashes them into the model card's checksum), so a
folder written once per content version is reused (``ensure``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from servecert.adapters.contract import tokenizer as suite_tokenizer

FORMAT_VERSION = "1"
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def default_root() -> Path:
    base = os.environ.get("SERVECERT_DYNAMO_MODEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "servecert"
    )
    return Path(base)


def _corpus() -> list[str]:
    """Lines shaped like the suite's prompts (``p12x345678 w123 ...``)."""
    lines = [" ".join(f"w{n}" for n in range(start, start + 32)) for start in range(0, 30000, 32)]
    lines += [" ".join(f"p{n}x{(n * 7919) % 1000000}" for n in range(start, start + 16)) for start in range(0, 4000, 16)]
    lines.append("The quick brown fox jumps over the lazy dog. hello world, 0123456789 !?.,;:'\"()[]{}<>/\\|@#$%^&*-+=_~`")
    return lines


def _tokenizer_json(vocab_size: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4096,
        special_tokens=[UNK, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    # NB: pad the vocabulary so every id a fake engine samples (up to VOCAB_SIZE-1) is a real
    # token; the padding is the suite's own decode word where that word is not taken yet.
    model = json.loads(tok.to_str())
    vocab: dict[str, int] = model["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for token_id in range(next_id, vocab_size):
        word = "Ġ" + suite_tokenizer.decode_token(token_id).strip()
        vocab[word if word not in vocab else f"<reserved_{token_id}>"] = token_id
    return json.dumps(model, ensure_ascii=False, sort_keys=True)


def _files(context_length: int, vocab_size: int) -> dict[str, Any]:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": context_length,
        "rms_norm_eps": 1e-5,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float16",
        "tie_word_embeddings": False,
    }
    tokenizer_config = {
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": context_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    generation_config = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}
    return {"config.json": config, "tokenizer_config.json": tokenizer_config, "generation_config.json": generation_config}


def ensure(context_length: int = 8192, root: Path | None = None) -> Path:
    """The model folder for ``context_length``, written once (atomically) and reused."""
    vocab_size = suite_tokenizer.VOCAB_SIZE
    folder = (root or default_root()) / f"dynamo-model-v{FORMAT_VERSION}-ctx{context_length}"
    if (folder / "tokenizer.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    for name, content in _files(context_length, vocab_size).items():
        (staging / name).write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    (staging / "tokenizer.json").write_text(_tokenizer_json(vocab_size))
    try:
        staging.rename(folder)
    except OSError:  # another process won the race; its folder has the same bytes
        for entry in staging.iterdir():
            entry.unlink()
        staging.rmdir()
    return folder
