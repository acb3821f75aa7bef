"""The build backend of sdk/python's packages (PEP 517 wheels and sdists, PEP 660 editables).

Standard library only, and in the source tree (pyproject.toml's `backend-path`), so
`pip install ./sdk/python` and `pip install ./sdk/python/worker` need nothing from a package
index: setuptools, the usual backend, is itself fetched from one by pip's isolated build.
It lives in worker/ because a backend-path must lie inside the package's own folder, and
sdk/python/worker is inside both sdk/python (the client) and itself (the worker SDK).

It reads the standard [project] table and one table of its own:

    [tool.switchyard-build]
    packages = ["switchyard"]   # folders packaged whole (minus __pycache__ and dotfiles)

A [project] key it does not know fails the build rather than being left out of the metadata.
pyproject.toml is read with tomllib (Python 3.11+); older Pythons get tomli through the
get_requires_* hooks, which is then the one thing pip fetches.
"""
import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import time
import zipfile

SUPPORTED_PROJECT_KEYS = {
    "name", "version", "description", "readme", "license", "requires-python", "dependencies",
    "optional-dependencies", "classifiers",
}
README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst"}
TOMLI = [] if sys.version_info >= (3, 11) else ["tomli>=1.1"]


def _load_toml(path):
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def _timestamp():
    # Reproducible archives: SOURCE_DATE_EPOCH when set, else the earliest time a zip can hold.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return max(int(epoch), 315532800) if epoch else 315532800


class Project:
    """pyproject.toml of the source tree the hooks run in (PEP 517: the working directory)."""

    def __init__(self, root="."):
        self.root = os.path.abspath(root)
        data = _load_toml(os.path.join(self.root, "pyproject.toml"))
        self.meta = data["project"]
        unknown = sorted(set(self.meta) - SUPPORTED_PROJECT_KEYS)
        if unknown:
            raise ValueError(f"pyproject.toml: [project] {', '.join(unknown)} not supported by switchyard_build")
        self.name = self.meta["name"]
        self.version = self.meta["version"]
        # The distribution name as file names spell it (the wheel and sdist specifications).
        self.dist = re.sub(r"[-_.]+", "_", self.name).lower()
        self.packages = data["tool"]["switchyard-build"]["packages"]
        self.backend_path = data["build-system"].get("backend-path", [])
        self.readme = self.meta.get("readme")
        if self.readme is not None and not isinstance(self.readme, str):
            raise ValueError("pyproject.toml: readme must be a file name for switchyard_build")

    def metadata(self):
        """Core metadata 2.1: the METADATA of the wheel, the PKG-INFO of the sdist."""
        m = self.meta
        lines = ["Metadata-Version: 2.1", f"Name: {self.name}", f"Version: {self.version}"]
        if "description" in m:
            lines.append(f"Summary: {m['description']}")
        if "license" in m:
            lines.append(f"License: {m['license']['text']}")
        lines += [f"Classifier: {c}" for c in m.get("classifiers", [])]
        if "requires-python" in m:
            lines.append(f"Requires-Python: {m['requires-python']}")
        lines += [f"Requires-Dist: {d}" for d in m.get("dependencies", [])]
        for extra, deps in m.get("optional-dependencies", {}).items():
            lines.append(f"Provides-Extra: {extra}")
            for dep in deps:
                requirement, _, marker = dep.partition(";")
                condition = f'({marker.strip()}) and extra == "{extra}"' if marker.strip() else f'extra == "{extra}"'
                lines.append(f"Requires-Dist: {requirement.strip()}; {condition}")
        body = ""
        if self.readme:
            content_type = README_TYPES.get(os.path.splitext(self.readme)[1].lower(), "text/plain")
            lines.append(f"Description-Content-Type: {content_type}")
            with open(os.path.join(self.root, self.readme), encoding="utf-8") as f:
                body = f.read()
        return ("\n".join(lines) + "\n\n" + body).encode("utf-8")

    def files_under(self, folder):
        """The files of a folder of the tree, recursively, as paths relative to the root."""
        found = []
        for dirpath, dirnames, filenames in os.walk(os.path.join(self.root, folder)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if not name.startswith(".") and not name.endswith((".pyc", ".pyo")):
                    found.append(os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/"))
        return found


class WheelWriter:
    """A py3-none-any wheel: its files, then the dist-info with a RECORD of every file."""

    def __init__(self, project, directory):
        self.project = project
        self.filename = f"{project.dist}-{project.version}-py3-none-any.whl"
        self.zip = zipfile.ZipFile(os.path.join(directory, self.filename), "w", zipfile.ZIP_DEFLATED)
        self.date = time.gmtime(_timestamp())[:6]
        self.record = []

    def add(self, arcname, data):
        info = zipfile.ZipInfo(arcname, self.date)
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, data, zipfile.ZIP_DEFLATED)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def finish(self):
        dist_info = f"{self.project.dist}-{self.project.version}.dist-info"
        self.add(f"{dist_info}/METADATA", self.project.metadata())
        wheel = "Wheel-Version: 1.0\nGenerator: switchyard_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        self.add(f"{dist_info}/WHEEL", wheel.encode())
        record = "\n".join(self.record + [f"{dist_info}/RECORD,,"]) + "\n"
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", self.date)
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, record, zipfile.ZIP_DEFLATED)
        self.zip.close()
        return self.filename


def get_requires_for_build_wheel(config_settings=None):
    return list(TOMLI)


def get_requires_for_build_sdist(config_settings=None):
    return list(TOMLI)


def get_requires_for_build_editable(config_settings=None):
    return list(TOMLI)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = Project()
    wheel = WheelWriter(project, wheel_directory)
    for package in project.packages:
        for path in project.files_under(package):
            with open(os.path.join(project.root, path), "rb") as f:
                wheel.add(path, f.read())
    return wheel.finish()


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # The source tree itself on sys.path, through a .pth file: edits take effect without a reinstall.
    project = Project()
    wheel = WheelWriter(project, wheel_directory)
    wheel.add(f"__editable__.{project.dist}-{project.version}.pth", (project.root + "\n").encode())
    return wheel.finish()


def build_sdist(sdist_directory, config_settings=None):
    # What it takes to build the wheel again: pyproject.toml, the readme, the packages and this
    # backend (its backend-path), plus PKG-INFO.
    project = Project()
    base = f"{project.dist}-{project.version}"
    filename = f"{base}.tar.gz"
    paths = ["pyproject.toml"] + ([project.readme] if project.readme else [])
    for folder in project.packages + project.backend_path:
        paths += project.files_under(folder)
    mtime = _timestamp()
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:

        def add(arcname, data):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))

        for path in dict.fromkeys(paths):  # once each, in order
            with open(os.path.join(project.root, path), "rb") as f:
                add(path, f.read())
        add("PKG-INFO", project.metadata())
    return filename
