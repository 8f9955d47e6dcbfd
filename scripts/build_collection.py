#!/usr/bin/env python3
"""Build the gpufleet.sglang collection from the checkout (make collection).

The checkout stays the only copy of every module, util, role and playbook; this script writes a collection tree
from it and transforms what a collection needs transformed, by code the unit tests cover:

* library/*.py -> plugins/modules/, module_utils/*.py -> plugins/module_utils/, top-level <type>_plugins/ ->
  plugins/<type>/, with ``ansible.module_utils.<own util>`` imports rewritten to the collection's path, and the
  plugins' <name>.yml documentation files beside them (one per filter: ansible-doc -t filter reads them);
* roles/ and playbooks/ copied, with the project's own modules, roles, playbooks, filters and lookups named by FQCN;
* collection/ (README.md, the operators' guide galaxy.yml's readme names; galaxy.yml, meta/runtime.yml, CHANGELOG.md,
  requirements.txt, bindep.txt, tests/sanity/) plus LICENSE copied as they are, and so are docs/ and monitoring/
  (Prometheus alert rules, the Grafana dashboard). The checkout's README.md is the maintainers' and stays out.

Lists are read from the tree, never kept here: a module, util, role or playbook added to the checkout is in the next
build. Then ``ansible-galaxy collection build`` writes the tarball to dist/.

    scripts/build_collection.py [--out build] [--dist dist] [--no-tarball]
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Collection-only files kept in the checkout (the checkout itself is not a collection root: no galaxy.yml at the top).
META_DIR = "collection"
TOP_FILES = ("LICENSE",)
# Task keywords that hold more tasks; play keywords that hold tasks.
BLOCK_KEYS = ("block", "rescue", "always")
PLAY_TASK_KEYS = ("pre_tasks", "tasks", "post_tasks", "handlers")
ROLE_ACTIONS = {p + a for p in ("", "ansible.builtin.", "ansible.legacy.")
                for a in ("import_role", "include_role")}
PLAYBOOK_ACTIONS = {"import_playbook", "ansible.builtin.import_playbook"}
JINJA_SUFFIXES = (".yml", ".yaml", ".j2")


class BuildError(Exception):
    """The checkout holds something the build cannot carry over faithfully."""


def galaxy_meta(repo=REPO):
    """namespace, name and version from collection/galaxy.yml."""
    with open(os.path.join(repo, META_DIR, "galaxy.yml"), encoding="utf-8") as handle:
        meta = yaml.safe_load(handle)
    for key in ("namespace", "name", "version"):
        if not meta.get(key):
            raise BuildError("%s/galaxy.yml: %s is missing" % (META_DIR, key))
    return meta


def py_names(folder):
    """Module names of the *.py files in a folder (not __init__)."""
    if not os.path.isdir(folder):
        return []
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")


def plugin_folders(repo=REPO):
    """{plugin type: folder} for each top-level <type>_plugins/ folder (filter_plugins -> filter)."""
    return {entry[:-len("_plugins")]: os.path.join(repo, entry) for entry in sorted(os.listdir(repo))
            if entry.endswith("_plugins") and os.path.isdir(os.path.join(repo, entry))}


def filter_names(folder):
    """Names of the filters the FilterModule classes in a folder define (their filters() keys)."""
    names = set()
    for name in py_names(folder):
        spec = importlib.util.spec_from_file_location("_build_filter_" + name, os.path.join(folder, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if hasattr(module, "FilterModule"):
            names.update(module.FilterModule().filters())
    return names


def doc_files(folder, kind):
    """The <plugin name>.yml documentation files in a plugin folder (ansible-doc reads them beside a file that
    defines several filters or tests). One that documents no plugin of the folder is refused: ansible-doc would
    list a filter that does not exist."""
    if not os.path.isdir(folder):
        return []
    docs = sorted(f for f in os.listdir(folder) if f.endswith((".yml", ".yaml")))
    if kind == "filter":
        defined = filter_names(folder)
    else:
        defined = set(py_names(folder))
    stray = [f for f in docs if f.rsplit(".", 1)[0] not in defined]
    if stray:
        raise BuildError("%s: %s documents no %s plugin defined there" % (
            os.path.basename(folder), ", ".join(stray), kind))
    return docs


# --- Python: imports of the project's own module_utils -------------------------------------------------------

def rewrite_imports(source, own_utils, target, path="<source>"):
    """Source with ``ansible.module_utils`` imports of own_utils pointed at target (a dotted package).

    ``from ansible.module_utils.X import y`` and ``from ansible.module_utils import X[, Y]`` are rewritten when X
    is one of own_utils; ansible-core's own utils (basic, common...) are left alone. A statement that mixes both
    kinds, or ``import ansible.module_utils.X``, is refused: the build would have to guess.
    """
    lines = source.splitlines(keepends=True)
    for node in ast.walk(ast.parse(source, path)):
        line = node.lineno - 1 if isinstance(node, (ast.Import, ast.ImportFrom)) else None
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[:2] == ["ansible", "module_utils"] and len(parts) > 2 and parts[2] in own_utils:
                    raise BuildError("%s:%d: use 'from ansible.module_utils import %s' (plain 'import %s' is "
                                     "not rewritten)" % (path, node.lineno, parts[2], alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[:2] != ["ansible", "module_utils"]:
                continue
            if len(parts) > 2:
                if parts[2] not in own_utils:
                    continue
                old, new = node.module, target + "." + ".".join(parts[2:])
            else:
                own = [a.name in own_utils for a in node.names]
                if not any(own):
                    continue
                if not all(own):
                    raise BuildError("%s:%d: one import mixes the project's module_utils with ansible-core's; "
                                     "split it" % (path, node.lineno))
                old, new = "ansible.module_utils", target
            pattern = re.compile(r"(\bfrom\s+)%s(\s+import\b)" % re.escape(old))
            lines[line], count = pattern.subn(lambda m, new=new: m.group(1) + new + m.group(2), lines[line])
            if count != 1:
                raise BuildError("%s:%d: cannot find 'from %s import' on the statement's first line"
                                 % (path, node.lineno, old))
    return "".join(lines)


# --- YAML: the project's modules, roles and playbooks by FQCN ------------------------------------------------

def _key(mapping, name):
    """(key node, value node) of a mapping node's key, or (None, None)."""
    for key, value in mapping.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            return key, value
    return None, None


