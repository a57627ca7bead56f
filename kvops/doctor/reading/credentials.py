"""What counts as a credential in a serve line or a log: an explicit list, never a substring.

`--max-num-batched-tokens 8192`, `--tokenizer x`, `MAX_TOKENS=5` are not secrets. Secrets are
the flags vLLM defines for credentials, environment variables named in the list below (or
ending in a credential suffix), and values shaped like a credential (hf_..., sk-..., bearer
tokens, GitHub and AWS keys), wherever they appear. `--ssl-keyfile` is a path: never read.
"""

from __future__ import annotations

import re

# vLLM's credential flags (entrypoints/openai/cli_args.py --api-key; engine args --hf-token)
# and the environment variable a printed command uses instead of the value.
SECRET_FLAGS: dict[str, str] = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}

SECRET_ENV_NAMES = frozenset(
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_HUB_TOKEN",
        "HUGGINGFACE_TOKEN",
        "HF_API_TOKEN",
        "VLLM_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "NGC_API_KEY",
        "WANDB_API_KEY",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AZURE_OPENAI_API_KEY",
        "MODELSCOPE_API_TOKEN",
        "LMCACHE_REMOTE_AUTH_TOKEN",
    ]
)
# Name endings that mean a credential (HF_TOKEN, MY_API_KEY, DB_PASSWORD); `_TOKENS`,
# `_TOKENIZER` and friends do not end this way.
SECRET_ENV_SUFFIXES = (
    "_TOKEN",
    "_API_KEY",
    "_APIKEY",
    "_SECRET",
    "_SECRET_KEY",
    "_ACCESS_KEY",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
)
_NOT_A_VALUE = ("_FILE", "_PATH", "_DIR")

# Values that are credentials whatever they are called.
TOKEN_SHAPE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)\b"
)
BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{8,})")


def is_secret_env(name: str) -> bool:
    """An environment variable that holds a credential (by the list or a credential suffix)."""
    upper = name.upper()
    if upper.endswith(_NOT_A_VALUE):
        return False
    return upper in SECRET_ENV_NAMES or upper.endswith(SECRET_ENV_SUFFIXES) or upper in ("TOKEN", "PASSWORD")


def secret_flag_env(flag: str) -> str | None:
    """`--api-key` -> VLLM_API_KEY, `--hf-token` -> HF_TOKEN; any other flag -> None."""
    canonical = "--" + flag.lstrip("-").replace("_", "-").lower() if flag.startswith("--") else flag
    return SECRET_FLAGS.get(canonical)
