"""A snapshot of folders for tests that assert "nothing changed": every path below the roots mapped to its bytes, its
link target (("link", target)) or None for a folder."""
import os


def tree(*roots):
    found = {}
    for root in roots:
        for directory, dirs, files in os.walk(str(root)):
            for name in dirs + files:
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    found[path] = ("link", os.readlink(path))
                elif os.path.isfile(path):
                    with open(path, "rb") as handle:
                        found[path] = handle.read()
                else:
                    found[path] = None
    return found