def _keys(node):
    return [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]


class _Renamer:
    """Collects (line, column, old, new) edits of plain scalars at the positions YAML's composer reports."""

    def __init__(self, fqcn, modules, roles, playbooks):
        self.fqcn, self.modules, self.roles, self.playbooks = fqcn, set(modules), set(roles), set(playbooks)
        self.edits = []

    def _rename(self, node, new):
        if node.style is not None:  # quoted or block scalar: its text is not the value itself
            raise BuildError("line %d: write %r plain (unquoted) so the build can name it by FQCN"
                             % (node.start_mark.line + 1, node.value))
        self.edits.append((node.start_mark.line, node.start_mark.column, node.value, new))

    def _role(self, node):
        if isinstance(node, yaml.ScalarNode) and node.value in self.roles:
            self._rename(node, self.fqcn + node.value)

    def role_entry(self, node):
        """An item of a play's roles: or a role's dependencies: (a name or a mapping with role/name)."""
        if isinstance(node, yaml.MappingNode):
            for keyword in ("role", "name"):
                self._role(_key(node, keyword)[1])
        else:
            self._role(node)

    def tasks(self, node):
        if not isinstance(node, yaml.SequenceNode):
            return
        for task in node.value:
            if isinstance(task, yaml.MappingNode):
                self.task(task)

    def task(self, task):
        for key, value in task.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if key.value in self.modules:
                self._rename(key, self.fqcn + key.value)
            elif key.value in BLOCK_KEYS:
                self.tasks(value)
            elif key.value in ROLE_ACTIONS and isinstance(value, yaml.MappingNode):
                self._role(_key(value, "name")[1])
            elif key.value in PLAYBOOK_ACTIONS:
                self.playbook_ref(value)

    def playbook_ref(self, node):
        """import_playbook: <file of playbooks/> -> <namespace>.<name>.<playbook>."""
        if not isinstance(node, yaml.ScalarNode):
            return
        stem = os.path.basename(node.value)
        for suffix in (".yml", ".yaml"):
            if stem.endswith(suffix) and stem[:-len(suffix)] in self.playbooks:
                self._rename(node, self.fqcn + stem[:-len(suffix)])

    def play(self, play):
        for key, value in play.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if key.value in PLAY_TASK_KEYS:
                self.tasks(value)
            elif key.value == "roles" and isinstance(value, yaml.SequenceNode):
                for entry in value.value:
                    self.role_entry(entry)
            elif key.value in PLAYBOOK_ACTIONS:
                self.playbook_ref(value)


