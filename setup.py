"""Build hooks: ship the top-level playbooks/ inside the package as kvops/_playbooks, and
build the C line finder where a compiler is at hand.

playbooks/ stays at the repository's top level (people read and edit it there, alerts link
to it); an installed kvops needs the same files, so the build copies them in. An editable
install finds the top-level folder directly (kvops/playbooks_path.py).

kvops.exposition._linescan finds a page's wanted lines in C (kvops/exposition/parser.py),
kvops.exposition._buckets groups histogram buckets into series (histograms.py), and
kvops.exporter._lines joins the exporter's lines (kvops/exporter/line_text.py). All are
optional: without a C compiler or Python's headers the build goes on without them and Python
does the same work (docs/performance.md measures both).
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class BuildPyWithPlaybooks(build_py):
    def run(self) -> None:
        super().run()
        src = Path(__file__).parent / "playbooks"
        dst = Path(self.build_lib) / "kvops" / "_playbooks"
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
            for md in src.glob("*.md"):
                shutil.copy2(md, dst / md.name)


setup(
    cmdclass={"build_py": BuildPyWithPlaybooks},
    ext_modules=[
        Extension("kvops.exposition._linescan", ["kvops/exposition/_linescan.c"], optional=True),
        Extension("kvops.exposition._buckets", ["kvops/exposition/_buckets.c"], optional=True),
        Extension("kvops.exporter._lines", ["kvops/exporter/_lines.c"], optional=True),
    ],
)
