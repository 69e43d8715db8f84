"""What of a URL (or a credential) may ever be printed: `redact`, which every message litebert shows goes through
(`litebert.errors.printable`, used by each error, warning and path it prints).

A URL keeps its scheme, host, port and path, which say where; its user information (``user:password@``) and the
values of query parameters that carry credentials (``token=``, ``sig=``, ``X-Amz-Signature=``, ``access_token=``,
an S3/GCS/Azure pre-signed URL's...) become ``***``. Outside URLs, an ``Authorization:`` header's value and Hugging
Face tokens (``hf_...``) are hidden too.
"""

from __future__ import annotations

import re

HIDDEN = "***"
# query parameters whose value is a credential: pre-signed S3 (X-Amz-*), GCS (X-Goog-*), Azure SAS (sig, se...),
# OAuth and API tokens, passwords
_SECRET_PARAM = re.compile(r"(?i)^(x-amz-(signature|credential|security-token)|x-goog-(signature|credential)|sig|"
                           r"signature|token|access_token|id_token|refresh_token|auth|authorization|api_?key|key|"
                           r"apikey|secret|client_secret|password|passwd|pwd|session|sessiontoken|code)$")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*)@")
_PARAM = re.compile(r"([?&;])([^=&;#]+)=([^&;#]*)")
_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization)(\s*[:=]\s*)(bearer\s+|basic\s+|token\s+)?[^\s,;'\"]+")
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{30,}")  # a token is hf_ and 34 letters; a file name rarely so


def redact_url(url: str) -> str:
    """``url`` without its secrets: user information and credential query values as ``***``."""
    url = _USERINFO.sub(lambda m: m.group(1) + HIDDEN + "@", url)
    return _PARAM.sub(lambda m: m.group(0) if not _SECRET_PARAM.match(m.group(2)) else
                      f"{m.group(1)}{m.group(2)}={HIDDEN}", url)


def redact(text: str) -> str:
    """``text`` with every URL in it `redact_url`-ed and ``Authorization`` values and ``hf_`` tokens hidden."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if "uthoriz" in text or "UTHORIZ" in text:
        text = _HEADER.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + HIDDEN, text)
    return _HF_TOKEN.sub("hf_" + HIDDEN, text) if "hf_" in text else text