def _apply(text, edits):
    lines = text.splitlines(keepends=True)
    for line, column, old, new in sorted(edits, reverse=True):
        if lines[line][column:column + len(old)] != old:
            raise BuildError("line %d: expected %r at column %d" % (line + 1, old, column + 1))
        lines[line] = lines[line][:column] + new + lines[line][column + len(old):]
    return "".join(lines)


def fqcn_yaml(text, kind, fqcn, modules, roles, playbooks, path="<yaml>"):
    """YAML text with the project's modules, roles and playbooks named by FQCN; formatting and comments kept.

    kind: "tasks" (a task list: tasks/, handlers/, playbooks/tasks/), "playbook", "meta" (a role's meta/main.yml)
    or anything else (left as it is). fqcn is the "<namespace>.<name>." prefix.
    """
    if kind not in ("tasks", "playbook", "meta"):
        return text
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise BuildError("%s: %s" % (path, exc)) from exc
    renamer = _Renamer(fqcn, modules, roles, playbooks)
    try:
        if kind == "tasks":
            renamer.tasks(root)
        elif kind == "playbook" and isinstance(root, yaml.SequenceNode):
            for play in root.value:
                if isinstance(play, yaml.MappingNode):
                    renamer.play(play)
        elif kind == "meta" and isinstance(root, yaml.MappingNode):
            deps = _key(root, "dependencies")[1]
            if isinstance(deps, yaml.SequenceNode):
                for entry in deps.value:
                    renamer.role_entry(entry)
        return _apply(text, renamer.edits)
    except BuildError as exc:
        raise BuildError("%s: %s" % (path, exc)) from exc


def fqcn_filters(text, fqcn, filters):
    """Jinja text with the project's own filters called by FQCN (``x | name`` -> ``x | ns.coll.name``)."""
    if not filters:
        return text
    names = "|".join(re.escape(f) for f in sorted(filters, key=len, reverse=True))
    return re.sub(r"(\|\s*)(%s)\b(?![.\w])" % names, lambda m: m.group(1) + fqcn + m.group(2), text)


def fqcn_lookups(text, fqcn, lookups):
    """Jinja text with the project's own lookups called by FQCN (``lookup('name', ...)``, ``query``, ``q``)."""
    if not lookups:
        return text
    names = "|".join(re.escape(n) for n in sorted(lookups, key=len, reverse=True))
    return re.sub(r"(\b(?:lookup|query|q)\(\s*)(['\"])(%s)\2" % names,
                  lambda m: m.group(1) + m.group(2) + fqcn + m.group(3) + m.group(2), text)


EXAMPLES_RE = re.compile(r'^(EXAMPLES\s*=\s*r?""")(.*?)(""")', re.S | re.M)


def fqcn_examples(source, fqcn, modules, roles, playbooks, path="<module>"):
    """A module's source with the tasks (or plays) of its EXAMPLES naming the project's modules by FQCN, so that
    ``ansible-doc gpufleet.sglang.<module>`` shows what a user of the collection types."""
    match = EXAMPLES_RE.search(source)
    if not match:
        return source
    text = match.group(2)
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BuildError("%s: EXAMPLES: %s" % (path, exc)) from exc
    plays = isinstance(parsed, list) and any(isinstance(entry, dict) and "hosts" in entry for entry in parsed)
    text = fqcn_yaml(text, "playbook" if plays else "tasks", fqcn, modules, roles, playbooks, path + " EXAMPLES")
    return source[:match.start(2)] + text + source[match.end(2):]


def yaml_kind(relpath):
    """How fqcn_yaml reads a file of the collection tree, from where it lies."""
    parts = relpath.split(os.sep)
    if not parts[-1].endswith((".yml", ".yaml")):
        return None
    if parts[0] == "playbooks":
        return "tasks" if len(parts) > 2 and parts[1] == "tasks" else "playbook"
    if parts[0] == "roles" and len(parts) > 3:
        if parts[2] in ("tasks", "handlers"):
            return "tasks"
        if parts[2] == "meta" and parts[-1] in ("main.yml", "main.yaml"):
            return "meta"
    return None


# --- the tree ------------------------------------------------------------------------------------------------

def _ignored(name):
    return name == "__pycache__" or name.endswith((".pyc", ".retry")) or name.startswith(".")


