"""The builder is pure Python: importing it must not import Django."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_builder_imports_and_builds_without_django():
    code = (
        "import sys\n"
        "from catalog.builder import build\n"
        "c = build([{'name': 'm', 'source': 'hf://org/m'}], engines=['vllm'])\n"
        "assert c.resolve('m')['engine'] == 'vllm'\n"
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if m.startswith('django'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
