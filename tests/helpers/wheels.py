"""Real sglang / flashinfer-python wheels from PyPI, downloaded once and cached.

The cache (``$SGLANG_TEST_WHEEL_CACHE``, default ``<repo>/.cache/test-wheels``)
is git-ignored: wheels are never committed.
"""
import fcntl
import hashlib
import glob
import os
import re
import shutil
import subprocess
import sys
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("SGLANG_TEST_WHEEL_CACHE", os.path.join(REPO, ".cache", "test-wheels"))
# The SGLang releases the real-wheel tests read (patch guards, server flags, fused architectures): adding a release
# to the collection starts here (CONTRIBUTING.md). 0.5.17, the GPU test machine's release, is read where it matters.
RELEASES = ["0.5.4", "0.5.7", "0.5.9", "0.5.14", "0.5.19", "0.5.21", "0.5.23"]


class NoWheel(Exception):
    """PyPI has no wheel for this release (only an sdist that needs torch to build)."""


def wheel(project, version):
    """Path of the cached wheel, downloading it with ``pip download --no-deps`` if needed."""
    pattern = "%s-%s-*.whl" % (project.replace("-", "_"), version)
    os.makedirs(CACHE, exist_ok=True)
    # One download at a time: pytest-xdist's workers share the cache, and pip writes a wheel in place, so another
    # worker could find a half-written one.
    with open(os.path.join(CACHE, ".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _cached_wheel(project, version, pattern)


def _cached_wheel(project, version, pattern):
    found = glob.glob(os.path.join(CACHE, pattern))
    if not found:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "-q", "-d", CACHE, "%s==%s" % (project, version)],
                              capture_output=True, text=True, check=False)
        if "No matching distribution" in proc.stderr:
            raise NoWheel("%s==%s" % (project, version))
        assert proc.returncode == 0, proc.stderr
        found = glob.glob(os.path.join(CACHE, pattern))
    assert len(found) == 1, "expected one wheel for %s==%s in %s, got %r" % (project, version, CACHE, found)
    return found[0]


def pinned_flashinfer(sglang_wheel):
    """The flashinfer-python version this sglang release pins (its Requires-Dist)."""
    with zipfile.ZipFile(sglang_wheel) as archive:
        meta = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")][0]
        text = archive.read(meta).decode("utf-8")
    match = re.search(r"^Requires-Dist: flashinfer[-_]python(?:\[[^\]]*\])?\s*==\s*([^\s;]+)", text, re.M)
    assert match, "no flashinfer-python pin in %s" % sglang_wheel
    return match.group(1)


def original_bytes(sglang_wheel, rel):
    """A file exactly as the wheel ships it."""
    with zipfile.ZipFile(sglang_wheel) as archive:
        return archive.read(rel)


def make_venv(path, *wheels):
    """A real venv with the wheels installed by real pip, --no-deps (no torch). The venv gets no pip of its own
    (--without-pip): this interpreter's pip installs into it (pip --python), which spares each venv the seconds of
    CPU that ensurepip spends installing pip; what the tests read (the wheels' packages and metadata) is the same."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    if wheels:
        pip_install(path, *wheels)
    return path


# What tests and the modules under test write into a venv of wheels in place (a hand edit, a chmod, an append): the
# guard files of the fusion patch. copy_venv copies these; the modules replace files by rename, never in place.
WRITTEN_IN_PLACE = (os.path.join("sglang", "srt", "layers"),)


def copy_venv(venv, path):
    """A private copy of a venv at path (its links kept as links, as a venv's interpreter is one): a fraction of the
    cost of installing the wheels again. Its folders are its own and so is every file outside site-packages (pyvenv.cfg,
    bin/, the patch's record); site-packages' files are hard links to the original's, except those under
    WRITTEN_IN_PLACE, which are copied. A test or module may add, remove or rename files anywhere, and write in place
    only below WRITTEN_IN_PLACE (a write through a hard link would change the original, which other tests read; the
    pristine venvs' fixture checks at the end of the run that none did). Tests run its Python, never its copied bin/
    scripts, whose first lines still name the original."""
    site = site_packages(venv)
    private = tuple(os.path.join(site, rel) + os.sep for rel in WRITTEN_IN_PLACE)

    def link_or_copy(src, dst):
        if not src.startswith(site + os.sep) or src.startswith(private):
            return shutil.copy2(src, dst)
        os.link(src, dst)
        return dst
    shutil.copytree(venv, str(path), symlinks=True, copy_function=link_or_copy)
    return str(path)


def file_stats(venv):
    """{path below the venv: (size, mtime_ns, mode)} of its files, bytecode aside: what a write in place or a chmod
    changes."""
    found = {}
    for directory, dirs, files in os.walk(venv):
        dirs[:] = [name for name in dirs if name != "__pycache__"]  # bytecode its Python may write where it may
        for name in files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[os.path.relpath(path, venv)] = (info.st_size, info.st_mtime_ns, info.st_mode)
    return found


def pip_install(venv, *wheels):
    # This interpreter's pip, installing for the venv's Python (pip --python): the venvs made here have no pip.
    subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"), "install", "-q",
                    "--no-deps", "--no-index", "--no-compile"] + list(wheels), check=True)


def site_packages(venv):
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    assert len(found) == 1, found
    return found[0]


def wheelhouse(name, *requirements):
    """A folder of wheels for the requirements and everything they need (``pip download``, binary wheels only),
    downloaded once into the cache (``<cache>/<name>``); pip installs from it with --no-index --find-links."""
    folder = os.path.join(CACHE, name)
    marker = os.path.join(folder, ".complete")
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, ".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(marker):
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-q", "-d", folder]
                                  + list(requirements), capture_output=True, text=True, check=False)
            assert proc.returncode == 0, proc.stderr
            with open(marker, "w", encoding="utf-8") as handle:
                handle.write("\n".join(requirements) + "\n")
    return folder


def hf_client_requirements():
    """What the sglang_model role installs into its hf client venv (sglang_model_hf_packages, its defaults)."""
    import yaml  # pylint: disable=import-outside-toplevel

    with open(os.path.join(REPO, "roles", "sglang_model", "defaults", "main.yml"), encoding="utf-8") as handle:
        return list(yaml.safe_load(handle)["sglang_model_hf_packages"])


def hf_client_python():
    """The Python of a venv holding the role's pinned huggingface_hub, installed by real pip from cached wheels (made
    once into the cache, rebuilt when the pin changes)."""
    requirements = hf_client_requirements()
    key = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    house = wheelhouse("hf-client-" + key, *requirements)
    venv = os.path.join(CACHE, "venv-hf-client-" + key)
    python = os.path.join(venv, "bin", "python")
    with open(os.path.join(CACHE, ".lock-venv"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(venv, ".complete")):
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
            subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", house]
                           + requirements, check=True)
            open(os.path.join(venv, ".complete"), "w", encoding="utf-8").close()
    return python
