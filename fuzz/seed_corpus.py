#!/usr/bin/env python3
"""Seeds fuzz/corpus/discover_files/ from the repository's fixtures.

Each seed is one project in the input format of the `discover_files`
target: the files of `FILES` (same order as in the target) joined by NUL
bytes. Seed k takes the k-th fixture file of every kind, wrapping around,
so every fixture definition file appears in at least one seed.
"""

import hashlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
OUT = ROOT / "fuzz" / "corpus" / "discover_files"

# (slot in the target's FILES, glob under fixtures/)
KINDS = [
    ("agent/agent.toml", "**/agent/agent.toml"),
    ("agent/instructions.md", "**/agent/instructions.md"),
    ("agent/tools/t.toml", "**/agent/tools/*.toml"),
    ("agent/skills/s.md", "**/agent/skills/*.md"),
    ("agent/schedules/x.md", "**/agent/schedules/*.md"),
    ("agent/schedules/y.toml", "**/agent/schedules/*.toml"),
    ("agent/channels/c.toml", "**/agent/channels/*.toml"),
    ("evals/evals.toml", "**/evals/evals.toml"),
    ("evals/e.eval.toml", "**/evals/**/*.eval.toml"),
    ("agent/hooks/h.toml", "**/agent/hooks/*.toml"),
    ("agent/mcp-connections/m.toml", "**/agent/mcp-connections/*.toml"),
    ("agent/ab.toml", "**/agent/ab.toml"),
    ("agent/subagents/r/agent.toml", "**/agent/subagents/*/agent.toml"),
    ("agent/skills/p/SKILL.md", "**/agent/skills/*/SKILL.md"),
]


def main() -> None:
    files = [sorted(FIXTURES.glob(pattern)) for _, pattern in KINDS]
    seeds = max(len(f) for f in files)
    OUT.mkdir(parents=True, exist_ok=True)
    for k in range(seeds):
        parts = [f[k % len(f)].read_bytes().replace(b"\0", b"") if f else b"" for f in files]
        data = b"\0".join(parts)
        name = hashlib.sha1(data).hexdigest()
        (OUT / name).write_bytes(data)
    print(f"wrote {seeds} seeds to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
