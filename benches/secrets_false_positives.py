"""False positives of the credential screen on ordinary scientific prose (SciFact).

    python benches/secrets_false_positives.py [/path/to/scifact]

Screens the title and text of every SciFact corpus document (5,183 abstracts, none of which
holds a credential) and prints how many the screen would refuse, with each finding's kind.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

from octobrain.secrets import find_secrets

DEFAULT = Path("/work/shared/data/scifact")


def main(root: Path) -> None:
    docs = flagged = 0
    kinds: Counter[str] = Counter()
    with gzip.open(root / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            docs += 1
            findings = find_secrets(f"{doc.get('title', '')}\n{doc.get('text', '')}")
            flagged += bool(findings)
            kinds.update(f.kind for f in findings)
    print(f"documents: {docs}")
    print(f"flagged: {flagged} ({flagged / docs:.4%})")
    for kind, n in kinds.most_common():
        print(f"  {kind}: {n}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
