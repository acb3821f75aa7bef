"""The README's Python snippets are Python (its quick start is run as written by
test/python-client.test.ts, against a gateway, after pip install)."""
from __future__ import annotations

import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_snippets_compile() -> None:
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) >= 3, "the quick start, streams, errors and timeouts each show code"
    for i, block in enumerate(blocks):
        compile(block, f"README.md python block {i + 1}", "exec")
