"""MkDocs hooks (mkdocs.yml ``hooks:``): the site's home page is README.md.

README.md sits at the repository root and links into ``docs/`` (``docs/guides/mail.md``), which is
right on a forge and in a clone; on the site the same page is ``index.md`` inside ``docs/``, so
the ``docs/`` prefix of its links is dropped here. ``docs/index.md`` is only the placeholder the
page hangs on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_DOCS_LINK = re.compile(r"\]\(docs/")


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri != "index.md":
        return None
    readme = Path(config["config_file_path"]).parent / "README.md"
    return _DOCS_LINK.sub("](", readme.read_text(encoding="utf-8"))
