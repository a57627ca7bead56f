"""Write a tiny random Llama and a BPE tokenizer trained here: no download, same bytes every run.

Run with the vLLM venv's python (transformers, tokenizers and torch come with vLLM):
    python make_model.py DIR
Random weights answer gibberish, which is all a metrics test needs: vLLM's scheduler, prefix cache
and offloading see the same token streams as with a real model.
"""

import random
import sys
from pathlib import Path

SEED = 20261126
VOCAB = 1000
WORDS = 400


def corpus(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(WORDS)]
    return [" ".join(rng.choice(words) for _ in range(40)) for _ in range(2000)]


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"], seed=SEED)
    bpe.train_from_iterator(corpus(rng), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tok.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        torch_dtype="bfloat16",
    )
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