def _copy_tree(src, dst):
    shutil.copytree(src, dst, ignore=lambda _d, names: [n for n in names if _ignored(n)])


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def build_tree(out, repo=REPO):
    """Write <out>/ansible_collections/<namespace>/<name>/ from the checkout; return its path."""
    meta = galaxy_meta(repo)
    fqcn = "%s.%s." % (meta["namespace"], meta["name"])
    target = "ansible_collections.%s.%s.plugins.module_utils" % (meta["namespace"], meta["name"])
    root = os.path.join(out, "ansible_collections", meta["namespace"], meta["name"])
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)

    for name in os.listdir(os.path.join(repo, META_DIR)):
        source = os.path.join(repo, META_DIR, name)
        (_copy_tree if os.path.isdir(source) else shutil.copy2)(source, os.path.join(root, name))
    for name in TOP_FILES:
        if not os.path.exists(os.path.join(repo, name)):
            raise BuildError("%s is missing (galaxy.yml names it)" % name)
        shutil.copy2(os.path.join(repo, name), os.path.join(root, name))
    readme = meta.get("readme", "README.md")
    if not os.path.isfile(os.path.join(root, readme)):
        raise BuildError("%s/%s is missing (galaxy.yml's readme names it)" % (META_DIR, readme))
    # docs/ for the reader; monitoring/ for Prometheus and Grafana (alert rules, the dashboard), taken as they are.
    for folder in ("docs", "monitoring"):
        if os.path.isdir(os.path.join(repo, folder)):
            _copy_tree(os.path.join(repo, folder), os.path.join(root, folder))

    modules = py_names(os.path.join(repo, "library"))
    roles = sorted(d for d in os.listdir(os.path.join(repo, "roles"))
                   if os.path.isdir(os.path.join(repo, "roles", d, "tasks")))
    playbooks = sorted(f.rsplit(".", 1)[0] for f in os.listdir(os.path.join(repo, "playbooks"))
                       if f.endswith((".yml", ".yaml")))
    own_utils = set(py_names(os.path.join(repo, "module_utils")))
    python_dirs = {"library": "modules", "module_utils": "module_utils"}
    python_dirs.update({os.path.basename(folder): kind for kind, folder in plugin_folders(repo).items()})
    filters, lookups = set(), set()
    for source_dir, kind in python_dirs.items():
        if kind == "filter":
            filters |= filter_names(os.path.join(repo, source_dir))
        if kind == "lookup":
            lookups |= set(py_names(os.path.join(repo, source_dir)))
        for name in py_names(os.path.join(repo, source_dir)):
            path = os.path.join(repo, source_dir, name + ".py")
            text = rewrite_imports(_read(path), own_utils, target, os.path.relpath(path, repo))
            if kind == "modules":
                text = fqcn_examples(text, fqcn, modules, roles, playbooks, os.path.relpath(path, repo))
            _write(os.path.join(root, "plugins", kind, name + ".py"), text)
        if kind not in ("modules", "module_utils"):
            for name in doc_files(os.path.join(repo, source_dir), kind):
                shutil.copy2(os.path.join(repo, source_dir, name), os.path.join(root, "plugins", kind, name))

    for folder in ("roles", "playbooks"):
        _copy_tree(os.path.join(repo, folder), os.path.join(root, folder))
    for folder in ("roles", "playbooks"):
        for dirpath, _dirs, files in os.walk(os.path.join(root, folder)):
            for name in files:
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if not name.endswith(JINJA_SUFFIXES):
                    continue
                text = original = _read(path)
                text = fqcn_yaml(text, yaml_kind(rel), fqcn, modules, roles, playbooks, rel)
                text = fqcn_lookups(fqcn_filters(text, fqcn, filters), fqcn, lookups)
                if text != original:
                    _write(path, text)
    return root


def build_tarball(root, dist):
    """ansible-galaxy collection build <root> into dist/; return the tarball's path."""
    os.makedirs(dist, exist_ok=True)
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    result = subprocess.run([galaxy if os.path.exists(galaxy) else "ansible-galaxy", "collection", "build",
                             root, "--output-path", dist, "--force"],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError("ansible-galaxy collection build failed:\n" + result.stdout + result.stderr)
    meta = galaxy_meta()
    return os.path.join(dist, "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default=os.path.join(REPO, "build"), help="where ansible_collections/ is written")
    parser.add_argument("--dist", default=os.path.join(REPO, "dist"), help="where the tarball is written")
    parser.add_argument("--no-tarball", action="store_true", help="write the tree only")
    args = parser.parse_args(argv)
    try:
        root = build_tree(args.out)
        print("collection tree: %s" % root)
        if not args.no_tarball:
            print("tarball: %s" % build_tarball(root, args.dist))
    except BuildError as exc:
        print("build_collection: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
