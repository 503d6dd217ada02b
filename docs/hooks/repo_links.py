"""MkDocs hook: a link from a page to a repository file outside ``docs/`` (``../validation/README.md``)
works on GitHub but is not part of the site, so the site shows it as the file's path in code
(``README (`validation/README.md`)``). A link to a file that does not exist is left alone, so
``mkdocs build --strict`` still fails on it, as on any broken link or anchor inside the site."""

from __future__ import annotations

import re
from pathlib import Path

LINK = re.compile(r"\[([^\]\n]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    here = (docs / page.file.src_path).parent

    def repo_path(match: re.Match) -> str:
        target = (here / match.group(2)).resolve()
        if target.is_relative_to(docs) or not target.is_relative_to(root) or not target.exists():
            return match.group(0)  # a page of the site, or missing: MkDocs validates it
        return f"{match.group(1)} (`{target.relative_to(root)}`)"

    return LINK.sub(repo_path, markdown)
