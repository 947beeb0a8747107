"""The wheel carries what a project needs beyond the code: the curated sweep specs (`studies/`),
the notebooks and the committed cpu-scale snapshots, under `isolab/bundle/`, so that an
installed isolab runs `isolab study list|run` from any folder and `isolab init` can lay out a
project. A checkout uses its own folders instead (`isolab.paths`). Everything else is in
pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithBundle(build_py):
    def run(self):
        super().run()
        bundle = Path(self.build_lib) / "isolab" / "bundle"
        for name, patterns in (
            ("studies", ("*.yaml",)),
            ("notebooks", ("*.ipynb", "*.py")),
            ("examples", ("*.yaml", "*.py", "*.jsonl")),
            ("runs", ("runs.parquet", "snapshot.json")),
        ):
            for path in (HERE / name).rglob("*"):
                if path.is_file() and any(path.match(p) for p in patterns):
                    if name == "runs" and len(path.relative_to(HERE / name).parts) != 4:
                        continue  # snapshots only: runs/<study>/<scale>/<sweep>/<file>
                    dest = bundle / path.relative_to(HERE)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest)


setup(cmdclass={"build_py": BuildWithBundle})
