"""A models tree as the service user can leave it today: the folder that holds it belongs to an unprivileged user
(``nobody`` here, ``sglang`` on a host), who plants links, FIFOs and files there from a forked child that dropped
root (setgroups, setgid, setuid). The tests run as root, as Ansible does on a host, and check that root refuses what
was planted, naming the path and the rule, and that a decoy tree outside stays exactly as it was (hashed)."""
import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import stat
import tempfile
import threading
import traceback

USER = "nobody"


@contextlib.contextmanager
def hang_guard(seconds):
    """A FIFO opened for reading blocks for ever: inside this, the test fails after SECONDS instead of hanging."""
    def expired(*_args):
        raise AssertionError("the operation hung (a FIFO was opened?)")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def fifo_released(path, seconds):
    """For a reader in another process (a module run through Ansible), which hang_guard cannot stop: from SECONDS
    on, the FIFO at PATH is opened for writing and closed once a second, so a reader blocked on it gets end of file
    and the run ends (and fails on its result) instead of hanging the suite."""
    done = threading.Event()

    def release():
        while not done.wait(1 if release.started else seconds):
            release.started = True
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting (ENXIO), or the FIFO is gone
    release.started = False
    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def as_user(action, user=USER):
    """Run ACTION() in a forked child as USER; AssertionError with the child's traceback when it fails."""
    entry = pwd.getpwnam(user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        status = 0
        try:
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            action()
        except BaseException:  # pylint: disable=broad-except
            os.write(write, traceback.format_exc().encode())
            status = 1
        os._exit(status)  # pylint: disable=protected-access
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        failure = handle.read().decode()
    _pid, status = os.waitpid(pid, 0)
    assert status == 0, "planting as %s failed: %s" % (user, failure)


def digest(*roots):
    """One sha256 over every path below the roots: its kind, mode, owner, and bytes or link target."""
    total = hashlib.sha256()
    for root in roots:
        for directory, dirs, files in os.walk(str(root)):
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(directory, name)
                info = os.lstat(path)
                total.update(("%s %o %d %d\n" % (path, info.st_mode, info.st_uid, info.st_gid)).encode())
                if stat.S_ISLNK(info.st_mode):
                    total.update(os.readlink(path).encode())
                elif stat.S_ISREG(info.st_mode):
                    with open(path, "rb") as handle:
                        total.update(handle.read())
    return total.hexdigest()


class Home(object):
    """A service user's home holding the models folder (theirs, as today), and a decoy tree of root's outside it:
    a 0700 folder with a 0600 key and a model-like file."""

    def __init__(self, adopt=False):
        self.adopt = adopt
        self.base = tempfile.mkdtemp(prefix="hostile-", dir="/tmp")
        os.chmod(self.base, 0o755)
        entry = pwd.getpwnam(USER)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        self.models = os.path.join(self.base, "home", "models")
        os.makedirs(self.models)
        for path in (os.path.dirname(self.models), self.models):
            os.chown(path, self.uid, self.gid)
            os.chmod(path, 0o750 if path != self.models else 0o755)
        os.chmod(os.path.dirname(self.models), 0o755)
        self.decoy = os.path.join(self.base, "decoy")
        os.makedirs(os.path.join(self.decoy, "keys"))
        os.chmod(os.path.join(self.decoy, "keys"), 0o700)
        with open(os.path.join(self.decoy, "keys", "id"), "wb") as handle:
            handle.write(b"root's private key\n")
        os.chmod(os.path.join(self.decoy, "keys", "id"), 0o600)
        with open(os.path.join(self.decoy, "config.json"), "wb") as handle:
            handle.write(b'{"not": "the model"}')
        os.chmod(os.path.join(self.decoy, "config.json"), 0o600)
        self.before = digest(self.decoy)

    def path(self, *parts):
        return os.path.join(self.models, *parts)

    def plant(self, action):
        """ACTION as the service user; with ADOPT, the model folders it made are handed to root afterwards (only
        their content stays the service user's)."""
        as_user(action)
        if self.adopt:
            for name in os.listdir(self.models):
                path = self.path(name)
                if os.path.isdir(path) and not os.path.islink(path):
                    os.chown(path, 0, 0)

    def root_model(self, name="m"):
        """The model's folder made by root (0755), as a fetch makes it."""
        os.makedirs(self.path(name), mode=0o755, exist_ok=True)

    def foreign(self, name):
        """Whether the model's folder is the service user's (a real folder, not root's)."""
        path = self.path(name)
        return os.path.isdir(path) and not os.path.islink(path) and os.lstat(path).st_uid != 0

    def decoy_unchanged(self):
        return digest(self.decoy) == self.before

    def close(self):
        shutil.rmtree(self.base, ignore_errors=True)
