"""Helpers for the studies' table.py scripts (import with scripts/study on sys.path)."""
import json
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rr_demo_table(demo):
    """scripts/abba-table over an abba-rr-demo output folder: prints its table and returns its
    JSON (B over A per case); None when the folder is not there."""
    demo = Path(demo)
    if not demo.is_dir():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "abba.json"
        print(subprocess.run([str(ROOT / "scripts/abba-table"), str(demo), "--json", str(out)],
                             check=True, capture_output=True, text=True).stdout)
        return json.loads(out.read_text())
